"""Bad-input cases for lmbook.sandbox (chapter 18): the jail for model-written Python."""

from lmbook import sandbox

from ._case import Case

TEXT = ("list", "none", "empty", "bytes")  # free text: the misspelt-choice kind does not apply

CASES = [
    Case("SandboxLimits", lambda: (sandbox.SandboxLimits, {"seconds": 2.0, "cpu_seconds": 2, "memory": 2**28,
                                                           "processes": 32, "file_size": 2**20, "output": 100})),
    Case("run_python", lambda: (sandbox.run_python, {"expression": "1 + 1", "limits": sandbox.SandboxLimits()}),
         kinds={"expression": TEXT}),
    Case("sandbox_command", lambda: (sandbox.sandbox_command, {"python": "/usr/bin/python3", "result_fd": 3}),
         kinds={"python": TEXT}),  # any absolute path: bwrap reports a missing interpreter when it runs
]

SKIP = {"bwrap_available": "takes no arguments", "ToolResult": "a record the tool returns, not an input"}
