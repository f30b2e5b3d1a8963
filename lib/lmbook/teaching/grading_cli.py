"""``python -m lmbook.teaching.grading_cli``: grade a batch, grade one Gradescope submission, or build the
Gradescope autograder bundle. ``--help`` on each command lists its options."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from . import exports, grading, sandbox

NO_SANDBOX_WARNING = ("warning: --no-sandbox runs every submission with your rights and your view of the file "
                      "system, limited only in time, memory, processes and output: a submission can read your "
                      "files (the answer keys included) and change them. Use it only inside a throwaway "
                      "container or for code you trust.")


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--reference", default="notebooks", help="folder of the reference notebooks (default: notebooks)")
    p.add_argument("--keys", default="lib/answer_keys", help="folder of the answer keys (default: lib/answer_keys)")
    p.add_argument("--no-sandbox", action="store_true", help="run submissions without bubblewrap (see the warning)")
    p.add_argument("--seconds", type=float, default=600, help="wall-clock limit per submission (default: 600)")
    p.add_argument("--cell-seconds", type=float, default=60, help="limit per cell and per function call (60)")
    p.add_argument("--memory-gib", type=float, default=4, help="memory limit per process, GiB (default: 4)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lmbook.teaching.grading_cli", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    batch = commands.add_parser("grade", help="grade every notebook under a folder of submissions")
    batch.add_argument("submissions")
    batch.add_argument("out", help="where grades.csv, canvas.csv and feedback/ go")
    batch.add_argument("--roster", help="Canvas gradebook export, to fill in canvas.csv's identity columns")
    batch.add_argument("--notebook", action="append", default=[], help="grade only this chapter (repeatable)")
    _options(batch)
    one = commands.add_parser("gradescope", help="grade one Gradescope submission into results.json")
    one.add_argument("submission")
    one.add_argument("results")
    one.add_argument("--notebook", required=True, help="the assignment's notebook, e.g. 01_...ipynb")
    _options(one)
    bundle = commands.add_parser("bundle", help="write the Gradescope autograder zip of one assignment")
    bundle.add_argument("out_zip")
    bundle.add_argument("--notebook", required=True, help="the assignment's notebook, e.g. 01_...ipynb")
    bundle.add_argument("--reference", default="notebooks")
    bundle.add_argument("--keys", default="lib/answer_keys")
    bundle.add_argument("--source", default=".", help="the book's repository (for the lmbook sources)")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        print("wrote", exports.gradescope_bundle(args.out_zip, args.notebook, args.reference, args.keys,
                                                 args.source))
        return
    if args.no_sandbox:
        print(NO_SANDBOX_WARNING, file=sys.stderr)
    limits = sandbox.Limits(seconds=args.seconds, cpu_seconds=int(args.seconds),
                            memory=int(args.memory_gib * sandbox.GiB))
    options = dict(limits=limits, cell_timeout=args.cell_seconds, use_sandbox=not args.no_sandbox)
    try:
        if args.command == "grade":
            grades = grading.grade_all(args.submissions, args.out, args.reference, args.keys,
                                       only=tuple(args.notebook), **options)
            canvas = exports.canvas_csv(grades, Path(args.out) / "canvas.csv", args.roster)
            print("wrote", grades, "and", canvas)
        else:
            rows, feedback = grading.grade_one(args.submission, args.notebook, args.reference, args.keys,
                                               **options)
            exports.write_json(args.results, exports.gradescope_results(rows, feedback))
            print("wrote", args.results)
    except (ValueError, RuntimeError, OSError, csv.Error) as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
