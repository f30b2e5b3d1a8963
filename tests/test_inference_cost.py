"""Chapter 11's cost accounting of multi-head latent attention: ``efficient_attention.mla_decode`` (rebuilt and
absorbed) against a naive per-head computation with torch's SDPA, and ``inference_cost.mla_step_flops`` against
torch's own FLOP counter."""

import pytest
import torch
import torch.nn.functional as F
from lmbook import efficient_attention as EA
from lmbook import inference_cost as IC
from torch.utils.flop_counter import FlopCounterMode


def mla_weights(seed, H=4, d_h=8, d_c=12, d=16, T=9, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype)

    return r(H, d_h), r(T, d_c), r(H, d_c, d_h), r(H, d_c, d_h), r(H, d_h, d)


def naive_mla(q, latent, W_uk, W_uv, W_o):
    """Head by head: rebuild that head's keys and values, attend with torch's SDPA, project, add."""
    out = 0
    for h in range(q.shape[0]):
        K, V = latent @ W_uk[h], latent @ W_uv[h]  # (T, d_h)
        z = F.scaled_dot_product_attention(q[h][None, None, None], K[None, None], V[None, None])[0, 0, 0]
        out = out + z @ W_o[h]
    return out


@pytest.mark.parametrize("seed, sizes", [(0, {}), (1, {"H": 1, "T": 1}), (2, {"H": 3, "d_c": 5, "d_h": 16, "T": 30})])
@pytest.mark.parametrize("absorbed", [False, True])
def test_mla_decode_matches_naive_sdpa(seed, sizes, absorbed):
    args = mla_weights(seed, **sizes)
    torch.testing.assert_close(EA.mla_decode(*args, absorbed=absorbed), naive_mla(*args), rtol=1e-12, atol=1e-12)


def test_absorbed_equals_rebuilt_and_differs_when_a_rotation_sits_between():
    q, latent, W_uk, W_uv, W_o = mla_weights(3)
    assert torch.allclose(EA.mla_decode(q, latent, W_uk, W_uv, W_o, absorbed=True),
                          EA.mla_decode(q, latent, W_uk, W_uv, W_o), rtol=0, atol=1e-12)
    # a position-dependent rotation of the keys after the up-projection cannot be absorbed into one W_uk
    angle = torch.tensor(0.7, dtype=torch.float64)
    R = torch.eye(8, dtype=torch.float64)
    R[:2, :2] = torch.tensor([[angle.cos(), -angle.sin()], [angle.sin(), angle.cos()]])
    rotated = W_uk @ R  # what key j would need at one position: a different matrix for every position
    assert not torch.allclose(EA.mla_decode(q, latent, rotated, W_uv, W_o), EA.mla_decode(q, latent, W_uk, W_uv, W_o))


@pytest.mark.parametrize("absorbed", [False, True])
@pytest.mark.parametrize("H, d_h, d_c, d, T", [(4, 8, 12, 16, 9), (2, 16, 4, 6, 33)])
def test_mla_step_flops_equal_torch_flop_counter(absorbed, H, d_h, d_c, d, T):
    args = mla_weights(0, H=H, d_h=d_h, d_c=d_c, d=d, T=T)
    with FlopCounterMode(display=False) as counter:
        EA.mla_decode(*args, absorbed=absorbed)
    assert counter.get_total_flops() == IC.mla_step_flops(T, H, d_h, d_c, d, absorbed)


def test_absorption_saves_flops_once_the_context_is_long():
    rebuilt = IC.mla_step_flops(4096, 128, 128, 512, 5120, absorbed=False)
    absorbed = IC.mla_step_flops(4096, 128, 128, 512, 5120, absorbed=True)
    assert rebuilt > 50 * absorbed


@pytest.mark.parametrize("change, match", [
    (lambda a: (a[0][0],) + a[1:], "q must have 2 dimensions"),
    (lambda a: (a[0], a[1][:0]) + a[2:], "latent must not be empty"),
    (lambda a: a[:2] + (a[2][:, :, :3],) + a[3:], "W_uk must have shape"),
    (lambda a: a[:4] + (a[4][:, :3],), "W_o must have shape"),
])
def test_mla_decode_rejects_bad_shapes(change, match):
    with pytest.raises(ValueError, match=match):
        EA.mla_decode(*change(mla_weights(0)))


def test_mla_step_flops_rejects_bad_sizes():
    with pytest.raises(ValueError, match="d_c"):
        IC.mla_step_flops(4, 2, 8, 0, 16, absorbed=True)
    with pytest.raises(TypeError, match="absorbed"):
        IC.mla_step_flops(4, 2, 8, 4, 16, absorbed="yes")
