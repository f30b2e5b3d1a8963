"""Every listing the book shows with ``show(...)`` is the idea: short, at most one line of validation, no
``raise`` or ``isinstance`` plumbing. Its line count is recorded in tests/listing_sizes.json, so a listing that
grows shows up in the diff (``python tests/test_listings.py`` rewrites the record)."""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORD = Path(__file__).with_name("listing_sizes.json")
LIMITS = {"function": 30, "class": 60, "page": 110}  # DESIGN: about 25 and 60; the whole model is one page
SHOW = re.compile(r"^(?:lmbook\.)?show\((.*)\)\s*$", re.S)


def _imports(cells: list[str]) -> str:
    """The notebook's lmbook import statements (multi-line ones included), to resolve show targets."""
    statements = []
    for source in cells:
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Import, ast.ImportFrom)) and "lmbook" in ast.unparse(node):
                statements.append(ast.unparse(node))
    return "\n".join(statements)


def show_targets() -> list[tuple[str, str]]:
    """(notebook stem, expression) for every cell whose last statement is ``show(...)``."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        for source in cells:
            body = ast.parse(source).body
            if body and isinstance(body[-1], ast.Expr) and (m := SHOW.match(ast.unparse(body[-1]))):
                found.append((path.stem, m.group(1)))
    return found


def resolve(stem: str, expression: str) -> list:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    namespace: dict = {"lmbook": __import__("lmbook")}
    exec(_imports(cells), namespace)  # noqa: S102 (the book's own import lines)
    value = eval(f"({expression},)", namespace)  # noqa: S307
    return list(value)


def kind(objects: list) -> str:
    if len(objects) > 1 or inspect.ismodule(objects[0]):
        return "page"
    return "class" if inspect.isclass(objects[0]) else "function"


def source(objects: list) -> str:
    """The listing exactly as the chapter displays it."""
    from lmbook import show

    return show(*objects).text


def sizes() -> dict[str, int]:
    return {f"{stem}: {expr}": len(source(resolve(stem, expr)).strip().splitlines())
            for stem, expr in show_targets()}


TARGETS = show_targets()


def test_listings_are_found():
    assert len(TARGETS) >= 40, f"only {len(TARGETS)} show(...) cells found; did the notebook format change?"


@pytest.mark.parametrize("stem,expression", TARGETS, ids=[f"{s}:{e}" for s, e in TARGETS])
def test_listing_is_the_idea(stem, expression):
    objects = resolve(stem, expression)
    text = source(objects)
    n = len(text.strip().splitlines())
    limit = LIMITS[kind(objects)]
    assert n <= limit, f"show({expression}) in {stem} is {n} lines, over the {kind(objects)} limit of {limit}"
    tree = ast.parse(text)
    raises = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise)]
    assert not raises, f"show({expression}) in {stem} raises on lines {raises}: move the checks into a checker"
    calls = [ast.unparse(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)]
    assert "isinstance" not in calls, f"show({expression}) in {stem} checks types inline: move it into a checker"
    checks = [c for c in calls if c.split(".")[-1].startswith("_check") or c.startswith("validate.")]
    per_function = sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in ast.walk(tree))
    assert len(checks) <= max(1, per_function), (
        f"show({expression}) in {stem} validates in {len(checks)} places ({checks}); one line per function")


def test_listing_sizes_are_recorded():
    recorded = json.loads(RECORD.read_text())
    current = sizes()
    changed = {k: (recorded.get(k), v) for k, v in current.items() if recorded.get(k) != v}
    gone = sorted(set(recorded) - set(current))
    assert not changed and not gone, (
        "listing sizes changed (recorded, now): " + json.dumps(changed, indent=1)
        + (f"\nno longer shown: {gone}" if gone else "") + "\nreview them, then run: python tests/test_listings.py")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "lib"))
    table = sizes()
    RECORD.write_text(json.dumps(table, indent=1) + "\n")
    for key, n in table.items():
        print(f"{n:4d}  {key}")
