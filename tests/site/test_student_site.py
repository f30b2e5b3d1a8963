"""The student edition of the site (make student) shows no line of any solution."""

import json
import pathlib

import pytest
from lmbook.teaching import BEGIN, END

ROOT = pathlib.Path(__file__).resolve().parents[2]
STUDENT_HTML = ROOT / "_build" / "student" / "html"


def solution_and_public_lines(nb):
    solution, public = [], []
    for cell in nb["cells"]:
        inside = False
        for line in "".join(cell["source"]).splitlines():
            if line.strip() in (BEGIN, END):
                inside = line.strip() == BEGIN
            elif line.strip():
                (solution if inside else public).append(line.strip())
        public.append(json.dumps(cell.get("outputs", [])))
    return solution, "\n".join(public)


def test_no_solution_line_in_the_student_site():
    if not (STUDENT_HTML / "index.html").exists():
        pytest.fail("the student site is not built: run `make student` (make test-site does it)")
    import html

    pages = {p: html.unescape(p.read_text(encoding="utf-8")) for p in STUDENT_HTML.rglob("*.html")}
    pages.update({p: p.read_text(encoding="utf-8") for p in STUDENT_HTML.rglob("*.ipynb")})  # the downloads
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    books = {p: solution_and_public_lines(json.loads(p.read_text())) for p in notebooks}
    public = "\n".join(pub for _, pub in books.values())  # a line the book shows elsewhere is not a leak
    for nb_path, (solution, _) in books.items():
        leaks = [line for line in solution if line not in public and any(line in text for text in pages.values())]
        assert not leaks, f"{nb_path.name}: solution lines in the student site: {leaks[:3]}"
    assert not any('class="solution' in text for text in pages.values()), "a solution block is in the student site"
