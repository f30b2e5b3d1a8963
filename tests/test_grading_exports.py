"""The grader's exports against the formats' public specifications, and the answer keys kept out of the
package that students install."""

import csv
import json
import math
import pathlib
import re
import stat
import zipfile

import pytest
from lmbook.teaching import exports, student_notebook
from lmbook.teaching.plain import NotPlain, decode, encode
from setuptools import find_packages

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIELDS = ["student", "notebook", "exercise", "passed", "points", "max_points", "reason", "flags"]


@pytest.fixture
def grades(tmp_path):
    rows = [("alice", "01_a.ipynb", "ch01-x", True, 1, 1), ("alice", "01_a.ipynb", "ch01-y", False, 0, 2),
            ("bob", "01_a.ipynb", "ch01-x", True, 1, 1), ("bob", "01_a.ipynb", "ch01-y", True, 2, 2),
            ("bob", "05_b.ipynb", "ch05-z", False, 0, 1)]
    path = tmp_path / "grades.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        w.writerows([*r, "passed" if r[3] else "failed", ""] for r in rows)
    return path


def test_canvas_csv_follows_the_gradebook_import_format(grades, tmp_path):
    # Canvas's gradebook import: the identity columns Student, ID, SIS User ID, SIS Login ID, Section, then one
    # column per assignment; an optional "Points Possible" row gives each assignment's maximum.
    out = list(csv.reader(exports.canvas_csv(grades, tmp_path / "canvas.csv").open()))
    assert out[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_a", "05_b"]
    assert out[1] == ["Points Possible", "", "", "", "", "3", "1"]
    assert out[2] == ["alice", "", "", "alice", "", "1", ""]  # alice submitted no 05_b: left blank, not 0
    assert out[3] == ["bob", "", "", "bob", "", "3", "0"]


def test_canvas_roster_fills_in_the_identity_columns(grades, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section,Quiz 1\n"
                      "    Points Possible,,,,,10\n"
                      "\"Liddell, Alice\",101,S-1,alice,Sec A,9\n", encoding="utf-8-sig")
    out = list(csv.reader(exports.canvas_csv(grades, tmp_path / "canvas.csv", roster).open()))
    assert out[2][:5] == ["Liddell, Alice", "101", "S-1", "alice", "Sec A"]


# Gradescope's autograder specification: results.json has an optional top-level score, execution_time, output,
# visibility, stdout_visibility, extra_data and a list of tests; a test has score, max_score, status (passed or
# failed), name, number, output, tags, visibility and extra_data.
TOP = {"score": (int, float), "execution_time": (int,), "output": (str,), "visibility": (str,),
       "stdout_visibility": (str,), "extra_data": (dict,), "tests": (list,), "leaderboard": (list,)}
TEST = {"score": (int, float), "max_score": (int, float), "status": (str,), "name": (str,), "number": (str,),
        "output": (str,), "tags": (list,), "visibility": (str,), "extra_data": (dict,)}
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def test_gradescope_results_follow_the_autograder_specification():
    rows = [{"exercise": "ch01-x", "passed": True, "points": 1.0, "max_points": 1.0, "reason": "passed"},
            {"exercise": "ch01-y", "passed": False, "points": 0.0, "max_points": 2.0, "reason": "case 1 differs"}]
    data = json.loads(json.dumps(exports.gradescope_results(rows, "feedback text")))
    assert set(data) <= set(TOP) and all(isinstance(data[k], TOP[k]) for k in data)
    assert data["visibility"] in VISIBILITY and data["stdout_visibility"] in VISIBILITY
    for test in data["tests"]:
        assert set(test) <= set(TEST) and all(isinstance(test[k], TEST[k]) for k in test)
        assert test["status"] in {"passed", "failed"} and test["visibility"] in VISIBILITY
    assert data["score"] == 1.0 and [t["max_score"] for t in data["tests"]] == [1.0, 2.0]


def test_gradescope_bundle_holds_an_executable_setup_and_run_script(tmp_path):
    chapter = "01_language_models_and_perplexity.ipynb"
    path = exports.gradescope_bundle(tmp_path / "ag.zip", chapter, ROOT / "notebooks", ROOT / "lib" / "answer_keys",
                                     ROOT)
    with zipfile.ZipFile(path) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
        run = z.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "answer_keys/ch01.py", "lmbook-src/pyproject.toml",
            "notebooks/01_language_models_and_perplexity.ipynb"} <= names
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    assert "/autograder/results/results.json" in run and "grading_cli gradescope" in run
    assert f"--notebook {chapter}" in run
    assert [n for n in names if n.startswith("notebooks/")] == [f"notebooks/{chapter}"]  # only the assignment


def test_answer_keys_are_not_part_of_the_installed_package():
    packages = find_packages(ROOT / "lib", include=["lmbook", "lmbook.*"])
    assert "answer_keys" not in packages and "lmbook.teaching.checks" in packages
    assert 'include = ["lmbook", "lmbook.*"]' in (ROOT / "pyproject.toml").read_text()


def test_no_reference_solution_is_readable_from_the_self_checks():
    """No solution line of any chapter appears in the checks, and hand answers are stored only as digests."""
    teaching = "\n".join(p.read_text() for p in (ROOT / "lib" / "lmbook" / "teaching" / "checks").rglob("*.py"))
    expected = (ROOT / "lib" / "lmbook" / "teaching" / "checks" / "expected.json").read_text()
    assert "SOLUTION" not in teaching
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        public = "\n".join("".join(c["source"]) for c in student_notebook(nb)["cells"])
        for cell in nb["cells"]:
            body = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", "".join(cell["source"]), re.S)
            for line in "".join(body).splitlines():
                line = line.strip()
                if len(line) > 25 and line not in public and not line.startswith("#"):
                    assert line not in teaching, f"{path.name}: a solution line is in lmbook.checks: {line}"
    from answer_keys import all_keys

    entries = json.loads(expected)
    for name, key in all_keys().items():
        if key.answer is not None:  # a hand answer is stored as digests only, never as a number
            assert sorted(entries[name]) == ["coarse", "digests"], name
            assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in [*entries[name]["digests"], entries[name]["coarse"]])


def test_the_stored_expected_outputs_are_those_of_the_answer_keys():
    """expected.json is what ``python -m answer_keys`` writes, to a tolerance: random public inputs drawn on
    another CPU can differ in their last bits (the self-checks use the stored ones)."""
    from answer_keys.__main__ import expected_file
    from lmbook.checks import close

    stored = json.loads((ROOT / "lib" / "lmbook" / "teaching" / "checks" / "expected.json").read_text())
    fresh = json.loads(expected_file())
    assert stored.keys() == fresh.keys(), "run python -m answer_keys"
    for name, entry in stored.items():
        assert entry.keys() == fresh[name].keys(), name
        if "digests" in entry:
            assert entry == fresh[name], f"{name}: run python -m answer_keys"
            continue
        for part in ("inputs", "outputs"):
            a, b = ([decode(x) for x in e[part]] for e in (entry, fresh[name]))
            assert len(a) == len(b) and all(close(x, y, 1e-5, 1e-7) for x, y in zip(a, b, strict=True)), \
                f"{name} {part}: run python -m answer_keys"


def test_every_hidden_case_is_new_and_plain():
    """The hidden inputs are not the public ones, and inputs and reference outputs are plain data."""
    import lmbook.teaching.checks  # noqa: F401
    from answer_keys import all_keys
    from lmbook.teaching.checks._core import CHECKS, comparable

    keys = all_keys()
    assert set(CHECKS) == set(keys)
    for name, check in CHECKS.items():
        if check.kind == "answer":
            assert keys[name].answer is not None and math.isfinite(keys[name].answer)
            continue
        public = [json.dumps(encode((c.args, c.kwargs))) for c in check.cases()]
        hidden = keys[name].hidden()
        assert len(hidden) >= 3, name
        for case in hidden:
            assert json.dumps(encode((case.args, case.kwargs))) not in public, name
            comparable(check, keys[name].reference(*case.args, **case.kwargs))


@pytest.mark.parametrize("value", [1, 2.5, -math.inf, "s", b"\x00\xff", None, True, (1, [2, {"a": 3}]),
                                   {1: "x"}, {1, 2}])
def test_plain_data_round_trips(value):
    assert decode(json.loads(json.dumps(encode(value)))) == value


@pytest.mark.parametrize("data", [{"array": {"dtype": "float64", "shape": [2], "data": [1.0]}},
                                  {"array": {"dtype": "object", "shape": [1], "data": [1]}},
                                  {"pickle": "gASV"}, {"dict": [[1.5, 2]]}, {"float": "1e400"}])
def test_plain_data_refuses_anything_else(data):
    with pytest.raises(NotPlain):
        decode(data)


def test_objects_are_not_plain_data():
    class Sneaky(float):
        def __eq__(self, other):
            return True

    with pytest.raises(NotPlain):
        encode(object())
    assert type(decode(json.loads(json.dumps(encode(Sneaky(1.0)))))) is float  # the subclass does not survive
