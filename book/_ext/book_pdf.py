"""Sphinx extension: the whole book as one PDF (``make pdf``), and links to it from the site.

- **Single-page build.** ``make pdf`` builds the book with Sphinx's ``singlehtml`` builder (then prints that
  page with Chromium, see ``print_pdf.py``). Extensions such as MyST-NB register their nodes for the ``html``
  builder only; this extension lends those handlers to ``singlehtml`` as well, so that both write the same HTML.
  It also adds the print stylesheet ``print-book.css`` to that build, and writes the page to ``index.html``.
- **Links.** When ``_build/pdf/book.pdf`` exists while the site is built (``make pdf`` before ``make book``;
  ``make test`` does both), the HTML build copies it to ``book.pdf`` at the site's root and links it from the
  download menu of every page and from the intro page. Without the file the site has no link, so the link
  never points at a missing file.
"""

import pathlib
import re
import shutil

PDF = pathlib.Path("_build") / "pdf" / "book.pdf"  # relative to the book's root, where make runs
PDF_NAME = "book.pdf"


def _pdf(app) -> pathlib.Path | None:
    path = pathlib.Path(app.srcdir) / PDF
    return path if app.builder.name == "html" and path.is_file() else None


def _lend_html_handlers(app):
    if app.builder.name == "singlehtml":
        handlers = app.registry.translation_handlers
        handlers["singlehtml"] = {**handlers.get("html", {}), **handlers.get("singlehtml", {})}
        app.add_css_file("print-book.css")


def _link_pdf(app, pagename, templatename, context, doctree):
    pdf = _pdf(app)
    if pdf is None:
        return
    url = context["pathto"](PDF_NAME, 1)
    size = f"{pdf.stat().st_size / 1e6:.0f} MB"
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"].append({"type": "link", "url": url, "text": "book (.pdf)", "icon": "fas fa-book",
                                     "tooltip": f"Download the whole book as a PDF ({size})",
                                     "label": "download-book-pdf-button"})
    if pagename == app.config.root_doc and "body" in context:
        line = (f'<p class="whole-book-pdf">The whole book is also a <a href="{url}">PDF</a> ({size}), '
                "without the exercises' solutions.</p>")
        # After the first paragraph of "How to read it", or at the end of the page.
        body, n = re.subn(r'(id="how-to-read-it".*?</p>)', lambda m: m.group(1) + "\n" + line,
                          context["body"], count=1, flags=re.S)
        context["body"] = body if n else body + line


def _copy_pdf(app, exception):
    if exception:
        return
    if app.builder.name == "singlehtml":
        # Sphinx writes the single page to the root document's path (book/intro.html) but with links relative
        # to the output folder, and a redirect to it as index.html; the page itself belongs at index.html.
        root = pathlib.Path(app.outdir) / app.builder.get_outfilename(app.config.root_doc)
        shutil.copyfile(root, pathlib.Path(app.outdir) / "index.html")
    pdf = _pdf(app)
    if pdf is not None:
        shutil.copyfile(pdf, pathlib.Path(app.outdir) / PDF_NAME)


def setup(app):
    app.connect("builder-inited", _lend_html_handlers)
    app.connect("html-page-context", _link_pdf, priority=600)  # after the theme's header buttons (501)
    app.connect("build-finished", _copy_pdf)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
