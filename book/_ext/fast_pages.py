"""Sphinx extension: pages that load fast on a phone (Lighthouse mobile >= 90, see benchmarks/results.md).

After an HTML build (``html``, ``singlehtml``), every page of the output folder is rewritten once:

- **Math typeset at build time.** Each formula Sphinx wrote for MathJax (``span.math`` ``\\(...\\)``,
  ``div.math`` ``\\[...\\]`` or a bare ``\\begin{env}``) is typeset by MathJax 3 itself, in Node
  (``prerender_math.js``, the npm package ``mathjax-full`` that the Makefile installs), into the same CommonHTML
  the browser's MathJax produced, with its hidden MathML for screen readers. The page gets the stylesheet of
  the glyphs it uses (fonts: the vendored woff files in ``_static/mathjax``) and no MathJax script. A formula
  MathJax cannot typeset stops the build; TeX left outside a math element stops it too.
- **Icons without Font Awesome's script.** The theme's ``fontawesome.js`` (1.5 MB) only swaps each
  ``<i class="fa-...">`` for an inline SVG; the build does that swap itself, with the same icon paths (read
  from the theme's own copy of the script), and drops the script.
- **No render-blocking scripts.** Scripts in the head are deferred (``documentation_options.js``, which inline
  scripts need at once, is inlined); the search index and its scripts (300 KB) load only on the search page.
- **Stylesheets** in one file per site (one request instead of eleven), without Font Awesome's per-icon
  rules, which only the swapped ``<i>`` elements used.
- **Layout only near the screen.** lmbook.css lets the browser skip the layout of sections far below the
  screen (``content-visibility: auto``), and the theme's check of which code blocks scroll (a tab stop for
  keyboard users) runs per element as it nears the screen instead of on the whole page at load (a patch of the
  theme's ``pydata-sphinx-theme.js`` in the output folder; the build stops if that code changes).
- **Images** get their width and height (no layout shift) and, after the first one, ``loading="lazy"``.

The same code runs on a copy of a built site: ``python book/_ext/fast_pages.py SITE_DIR``.
"""

import hashlib
import html
import itertools
import json
import os
import pathlib
import re
import shutil
import struct
import subprocess
import urllib.parse

from sphinx.util import logging

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# npm's mathjax-full, installed by the Makefile into the repository's _build/node (the student edition builds a
# copy of the book inside _build, so the nearest such folder above this file is the one).
NODE_MODULES = pathlib.Path(os.environ.get("LMBOOK_NODE_MODULES") or next(
    (d / "_build" / "node" / "node_modules" for d in HERE.parents if (d / "_build" / "node" / "node_modules").is_dir()),
    ROOT / "_build" / "node" / "node_modules"))
MARKER = '<meta name="lmbook-fast-pages" content="1" />'
# MathJax in the browser scales formulas to the x-height of the surrounding text: 127.3 % on this theme's
# font (measured in Chromium on the site as MathJax typeset it there), i.e. an ex of 9.0 px at a 16 px em.
EX_PX = 9.0
FONTS = "_static/mathjax/output/chtml/fonts/woff-v2"
MATH_ELEMENT = re.compile(r'<(span|div) class="math notranslate nohighlight"([^>]*)>(.*?)</\1>', re.S)
TEX_LEFT = re.compile(r"\\\(|\\\[|\$\$|\\begin\{")
# The math fonts swap in when they arrive: the page's text is drawn at once instead of waiting for them (the
# browser's default for a font without font-display hides the text for up to 3 s; chapter 14, whose first screen
# needs five math fonts, went from performance 91 to 96, first contentful paint 2.6 s to 1.8 s). Formulas have
# their final widths from the start, so nothing moves when the glyphs change.
FONT_FACE, SWAP = re.compile(r"(@font-face[^{]*\{)"), r"\1font-display: swap;"


# ---- math --------------------------------------------------------------------------------------------------
def _formulas(tag: str, inner: str) -> list[tuple[str, str, bool]]:
    """(html to replace, TeX, display) for one math element's content."""
    if tag == "span":
        return [(m.group(0), html.unescape(m.group(1)), False) for m in re.finditer(r"\\\((.*?)\\\)", inner, re.S)]
    eqno = re.match(r"\s*<span class=\"eqno\">.*?</span>", inner, re.S)  # Sphinx's equation number
    rest = inner[eqno.end():] if eqno else inner
    parts = [(m.group(0), html.unescape(m.group(1)), True) for m in re.finditer(r"\\\[(.*?)\\\]", rest, re.S)]
    if not parts and rest.strip():  # a bare amsmath environment (MyST's amsmath extension)
        parts = [(rest.strip(), html.unescape(rest.strip()), True)]
    return parts


def _typeset(pages: list[dict]) -> list[dict]:
    """Run prerender_math.js on every page's formulas at once."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "mathjax-full").is_dir():
        raise RuntimeError(f"typesetting the math needs Node.js and the npm package mathjax-full in {NODE_MODULES}: "
                           "run `make book` (it installs them), or set LMBOOK_NODE_MODULES")
    env = {**os.environ, "NODE_PATH": str(NODE_MODULES)}
    run = subprocess.run([node, str(HERE / "prerender_math.js")], input=json.dumps({"ex": EX_PX, "pages": pages}),
                         capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise RuntimeError("MathJax could not typeset the book's math at build time:\n" + run.stderr[-4000:])
    return json.loads(run.stdout)["pages"]


# ---- icons -------------------------------------------------------------------------------------------------
_ICONS: dict | None = None
FA_CSS = ("svg:not(:host).svg-inline--fa,svg:not(:root).svg-inline--fa{overflow:visible;box-sizing:content-box}"
          ".svg-inline--fa{display:var(--fa-display,inline-block);height:1em;overflow:visible;"
          "vertical-align:-.125em}.svg-inline--fa.fa-lg{vertical-align:-.2em}")  # what fontawesome.js injects
FA_FAMILIES = {"fa-solid": "fas", "fas": "fas", "fa-brands": "fab", "fab": "fab", "fa-regular": "far", "far": "far"}
ICON_TAG = re.compile(r'<(i|span) class="([^"]*\bfa-[^"]*)"([^>]*)>\s*</\1>')


def _icons(script: pathlib.Path) -> dict:
    """{(prefix, name): (width, height, path)} from the theme's fontawesome.js (Font Awesome Free 6)."""
    global _ICONS
    if _ICONS is None:
        text = script.read_text()
        _ICONS, start = {}, 0
        for m in re.finditer(r'\(\s*"(fa[bsr])"\s*,', text):  # each icon set is defined just before its name
            if m.group(1) in {p for p, _ in _ICONS}:
                continue
            for icon in re.finditer(r'"?([a-z0-9-]+)"?:\[(\d+),(\d+),\[[^\]]*\],"[^"]*","([^"]+)"\]',
                                    text[start:m.start()]):
                _ICONS.setdefault((m.group(1), icon.group(1)), (icon.group(2), icon.group(3), icon.group(4)))
            start = m.end()
    return _ICONS


def _icon_svg(match, icons) -> str:
    classes = match.group(2).split()
    prefix = next((FA_FAMILIES[c] for c in classes if c in FA_FAMILIES), "fas")
    names = [c.removeprefix("fa-") for c in classes if c.startswith("fa-") and c not in FA_FAMILIES
             and (prefix, c.removeprefix("fa-")) in icons]
    if not names:
        raise RuntimeError(f"no Font Awesome icon for {match.group(0)}")
    width, height, path = icons[(prefix, names[0])]
    kept = [c for c in classes if c not in FA_FAMILIES]
    attrs = match.group(3)
    title = re.search(r'\s*title="([^"]*)"', attrs)
    attrs = attrs.replace(title.group(0), "") if title else attrs
    return (f'<svg class="svg-inline--fa {" ".join(kept)}"{attrs} aria-hidden="true" focusable="false" '
            f'data-prefix="{prefix}" data-icon="{names[0]}" role="img" xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {width} {height}">' + (f"<title>{title.group(1)}</title>" if title else "")
            + f'<path fill="currentColor" d="{path}"></path></svg>')


# ---- images ------------------------------------------------------------------------------------------------
def _image_size(path: pathlib.Path) -> tuple[int, int] | None:
    try:
        head = path.read_bytes()[:32] if path.suffix.lower() == ".png" else b""
    except OSError:
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
        return struct.unpack(">II", head[16:24])
    return None


def _images(page: pathlib.Path, text: str) -> str:
    count = 0

    def fix(m):
        nonlocal count
        tag = m.group(0)
        src = re.search(r'\ssrc="([^"]+)"', tag)
        if not src or src.group(1).startswith(("data:", "http:", "https:")):
            return tag
        count += 1
        extra = ""
        size = _image_size((page.parent / html.unescape(src.group(1))).resolve())
        if size and " width=" not in tag and " height=" not in tag and " style=" not in tag:
            extra += f' width="{size[0]}" height="{size[1]}"'
        if count > 1 and " loading=" not in tag:
            extra += ' loading="lazy"'
        if " decoding=" not in tag:
            extra += ' decoding="async"'
        return tag[:4] + extra + tag[4:]

    # Only the article's images count for "first": the header's launch-button logos sit in closed menus.
    start = text.find('<main id="main-content"')
    start = 0 if start < 0 else start
    head, body = text[:start], text[start:]
    head = re.sub(r"<img\b[^>]*>", lambda m: m.group(0)[:4] + ' loading="lazy"' + m.group(0)[4:]
                  if " loading=" not in m.group(0) else m.group(0), head)
    return head + re.sub(r"<img\b[^>]*>", fix, body)


# ---- scripts -----------------------------------------------------------------------------------------------
def _scripts(page: pathlib.Path, text: str, outdir: pathlib.Path) -> str:
    head_end = text.find("</head>")
    head, rest = text[:head_end], text[head_end:]
    head = re.sub(r'\s*<script[^>]*src="[^"]*fontawesome\.js[^"]*"[^>]*></script>', "", head)
    head = re.sub(r'\s*<script>window\.MathJax = .*?</script>', "", head)
    head = re.sub(r'\s*<script[^>]*src="[^"]*tex-mml-chtml\.js[^"]*"[^>]*></script>', "", head)
    if page.name != "search.html":
        head = re.sub(r'\s*<script src="[^"]*(searchtools\.js|language_data\.js|searchindex\.js)"></script>', "",
                      head)
        options = outdir / "_static" / "documentation_options.js"

        def inline_options(m):
            return f"<script>{options.read_text().strip()}</script>" if options.is_file() else m.group(0)

        head = re.sub(r'<script src="[^"]*documentation_options\.js[^"]*"></script>', inline_options, head)
        head = re.sub(r"<script ((?:(?!defer|async)[^>])*\bsrc=[^>]*)></script>", r"<script defer \1></script>", head)
    return head + rest


# ---- the theme's script -----------------------------------------------------------------------------------
# pydata-sphinx-theme gives every code block and output that scrolls a tab stop (tabIndex 0), so keyboard
# users can scroll it. It measures them all on the "load" event, which forces the layout of the whole page at
# once (more than a second of a throttled phone's CPU on a long chapter, and all of the sections that the
# browser would otherwise lay out only when scrolled to, see lmbook.css). The same check is run on each
# element as it comes near the screen instead; until then a code block has tabindex="0" from the build.
TAB_STOPS_OLD = ".forEach(e=>{e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1})"
TAB_STOPS_NEW = (".forEach(e=>{(window.lmbookTabStops=window.lmbookTabStops||new IntersectionObserver(s=>s.forEach("
                 "x=>{if(x.isIntersecting){const e=x.target;e.tabIndex=e.scrollWidth>e.clientWidth||"
                 "e.scrollHeight>e.clientHeight?0:-1;window.lmbookTabStops.unobserve(e)}}),{rootMargin:\"400px\"}))"
                 ".observe(e)})")
TAB_STOP_ELEMENTS = re.compile(r"<(pre)(?![^>]*tabindex)")


def _patch_theme_script(outdir: pathlib.Path) -> None:
    script = outdir / "_static" / "scripts" / "pydata-sphinx-theme.js"
    if not script.is_file():
        return
    text = script.read_text()
    if TAB_STOPS_NEW in text:
        return
    if TAB_STOPS_OLD not in text:
        raise RuntimeError(f"{script}: the theme's tab-stop code changed; update fast_pages.TAB_STOPS_OLD")
    script.write_text(text.replace(TAB_STOPS_OLD, TAB_STOPS_NEW))


# ---- stylesheets ------------------------------------------------------------------------------------------
CSS_LINK = re.compile(r'\s*<link (?:rel="stylesheet" type="text/css" href="([^"]+)"|href="([^"]+)" '
                      r'rel="stylesheet") />')


def _read_css(path: pathlib.Path, static: pathlib.Path, target: pathlib.Path) -> str:
    """A stylesheet's text with its @import inlined and its url()s made relative to ``target``'s folder."""
    text = path.read_text()

    def imported(m):
        return _read_css((path.parent / m.group(1)).resolve(), static, target)

    text = re.sub(r'@import\s+(?:url\()?"([^"]+)"\)?\s*;', imported, text)

    def relocate(m):
        url = m.group(2)
        if url.startswith(("data:", "http:", "https:", "/", "#")):
            return m.group(0)
        new = os.path.relpath((path.parent / url).resolve(), target.parent).replace(os.sep, "/")
        return f"url({m.group(1)}{new}{m.group(1)})"

    return re.sub(r"url\((['\"]?)([^'\")]+)\1\)", relocate, text)


FA_GLYPH_RULE = re.compile(r'\.fa-([a-z0-9-]+):before\{content:"[^"]*"\}')
FA_KEEP = {"xmark"}  # the theme's script makes <i class="fa-solid fa-xmark"> for its banners' close buttons


# The admonitions' icons (the theme's, and sphinx-exercise's pencil) drawn as inline SVG masks in the text's
# colour instead of glyphs of Font Awesome's web font: a chapter then never downloads that font (157 KB), which
# Lighthouse otherwise counts against the first paint of pages whose first screen requests it (chapters 3 and
# 14 scored 90 to 92 in such runs, against 97 to 99 without it).
ADMONITION_ICONS = {"": "bell", "attention": "circle-exclamation", "important": "circle-exclamation",
                    "caution": "triangle-exclamation", "warning": "triangle-exclamation",
                    "danger": "triangle-exclamation", "error": "circle-xmark", "hint": "lightbulb", "tip": "lightbulb",
                    "note": "circle-info", "seealso": "share", "admonition-todo": "pencil", "exercise": "pencil"}


def _admonition_css(icons: dict) -> str:
    mask = "var(--lmbook-icon) center / contain no-repeat"
    rules = [f'div.admonition > p.admonition-title::after {{ font: inherit; content: ""; background-color: '
             f"currentColor; -webkit-mask: {mask}; mask: {mask}; }}"]
    for kind, name in ADMONITION_ICONS.items():
        width, height, path = icons[("fas", name)]
        svg = f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}'><path d='{path}'/></svg>"
        rules.append(f"div.admonition{'.' + kind if kind else ''} > p.admonition-title::after "
                     f"{{ --lmbook-icon: url(\"data:image/svg+xml,{urllib.parse.quote(svg)}\"); }}")
    rules.append("div.solution.admonition > p.admonition-title::after { content: none; }")  # as sphinx-exercise
    return "\n".join(rules) + "\n"


def _bundle_css(page: pathlib.Path, text: str, outdir: pathlib.Path, bundles: dict, strip_glyphs: bool,
                icons: dict | None = None) -> str:
    """The head's stylesheets as one file (one request instead of eleven), shared by pages with the same list."""
    head_end = text.find("</head>")
    head = text[:head_end]
    links = list(CSS_LINK.finditer(head))
    hrefs = [(m.group(1) or m.group(2)) for m in links]
    if len(links) < 2:
        return text
    files = [(page.parent / h.split("?")[0]).resolve() for h in hrefs]
    if not all(f.is_file() for f in files):
        return text
    static = outdir / "_static"
    key = tuple(f.relative_to(outdir).as_posix() for f in files)
    if key not in bundles:
        target = static / "styles" / "bundle.css"
        body = "\n".join(f"/* {name} */\n" + _read_css(f, static, target) for name, f in zip(key, files, strict=True))
        if strip_glyphs:  # 1,900 rules (20 KB gzipped) that only <i class="fa-..."> elements used
            body = FA_GLYPH_RULE.sub(lambda m: m.group(0) if m.group(1) in FA_KEEP else "", body)
        if icons:
            body += "\n/* admonition icons as SVG (book/_ext/fast_pages.py) */\n" + _admonition_css(icons)
        name = f"styles/bundle-{hashlib.sha1(body.encode()).hexdigest()[:10]}.css"
        (static / name).write_text(body)
        bundles[key] = name
    href = os.path.relpath(static / bundles[key], page.parent).replace(os.sep, "/")
    head = head[:links[0].start()] + f'\n  <link rel="stylesheet" href="{href}" />' + \
        "".join(head[a.end():b.start()] for a, b in itertools.pairwise(links)) + head[links[-1].end():]
    return head + text[head_end:]


# ---- the pass over the site --------------------------------------------------------------------------------
def process_site(outdir: pathlib.Path) -> int:
    """Rewrite every page of a built site once (pages already rewritten are skipped). Returns the count."""
    outdir = pathlib.Path(outdir)
    files = [p for p in sorted(outdir.rglob("*.html"))
             if not p.relative_to(outdir).parts[0].startswith(("_static", "_sources", "_images"))]
    todo = [(p, p.read_text()) for p in files]
    todo = [(p, t) for p, t in todo if MARKER not in t]
    if not todo:
        return 0
    _patch_theme_script(outdir)
    fa_script = outdir / "_static" / "scripts" / "fontawesome.js"
    icons = _icons(fa_script) if fa_script.is_file() else {}
    requests, found, bundles = [], [], {}
    for page, text in todo:
        elements = [(m, _formulas(m.group(1), m.group(3))) for m in MATH_ELEMENT.finditer(text)]
        found.append(elements)
        font_url = os.path.relpath(outdir / FONTS, page.parent).replace(os.sep, "/")
        requests.append({"name": page.relative_to(outdir).as_posix(), "fontURL": font_url,
                         "math": [[tex, display] for _, parts in elements for _, tex, display in parts]})
    rendered = _typeset(requests) if any(r["math"] for r in requests) else [{"css": "", "html": []}] * len(todo)
    for (page, text), elements, result in zip(todo, found, rendered, strict=True):
        out, pos, k = [], 0, 0
        for m, parts in elements:
            inner = m.group(3)
            for source, _, _ in parts:
                inner = inner.replace(source, result["html"][k], 1)
                k += 1
            out += [text[pos:m.start(3)], inner]
            pos = m.end(3)
        text = "".join(out) + text[pos:]
        visible = re.sub(r"<(script|style|pre|code|textarea)\b.*?</\1>|<[^>]+>", "", text, flags=re.S)
        left = TEX_LEFT.search(visible)
        if left:
            raise RuntimeError(f"{page}: TeX outside a math element is left for the browser, which has no MathJax: "
                               f"{html.unescape(visible[left.start():left.start() + 80])!r}")
        if icons:
            text = ICON_TAG.sub(lambda m: _icon_svg(m, icons), text)
        text = _scripts(page, text, outdir)
        text = _images(page, text)
        main = text.find('<main id="main-content"')
        if main >= 0:
            text = text[:main] + TAB_STOP_ELEMENTS.sub(r'<\1 tabindex="0"', text[main:])
        text = _bundle_css(page, text, outdir, bundles, strip_glyphs=bool(icons), icons=icons)
        style = (f"<style>{FA_CSS}</style>" if icons else "") + (
            f"<style>{FONT_FACE.sub(SWAP, result['css'])}</style>" if result["css"] else "")
        text = text.replace("</head>", f"{MARKER}{style}\n</head>", 1)
        page.write_text(text)
    return len(todo)


def _on_build_finished(app, exception):
    if exception is None and app.builder.name in ("html", "singlehtml", "dirhtml"):
        n = process_site(pathlib.Path(app.outdir))
        logging.getLogger(__name__).info(f"fast_pages: {n} pages typeset and trimmed")


def setup(app):
    app.connect("build-finished", _on_build_finished, priority=900)  # after book_pdf copies the single page
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(process_site(pathlib.Path(sys.argv[1])), "pages rewritten")
