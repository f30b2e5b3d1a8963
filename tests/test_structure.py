"""The book's structure: every notebook is listed, was run top to bottom, starts with the shared set-up
cell, keeps nbval's escape hatches within budget, leaks no path of the build machine, and follows the
exercise convention."""

import json
import os
import pathlib
import re
import tempfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip", "raises-exception"}


def load(nb):
    return json.loads(nb.read_text())


def code_cells(d):
    return [c for c in d["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def toc_files(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("file", "root"):
                yield v
            else:
                yield from toc_files(v)
    elif isinstance(node, list):
        for v in node:
            yield from toc_files(v)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"
    for nb in NOTEBOOKS:
        assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", nb.name), nb.name


def test_toc_lists_every_notebook_and_every_entry_exists():
    listed = set(toc_files(TOC))
    for nb in NOTEBOOKS:
        assert f"notebooks/{nb.stem}" in listed, f"{nb.name} is not in _toc.yml"
    for entry in listed:
        assert any((ROOT / f"{entry}{ext}").exists() for ext in (".md", ".ipynb")), f"_toc.yml lists missing {entry}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_run_top_to_bottom_with_outputs(nb):
    cells = code_cells(load(nb))
    counts = [c["execution_count"] for c in cells]
    assert None not in counts, f"{nb.name}: some code cells were never run"
    assert counts == list(range(1, len(cells) + 1)), f"{nb.name}: execution counts {counts} are not 1..n"
    assert any(c["outputs"] for c in cells), f"{nb.name}: no stored outputs"


def test_first_code_cell_is_shared_hidden_and_pins_the_release():
    firsts = {nb.name: code_cells(load(nb))[0] for nb in NOTEBOOKS}
    sources = {"".join(c["source"]) for c in firsts.values()}
    assert len(sources) == 1, f"first code cells differ: {sorted(firsts)}"
    (source,) = sources
    for name, cell in firsts.items():
        assert "hide-input" in cell["metadata"].get("tags", []), f"{name}: first cell must be tagged hide-input"
    pin = f"git+{CONFIG['repository']['url']}@{CONFIG['lmbook_release']}"
    assert pin in source, f"the set-up cell must install {pin} (the repository and release in _config.yml)"
    assert "setup_notebook" in source and "LMBOOK_PIP_SPEC" in source


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_output_check_escapes_within_budget(nb):
    cells = code_cells(load(nb))
    escapes = sum(bool(IGNORE_TAGS & set(c["metadata"].get("tags", []))) for c in cells)
    escapes += sum(bool(re.search(r"#\s*NBVAL_(IGNORE_OUTPUT|SKIP)", "".join(c["source"]))) for c in cells)
    assert escapes <= max(2, len(cells) // 10), f"{nb.name}: {escapes} cells escape nbval's output check"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_machine_paths_or_errors_in_outputs(nb):
    paths = {str(ROOT), os.path.expanduser("~"), tempfile.gettempdir() + "/", "/work/", "/root/", "site-packages"}
    for cell in code_cells(load(nb)):
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"{nb.name}: a stored output is an error: {out.get('ename')}"
            text = json.dumps(out)
            for p in paths:
                assert p not in text, f"{nb.name}: output contains the machine path {p!r}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_shape_and_exercise_convention(nb):
    d = load(nb)
    md = ["".join(c["source"]) for c in d["cells"] if c["cell_type"] == "markdown"]
    assert md and md[0].lstrip().startswith("# "), f"{nb.name}: the first cell must be the H1 title"
    text = "\n".join(md)
    for heading in ("## Exercises", "## Summary", "## References"):
        assert heading in text, f"{nb.name}: missing section {heading!r}"
    assert "{cite" in text, f"{nb.name}: cites nothing from book/references.bib"
    exercises = re.findall(r"```\{exercise-start\}[^\n]*\n:label: ([\w-]+)", text)
    solutions = re.findall(r"```\{solution-start\} ([\w-]+)", text)
    assert len(exercises) >= 4, f"{nb.name}: {len(exercises)} exercises, at least 4 are required"
    assert len(set(exercises)) == len(exercises), f"{nb.name}: duplicate exercise labels"
    assert sorted(solutions) == sorted(exercises), f"{nb.name}: every exercise needs exactly one gated solution"
    assert text.count("```{exercise-end}") == len(exercises) and text.count("```{solution-end}") == len(solutions)
    for label in exercises:
        assert label.startswith(nb.stem[:2] + "-") or label.startswith("ch" + nb.stem[:2] + "-"), label
    # coding solutions: markers balanced, each followed by a self-check call
    sources = ["".join(c["source"]) for c in d["cells"] if c["cell_type"] == "code"]
    for i, src in enumerate(sources):
        assert src.count("### BEGIN SOLUTION") == src.count("### END SOLUTION"), f"{nb.name}: unbalanced markers"
        if "### BEGIN SOLUTION" in src:
            after = "\n".join(sources[i + 1:i + 3])
            assert "checks.check_" in src + after, f"{nb.name}: a solution cell has no self-check after it"


# Every chapter follows the exercise rules: at least five exercises, each labelled with its kinds in a `:class:`
# line after its `:label:`, with two that transfer, one proof or derivation and one mini-project; and no more than
# about 70 cells, a chapter a student can finish.
EXERCISE_KINDS = {"drill", "transfer", "proof", "project"}
MAX_CELLS = 70


def section_numbers_and_references(markdown: str) -> tuple[list[int], set[int]]:
    """The numbers of a chapter's "## N." headings, and the N of every "section N" it mentions (not those of
    "chapter M's section N" or "chapter M, section N", which point into another chapter)."""
    numbers = [int(m.group(1)) for m in re.finditer(r"^## (\d+)\.", markdown, re.M)]
    references = {int(m.group(1)) for m in re.finditer(r"\b[Ss]ections? (\d+)", markdown)
                  if not re.search(r"[Cc]hapter \d+('s|,)\s*$", markdown[max(0, m.start() - 25):m.start()])}
    return numbers, references


def test_section_references_are_read_from_the_text():
    text = "## 1. A\n## 2. B\nas section 2 shows; chapter 9's section 7 and chapter 3, section 8 are elsewhere"
    assert section_numbers_and_references(text) == ([1, 2], {2})


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_sections_are_numbered_in_order_and_every_reference_resolves(nb):
    markdown = "\n".join("".join(c["source"]) for c in load(nb)["cells"] if c["cell_type"] == "markdown")
    numbers, references = section_numbers_and_references(markdown)
    assert numbers == list(range(1, len(numbers) + 1)), f"{nb.name}: sections numbered {numbers}"
    assert references <= set(numbers), f"{nb.name}: refers to missing section(s) {sorted(references - set(numbers))}"


def exercise_kinds(markdown: str) -> dict[str, list[str]]:
    """{label: kinds} for every exercise in a chapter's markdown; kinds come from the `:class:` option."""
    found = re.findall(r"```\{exercise-start\}[^\n]*\n:label: ([\w-]+)\n(?::class: ([^\n]*)\n)?", markdown)
    return {label: classes.split() for label, classes in found}


def test_exercise_kinds_are_read_from_the_class_option():
    md = ("```{exercise-start} A\n:label: ch01-a\n:class: transfer proof\n```\n"
          "```{exercise-start} B\n:label: ch01-b\n```\n")
    assert exercise_kinds(md) == {"ch01-a": ["transfer", "proof"], "ch01-b": []}


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_teach_transfer_and_chapters_stay_short(nb):
    d = load(nb)
    assert len(d["cells"]) <= MAX_CELLS, f"{nb.name}: {len(d['cells'])} cells, at most {MAX_CELLS}"
    kinds = exercise_kinds("\n".join("".join(c["source"]) for c in d["cells"] if c["cell_type"] == "markdown"))
    assert len(kinds) >= 5, f"{nb.name}: {len(kinds)} exercises, at least 5 are required"
    for label, ks in kinds.items():
        assert ks and set(ks) <= EXERCISE_KINDS, f"{nb.name}: {label} has kinds {ks}, expected some of {EXERCISE_KINDS}"
    count = {k: sum(k in ks for ks in kinds.values()) for k in EXERCISE_KINDS}
    for kind, least in {"transfer": 2, "proof": 1, "project": 1}.items():
        assert count[kind] >= least, f"{nb.name}: {count[kind]} {kind} exercises, at least {least} required"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_open_and_close_their_own_cells(nb):
    """The student edition drops whole markdown cells from a solution's start to its end: a solution must
    start at the top of a cell, and nothing may follow its end in the same cell (it would vanish)."""
    for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
        text = "".join(cell["source"]) if cell["cell_type"] == "markdown" else ""
        if "{solution-start}" in text:
            assert re.match(r"\s*`{3,}\{solution-start\}", text), f"{nb.name} cell {i}: text before a solution"
        end = re.search(r"`{3,}\{solution-end\}[^\n]*(\n`{3,})?", text)
        if end:
            assert not text[end.end():].strip(), f"{nb.name} cell {i}: text after a solution's end is lost"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_student_edition_can_run_top_to_bottom(nb):
    """Names a solution defines are stubbed in the student edition, so no cell outside the solutions may use
    them, except the self-check calls (which report a stub politely)."""
    cells = [c for c in load(nb)["cells"] if c["cell_type"] == "code"]
    defined = set()
    for c in cells:
        src = "".join(c["source"])
        if "### BEGIN SOLUTION" in src:
            defined |= set(re.findall(r"^def (\w+)", src, re.M)) | set(re.findall(r"^(\w+)\s*=(?!=)", src, re.M))
    for c in cells:
        src = "".join(c["source"])
        if "### BEGIN SOLUTION" in src:
            continue
        code = "\n".join(line for line in src.splitlines() if "checks.check_" not in line)
        used = {name for name in defined if re.search(rf"\b{name}\b", code)}
        assert not used, f"{nb.name}: a cell outside the solutions uses {sorted(used)}, which the student edition stubs"
    stubbed = set()  # inside a solution cell: the functions it stubs, and what its solution lines assign
    for c in cells:
        src = "".join(c["source"])
        inside = "\n".join(re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", src, re.S))
        stubbed |= set(re.findall(r"^def (\w+)", src, re.M)) | set(re.findall(r"^(\w+)\s*=(?!=)", inside, re.M))
    for c in cells:  # ... and no line of a solution cell outside its markers may call or read them either
        src = "".join(c["source"])
        if "### BEGIN SOLUTION" not in src:
            continue
        outside = re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", src, flags=re.S)
        code = "\n".join(line for line in outside.splitlines()
                         if "checks.check_" not in line and not re.match(r"\s*def \w+\(", line))
        used = {name for name in stubbed if re.search(rf"\b{name}\b", code)}
        assert not used, f"{nb.name}: a solution cell uses {sorted(used)} outside its solution markers"


# ----- the package's layers ---------------------------------------------------------------------------

PACKAGE = ROOT / "lib" / "lmbook"
HELPERS = {"__init__", "show", "plotting", "utils", "data", "validate", "checks"}
TARGET_NAMES = ("01_language_models_and_perplexity", "02_tfidf_bm25_pmi", "03_pagerank_textrank", "04_pos_tagging",
                "05_tokenization", "06_embeddings", "07_attention", "08_efficient_attention", "09_transformer_lm",
                "10_decoding", "11_kv_cache", "12_positional_encodings", "13_encoder_decoder",
                "14_mixture_of_experts", "15_lora", "16_dpo", "17_reasoning_models", "18_agents_and_retrieval")


def _imports_of(path: pathlib.Path) -> set[str]:
    """The lmbook modules a file imports, as dotted names relative to lmbook ("experiments.lora_task")."""
    import ast

    package = path.relative_to(PACKAGE).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = (node.module or "").split(".") if node.module else []
            if not node.level and module[:1] != ["lmbook"]:
                continue
            dotted = base + (module[1:] if not node.level else module)
            found.add(".".join(dotted))
            found.update(".".join(dotted + [alias.name]) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("lmbook.") for a in node.names if a.name.startswith("lmbook."))
    return found


def test_layers_point_down():
    """Concept modules and book helpers never import the experiments or the teaching layer."""
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem in ("__init__", "checks"):  # the package's entry point; lmbook.checks is teaching.checks
            continue
        upward = sorted(m for m in _imports_of(path) if m.split(".")[0] in ("experiments", "teaching"))
        assert not upward, f"lmbook/{path.name} imports {upward}: arrows point from experiments/teaching down"


def test_modules_stay_readable():
    """DESIGN: a module reads top to bottom, never over about 350 lines."""
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 350}
    assert not long, f"modules over 350 lines: {long}"


def test_notebooks_carry_their_target_names():
    """Chapter files are named as in the table of contents of the second edition."""
    for nb in NOTEBOOKS:
        assert nb.stem in TARGET_NAMES, f"{nb.name} is not one of the target chapter names"
        title = next(c for c in json.load(open(nb))["cells"] if c["cell_type"] == "markdown")["source"][0]
        assert title.startswith(f"# {int(nb.stem[:2])}. "), f"{nb.name}: the title should start with its number"


def test_package_docstring_maps_every_concept_module_to_its_chapter():
    import lmbook

    concepts = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in HELPERS)
    missing = [name for name in concepts if f"``{name}``" not in lmbook.__doc__]
    assert not missing, f"lmbook/__init__.py's chapter map does not list: {missing}"
