"""The book's local Sphinx extensions, on a one-page project: an exercise's kinds are shown at its top."""

import sys
from pathlib import Path

from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[1]

PAGE = """# Page

```{exercise-start} A transfer task
:label: ch99-a
:class: transfer proof
```
Apply it elsewhere.
```{exercise-end}
```

```{exercise-start} No kind given
:label: ch99-b
```
Compute it.
```{exercise-end}
```
"""


def test_exercise_kinds_are_shown_at_the_top_of_each_exercise(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "index.md").write_text(PAGE)
    (tmp_path / "src" / "conf.py").write_text(
        "extensions = ['myst_parser', 'sphinx_exercise', 'exercise_kinds']\n")
    app = Sphinx(tmp_path / "src", tmp_path / "src", tmp_path / "out", tmp_path / "doctree", "html",
                 status=None, warning=sys.stderr, freshenv=True)
    app.build()
    html = (tmp_path / "out" / "index.html").read_text()
    assert '<p class="exercise-kind">Transfer · Proof</p>' in html
    assert html.count('class="exercise-kind"') == 1  # the exercise without a kind gets no line


def test_chapters_get_a_discuss_link_to_the_configured_repository(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "book" / "_ext"))
    src = tmp_path / "src"
    (src / "notebooks").mkdir(parents=True)
    (src / "index.md").write_text("# Home\n\n```{toctree}\nnotebooks/07_attention\n```\n")
    (src / "notebooks" / "07_attention.md").write_text("# Attention & masks\n\nText.\n")
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'discuss_link']\n"
        "html_theme_options = {'repository_url': 'https://github.com/someone/fork'}\n")
    app = Sphinx(src, src, tmp_path / "out", tmp_path / "doctree", "html", status=None, warning=sys.stderr,
                 freshenv=True)
    app.build()
    chapter = (tmp_path / "out" / "notebooks" / "07_attention.html").read_text()
    url = "https://github.com/someone/fork/discussions/new?category=q-a&amp;title=Attention%20%26%20masks"
    assert f'<a href="{url}">Discuss this page</a>' in chapter
    assert "Discuss this page" not in (tmp_path / "out" / "index.html").read_text()  # chapters only
