"""book/_ext/fast_pages.py on a tiny built page: math is typeset by MathJax at build time, a formula MathJax
cannot typeset stops the build, icons become inline SVG and scripts are deferred."""

import importlib.util
import re
import shutil

import pytest
from _site_helpers import ROOT

SPEC = importlib.util.spec_from_file_location("fast_pages", ROOT / "book" / "_ext" / "fast_pages.py")
fast_pages = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(fast_pages)

PAGE = """<!DOCTYPE html><html><head>
<script src="../_static/documentation_options.js?v=1"></script>
<script>DOCUMENTATION_OPTIONS.pagename = 'x';</script>
<script src="../_static/doctools.js?v=1"></script>
<script>window.MathJax = {"options": {}}</script>
<script defer="defer" src="../_static/mathjax/tex-mml-chtml.js?v=1"></script>
<script src="../searchindex.js"></script>
</head><body><main id="main-content"><article>
<p>Inline <span class="math notranslate nohighlight">\\(x^2 &lt; \\alpha\\)</span> math.</p>
<div class="math notranslate nohighlight" id="equation-a">
<span class="eqno">(1)<a class="headerlink" href="#equation-a">#</a></span>\\[{FORMULA}\\]</div>
<pre>code with \\( in it</pre>
</article></main></body></html>"""


@pytest.fixture
def site(tmp_path):
    if shutil.which("node") is None or not (fast_pages.NODE_MODULES / "mathjax-full").is_dir():
        pytest.skip("Node.js and mathjax-full (make book installs it) are needed")
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "documentation_options.js").write_text("const DOCUMENTATION_OPTIONS = {};")
    (tmp_path / "notebooks").mkdir()
    return tmp_path


def test_math_is_typeset_and_scripts_trimmed(site):
    page = site / "notebooks" / "ch.html"
    page.write_text(PAGE.replace("{FORMULA}", r"\frac{QK^\top}{\sqrt{d_k}}"))
    assert fast_pages.process_site(site) == 1
    text = page.read_text()
    assert text.count("<mjx-container") == 2 and "<mjx-assistive-mml" in text
    assert "\\(" not in text.split("<pre")[0] and "tex-mml-chtml" not in text and "window.MathJax" not in text
    assert "searchindex.js" not in text and "const DOCUMENTATION_OPTIONS = {};" in text
    assert '<script defer src="../_static/doctools.js?v=1">' in text
    assert 'url("../_static/mathjax/output/chtml/fonts/woff-v2/MathJax_Main-Regular.woff")' in text
    assert "font-display: swap;" in text  # the text is drawn before the math fonts arrive
    assert '<span class="eqno">(1)' in text  # Sphinx's equation number is kept
    assert '<pre tabindex="0">code with \\( in it</pre>' in text  # code is left alone, and focusable
    assert fast_pages.process_site(site) == 0  # a page is rewritten once


def test_a_formula_mathjax_cannot_typeset_stops_the_build(site):
    (site / "notebooks" / "ch.html").write_text(PAGE.replace("{FORMULA}", r"\notamacro{x}"))
    with pytest.raises(RuntimeError, match="notamacro"):
        fast_pages.process_site(site)


def test_stylesheets_become_one_file_with_urls_relocated(tmp_path):
    (tmp_path / "_static" / "styles").mkdir(parents=True)
    (tmp_path / "_static" / "a.css").write_text('@import "b.css";\np { background: url(img/x.png); }')
    (tmp_path / "_static" / "b.css").write_text("h1 { color: red; }")
    (tmp_path / "_static" / "c.css").write_text('.fa-cat:before{content:"\\f6be"}.fa-xmark:before{content:"x"}')
    page = tmp_path / "notebooks" / "ch.html"
    page.parent.mkdir()
    text = ('<html><head>\n<link rel="stylesheet" type="text/css" href="../_static/a.css?v=1" />\n<meta x />'
            '\n<link href="../_static/c.css" rel="stylesheet" /></head><body></body></html>')
    out = fast_pages._bundle_css(page, text, tmp_path, {}, strip_glyphs=True)
    links = re.findall(r'<link rel="stylesheet" href="([^"]+)" />', out)
    assert len(links) == 1 and "<meta x />" in out and "a.css" not in out
    bundle = (page.parent / links[0]).read_text()
    assert "h1 { color: red; }" in bundle  # the @import is inlined
    assert "url(../img/x.png)" in bundle  # relative to _static/styles, where the bundle lives
    assert "fa-cat" not in bundle and ".fa-xmark:before" in bundle  # icon glyph rules dropped, the banner's kept
