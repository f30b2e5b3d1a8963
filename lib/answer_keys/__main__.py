"""``python -m answer_keys [chNN ...]``: write the self-checks' expected outputs (``expected.json``) from the answer
keys, for every chapter or only those named; ``--check`` only reports whether the stored file is up to date."""

from __future__ import annotations

import importlib
import json
import sys

import lmbook.teaching.checks  # noqa: F401  (registers every check)
from lmbook.teaching.checks._core import CHECKS, EXPECTED_PATH, answer_digests, coarse_digest, comparable
from lmbook.teaching.plain import decode, encode

from . import all_keys


def expected_entry(name: str, key) -> dict:
    check = CHECKS[name]
    if check.kind == "answer":
        return {"digests": answer_digests(name, key.answer), "coarse": coarse_digest(name, key.answer)}
    inputs = [encode({"args": tuple(c.args), "kwargs": dict(c.kwargs)}) for c in check.cases()]
    stored = [decode(json.loads(json.dumps(i)), torch_tensors=True) for i in inputs]
    return {"inputs": inputs,
            "outputs": [encode(comparable(check, key.reference(*s["args"], **s["kwargs"]))) for s in stored]}


def render(entries: dict) -> str:
    return "{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(entries.items())) + "\n}\n"


def expected_file(chapters=()) -> str:
    """The text of expected.json: every check's entry, or only the named chapters' (the rest kept as stored)."""
    if chapters:
        keys = {}
        for chapter in chapters:
            keys.update(importlib.import_module(f"answer_keys.{chapter}").KEYS)
        entries = json.loads(EXPECTED_PATH.read_text()) if EXPECTED_PATH.exists() else {}
    else:
        keys, entries = all_keys(), {}
        missing = sorted(set(CHECKS) - set(keys))
        if missing:
            raise SystemExit(f"no answer key for: {', '.join(missing)}")
    entries.update({name: expected_entry(name, key) for name, key in keys.items()})
    return render(entries)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--check"]
    text = expected_file(args)
    if "--check" in sys.argv:
        sys.exit(0 if EXPECTED_PATH.read_text() == text else f"{EXPECTED_PATH} is out of date: python -m answer_keys")
    EXPECTED_PATH.write_text(text)
    print("wrote", EXPECTED_PATH)
