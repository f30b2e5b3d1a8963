"""Chapter 12's self-checks accept the right answer and reject plausible wrong ones with a useful message."""

import math

import pytest
import torch
from lmbook import checks
from lmbook.checks import RESULTS
from lmbook.pretrained import interleaved_to_half_rows


def rope_complex(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
    angles = positions.double()[:, None] * theta
    return torch.view_as_real(z * torch.exp(1j * angles)).reshape(x.shape).to(x.dtype)


def rope_complex_clockwise(x, positions, base=10000.0):
    return rope_complex(x, -positions, base)  # e^{-i p theta}: the wrong direction


def rope_complex_half_pairs(x, positions, base=10000.0):
    d = x.shape[-1]
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    return rope_complex(x[..., perm], positions, base)  # pairs (i, i + d/2), not (2i, 2i + 1)


def rope_complex_ignores_base(x, positions, base=10000.0):
    return rope_complex(x, positions)


def half_to_interleaved_rows(w, n_heads, rotary_dim):
    out = w.clone()
    head_dim = w.shape[0] // n_heads
    for h in range(n_heads):
        for i in range(rotary_dim // 2):  # pair i = rows (i, i + r/2) goes to rows (2i, 2i + 1)
            out[h * head_dim + 2 * i] = w[h * head_dim + i]
            out[h * head_dim + 2 * i + 1] = w[h * head_dim + i + rotary_dim // 2]
    return out


def half_to_interleaved_rows_whole_head(w, n_heads, rotary_dim):
    return half_to_interleaved_rows(w, n_heads, w.shape[0] // n_heads)  # pairs (i, i + d_k/2): ignores rotary_dim


def half_to_interleaved_rows_whole_matrix(w, n_heads, rotary_dim):
    return half_to_interleaved_rows(w, 1, rotary_dim)  # treats the matrix as one head


def half_to_interleaved_rows_inverse_direction(w, n_heads, rotary_dim):
    return interleaved_to_half_rows(w, n_heads)  # the permutation the other way round


def rope_decay(head_dim, base, distances):
    theta = torch.tensor([base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    return torch.cos(torch.as_tensor(distances, dtype=torch.float64)[:, None] * theta).mean(1)


def rope_decay_odd_exponent(head_dim, base, distances):
    theta = torch.tensor([base ** (-(2 * i + 1) / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    return torch.cos(torch.as_tensor(distances, dtype=torch.float64)[:, None] * theta).mean(1)


def rope_decay_unnormalised(head_dim, base, distances):
    return rope_decay(head_dim, base, distances) * head_dim


def rope_decay_float32(head_dim, base, distances):
    return rope_decay(head_dim, base, distances).float()  # right values, but not the float64 the exercise asks for


@pytest.mark.parametrize("check,good,bad,message", [
    (checks.check_rope_complex, rope_complex, rope_complex_clockwise, "counter-clockwise"),
    (checks.check_rope_complex, rope_complex, rope_complex_half_pairs, "x_{2i}"),
    (checks.check_rope_complex, rope_complex, rope_complex_ignores_base, "base argument"),
    (checks.check_half_to_interleaved_rows, half_to_interleaved_rows, half_to_interleaved_rows_whole_head,
     "0, 2, 1, 3, 4, 5, 6, 7"),
    (checks.check_half_to_interleaved_rows, half_to_interleaved_rows, half_to_interleaved_rows_whole_matrix,
     "inside their own head"),
    (checks.check_half_to_interleaved_rows, half_to_interleaved_rows, half_to_interleaved_rows_inverse_direction,
     "0, 4, 1, 5"),
    (checks.check_rope_decay, rope_decay, rope_decay_odd_exponent, "cos(distance"),
    (checks.check_rope_decay, rope_decay, rope_decay_unnormalised, "divide by d"),
    (checks.check_rope_decay, rope_decay, rope_decay_float32, "float64"),
])
def test_check_accepts_the_solution_and_rejects_a_mistake(check, good, bad, message, capsys):
    name = check.__name__.removeprefix("check_")
    check(good)
    assert RESULTS[name] is True, capsys.readouterr().out
    capsys.readouterr()
    check(bad)
    out = capsys.readouterr().out
    assert RESULTS[name] is False and message in out, out


def test_half_to_interleaved_undoes_the_loader_permutation():
    w = torch.randn(18, 4)
    torch.testing.assert_close(interleaved_to_half_rows(half_to_interleaved_rows(w, 3, 6), 3), w)


def test_partial_rotary_conversion_keeps_the_scores():
    """The exercise's claim: new rows with interleaved RoPE on the first r coordinates give the old scores."""
    from lmbook.positional import apply_rope, rope_inv_freq

    d_k, r, x = 16, 4, torch.randn(5, 12, dtype=torch.float64)
    wq, wk = torch.randn(d_k, 12, dtype=torch.float64), torch.randn(d_k, 12, dtype=torch.float64)
    pos, theta = torch.arange(5), rope_inv_freq(r)

    def scores(wq, wk, pairing):
        q, k = x @ wq.T, x @ wk.T
        q = torch.cat([apply_rope(q[:, :r], pos, theta, pairing), q[:, r:]], 1)
        k = torch.cat([apply_rope(k[:, :r], pos, theta, pairing), k[:, r:]], 1)
        return q @ k.T

    new = scores(half_to_interleaved_rows(wq, 1, r), half_to_interleaved_rows(wk, 1, r), "interleaved")
    torch.testing.assert_close(new, scores(wq, wk, "half"))
    assert not torch.allclose(scores(wq, wk, "interleaved"), scores(wq, wk, "half"))


def test_full_turns(capsys):
    checks.check_full_turns(40)
    assert RESULTS["full_turns"] is True
    checks.check_full_turns(64 - 40)  # counted the planes that do *not* turn
    assert RESULTS["full_turns"] is False and "hint" in capsys.readouterr().out
    checks.check_full_turns(math.floor(128 * math.log(32768 / (2 * math.pi)) / (2 * math.log(1e6))))  # forgot i = 0
    assert RESULTS["full_turns"] is False


def test_full_turns_rejects_text(capsys):
    checks.check_full_turns("40")
    out = capsys.readouterr().out
    assert RESULTS["full_turns"] is False and "expected a number" in out, out


def test_rope_decay_stub_is_reported_as_not_attempted(capsys):
    def stub(head_dim, base, distances):
        raise NotImplementedError

    checks.check_rope_decay(stub)
    out = capsys.readouterr().out
    assert RESULTS["rope_decay"] is False and "not attempted" in out, out
