"""Every notebook runs in a fresh environment, the way a Colab student runs it.

A new virtual environment outside the repository gets only what a Colab runtime already has (torch, numpy,
matplotlib, scipy, tqdm, ipywidgets, a Jupyter kernel). The *student edition* of each notebook (solutions
stubbed out, see lmbook.teaching) is written to a directory with no checkout around it and executed there with
nbclient, so its first cell takes the install path: it pip-installs lmbook from ``LMBOOK_PIP_SPEC``, here a
wheel built from this repository instead of the pinned git tag. This catches notebooks that rely on the
repository layout or on packages Colab does not have, and proves that a student notebook runs top to bottom
with every exercise unanswered (each check then says so politely). The solutions themselves run under nbval.
Run by ``make test-fresh`` (part of ``make test``); slow, since it runs the whole book once more.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from lmbook.teaching import student_notebook

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
COLAB_RUNTIME = ["torch==2.13.0", "numpy", "matplotlib", "scipy", "tqdm", "ipywidgets", "ipykernel", "nbclient",
                 "nbformat", "pyyaml"]

RUN = """
import json, sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
# nbclient waits only 4 s by default for a cell's last outputs after the cell has finished, then drops them
# silently: on a loaded machine a check's message could go missing. Wait longer, and fail loudly if it runs out.
NotebookClient(nb, timeout=900, startup_timeout=300, iopub_timeout=120, raise_on_iopub_timeout=True,
               kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}}).execute()
# One message per check cell: a print can reach the notebook as several stream outputs (its text, then its
# newline) when the kernel flushes stdout in between, so a cell's outputs are joined, never read one by one.
checks = ["".join(o.get("text", "") for o in c.outputs) for c in nb.cells
          if c.cell_type == "code" and "checks.check_" in c.source]
print(json.dumps(checks))
"""


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("colab")
    # Build from a private copy of the sources: pytest-xdist workers building in the checkout itself would
    # share (and trample) setuptools' build/ and egg-info directories.
    source = root / "source"
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = root / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(source)], check=True)
    (wheel,) = wheels.glob("lmbook-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *COLAB_RUNTIME],
                   check=True)
    assert subprocess.run([str(python), "-c", "import lmbook"], capture_output=True).returncode != 0
    return root, python, wheel


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_in_a_fresh_colab_like_environment(fresh_env, notebook):
    root, python, wheel = fresh_env
    workdir = root / "work" / notebook.stem  # no ../lib here: the set-up cell must install lmbook
    workdir.mkdir(parents=True)
    target = workdir / notebook.name
    target.write_text(json.dumps(student_notebook(json.loads(notebook.read_text()))))
    env = {**os.environ, "LMBOOK_PIP_SPEC": str(wheel), "LMBOOK_QUIET": "1", "PYTHONPATH": ""}
    proc = subprocess.run([str(python), "-c", RUN, str(target), str(workdir)], cwd=workdir, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, (f"{notebook.name} failed in the fresh environment (exit code {proc.returncode})."
                                  f"\n--- stdout:\n{proc.stdout}\n--- stderr:\n{proc.stderr}")
    messages = json.loads(proc.stdout.strip().splitlines()[-1])
    unexpected = [m for m in messages if "not attempted yet" not in m and "not answered yet" not in m]
    assert messages and not unexpected, f"{notebook.name}: checks that did not say 'not attempted': {unexpected}"
