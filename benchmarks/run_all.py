"""Run every benchmarks/bench_*.py and write benchmarks/results.md.

Each bench module exposes ``run() -> str``: a Markdown section whose figures are ratios against peers
measured in the same run (absolute times are given for context only). ``python benchmarks/run_all.py
bench_bm25`` runs a subset. Benchmarks are not tests: nothing here asserts a time.
"""

from __future__ import annotations

import datetime
import importlib
import os
import pathlib
import platform
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
OTHER_WRITERS = ("## Lighthouse",)  # results.md sections written by another script, which a full run keeps
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "lib"))


def main(names: list[str]) -> None:
    import torch

    names = names or sorted(p.stem for p in HERE.glob("bench_*.py"))
    sections = []
    for name in names:
        start = time.perf_counter()
        print(f"running {name} ...", flush=True)
        sections.append(importlib.import_module(name).run().strip())
        print(f"  done in {time.perf_counter() - start:.0f} s", flush=True)
    header = (
        "# Benchmarks\n\n"
        f"Written by `make bench` on {datetime.date.today().isoformat()}: "
        f"{platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} torch threads. Every figure that matters is a ratio to a peer timed in the same "
        "run; medians of repeated runs.\n"
    )
    out = HERE / "results.md"
    if len(names) < len(list(HERE.glob("bench_*.py"))) and out.exists():
        # partial run: replace only the sections that were re-run
        old = out.read_text().split("\n## ")[1:]
        keep = {s.split("\n", 1)[0]: "## " + s.strip() for s in old}
        for s in sections:
            keep[s.split("\n", 1)[0].removeprefix("## ")] = s
        sections = list(keep.values())
    elif out.exists():
        # sections that no bench module writes (the Lighthouse scores, written by benchmarks/lighthouse.py)
        # are kept as they are
        old = ["## " + s.strip() for s in out.read_text().split("\n## ")[1:]]
        sections += [s for s in old if s.startswith(OTHER_WRITERS)]
    out.write_text(header + "\n" + "\n\n".join(sections) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
