"""lmbook: the reference implementations behind *Understanding Language Models*.

One module per concept; each chapter imports the modules it teaches and shows their source
with :func:`lmbook.show`.
"""

__version__ = "0.1.0"

from . import checks, utils  # noqa: E402  (light modules the notebooks use as lmbook.checks / lmbook.utils)
from .show import show  # noqa: E402

__all__ = ["show", "checks", "utils", "__version__"]
