"""lmbook: the reference implementations behind *Understanding Language Models*.

The package has three layers, and imports point down only:

- the concept modules, one per idea, in chapter order (``metrics``, ``ngram``, ... ``preference``): the code
  each chapter shows with :func:`lmbook.show`;
- ``lmbook.experiments``: the slow runs whose results the chapters load from ``lmbook/data``;
- ``lmbook.teaching``: the exercises' self-checks (``lmbook.checks``), the student edition and the grader.

Book helpers sit beside them: ``show``, ``plotting``, ``utils``, ``data`` and ``validate``.
"""

__version__ = "0.1.0"

from . import checks, utils  # noqa: E402  (light modules the notebooks use as lmbook.checks / lmbook.utils)
from .show import show  # noqa: E402

__all__ = ["show", "checks", "utils", "__version__"]
