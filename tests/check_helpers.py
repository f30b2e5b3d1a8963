"""Helpers shared by the tests of lmbook.checks (not a test module itself)."""

from lmbook import checks
from lmbook.checks import RESULTS


def verdict(capsys, check, answer, name):
    """Run ``check(answer)``; return (the recorded result for ``name``, what the check printed)."""
    RESULTS.pop(name, None)
    check(answer)
    return RESULTS[name], capsys.readouterr().out


def accepts_then_rejects(capsys, name, good, bad, message):
    """``check_<name>`` passes ``good``, then rejects ``bad`` with a failure mark and ``message`` in its output."""
    check = getattr(checks, f"check_{name}")
    passed, out = verdict(capsys, check, good, name)
    assert passed is True, out
    passed, out = verdict(capsys, check, bad, name)
    assert passed is False
    assert message in out and "✗" in out, out
