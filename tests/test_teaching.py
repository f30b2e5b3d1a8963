"""The student edition: no solution line survives, every exercise keeps its stub and its self-check."""

import json
import pathlib

import pytest
from lmbook.teaching import BEGIN, END, stub_solution, student_notebook

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def solution_lines(nb):
    lines = []
    for cell in nb["cells"]:
        inside = False
        for line in "".join(cell["source"]).splitlines():
            if line.strip() == BEGIN:
                inside = True
            elif line.strip() == END:
                inside = False
            elif inside and line.strip():
                lines.append(line.strip())
    return lines


def _outside_markers(source):
    out, inside = [], False
    for line in source.splitlines():
        if line.strip() in (BEGIN, END):
            inside = line.strip() == BEGIN
        elif not inside:
            out.append(line)
    return out


def _in_solution(cell, nb):
    """True for the markdown cells of a gated solution block (the worked answer)."""
    inside = False
    for c in nb["cells"]:
        src = "".join(c["source"]).lstrip()
        if c["cell_type"] == "markdown" and src.startswith("```{solution-start}"):
            inside = True
        if c is cell:
            return inside and c["cell_type"] == "markdown"
        if c["cell_type"] == "markdown" and src.startswith("```{solution-end}"):
            inside = False
    return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_solution_line_leaks_into_the_student_notebook(path):
    nb = json.loads(path.read_text())
    student = student_notebook(nb)
    text = "\n".join("".join(c["source"]) + json.dumps(c.get("outputs", [])) for c in student["cells"])
    lines = solution_lines(nb)
    assert lines, f"{path.name} has no solution code"
    # a generic line such as "for n in orders:" may also occur outside the solutions; only lines that the
    # public part of the chapter does not contain count as leaks
    public = "\n".join(line for c in nb["cells"] if not _in_solution(c, nb)
                       for line in _outside_markers("".join(c["source"])) + [json.dumps(c.get("outputs", []))])
    leaked = [line for line in lines if line in text and line not in public]
    assert not leaked, f"{path.name}: solution lines in the student edition: {leaked[:3]}"
    assert "```{solution-start}" not in text and BEGIN not in text
    checks = sum("checks.check_" in "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    kept = sum("checks.check_" in "".join(c["source"]) for c in student["cells"] if c["cell_type"] == "code")
    assert kept == checks, "every self-check call is kept"


def test_stub_inside_a_function_raises_and_top_level_assignments_become_none():
    src = f"def f(x):\n    {BEGIN}\n    y = x + 1\n    return y\n    {END}\n"
    assert stub_solution(src) == 'def f(x):\n    raise NotImplementedError("your code here")'
    src = f"{BEGIN}\nanswer = 2 ** 0.5\nother = 3\nanswer = answer * 2\n{END}\nprint(answer)"
    assert stub_solution(src) == "answer = None  # your answer here\nother = None  # your answer here\nprint(answer)"


@pytest.mark.parametrize("src", [f"{BEGIN}\nx = 1", f"x = 1\n{END}", f"{BEGIN}\n{BEGIN}\n{END}"])
def test_unbalanced_markers_are_refused(src):
    with pytest.raises(ValueError, match="SOLUTION"):
        stub_solution(src)


def test_stubbed_function_and_answer_are_reported_politely(capsys):
    from lmbook import checks

    namespace = {}
    exec(stub_solution(f"def add_k_prob(a, b, c, d):\n    {BEGIN}\n    return 1\n    {END}"), namespace)
    checks.check_add_k(namespace["add_k_prob"])
    exec(stub_solution(f"{BEGIN}\nanswer = 4.0\n{END}"), namespace)
    checks.check_ppl_by_hand(namespace["answer"])
    out = capsys.readouterr().out
    assert "not attempted yet" in out and "not answered yet" in out
