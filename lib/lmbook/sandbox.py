"""Chapter 18: a sandbox for a tool that runs code a language model wrote.

:func:`run_python` evaluates one Python *expression* in a fresh interpreter inside Debian's ``bubblewrap``
(``bwrap``), the same kind of jail the book's grader puts student code in, and returns what it printed or the
error it raised, as text for the model to read. The jail has:

- no network (new network namespace: not even the host's loopback);
- no host files but the operating system and Python, read-only; a small private ``/tmp`` in memory;
- its own PID namespace: every process the expression starts dies with it;
- limits: wall-clock ``seconds`` for the whole tree, CPU seconds, address space (``memory``) and file size
  per process, and, ONLY where the caller is root (then the jail runs as ``nobody``), the number of
  processes. An ordinary user gets no process limit: a fork bomb then runs until the wall-clock limit.

What is visible inside: ``/usr`` (all of it, ``/usr/local`` included), ``/bin``, ``/lib``, ``/lib64`` and
``/etc/ld.so.cache``, read-only; for an interpreter outside ``/usr``, its binary, its ``lib/pythonX.Y`` and its
``libpython`` only (never its whole prefix; a prefix that is the user's home or contains it is refused). As
root, the jail runs the system's ``/usr/bin/python3`` where ``nobody`` cannot reach the caller's interpreter.

The result comes back on its own pipe, written only by the evaluating process (forked children exit without
writing), never on stdout, so stray prints and children's output cannot be taken for the result. Code in the
jail can still write that pipe itself, just as it can evaluate to any value it likes: the result says what the
code did, and the code is untrusted.

Everything that goes wrong (a timeout, a crash, a refused system call, a huge output, a limit the caller's
own hard limits forbid) comes back as a :class:`ToolResult` with ``ok=False``, never as an exception in the
caller. Where ``bwrap`` is missing the tool
refuses to run (``ok=False``): running model-written code unsandboxed is not an option this module offers.

Left out on purpose: statements (only ``eval`` of one expression), persistent state between calls, seccomp
filters, and the cgroup limits of the grader (:mod:`lmbook.teaching.sandbox`, which is built for whole notebooks).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from . import validate

__all__ = ["SandboxLimits", "ToolResult", "bwrap_available", "run_python", "sandbox_command"]

MiB = 2**20
NOBODY = 65534

# The code that runs inside: read the expression from stdin, evaluate it, and write "OK repr(value)" or
# "ERR Type: message" to the result pipe (its descriptor is argv[1]); a forked child leaves without writing.
RUNNER = """import os, sys
fd, top = int(sys.argv[1]), os.getpid()
source = sys.stdin.read()
try:
    text = "OK " + repr(eval(compile(source, "<tool>", "eval"), {"__builtins__": __builtins__}))
except BaseException as err:
    text = "ERR " + type(err).__name__ + ": " + str(err)
if os.getpid() != top:
    os._exit(0)
os.write(fd, text.encode("utf-8", "replace"))
"""


@dataclass(frozen=True)
class SandboxLimits:
    seconds: float = 2.0          # wall clock for the whole process tree
    cpu_seconds: int = 2          # CPU time per process
    memory: int = 256 * MiB       # address space per process
    processes: int = 32           # processes (as nobody: RLIMIT_NPROC binds only a non-root user)
    file_size: int = 1 * MiB      # largest file any process may write (in the jail's /tmp)
    output: int = 2000            # characters of the result kept

    def __post_init__(self):
        validate.number("seconds", self.seconds, low=0, low_open=True)
        for name in ("cpu_seconds", "memory", "processes", "file_size", "output"):
            validate.integer(name, getattr(self, name))


@dataclass(frozen=True)
class ToolResult:
    ok: bool      # True: the expression evaluated; ``text`` is repr(value)
    text: str     # repr(value), or "ErrorType: message" for what went wrong


def bwrap_available() -> bool:
    """True when bubblewrap is installed and can build this module's jail here."""
    if shutil.which("bwrap") is None:
        return False
    result = run_python("1 + 1")
    return result.ok and result.text == "2"


def run_python(expression: str, limits: SandboxLimits = SandboxLimits()) -> ToolResult:
    """Evaluate ``expression`` in the jail; return ToolResult(True, repr(value)) or (False, "Error: ...")."""
    _check_run_python(expression, limits)
    if shutil.which("bwrap") is None:
        return ToolResult(False, "SandboxError: bubblewrap (bwrap) is not installed; refusing to run code")
    python, user = _interpreter()
    try:
        done, out = _run_jailed(python, user, expression, limits)
    except subprocess.TimeoutExpired:  # subprocess.run killed bwrap; its PID namespace dies with it
        return ToolResult(False, f"TimeoutError: no result within {limits.seconds} s")
    except (OSError, ValueError, subprocess.SubprocessError) as err:  # e.g. a limit above the caller's hard limit
        return ToolResult(False, f"SandboxError: could not start the jail: {type(err).__name__}: {err}")
    return _result(done, out, limits)


def _run_jailed(python: str, user: int | None, expression: str, limits: SandboxLimits):
    """Run the jail; the result comes back on a pipe of its own, read by a thread while the jail runs."""
    read, write = os.pipe()
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(read, chunks), daemon=True)
    reader.start()
    try:
        done = subprocess.run(sandbox_command(python, write), input=expression.encode("utf-8", "replace"),
                              capture_output=True, timeout=limits.seconds, user=user, group=user, pass_fds=(write,),
                              extra_groups=[] if user is not None else None, preexec_fn=_limit(limits, user))
    finally:
        os.close(write)
        reader.join(limits.seconds)
    return done, b"".join(chunks).decode("utf-8", "replace")


def _drain(fd: int, chunks: list) -> None:
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while data := pipe.read(65536):
            chunks.append(data)


def _result(done: subprocess.CompletedProcess, out: str, limits: SandboxLimits) -> ToolResult:
    if out.startswith("OK "):
        return ToolResult(True, _cut(out[3:], limits.output))
    if out.startswith("ERR "):
        return ToolResult(False, _cut(out[4:], limits.output))
    if done.returncode < 0:  # killed by a signal: SIGXCPU (CPU limit), SIGKILL, SIGSEGV ...
        return ToolResult(False, f"Killed: the evaluator died from signal {-done.returncode}")
    tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    return ToolResult(False, _cut(f"SandboxError: exit status {done.returncode}: {tail[0]}", limits.output))


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


def sandbox_command(python: str, result_fd: int = 3) -> list[str]:
    """The bwrap command line: new namespaces for everything (network, PIDs, IPC, hostname, user), the
    system and Python read-only, a private /tmp, no environment, no capabilities, then ``python -I -S -c``,
    which writes its result to the inherited descriptor ``result_fd``."""
    validate.string("python", python)
    validate.integer("result_fd", result_fd, low=3)  # 0, 1 and 2 are the standard streams
    if not Path(python).is_absolute():
        raise ValueError(f"python must be an absolute path to an interpreter, got {python!r}")
    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
           "--proc", "/proc", "--dev", "/dev", "--size", str(8 * MiB), "--tmpfs", "/tmp"]
    for path in _visible_paths(python):
        if path.is_symlink() and path.parent == Path("/"):
            cmd += ["--symlink", os.readlink(path), str(path)]  # /bin -> usr/bin on merged-/usr systems
        else:
            cmd += ["--ro-bind", str(path), str(path)]
    cmd += ["--remount-ro", "/", "--chdir", "/tmp", "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
    return cmd + ["--", python, "-I", "-S", "-c", RUNNER, str(result_fd)]


def _visible_paths(python: str) -> list[Path]:
    """The system directories, and for an interpreter outside /usr only its binary, lib/pythonX.Y and libpython."""
    paths = [Path(p) for p in ("/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache")]
    binary = Path(python).resolve()
    prefix = binary.parents[1]  # e.g. /usr or ~/.pyenv/versions/3.11.7
    if prefix != Path("/usr") and not prefix.is_relative_to("/usr"):
        home = Path.home().resolve()
        if prefix == home or home.is_relative_to(prefix):
            raise ValueError(f"python's prefix {str(prefix)!r} is or contains the home directory; refusing to "
                             "bind it into the jail")
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        paths += [binary, prefix / "lib" / version, *sorted((prefix / "lib").glob("libpython*.so*"))]
    return [p for p in paths if p.exists() or p.is_symlink()]


def _interpreter() -> tuple[str, int | None]:
    """The Python to run in the jail, and the user to run it as: ``nobody`` where the caller is root and
    ``nobody`` can reach an interpreter (this one, else the system's), so that the process limit binds."""
    python = str(Path(sys.executable).resolve())
    if os.geteuid() != 0:
        return python, None
    for candidate in (python, shutil.which("python3", path="/usr/bin:/bin")):
        if candidate and _others_can_run(Path(candidate).resolve()):
            return str(Path(candidate).resolve()), NOBODY
    return python, None


def _others_can_run(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _limit(limits: SandboxLimits, user: int | None):
    """Runs in the child before bwrap starts: a new session and the kernel's per-process limits."""
    def apply():
        os.setsid()
        for what, value in ((resource.RLIMIT_AS, limits.memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.file_size), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(what, (value, value))
        if user is not None:  # counts the processes of user nobody; a normal user's count includes its desktop
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    return apply


# ----- argument checks ---------------------------------------------------------------------------------

def _check_run_python(expression, limits) -> None:
    validate.string("expression", expression)
    if not isinstance(limits, SandboxLimits):
        raise TypeError(f"limits must be a SandboxLimits, got {validate.describe(limits)}")
