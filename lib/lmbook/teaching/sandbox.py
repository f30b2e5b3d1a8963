"""Run untrusted code (a student's notebook) in a bubblewrap sandbox, with limits.

Inside the sandbox there is no network (a private loopback only), no writable file outside private scratch
folders in memory, and nothing of the host's file system but the operating system, Python and the installed
``lmbook``, all read-only: not the reference notebooks, the answer keys, the other submissions, the grades or the
instructor's home. The kernel settings under ``/proc`` are read-only. Every process the code starts lives in the
sandbox's own PID namespace and dies with it, daemons included. Limits (see :class:`Limits`) bound wall-clock
time for the whole process tree, CPU time, memory, the number of processes, the scratch folders, file sizes and
the output the grader keeps. Memory and processes are capped for the whole tree by cgroups where the grader runs
as root on a host with cgroup v1 controllers; elsewhere memory is capped per process, and processes by
RLIMIT_NPROC (which counts all of the user's processes).

``run(argv, stdin, limits)`` returns the exit status and the (truncated) stdout and stderr. Where bubblewrap is
missing the grader refuses to run, unless told ``sandbox=False``: then the code runs with the limits but with
the instructor's view of the file system and the network (as the user ``nobody`` where the grader is root and
Python is readable by others).
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Limits", "Outcome", "bwrap_available", "sandbox_argv", "run"]

GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Limits:
    """Per submission: ``seconds`` of wall-clock time for the whole process tree; ``cpu_seconds`` per process;
    ``memory`` (address space) per process; ``processes`` (threads included); ``scratch`` bytes of private
    folder; ``file_size`` for any one file; ``output`` bytes kept of stderr (the log) and ``results`` of stdout."""

    seconds: float = 600
    cpu_seconds: int = 600
    memory: int = 4 * GiB
    processes: int = 256
    scratch: int = 256 * MiB
    file_size: int = 64 * MiB
    output: int = 1 * MiB
    results: int = 16 * MiB


@dataclass
class Outcome:
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool
    seconds: float


def bwrap_available() -> bool:
    """True when bubblewrap is installed and can build this module's sandbox here (the same command line)."""
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(sandbox_argv(["/bin/true"], Limits()), capture_output=True)
    return probe.returncode == 0


# Where the sandbox's user is the host's root (the grader runs as root), these parts of /proc would let it change
# the host's kernel settings or read kernel state; they are made read-only or hidden, as container runtimes do.
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/asound")
_PROC_HIDDEN = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/kallsyms")


def _read_only_paths() -> list[Path]:
    """What the sandbox sees of the host: the system, Python, the virtual environment and lmbook itself."""
    import lmbook
    from lmbook.pretrained import cache_dir  # SmolLM2's dequantized weights, derived from the installed file

    paths = [Path(p) for p in ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
                               "/etc/ld.so.conf.d", "/etc/localtime", "/etc/ssl", "/etc/alternatives")]
    paths += [Path(sys.base_prefix), Path(sys.prefix), Path(lmbook.__file__).resolve().parent, cache_dir()]
    return [p for p in paths if p.exists()]


def sandbox_argv(argv: list[str], limits: Limits) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the sandbox."""
    from lmbook.pretrained import cache_dir

    cmd = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
           "--proc", "/proc", "--dev", "/dev"]
    for folder in ("/tmp", "/sandbox", "/dev/shm"):
        cmd += ["--size", str(limits.scratch), "--tmpfs", folder]
    cmd += [arg for p in _PROC_READ_ONLY if Path(p).exists() for arg in ("--ro-bind", p, p)]
    cmd += [arg for p in _PROC_HIDDEN if Path(p).exists() for arg in ("--ro-bind", "/dev/null", p)]
    for path in _read_only_paths():  # after the scratch folders: Python may live under /tmp (a CI checkout)
        if path.is_symlink() and path.parent == Path("/"):
            cmd += ["--symlink", os.readlink(path), str(path)]  # /bin -> usr/bin on merged-/usr systems
        else:
            cmd += ["--ro-bind", str(path), str(path)]
    cmd += ["--chdir", "/sandbox"]
    env = {"HOME": "/sandbox", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "MPLBACKEND": "Agg",
           "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
           "OMP_NUM_THREADS": "1", "LMBOOK_THREADS": "1", "LMBOOK_QUIET": "1", "LMBOOK_CACHE": str(cache_dir())}
    for name, value in env.items():
        cmd += ["--setenv", name, value]
    return cmd + ["--", *argv]


def _limit_resources(limits: Limits, group: list[Path]):
    """Runs in the child between fork and exec: its own session, the kernel's per-process limits, and the
    cgroups that cap the whole tree's processes and memory where the grader can make them (as root)."""
    def apply():
        os.setsid()
        for what, value in ((resource.RLIMIT_AS, limits.memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.file_size), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(what, (value, value))
        for g in group:
            (g / "cgroup.procs").write_text(str(os.getpid()))
        if not group:  # RLIMIT_NPROC does not bind root, and counts all of the user's processes
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    return apply


_CGROUPS = {"pids": ("pids.max", "processes"), "memory": ("memory.limit_in_bytes", "memory")}  # cgroup v1


def _cgroups(limits: Limits) -> list[Path]:
    """New cgroups capping the processes and the total memory (tmpfs and shared memory included) of one run;
    none where the grader cannot make them (not root, or no cgroup v1 hierarchy for them)."""
    made = []
    for controller, (knob, field) in _CGROUPS.items():
        root = Path("/sys/fs/cgroup") / controller
        if os.geteuid() != 0 or not os.access(root, os.W_OK):
            continue
        group = root / f"lmbook-grader-{os.getpid()}-{time.monotonic_ns()}"
        try:
            group.mkdir()
            (group / knob).write_text(str(getattr(limits, field)))
            made.append(group)
        except OSError:
            continue
    return made


def _drain(stream, limit: int, into: list, truncated: list):
    """Keep the first ``limit`` bytes of a stream and discard the rest (reading on, so the writer never blocks)."""
    kept = 0
    while chunk := stream.read(65536):
        if kept < limit:
            into.append(chunk[: limit - kept])
        kept += len(chunk)
    truncated.append(kept > limit)


def run(argv: list[str], stdin: bytes, limits: Limits, sandbox: bool = True) -> Outcome:
    """Run ``argv`` (in the sandbox unless ``sandbox`` is False) with ``stdin`` as its input and the limits.
    Unsandboxed, it runs in a fresh temporary folder, and as the user ``nobody`` where the grader is root."""
    with tempfile.TemporaryDirectory() as scratch:
        cmd, env, user = sandbox_argv(argv, limits), None, None
        if not sandbox:
            cmd, env = argv, {**os.environ, "HOME": scratch, "IPYTHONDIR": scratch, "MPLBACKEND": "Agg"}
            if os.geteuid() == 0 and _others_can_run(Path(sys.executable).resolve()):
                user = 65534
                os.chown(scratch, user, user)
        return _run(cmd, stdin, limits, scratch, env, user)


def _others_can_run(path: Path) -> bool:
    """True when a user other than the owner can reach and run ``path`` (every folder on the way is o+x)."""
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _run(cmd, stdin, limits, cwd, env, user) -> Outcome:
    group = _cgroups(limits)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env=env, user=user, group=user, extra_groups=[] if user else None,
                            preexec_fn=_limit_resources(limits, group), close_fds=True)
    out, err, truncated = [], [], []
    readers = [threading.Thread(target=_drain, args=(s, cap, buf, truncated), daemon=True)
               for s, cap, buf in ((proc.stdout, limits.results, out), (proc.stderr, limits.output, err))]
    for reader in readers:
        reader.start()
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        proc.wait(timeout=limits.seconds)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_tree(proc, group)
    for reader in readers:
        reader.join(timeout=10)
    return Outcome(proc.returncode, b"".join(out), b"".join(err), timed_out, any(truncated),
                   time.monotonic() - start)


def _kill_tree(proc: subprocess.Popen, groups: list[Path]):
    """Kill the process and everything it started: its session (and, in the sandbox, its PID namespace)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    for group in groups:
        for _ in range(50):  # the namespace's processes are killed by the kernel; wait for the group to empty
            try:
                pids = (group / "cgroup.procs").read_text().split()
                for pid in pids:
                    os.kill(int(pid), signal.SIGKILL)
                if not pids:
                    group.rmdir()
                    break
            except (OSError, ValueError):
                break
            time.sleep(0.05)
