"""lmbook: the reference implementations behind *Understanding Language Models*.

One module per concept; each chapter imports the modules it teaches and shows their source
with :func:`lmbook.show`.
"""

__version__ = "0.1.0"

from .show import show  # noqa: E402

__all__ = ["show", "__version__"]
