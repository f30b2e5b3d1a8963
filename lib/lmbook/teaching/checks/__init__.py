"""Self-checks for the book's exercises: ``lmbook.checks.check_<name>(your_function)``.

Each chapter's checks live in their own module (``ch01`` ...) and are re-exported here.
"""

from ._core import RESULTS, Case, check_answer, close, run_check  # noqa: F401
from .ch01 import *  # noqa: F401,F403
from .ch02 import *  # noqa: F401,F403
from .ch03 import *  # noqa: F401,F403
from .ch04 import *  # noqa: F401,F403
from .ch05 import *  # noqa: F401,F403
from .ch06 import *  # noqa: F401,F403
from .ch07 import *  # noqa: F401,F403
from .ch08 import *  # noqa: F401,F403
from .ch09 import *  # noqa: F401,F403
from .ch10 import *  # noqa: F401,F403
from .ch11 import *  # noqa: F401,F403
from .ch12 import *  # noqa: F401,F403
from .ch13 import *  # noqa: F401,F403
from .ch14 import *  # noqa: F401,F403
from .ch15 import *  # noqa: F401,F403
from .ch16 import *  # noqa: F401,F403
from .ch17 import *  # noqa: F401,F403
from .ch18 import *  # noqa: F401,F403
