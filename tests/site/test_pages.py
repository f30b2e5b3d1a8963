"""The website as a reader meets it, in a real browser: every page loads cleanly, images load and are
described, math is typeset (offline), solutions start closed, launch buttons point to the right notebook,
every chapter links to its discussion, search finds a chapter's term, and saved widgets render. A screenshot
of each chapter's first screen is kept in _build/screenshots/."""

import re

import pytest
import yaml
from _site_helpers import ROOT, site_pages

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
PAGES = site_pages()
CHAPTERS = [p for p in PAGES if p.startswith("notebooks/")]
SHOTS = ROOT / "_build" / "screenshots"


def open_page(page, server, path):
    page.goto(f"{server}/{path}", wait_until="load")
    load_everything(page)


def load_everything(page):
    """Load the images that the page lazy-loads (below the fold) and the web fonts, as a reader scrolling would."""
    if page.locator("script[src*='tex-mml-chtml']").count():  # a page that still typesets in the browser
        page.wait_for_function("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)",
                               timeout=20_000)
        page.evaluate("() => MathJax.startup.promise.then(() => true)")
    page.evaluate("""() => { document.querySelectorAll('img[loading=lazy]').forEach(i => { i.loading = 'eager'; });
                             return Promise.all([...document.images].map(i => i.decode().catch(() => null)))
                               .then(() => document.fonts.ready).then(() => true); }""")


def test_the_site_has_every_chapter():
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [pathlib_stem(p) for p in CHAPTERS] == notebooks


def pathlib_stem(path):
    return path.rsplit("/", 1)[-1].removesuffix(".html")


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_cleanly_with_images_and_typeset_math(page, server, path):
    open_page(page, server, path)
    assert page.console_errors == [], f"{path}: console errors {page.console_errors[:3]}"
    # A live widget's own plot (drawn by the widget, not the page) cannot carry alt text; every widget is
    # followed by a static figure that does, so images inside widgets are exempt from the alt check.
    images = page.eval_on_selector_all(
        "article img", "els => els.filter(e => !e.closest('.jupyter-widgets, .widget-output'))"
                       ".map(e => [e.getAttribute('src'), e.complete && e.naturalWidth > 0, "
                       "(e.getAttribute('alt') || '').trim()])")
    for src, loaded, alt in images:
        assert loaded, f"{path}: image {src} did not load"
        assert alt, f"{path}: image {src} has no alt text"
    text = page.inner_text("article")
    assert "$$" not in text and "\\(" not in text and "\\[" not in text, f"{path}: raw TeX is visible"
    if page.locator("article .math").count():
        assert page.locator("article mjx-container").count() > 0, f"{path}: math was not typeset"
    # The math is typeset at build time and the icons are inline SVG (book/_ext/fast_pages.py): no page loads
    # MathJax or Font Awesome's script, and the only render-blocking stylesheet is the bundle.
    scripts = page.eval_on_selector_all("script[src]", "els => els.map(e => e.getAttribute('src'))")
    assert not [s for s in scripts if "tex-mml-chtml" in s or "fontawesome" in s], f"{path}: {scripts}"
    assert page.locator("i.fa-solid, i.fas, i.fab").count() == 0, f"{path}: a Font Awesome icon was not inlined"


@pytest.mark.parametrize("path", CHAPTERS)
def test_chapter_solutions_closed_and_launch_buttons_right(page, server, path):
    open_page(page, server, path)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{pathlib_stem(path)}.png"))
    solutions = page.locator("details.solution, .solution.dropdown, details.dropdown.solution")
    assert solutions.count() >= 4, f"{path}: expected at least 4 solution drop-downs"
    for i in range(solutions.count()):
        assert solutions.nth(i).get_attribute("open") is None, f"{path}: solution {i} is open by default"
    repo = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    branch, notebook = CONFIG["repository"]["branch"], f"notebooks/{pathlib_stem(path)}.ipynb"
    links = page.eval_on_selector_all("a", "els => els.map(e => e.href)")
    colab = [h for h in links if "colab.research.google.com" in h]
    binder = [h for h in links if "mybinder.org" in h]
    assert colab == [f"https://colab.research.google.com/github/{repo}/blob/{branch}/{notebook}"], colab
    assert binder and all(f"/gh/{repo}/{branch}" in h and notebook in h for h in binder), binder
    assert any(h.endswith(f"_sources/{notebook}") for h in links), "no download link for the .ipynb"
    discuss = f"{CONFIG['repository']['url']}/discussions/new?category=q-a&title="
    assert page.get_by_role("link", name="Discuss this page").get_attribute("href").startswith(discuss), \
        f"{path}: no 'Discuss this page' link to {discuss}"
    provenance = page.inner_text("article")
    assert re.search(r"lmbook \d+\.\d+\.\d+ \| torch \S+ .*outputs of \d{4}-\d\d-\d\d", provenance), \
        f"{path}: the versions and date of the outputs are not shown"


def test_header_buttons_have_labels_and_icons_and_the_theme_switch_works(page, server):
    open_page(page, server, "notebooks/07_attention.html")
    buttons = page.locator(".bd-header-article button:visible")  # launch, repository, download, full screen, mode
    assert buttons.count() >= 4
    for i in range(buttons.count()):
        button = buttons.nth(i)
        label = (button.get_attribute("aria-label") or button.get_attribute("title") or button.inner_text()).strip()
        assert label, f"header button {i} has no accessible name: {button.evaluate('e => e.outerHTML')[:200]}"
        assert button.locator("svg").count() >= 1 or button.inner_text().strip(), f"header button {i} shows nothing"
    icon = page.locator(".bd-header-article button svg.svg-inline--fa").first
    assert icon.bounding_box()["width"] > 8, "the header's icons are not drawn"
    before = page.evaluate("() => document.documentElement.dataset.mode")
    page.locator("button.theme-switch-button").first.click()
    assert page.evaluate("() => document.documentElement.dataset.mode") != before, "the theme switch does nothing"


def test_admonition_icons_are_drawn_without_the_icon_font(page, server):
    """Admonition icons are SVG masks (book/_ext/fast_pages.py): a chapter never downloads Font Awesome's font."""
    open_page(page, server, "notebooks/03_pagerank_textrank.html")
    page.evaluate("() => document.querySelectorAll('section').forEach(s => { s.style.contentVisibility = 'visible'; })")
    warning = page.locator("div.warning.admonition > p.admonition-title").first
    warning.scroll_into_view_if_needed()
    icon = warning.evaluate("""e => { const s = getComputedStyle(e, '::after');
                                      return [s.maskImage || s.webkitMaskImage, s.width, s.backgroundColor]; }""")
    assert icon[0].startswith('url("data:image/svg+xml') and icon[1] != "0px", icon[:2]
    solution = page.locator("div.solution.admonition > p.admonition-title").first
    assert solution.evaluate("e => getComputedStyle(e, '::after').content") == "none"  # solutions have no icon
    page.evaluate("() => document.fonts.ready.then(() => true)")
    fonts = page.evaluate("() => performance.getEntriesByType('resource').map(r => r.name)"
                          ".filter(n => /webfonts/.test(n))")
    assert fonts == [], fonts


def test_search_finds_a_chapter_term(page, server):
    page.goto(f"{server}/search.html?q=Kneser", wait_until="load")
    page.wait_for_selector("#search-results li", timeout=20_000)
    hits = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.href)")
    assert any("01_language_models_and_perplexity" in h for h in hits), hits


def test_saved_widgets_render(page, server, site):
    with_widgets = [p for p in CHAPTERS if "application/vnd.jupyter.widget-view+json" in (site / p).read_text()]
    if not with_widgets:
        pytest.skip("no chapter stores widget state yet")
    for path in with_widgets:
        open_page(page, server, path)
        page.wait_for_selector(".widget-slider, .jupyter-widgets, .widget-container", timeout=20_000)


def test_site_works_from_disk_without_a_server(page, site):
    """The built folder opened with file://, offline: math, figures and search all work."""
    chapter = site / "notebooks" / "01_language_models_and_perplexity.html"
    page.goto(chapter.as_uri(), wait_until="load")
    load_everything(page)
    assert page.locator("article mjx-container").count() > 10
    # The math's glyphs come from the vendored MathJax fonts, which load from disk too.
    assert page.evaluate("() => [...document.fonts].some(f => f.family === 'MJXTEX' && f.status === 'loaded')")
    assert page.eval_on_selector_all("article img", "els => els.every(e => e.complete && e.naturalWidth > 0)")
    assert page.console_errors == [], page.console_errors[:3]
    # Search finds pages from disk too; only its result snippets need a server (the browser blocks fetch()
    # of file:// URLs), so those fetch errors are expected here.
    page.goto((site / "search.html").as_uri() + "?q=perplexity", wait_until="load")
    page.wait_for_selector("#search-results li a", timeout=20_000)
    hits = page.eval_on_selector_all("#search-results li a", "els => els.map(e => e.href)")
    assert any("01_language_models_and_perplexity" in h for h in hits), hits


def _diagram_pages():
    """(page, diagram name) for every mechanism diagram a chapter draws."""
    import json

    from lmbook.plotting.diagrams import ALT_TEXT

    found = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        text = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        found += [(f"notebooks/{nb.stem}.html", name) for name in ALT_TEXT if f"diagrams.{name}(" in text]
    return found


@pytest.mark.parametrize("path,name", _diagram_pages())
def test_diagram_is_described_captioned_and_readable_in_dark_mode(page, server, path, name):
    from lmbook.plotting.diagrams import ALT_TEXT

    open_page(page, server, path)
    page.evaluate("() => { const root = document.documentElement; root.dataset.theme = root.dataset.mode = 'dark'; }")
    found = page.evaluate(
        """alt => [...document.querySelectorAll('article img')].filter(e => e.getAttribute('alt') === alt).map(e => {
             const c = document.createElement('canvas'); c.width = e.naturalWidth; c.height = e.naturalHeight;
             const ctx = c.getContext('2d'); ctx.drawImage(e, 0, 0);
             return {width: e.naturalWidth,
                     caption: !!e.closest('figure')?.querySelector('figcaption'),
                     corner: [...ctx.getImageData(1, 1, 1, 1).data]}; })""", ALT_TEXT[name])
    assert len(found) == 1, f"{path}: expected one image with the alt text of {name}, found {len(found)}"
    image = found[0]
    assert image["caption"], f"{path}: the {name} diagram has no caption"
    assert 0 < image["width"] <= 760, f"{path}: the {name} diagram is {image['width']} px wide"
    assert image["corner"] == [255, 255, 255, 255], f"{path}: {name} is not opaque white in dark mode: {image}"
