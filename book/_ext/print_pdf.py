"""Print the single-page build of the book to one PDF with Debian's Chromium (``make pdf``).

    python book/_ext/print_pdf.py SINGLEHTML_DIR OUT.pdf

The page is served on 127.0.0.1 and opened offline (anything external is refused, as in the site tests); the
math is typeset at build time (book/_ext/fast_pages.py; if a page still loads MathJax, the script waits for it), the
script loads every image and font, opens the drop-downs that hold code or outputs (the
solutions are already gone: the build ran with HIDE_SOLUTIONS=1), and prints with the print stylesheet
``book/_static/print-book.css``, page numbers in the footer and the headings as the PDF's outline.
"""

import functools
import http.server
import os
import pathlib
import sys
import threading
import time

CHROMIUM = os.environ.get("LMBOOK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#555">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def print_pdf(site: pathlib.Path, out: pathlib.Path, page_path: str = "index.html") -> None:
    from playwright.sync_api import sync_playwright

    handler = functools.partial(QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1000, "height": 1400})
            context.route(lambda url: not url.startswith("http://127.0.0.1"), lambda route: route.abort())
            page = context.new_page()
            page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/{page_path}", wait_until="load",
                      timeout=300_000)
            if page.locator("script[src*='tex-mml-chtml']").count():
                page.wait_for_function("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)",
                                       timeout=120_000)
                page.evaluate("() => MathJax.startup.promise.then(() => true)")
            # Code and outputs inside drop-downs are printed open, except the hidden set-up cell's source.
            page.evaluate("""() => document.querySelectorAll('details').forEach(d => {
                if (!d.classList.contains('above-input')) d.open = true; })""")
            # Print media from here on: the screen's stylesheet lays out only the sections near the screen.
            page.emulate_media(media="print")
            # Images below the fold are lazy-loaded on the site (book/_ext/fast_pages.py): load them all now, and
            # every web font the page declares (the math is typeset at build time and drawn with MathJax's fonts,
            # which a browser fetches only once it lays out a formula that needs them).
            page.evaluate("() => document.querySelectorAll('img[loading=lazy]').forEach(i => { i.loading = 'eager'; })")
            page.evaluate("() => Promise.all([...document.images].map(i => i.decode().catch(() => null)))")
            page.evaluate("() => Promise.all([...document.fonts].map(f => f.load().catch(() => null)))"
                          ".then(() => document.fonts.ready).then(() => true)")
            failed = page.evaluate("() => [...document.fonts].filter(f => f.status === 'error').map(f => f.family)")
            if any(name.startswith("MJX") for name in failed):
                raise RuntimeError(f"the math fonts did not load: {failed}")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.pdf(path=str(out), format="A4", print_background=True, prefer_css_page_size=True,
                     display_header_footer=True, header_template="<span></span>", footer_template=FOOTER,
                     outline=True, tagged=True)
            browser.close()
    finally:
        httpd.shutdown()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    if not pathlib.Path(CHROMIUM).exists():
        sys.exit(f"Chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install chromium) or set "
                 "LMBOOK_CHROMIUM")
    start = time.perf_counter()
    print_pdf(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    print(f"{sys.argv[2]} written in {time.perf_counter() - start:.0f} s")
