"""The grader against a class of hostile submissions (tests/grading/attacks.py) on chapter 1's exercises.

One batch holds honest solutions, unsolved stubs and every attack. Every attack fails: no stub earns a point,
nothing leaks or is damaged, and the honest students keep full marks in the same batch. The batch always produces its
CSV, and survives malformed notebooks, endless loops, floods, memory hogs, fork bombs and its own death.
Small limits keep it to about two minutes.
"""

import copy
import csv
import hashlib
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from grading.attacks import BREAK, FILES, FORGE
from lmbook.teaching import flags, grading, sandbox, student_notebook

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHAPTER = "01_language_models_and_perplexity.ipynb"
LIMITS = sandbox.Limits(seconds=20, cpu_seconds=20, memory=int(1.5 * sandbox.GiB), processes=64,
                        output=256 * 1024)
HAVE_BWRAP = sandbox.bwrap_available()
needs_sandbox = pytest.mark.skipif(not HAVE_BWRAP and not os.environ.get("LMBOOK_REQUIRE_SANDBOX"),
                                   reason="bubblewrap is not installed (CI installs it)")


def code(source):
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def chapter_one_exercises() -> dict:
    """Chapter 1 cut down to its set-up cell and its exercises (solution cells that need the chapter's own
    variables are left out), so a submission runs in seconds."""
    nb = json.loads((ROOT / "notebooks" / CHAPTER).read_text())
    cells, inside, first = [], False, True
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and first:
            cells += [cell, code("import math")]
            first = False
        elif cell["cell_type"] == "markdown" and "{solution-start}" in src:
            cells.append(cell)
            inside = True
        elif cell["cell_type"] == "markdown" and "{solution-end}" in src:
            cells.append(cell)
            inside = False
        elif cell["cell_type"] == "code" and (("def " in src or "answer =" in src) if inside else "checks." in src):
            cells.append(cell)
    return {**nb, "cells": cells}


N_CHECKED = len(grading.exercises_of(chapter_one_exercises()))  # chapter 1's checked exercises, one point each


def with_cell(nb: dict, where: str, source: str) -> dict:
    nb = copy.deepcopy(nb)
    nb["cells"].insert(1 if where == "start" else len(nb["cells"]), code(source))
    return nb


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("batch")
    reference, subs, out, home = root / "reference", root / "subs", root / "out", root / "home"
    for d in (reference, subs, home):
        d.mkdir()
    honest = chapter_one_exercises()
    (reference / CHAPTER).write_text(json.dumps(honest))
    stub = student_notebook(honest)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    received = []
    threading.Thread(target=_accept, args=(server, received), daemon=True).start()
    places = {"reference": reference, "submissions": subs, "out": out, "keys": ROOT / "lib" / "answer_keys",
              "home": home, "port": server.getsockname()[1]}
    loud = "%load_ext autotime\nfor i in range(2000):\n    print('an honest line', i)"
    spy = copy.deepcopy(honest)  # prints its inputs: the self-check's public ones, never the hidden ones
    for cell in spy["cells"]:
        head = "def add_k_prob(count_hw, count_h, vocab_size, k):\n"
        cell["source"] = "".join(cell["source"]).replace(
            head, head + "    print('ARGS', (count_hw, count_h, vocab_size, k))\n")
    leak = copy.deepcopy(honest)  # a solved notebook whose add_k_prob tries every way out with its inputs
    for cell in leak["cells"]:
        head = "def add_k_prob(count_hw, count_h, vocab_size, k):\n"
        if head in "".join(cell["source"]):
            cell["source"] = "import json, os\n_saved = os.dup(2)\n" + "".join(cell["source"]).replace(head, head + (
                "    seen = f'HIDDEN {(count_hw, count_h, vocab_size, k)}'\n    print(seen)\n"
                "    os.write(_saved, (seen + '\\n').encode())\n"
                "    for fd in range(3, 30):\n"
                "        for line in ({'exercise': 'continuation_probs', 'outputs': [{'error': seen}]},"
                " {'exercise': 'optimal_logit_gap', 'error': seen}):\n"
                "            try:\n"
                "                os.write(fd, (json.dumps(line) + '\\n').encode())\n"
                "            except OSError:\n"
                "                pass\n"
                "    if (count_hw, count_h, vocab_size, k) == (0, 3, 7, 0.25):\n"
                "        raise type('H_0_3_7_0p25', (Exception,), {})()  # a hidden input, spelt as a name\n"))
    notebooks = {"aa_honest": with_cell(spy, "start", loud), "zz_honest": honest, "ag_leak_hidden_inputs": leak,
                 "zz_stub": stub, "ab_malformed_cells": {**honest, "cells": 7}, "ac_not_json": None}
    for name, (where, source) in {**FORGE, **FILES, **BREAK}.items():
        for key, value in places.items():
            source = source.replace("{" + key + "}", str(value))
        notebooks[name] = with_cell(stub, where, source)
    for name, nb in notebooks.items():
        (subs / name).mkdir()
        (subs / name / CHAPTER).write_text("{ not json" if nb is None else json.dumps(nb))
    (subs / "ad_link_to_the_reference").mkdir()  # a link, a FIFO and a copy one folder too deep earn nothing
    (subs / "ad_link_to_the_reference" / CHAPTER).symlink_to(reference / CHAPTER)
    (subs / "ae_fifo").mkdir()
    os.mkfifo(subs / "ae_fifo" / CHAPTER)
    (subs / "af_bad_name").mkdir()  # a file name that is not UTF-8
    (subs / "af_bad_name" / os.fsdecode(b"\xff.ipynb")).write_text("{}")
    (subs / "zz_stub" / "zz_honest").mkdir()
    (subs / "zz_stub" / "zz_honest" / CHAPTER).write_text(json.dumps(honest))
    before = {p: _digest(p) for p in [*subs.glob("*/*.ipynb"), reference / CHAPTER, _core_file()]
              if p.is_file() and not p.is_symlink()}
    start = time.monotonic()
    path = grading.grade_all(subs, out, reference, ROOT / "lib" / "answer_keys", limits=LIMITS, cell_timeout=5)
    seconds = time.monotonic() - start
    csv_after = path.read_bytes()
    time.sleep(1.5)  # a surviving daemon would write now
    rows = list(csv.DictReader(path.open()))
    server.close()
    return Batch(rows=rows, out=out, home=home, before=before, received=received, csv_after=csv_after,
                 seconds=seconds, path=path, names=list(notebooks))


class Batch(dict):
    def __repr__(self):  # keeps pytest's report of a failure short
        return f"<a graded batch of {len(self['names'])} submissions>"


def _accept(server, received):
    while True:
        try:
            conn, _ = server.accept()
            received.append(conn.recv(100))
        except OSError:
            if server.fileno() == -1:
                return


def _digest(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def _core_file():
    import lmbook.teaching.checks._core as core

    return pathlib.Path(core.__file__)


def survivors(grader_pid: int) -> list[int]:
    """Processes still marked as started by the grader with this process id (the sandbox sets LMBOOK_GRADER)."""
    mark, found = f"LMBOOK_GRADER={grader_pid}\0".encode(), []
    for env in pathlib.Path("/proc").glob("[0-9]*/environ"):
        try:
            found += [int(env.parent.name)] if mark in env.read_bytes() else []
        except OSError:
            pass
    return found


def points(batch, student):
    return sum(float(r["points"]) for r in batch["rows"] if r["student"] == student)


def feedback(batch, student):
    return (batch["out"] / "feedback" / f"{student}.md").read_text()


def has(batch, student, text):
    """Whether a student's feedback holds ``text`` (a function, so that a failure does not print the feedback)."""
    return text in feedback(batch, student)


@needs_sandbox
def test_honest_students_keep_full_marks_in_a_hostile_batch(batch):
    assert points(batch, "aa_honest") == N_CHECKED and points(batch, "zz_honest") == N_CHECKED
    assert has(batch, "aa_honest", "an honest line 1999")  # printed freely
    assert points(batch, "zz_stub") == 0  # after the startup-file and installed-package attacks
    assert has(batch, "aa_honest", "ARGS (3, 10, 5, 1.0)")  # the notebook's own self-check
    assert not has(batch, "aa_honest", "ARGS (0, 3, 7, 0.25)")  # a hidden input stays hidden


@needs_sandbox
def test_hidden_inputs_never_leave_the_sandbox(batch):
    text = "".join(p.read_text(errors="replace") for p in (batch["out"] / "feedback").iterdir())
    text += batch["path"].read_text(errors="replace")
    assert has(batch, "ag_leak_hidden_inputs", "HIDDEN (3, 10, 5, 1.0)")  # public, in the notebook's own run
    assert "HIDDEN (12, 40, 250, 0.5)" not in text and "[12, 40, 250, 0.5]" not in text
    assert "H_0_3_7_0p25" not in text
    # right answers, but for the exercise that raised on a hidden input and the two whose forged lines came first
    assert points(batch, "ag_leak_hidden_inputs") == N_CHECKED - 3
    assert has(batch, "find_the_job_in_memory", "JOB") and "0.25]" not in feedback(batch, "find_the_job_in_memory")


@needs_sandbox
def test_links_fifos_and_nested_copies_earn_nothing(batch):
    rows = {(r["student"], r["reason"]) for r in batch["rows"]}
    assert points(batch, "ad_link_to_the_reference") == 0 and points(batch, "ae_fifo") == 0
    assert all("not a regular file" in reason for s, reason in rows if s in ("ad_link_to_the_reference", "ae_fifo"))
    assert [r for r in batch["rows"] if r["student"] == "zz_stub"] and points(batch, "zz_honest") == N_CHECKED
    assert len([r for r in batch["rows"] if r["student"] == "zz_honest"]) == N_CHECKED  # the nested copy is not graded


@needs_sandbox
@pytest.mark.parametrize("attack", [*FORGE, *FILES, *BREAK])
def test_every_attack_earns_nothing(batch, attack):
    earned = [(r["exercise"], r["reason"]) for r in batch["rows"] if r["student"] == attack and r["passed"] == "True"]
    assert not earned, f"{attack} earned points: {earned}"


@needs_sandbox
def test_no_solution_and_no_file_outside_the_sandbox_is_reachable(batch):
    text = feedback(batch, "probe_and_steal") + batch["path"].read_text()
    leaked = [line for line in ("return (count_hw + k) / (count_h + k * vocab_size)", "BEGIN SOLUTION", "def add_k")
              if line in text]
    assert has(batch, "probe_and_steal", "STOLEN []") and not leaked
    assert not has(batch, "read_the_answer_keys_from_the_grader", "found a key")
    assert has(batch, "read_the_answer_keys_from_the_grader", "modules: []")


@needs_sandbox
def test_no_file_was_written_changed_or_deleted(batch):
    # inside the sandbox the attack may write and delete freely: its writes land in the sandbox's own memory
    assert has(batch, "write_and_delete_files", f"could not write {_core_file()}")
    assert all(_digest(p) == d for p, d in batch["before"].items())
    assert not (batch["home"] / "lmbook-attack.txt").exists()
    assert {p.name for p in batch["out"].iterdir()} == {"grades.csv", "feedback"}
    assert {p.stem for p in (batch["out"] / "feedback").iterdir()} == {*batch["names"], "ad_link_to_the_reference",
                                                                         "ae_fifo"}
    assert "af_bad_name" not in {r["student"] for r in batch["rows"]}  # not a chapter's name: not graded


@needs_sandbox
def test_nothing_outlives_its_run_and_there_is_no_network(batch):
    assert batch["path"].read_bytes() == batch["csv_after"]  # no late writer
    assert survivors(os.getpid()) == []
    assert batch["received"] == []
    assert has(batch, "network", "no network")
    assert not has(batch, "write_kernel_settings", "WROTE")
    assert has(batch, "write_kernel_settings", "refused /proc/sys/kernel/core_pattern")


@needs_sandbox
def test_limits_hold_and_cost_only_their_author(batch):
    rows = {r["student"]: r for r in batch["rows"]}
    assert "limit" in rows["loop_that_ignores_interrupts"]["reason"]  # of wall-clock or of CPU time
    assert "did not finish" in rows["fill_own_stdin_then_sleep"]["reason"]  # stopped at the limit all the same
    assert (batch["out"] / "feedback" / "flood_the_output.md").stat().st_size < 2 * LIMITS.output
    assert not has(batch, "allocate_4_gib", "ALLOCATED")
    started = re.search(r"STARTED (\d+)", feedback(batch, "fork_bomb"))
    assert started is None or int(started.group(1)) < LIMITS.processes
    assert "not a readable notebook" in rows["ab_malformed_cells"]["reason"]
    assert "not a readable notebook" in rows["ac_not_json"]["reason"]
    assert batch["seconds"] < 400


@needs_sandbox
def test_flags_point_at_the_cells_that_reach_for_the_machinery(batch):
    flags = {r["student"]: r["flags"] for r in batch["rows"]}
    assert flags["zz_honest"] == "" and flags["zz_stub"] == ""
    for attack, what in [("replace_check_functions", "reaches into lmbook.checks"),
                         ("rebind_lmbook", "sys.modules"), ("settrace", "tracing"),
                         ("read_expected_from_the_callers_frame", "frame inspection"),
                         ("input_transformer", "IPython hooks"), ("probe_and_steal", "file system")]:
        assert what in flags[attack], (attack, flags[attack])


@needs_sandbox
def test_killing_the_grader_keeps_the_rows_already_graded_and_leaves_nothing_running(tmp_path):
    honest = chapter_one_exercises()
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / CHAPTER).write_text(json.dumps(honest))
    for name, nb in [("a", honest), ("b", with_cell(honest, "end", "import time\ntime.sleep(600)"))]:
        (tmp_path / "subs" / name).mkdir(parents=True)
        (tmp_path / "subs" / name / CHAPTER).write_text(json.dumps(nb))
    proc = subprocess.Popen([sys.executable, "-m", "lmbook.teaching.grading_cli", "grade", str(tmp_path / "subs"),
                             str(tmp_path / "out"), "--reference", str(tmp_path / "reference"),
                             "--keys", str(ROOT / "lib" / "answer_keys"), "--seconds", "600"])
    grades = tmp_path / "out" / "grades.csv"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (grades.exists() and grades.read_text().count("\n") >= 6):
        time.sleep(0.5)
    time.sleep(3)  # student b is running now
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(1)
    rows = list(csv.DictReader(grades.open()))
    assert [r["student"] for r in rows] == ["a"] * N_CHECKED and all(r["passed"] == "True" for r in rows)
    assert survivors(proc.pid) == []


def test_the_grader_refuses_to_run_unsandboxed_unless_told(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    (tmp_path / "subs").mkdir()
    with pytest.raises(RuntimeError, match="--no-sandbox"):
        grading.grade_all(tmp_path / "subs", tmp_path / "out", ROOT / "notebooks")


def test_unsandboxed_grading_still_grades_and_limits(tmp_path):
    honest = chapter_one_exercises()
    for d in ("reference", "subs/s"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "reference" / CHAPTER).write_text(json.dumps(honest))
    (tmp_path / "subs" / "s" / CHAPTER).write_text(json.dumps(honest))
    path = grading.grade_all(tmp_path / "subs", tmp_path / "out", tmp_path / "reference",
                             ROOT / "lib" / "answer_keys", limits=LIMITS, cell_timeout=5, use_sandbox=False)
    assert sum(float(r["points"]) for r in csv.DictReader(path.open())) == N_CHECKED


def test_exercises_are_read_from_the_reference():
    exercises = grading.exercises_of(chapter_one_exercises(), {"ch01-add-k": 2})
    assert [(e.check_name, e.target) for e in exercises] == [
        ("ppl_by_hand", "answer"), ("add_k", "add_k_prob"), ("continuation_probs", "continuation_probs"),
        ("ppl_per_word", "answer"), ("optimal_logit_gap", "optimal_logit_gap"), ("char_sequences", "char_sequences")]
    assert exercises[1].points == 2


def test_every_check_call_in_the_book_names_its_answer_plainly():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for e in grading.exercises_of(json.loads(path.read_text())):
            assert e.check_call is None or e.target, f"{path.name}: {e.check_call}"


@needs_sandbox
def test_an_answer_is_graded_as_it_stood_when_its_check_ran(tmp_path):
    """Two exercises of chapter 11 both name their result ``answer``; each is graded on its own value."""
    from answer_keys import all_keys

    keys = all_keys()

    def exercise(label, check, value):
        return [{"cell_type": "markdown", "metadata": {}, "source": f"```{{solution-start}} {label}\n```"},
                code(f"### BEGIN SOLUTION\nanswer = {value!r}\n### END SOLUTION"),
                {"cell_type": "markdown", "metadata": {}, "source": "```{solution-end}\n```"},
                code(f"lmbook.checks.check_{check}(answer)")]

    nb = {"cells": [code("import lmbook"), *exercise("a", "kv_example", keys["kv_example"].answer),
                    *exercise("b", "context_budget", keys["context_budget"].answer)],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    for d in ("reference", "subs/s"):
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / "11_x.ipynb").write_text(json.dumps(nb))
    path = grading.grade_all(tmp_path / "subs", tmp_path / "out", tmp_path / "reference",
                             ROOT / "lib" / "answer_keys", limits=LIMITS, cell_timeout=5)
    assert [r["passed"] for r in csv.DictReader(path.open())] == ["True", "True"]


@pytest.mark.parametrize("stdout", [
    b'{"exercise": "add_k", "outputs": [{"value": {"array": {"dtype": "float64", "shape": [9], "data": [1]}}}]}',
    b'{"exercise": "ppl_by_hand", "value": {"pickle": "x"}}\n{"exercise": "add_k", "outputs": 7}',
    b'{"exercise": "ppl_by_hand", "value": [3.97]}\n{"exercise": "add_k", "outputs": [[1], {"value": 1}]}',
    b"\xff\xfe not json at all", b'{"cells": 5}\n' * 1000])
def test_forged_or_malformed_harness_output_earns_nothing_and_never_crashes(stdout, tmp_path, monkeypatch):
    from answer_keys import all_keys

    grader = grading.Grader(chapter_one_exercises(), all_keys())
    monkeypatch.setattr(sandbox, "run", lambda *a, **k: sandbox.Outcome(0, stdout, b"", False, False, 0.1))
    (tmp_path / CHAPTER).write_text(json.dumps(chapter_one_exercises()))
    rows, _ = grading.grade_submission(tmp_path / CHAPTER, grader, LIMITS)
    assert len(rows) == N_CHECKED and not any(r["passed"] for r in rows)


def test_flags_stay_short_however_many_cells_deserve_one():
    found = flags.flag_cells([f"os.x{i}" for i in range(5000)], set(), set())
    assert len(found) <= 1000 and found.endswith("more cells")


def test_flags_take_linear_time_on_a_huge_line():
    start = time.monotonic()
    found = flags.flag_cells(["x = merge_pair(1)  # " + "import " * 200_000], set(), {"merge_pair"})
    assert time.monotonic() - start < 5 and "uses lmbook's merge_pair" in found


def test_a_gradescope_submission_is_graded_on_its_assignment_only(tmp_path, monkeypatch):
    """A solved notebook of another chapter beside the assigned one earns nothing."""
    monkeypatch.setattr(sandbox, "bwrap_available", lambda: True)
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / CHAPTER).write_text(json.dumps(chapter_one_exercises()))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "05_other.ipynb").write_text(json.dumps(chapter_one_exercises()))
    rows, _ = grading.grade_one(tmp_path / "sub", CHAPTER, tmp_path / "ref", ROOT / "lib" / "answer_keys")
    assert len(rows) == N_CHECKED and not any(r["passed"] for r in rows)
    assert "no notebook named" in rows[0]["reason"]


def test_the_grader_keeps_its_environment_from_unsandboxed_code(monkeypatch):
    monkeypatch.setenv("LMBOOK_TEST_SECRET", "s3cret")
    code = "import os; print(sorted(os.environ))"
    out = sandbox.run([sys.executable, "-c", code], b"", LIMITS, sandbox=False).stdout.decode()
    assert "LMBOOK_TEST_SECRET" not in out and "HOME" in out


def test_sets_and_dicts_from_a_submission_are_bounded():
    from lmbook.teaching.plain import MAX_KEYS, NotPlain, decode

    with pytest.raises(NotPlain):
        decode({"set": list(range(MAX_KEYS + 1))})


def test_folders_the_sandbox_shows_are_refused(tmp_path):
    import lmbook

    with pytest.raises(ValueError, match="inside a folder the sandbox shows"):
        grading.grade_all(pathlib.Path(lmbook.__file__).parent, tmp_path / "out", ROOT / "notebooks")
