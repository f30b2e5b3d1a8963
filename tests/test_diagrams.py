"""The mechanism diagrams of lmbook.plotting.diagrams: each draws, fits the page, is readable (white
background, dark text of at least 10 pt, every label inside the figure and none on top of another), is the
same on every call, and carries alt text that the notebooks use unchanged."""

import json
import pathlib

import matplotlib.pyplot as plt
import pytest
from lmbook.plotting import diagrams
from matplotlib.colors import to_rgb, to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Text

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAMES = [name for name in diagrams.__all__ if name != "ALT_TEXT"]


@pytest.fixture(params=NAMES)
def drawn(request):
    fig = getattr(diagrams, request.param)()
    fig.canvas.draw()
    yield request.param, fig
    plt.close(fig)


def texts(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def test_every_diagram_is_public_and_has_alt_text():
    assert sorted(diagrams.ALT_TEXT) == sorted(NAMES)
    for name in NAMES:
        assert getattr(diagrams, name).__doc__, f"{name} has no docstring"


def test_a_white_figure_that_fits_the_page(drawn):
    name, fig = drawn
    assert isinstance(fig, Figure)
    assert to_rgba(fig.get_facecolor()) == (1.0, 1.0, 1.0, 1.0), f"{name}: the background must be opaque white"
    width, height = fig.get_size_inches()
    assert width <= 8 and height <= 6, f"{name}: {width} x {height} inches"
    assert all(not ax.axison for ax in fig.axes), f"{name}: a diagram shows no axes"


def test_text_is_large_dark_inside_and_never_overlaps(drawn):
    name, fig = drawn
    renderer = fig.canvas.get_renderer()
    found = texts(fig)
    assert len(found) >= 5, f"{name}: a diagram needs labels"
    frame = fig.bbox
    boxes = []
    for t in found:
        assert t.get_fontsize() >= 10, f"{name}: {t.get_text()!r} is {t.get_fontsize()} pt"
        r, g, b = to_rgb(t.get_color())
        assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.3, f"{name}: {t.get_text()!r} is not dark text"
        bb = t.get_window_extent(renderer)
        inside = bb.x0 >= frame.x0 - 0.5 and bb.y0 >= frame.y0 - 0.5 and bb.x1 <= frame.x1 + 0.5 and \
            bb.y1 <= frame.y1 + 0.5
        assert inside, f"{name}: {t.get_text()!r} sticks out of the figure"
        boxes.append((t.get_text(), bb))
    for i, (a, bb_a) in enumerate(boxes):
        for b, bb_b in boxes[i + 1:]:
            dx = min(bb_a.x1, bb_b.x1) - max(bb_a.x0, bb_b.x0)
            dy = min(bb_a.y1, bb_b.y1) - max(bb_a.y0, bb_b.y0)
            assert dx <= 1 or dy <= 1, f"{name}: {a!r} overlaps {b!r}"


def test_the_same_picture_every_time(tmp_path):
    for name in NAMES:
        pngs = []
        for k in range(2):
            fig = getattr(diagrams, name)()
            fig.savefig(tmp_path / f"{name}{k}.png")
            plt.close(fig)
            pngs.append((tmp_path / f"{name}{k}.png").read_bytes())
        assert pngs[0][:8] == b"\x89PNG\r\n\x1a\n" and len(pngs[0]) > 10_000, name
        assert pngs[0] == pngs[1], f"{name} changed between two calls"


def test_alt_text_describes_in_plain_words():
    for name, alt in diagrams.ALT_TEXT.items():
        assert 100 <= len(alt) <= 450, f"{name}: alt text of {len(alt)} characters"
        assert "$" not in alt and "\\" not in alt, f"{name}: alt text is read aloud, so no TeX"
        assert alt.endswith("."), name


def test_bpe_diagram_shows_smollm2s_real_merges():
    """The merges drawn for "return" are the ones SmolLM2's tokenizer applies, in its order, with its ranks."""
    from lmbook.plotting.diagrams_training import RETURN_MERGES
    from lmbook.tokenization import BPETokenizer, smollm2_gguf_path

    tok = BPETokenizer.from_gguf(smollm2_gguf_path())
    ids = {v: k for k, v in tok.vocab.items()}
    ranks = {pair: r for r, pair in enumerate(tok.merges)}
    symbols = list("return")
    for (left, right), rank in RETURN_MERGES:
        present = {(ids[a.encode()], ids[b.encode()]): (a, b) for a, b in zip(symbols, symbols[1:], strict=False)}
        best = min((p for p in present if p in ranks), key=ranks.get)
        assert present[best] == (left, right) and ranks[best] == rank
        k = symbols.index(left)
        symbols[k:k + 2] = [left + right]
    assert symbols == ["return"] and tok.tokens("return") == ["return"]


def test_every_diagram_is_in_a_chapter_with_its_alt_text():
    used = set()
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            source = "".join(cell["source"])
            shown = [name for name in NAMES if f"diagrams.{name}(" in source]
            if cell["cell_type"] != "code" or not shown:
                continue
            alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt")
            assert len(shown) == 1 and alt == diagrams.ALT_TEXT[shown[0]], f"{nb.name}: {shown} needs ALT_TEXT"
            used.update(shown)
    assert used == set(NAMES), f"diagrams shown in no chapter: {sorted(set(NAMES) - used)}"
