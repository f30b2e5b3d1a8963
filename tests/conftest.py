import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))  # the checkout's lmbook, even without `pip install -e .`

from lmbook.utils import seed_everything  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same random state, whichever tests ran before it in the same worker."""
    seed_everything(0)
