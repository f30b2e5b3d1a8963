"""Small helpers every chapter uses: seeding, the compute device, a quiet progress bar,
argument validation, and the notebook set-up line.

Left out on purpose: configuration files, logging frameworks, anything a reader would have
to learn before the first chapter.
"""

from __future__ import annotations

import datetime
import os
import platform
import random
import sys

import numpy as np
import torch

__all__ = ["seed_everything", "default_device", "progress", "under_test", "setup_notebook", "check_positive"]


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) so that a chapter gives the same numbers on every run."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def default_device() -> torch.device:
    """The device chapters compute on: CPU unless the environment variable LMBOOK_DEVICE names another.

    ``LMBOOK_DEVICE=cuda`` runs the book on an NVIDIA GPU, ``LMBOOK_DEVICE=mps`` on an Apple-silicon Mac
    (outputs may then differ from the stored ones, which were computed on a CPU).
    """
    name = os.environ.get("LMBOOK_DEVICE", "cpu").strip() or "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ValueError(f"LMBOOK_DEVICE must be 'cpu', 'cuda' or 'mps', got {name!r}") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("LMBOOK_DEVICE is 'cuda' but torch sees no CUDA device; unset it to use the CPU")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"LMBOOK_DEVICE is {name!r} but torch sees {torch.cuda.device_count()} CUDA device(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError("LMBOOK_DEVICE is 'mps' but torch sees no Apple-silicon GPU; unset it to use the CPU")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"LMBOOK_DEVICE must be 'cpu', 'cuda' or 'mps', got {name!r}")
    return device


def under_test() -> bool:
    """True when a notebook is being re-run by nbval or another batch executor (no live progress bars then)."""
    return bool(os.environ.get("LMBOOK_QUIET")) or "PYTEST_CURRENT_TEST" in os.environ or bool(
        os.environ.get("NBVAL_TEST")
    )


def progress(iterable=None, **kwargs):
    """A tqdm progress bar that is silent when outputs are checked, so no timings leak into them."""
    from tqdm.auto import tqdm

    kwargs.setdefault("disable", under_test())
    kwargs.setdefault("leave", False)
    return tqdm(iterable, **kwargs)


def check_positive(name: str, value, *, allow_zero: bool = False) -> None:
    """Raise a ValueError naming ``name`` unless ``value`` is a (non-negative if allow_zero) finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    ok = value >= 0 if allow_zero else value > 0
    if not ok or not np.isfinite(value):
        need = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {need}, got {value!r}")


def setup_notebook(seed: int = 0) -> torch.device:
    """What the first cell of every chapter does: seed, set the thread count, set the plot style,
    print the versions, and return the compute device.

    Readers get torch's own thread count (all their cores). ``LMBOOK_THREADS=n`` fixes it to n; the tests
    run with 1, two notebooks at once on two cores. The stored outputs are checked with 1 and 4 threads
    (``make test-repro``).
    """
    from . import __version__, plotting

    seed_everything(seed)
    threads = os.environ.get("LMBOOK_THREADS", "").strip()
    if threads:
        if not threads.isdigit() or int(threads) < 1:
            raise ValueError(f"LMBOOK_THREADS must be a positive integer, got {threads!r}")
        torch.set_num_threads(int(threads))
    plotting.use_style()
    device = default_device()
    today = datetime.date.today().isoformat()
    print(
        f"lmbook {__version__} | torch {torch.__version__} | numpy {np.__version__} | "
        f"Python {platform.python_version()} | device {device} | outputs of {today}"
    )
    return device


if sys.version_info < (3, 10):  # pragma: no cover
    raise ImportError("lmbook needs Python 3.10 or newer")
