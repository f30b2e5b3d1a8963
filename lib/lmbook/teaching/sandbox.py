"""Run untrusted code (a student's notebook) in a bubblewrap sandbox, with limits.

Inside the sandbox there is no network (a private loopback only), no writable file outside private scratch
folders in memory, and nothing of the host's file system but the operating system, Python and the installed
``lmbook``, all read-only: not the reference notebooks, the answer keys, the other submissions, the grades or the
instructor's home. The kernel settings under ``/proc`` are read-only, and no further user namespace can be made.
Every process the code starts lives in the sandbox's own PID namespace and dies with it, daemons included.
Limits (see :class:`Limits`) bound wall-clock time for the whole process tree, CPU time, memory, the number of
processes, the scratch folders, file sizes and the output the grader keeps. Where the grader runs as root with
cgroup v1 controllers, cgroups inside its own cap the whole tree's processes, memory and CPU; as root without
them, the sandbox is started as ``nobody`` where it can be, so that RLIMIT_NPROC binds; elsewhere memory is
capped per process, and processes by RLIMIT_NPROC (which counts all of the user's processes).

``run(argv, stdin, limits)`` returns the exit status and the (truncated) stdout and stderr. Where bubblewrap is
missing the grader refuses to run, unless told ``sandbox=False``: then the code runs with the limits but with
the instructor's view of the file system and the network (as the user ``nobody`` where the grader is root and
Python is readable by others).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import re
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

__all__ = ["Limits", "Outcome", "bwrap_available", "sandbox_argv", "read_only_paths", "run", "MARKER"]

GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Limits:
    """Per submission: ``seconds`` of wall-clock time for the whole process tree; ``cpu_seconds`` per process;
    ``memory`` (address space) per process; ``processes`` (threads included); ``scratch`` bytes of private
    folder; ``file_size`` for any one file; ``output`` bytes kept of stderr (the log) and ``results`` of stdout;
    ``cpus`` cores for the whole tree (where a cgroup can cap it)."""

    seconds: float = 600
    cpu_seconds: int = 600
    memory: int = 4 * GiB
    processes: int = 256
    scratch: int = 256 * MiB
    file_size: int = 64 * MiB
    output: int = 1 * MiB
    results: int = 16 * MiB
    cpus: float = 1.0


@dataclass
class Outcome:
    returncode: int
    stdout: bytes
    stderr: bytes
    timed_out: bool
    truncated: bool
    seconds: float
    log_closed: bool = False  # the program wrote MARKER (so whatever ended it came after)


def bwrap_available() -> bool:
    """True when bubblewrap is installed and can build this module's sandbox here (the same command line)."""
    if shutil.which("bwrap") is None:
        return False
    user = _unprivileged_user(True)
    probe = subprocess.run(sandbox_argv(["/bin/true"], Limits(), user), capture_output=True, user=user)
    return probe.returncode == 0


# Where the sandbox's user is the host's root (the grader runs as root), these parts of /proc would let it change
# the host's kernel settings or read kernel state; they are made read-only or hidden, as container runtimes do.
_PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
_PROC_HIDDEN = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
                "/proc/kallsyms", "/proc/latency_stats", "/proc/slabinfo", "/proc/kpagecount", "/proc/kpageflags",
                "/proc/kpagecgroup", "/proc/asound", "/proc/acpi", "/proc/scsi")
_ENV = {"MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
        "LMBOOK_THREADS": "1", "LMBOOK_QUIET": "1"}


def read_only_paths(optional: bool = True) -> list[Path]:
    """What the sandbox sees of the host: the system, Python, the virtual environment and lmbook itself, and
    (``optional``) SmolLM2's cache of dequantized weights, derived from the installed weights file."""
    import lmbook
    from lmbook.pretrained import cache_dir

    paths = [Path(p) for p in ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
                               "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives")]
    paths += [Path(sys.base_prefix), Path(sys.prefix), Path(lmbook.__file__).resolve().parent]
    paths += [cache_dir()] * optional
    return [p for p in paths if p.exists()]


def sandbox_argv(argv: list[str], limits: Limits, user: int | None = None) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in the sandbox (started as ``user``, or as the grader)."""
    from lmbook.pretrained import cache_dir

    cmd = ["bwrap", "--unshare-all", "--unshare-user", *_no_more_namespaces(), "--die-with-parent",
           "--new-session", "--cap-drop", "ALL", "--clearenv", "--proc", "/proc", "--dev", "/dev"]
    for folder in ("/tmp", "/sandbox", "/dev/shm"):
        cmd += ["--size", str(limits.scratch), "--tmpfs", folder]
    cmd += [arg for p in _PROC_READ_ONLY if Path(p).exists() for arg in ("--ro-bind", p, p)]
    for path in (Path(p) for p in _PROC_HIDDEN if Path(p).exists()):  # an empty folder, or /dev/null
        cmd += ["--tmpfs", str(path), "--remount-ro", str(path)] if path.is_dir() else \
            ["--ro-bind", "/dev/null", str(path)]
    for path in read_only_paths():  # after the scratch folders: Python may live under /tmp (a CI checkout)
        if path.is_symlink() and path.parent == Path("/"):
            cmd += ["--symlink", os.readlink(path), str(path)]  # /bin -> usr/bin on merged-/usr systems
        elif user is None or _others_can_run(path):
            cmd += ["--ro-bind", str(path), str(path)]
    env = {**_ENV, "LMBOOK_GRADER": str(os.getpid()), "HOME": "/sandbox",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
           "MPLCONFIGDIR": "/tmp/matplotlib", "LMBOOK_CACHE": str(cache_dir())}
    cmd += ["--remount-ro", "/dev", "--remount-ro", "/"]  # the only writable folders are the sized ones
    return cmd + ["--chdir", "/sandbox"] + [a for kv in env.items() for a in ("--setenv", *kv)] + ["--", *argv]


@functools.cache
def _no_more_namespaces() -> list[str]:
    """``--disable-userns`` (no nested user namespace: less of the kernel in reach), where bubblewrap has it."""
    version = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.split()[-1:]
    parts = tuple(int(x) for x in re.findall(r"\d+", version[0])[:2]) if version else (0, 0)
    return ["--disable-userns"] if parts >= (0, 8) else []


def _limit_resources(limits: Limits, groups: list[Path]):
    """Runs in the child between fork and exec: its own session, the kernel's per-process limits (RLIMIT_NPROC
    does not bind root), and the cgroups that cap the whole tree where the grader can make them."""
    def apply():
        os.setsid()
        for what, value in ((resource.RLIMIT_AS, limits.memory), (resource.RLIMIT_CPU, limits.cpu_seconds),
                            (resource.RLIMIT_FSIZE, limits.file_size), (resource.RLIMIT_CORE, 0),
                            (resource.RLIMIT_NPROC, limits.processes)):
            resource.setrlimit(what, (value, value))
        for group in groups:
            (group / "cgroup.procs").write_text(str(os.getpid()))
        if _KEYCTL is not None:  # a session keyring of its own: none shared with the grader or other runs
            ctypes.CDLL(None, use_errno=True).syscall(_KEYCTL, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING
    return apply


_KEYCTL = {"x86_64": 250, "aarch64": 219}.get(platform.machine())  # the keyctl system call


# cgroup v1 controllers: the number of processes, their total memory (tmpfs and shared memory included), and
# their total CPU (a quota of `cpus` cores per 100 ms period).
_CGROUPS = {"pids": lambda lim: {"pids.max": lim.processes},
            "memory": lambda lim: {"memory.limit_in_bytes": lim.memory},
            "cpu": lambda lim: {"cpu.cfs_period_us": 100_000, "cpu.cfs_quota_us": int(lim.cpus * 100_000)}}


def _cgroup_roots() -> dict[str, Path]:
    """For each controller, the grader's own cgroup where the grader may make groups inside it (as root)."""
    roots = {}
    if os.geteuid() != 0:
        return roots
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            root = Path("/sys/fs/cgroup") / controller / path.lstrip("/")
            if controller in _CGROUPS and os.access(root, os.W_OK):
                roots[controller] = root
    return roots


def _cgroups(limits: Limits) -> list[Path]:
    """New cgroups, inside the grader's own, that cap one run's whole process tree; none where not possible."""
    made = []
    for controller, root in _cgroup_roots().items():
        for stale in root.glob("lmbook-grader-*"):  # left by a grader that was killed
            if not Path(f"/proc/{stale.name.split('-')[2]}").exists():
                with contextlib.suppress(OSError):
                    stale.rmdir()
        group = root / f"lmbook-grader-{os.getpid()}-{time.monotonic_ns()}"
        try:
            group.mkdir()
            for knob, value in _CGROUPS[controller](limits).items():
                (group / knob).write_text(str(value))
            made.append(group)
        except OSError:  # all or nothing: a partial set of caps would pass for the whole set
            for made_group in made + [group]:
                with contextlib.suppress(OSError):
                    made_group.rmdir()
            return []
    return made


MARKER = b"\n\x00lmbook: the notebook's own output ends here\x00\n"


def run(argv: list[str], stdin: bytes, limits: Limits, sandbox: bool = True, then: bytes | None = None) -> Outcome:
    """Run ``argv`` (in the sandbox unless ``sandbox`` is False) with ``stdin`` as its input and the limits.

    With ``then``, stdin stays open until the program writes :data:`MARKER` to stderr; from there on stderr is
    discarded, and only then is ``then`` written to stdin. The grader sends the hidden inputs this way, so that
    nothing the program prints once it knows them can reach anyone. Unsandboxed, the program runs in a fresh
    temporary folder with a minimal environment, as the user ``nobody`` where the grader is root and can."""
    with tempfile.TemporaryDirectory() as scratch:
        user = _unprivileged_user(sandbox)
        cmd, env = sandbox_argv(argv, limits, user), None
        if not sandbox:
            cmd, env = argv, {**_ENV, "LMBOOK_GRADER": str(os.getpid()), "HOME": scratch, "IPYTHONDIR": scratch,
                              "PATH": os.defpath}
        if user is not None:
            os.chown(scratch, user, user)
        return _run(cmd, stdin, then, limits, scratch, env, user)


def _unprivileged_user(sandbox: bool) -> int | None:
    """``nobody``, to run as where the grader is root and ``nobody`` can reach Python and lmbook (then the
    kernel's limit on processes binds); None otherwise. In the sandbox, root stays where cgroups cap the tree."""
    if os.geteuid() != 0 or (sandbox and len(_cgroup_roots()) == len(_CGROUPS)):
        return None
    needed = [Path(sys.executable).resolve(), *read_only_paths(optional=False)]
    return 65534 if all(_others_can_run(p) for p in needed) else None


def _others_can_run(path: Path) -> bool:
    """True when a user other than the owner can reach ``path`` (every folder on the way is o+x)."""
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _run(cmd, stdin, then, limits, cwd, env, user) -> Outcome:
    groups = _cgroups(limits)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            env=env, user=user, group=user, extra_groups=[] if user is not None else None,
                            preexec_fn=_limit_resources(limits, groups), close_fds=True)
    out, log, state, ended = bytearray(), bytearray(), {}, threading.Event()
    readers = [threading.Thread(target=_drain, args=(proc.stdout, limits.results, out, state), daemon=True),
               threading.Thread(target=_drain_log, args=(proc.stderr, limits.output, log, state, ended),
                                daemon=True)]
    for reader in readers:
        reader.start()
    threading.Thread(target=_feed, args=(proc, stdin, then, ended, start + limits.seconds), daemon=True).start()
    try:  # the writer is a thread: a notebook that fills its own stdin pipe cannot hold the grader past the limit
        proc.wait(timeout=max(0.0, start + limits.seconds - time.monotonic()))
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill_tree(proc, groups)
    for reader in readers:
        reader.join(timeout=10)
    return Outcome(proc.returncode, bytes(out), bytes(log), timed_out, bool(state.get("truncated")),
                   time.monotonic() - start, ended.is_set())


def _feed(proc, stdin: bytes, then: bytes | None, ended: threading.Event, deadline: float):
    try:
        proc.stdin.write(stdin)
        proc.stdin.flush()
        if then is not None:
            while not ended.wait(0.1):
                if proc.poll() is not None or time.monotonic() > deadline:
                    return
            proc.stdin.write(then)
        proc.stdin.close()
    except (OSError, ValueError):
        pass


def _drain(stream, limit: int, into: bytearray, state: dict):
    """Keep the first ``limit`` bytes of a stream and discard the rest (reading on, so the writer never blocks)."""
    while chunk := stream.read1(65536):
        state["truncated"] = state.get("truncated") or len(into) + len(chunk) > limit
        into += chunk[: max(0, limit - len(into))]


def _drain_log(stream, limit: int, into: bytearray, state: dict, ended: threading.Event):
    """As :func:`_drain`, up to :data:`MARKER`; from there on everything is discarded and ``ended`` is set."""
    seen, window = 0, b""
    while chunk := stream.read1(65536):
        if not ended.is_set():
            window = window[-len(MARKER):] + chunk  # the marker may straddle two reads
            hit = window.find(MARKER)
            end = seen + len(chunk) if hit < 0 else seen + len(chunk) - len(window) + hit  # where the log ends
            keep = min(end, limit)
            del into[keep:]
            into += chunk[max(0, len(into) - seen): max(0, keep - seen)]
            state["truncated"] = state.get("truncated") or end > limit
            if hit >= 0:
                ended.set()
        seen += len(chunk)


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
