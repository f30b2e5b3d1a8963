"""The whole book as a PDF (make pdf), read back with Debian's poppler-utils: a plausible page count, every
entry of _toc.yml starting a page in table-of-contents order, math rendered (not TeX source), figures and
code outputs present, the bibliography, no solutions, a page that renders to a non-blank image, and the
site's link to the PDF resolving."""

import hashlib
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml
from _site_helpers import ROOT

PDF = ROOT / "_build" / "pdf" / "book.pdf"
TOOLS = ("pdfinfo", "pdftotext", "pdftoppm", "pdfimages", "pdffonts")


@pytest.fixture(scope="module")
def pdf():
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        message = f"{', '.join(missing)} not found: install Debian's poppler-utils to check the PDF"
        if os.environ.get("LMBOOK_REQUIRE_BROWSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    if not PDF.exists():
        pytest.fail("the PDF is not built: run `make pdf` (make test-site does it for you)")
    return PDF


@pytest.fixture(scope="module")
def pages(pdf):
    """The text of each page, whitespace collapsed."""
    text = subprocess.run(["pdftotext", "-enc", "UTF-8", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout
    return [" ".join(page.split()) for page in text.split("\f")[:-1]]


def toc_titles():
    """The title (first H1) of every file of _toc.yml, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    titles = []
    for name in files:
        if name.startswith("notebooks/"):
            cells = json.loads((ROOT / f"{name}.ipynb").read_text())["cells"]
            source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            source = (ROOT / f"{name}.md").read_text()
        title = re.search(r"^# (.+)$", source, re.M).group(1)
        titles.append((name, re.sub(r"[*_`]", "", title).strip()))
    return titles


def test_page_count_is_plausible(pdf):
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    count = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    chapters = sum(name.startswith("notebooks/") for name, _ in toc_titles())
    assert 10 * chapters <= count <= 80 * chapters, f"{count} pages for {chapters} chapters"


def test_every_toc_entry_starts_a_page_in_order(pages):
    def bare(text):  # pdftotext joins a hyphenated word broken at a line end ("byte-level" -> "bytelevel")
        return re.sub(r"[\s-]", "", text)

    starts, previous = [bare(p[:300]) for p in pages], -1
    for name, title in toc_titles():
        found = next((i for i in range(previous + 1, len(pages)) if starts[i].startswith(bare(title))), None)
        assert found is not None, f"{name}: no page after page {previous + 1} starts with its title {title!r}"
        previous = found


def test_math_is_rendered_not_tex(pages):
    text = " ".join(pages)
    # TeX may appear in code (matplotlib labels such as r"$1/\sqrt{d_k}$"), never more often than the code has it.
    code = "".join("".join(c["source"]) for nb in (ROOT / "notebooks").glob("*.ipynb")
                   for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
    for tex in (r"\frac{", r"\sqrt{", r"\sum_", r"\mathbf{", r"\(", r"\[", "$$"):
        extra = text.count(tex) - code.count(tex)
        assert extra <= 0, f"raw TeX {tex!r} in the PDF ({extra} more than in code): MathJax did not typeset it"
    # Chapter 7's matrix form of attention, softmax(QK^T / sqrt(d_k)) V, typeset by MathJax into symbols.
    assert text.replace(" ", "").count("(QK⊤/√dk)V") > 0, "chapter 7's softmax(QK^T/sqrt(d_k))V is not in the PDF"


def test_math_is_drawn_in_mathjax_fonts(pdf):
    """The math is typeset at build time (book/_ext/fast_pages.py): the PDF must embed MathJax's own fonts."""
    fonts = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    # Chromium embeds MathJax's woff fonts as unnamed Type 3 fonts; the text fonts (DejaVu, Liberation, Font
    # Awesome) are TrueType. Without the math fonts (not loaded before printing) the math falls back to a text
    # font and the PDF has no Type 3 font at all.
    type3 = [line for line in fonts.splitlines()[2:] if " Type 3 " in line]
    assert len(type3) >= 3, f"only {len(type3)} Type 3 (MathJax) fonts in the PDF: the math fonts did not load"


def test_code_outputs_figures_bibliography_and_no_solutions(pdf, pages):
    text = " ".join(pages)
    assert text.count("from lmbook import") > 0, "no code cell in the PDF"
    assert re.search(r"lmbook \d+\.\d+\.\d+ \| torch \S+", text), "no stored output (the set-up cell's versions)"
    images = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True, text=True, check=True).stdout
    figures = len(images.splitlines()) - 2  # below a two-line header
    assert figures >= 2 * sum(n.startswith("notebooks/") for n, _ in toc_titles()), f"only {figures} figures in the PDF"
    bibliography = next(p for p in reversed(pages) if p.startswith("Bibliography"))
    assert len(re.findall(r"\b(19|20)\d\d\b", bibliography)) >= 10, "the bibliography has no entries"
    assert text.count("Solution to Exercise") == 0, "a solution is in the PDF (it is built with HIDE_SOLUTIONS=1)"


def test_a_page_renders_to_a_non_blank_image(pdf, tmp_path, pages):
    chapter = next(i for i, p in enumerate(pages) if p.startswith("1. ")) + 1  # chapter 1's first page
    subprocess.run(["pdftoppm", "-r", "40", "-gray", "-f", str(chapter), "-l", str(chapter), str(pdf),
                    str(tmp_path / "page")], check=True)
    (image,) = tmp_path.glob("page*.pgm")
    data = image.read_bytes()
    width, height, depth = map(int, re.match(rb"P5\s+(\d+)\s+(\d+)\s+(\d+)\s", data).groups())
    pixels = data[-width * height:]
    dark = sum(1 for v in pixels if v < depth // 2) / len(pixels)
    assert 0.005 < dark < 0.5, f"page {chapter} is {dark:.1%} dark: blank or black"


def test_the_site_links_the_pdf(site):
    intro = (site / "book" / "intro.html").read_text()
    assert 'href="../book.pdf"' in intro, "the intro page does not link the PDF (build the site after make pdf)"
    same = hashlib.sha256((site / "book.pdf").read_bytes()).digest() == hashlib.sha256(PDF.read_bytes()).digest()
    assert same, "the site serves another PDF than make pdf wrote (build the site after make pdf)"
    chapter = (site / "notebooks" / "07_attention.html").read_text()
    assert 'href="../book.pdf"' in chapter, "the download menu of a chapter does not offer the PDF"
