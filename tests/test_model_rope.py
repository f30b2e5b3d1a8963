"""lmbook.positional's RoPE against transformers (Llama's half pairing, RoFormer's interleaved pairing), the
relative-position property, and the llama.cpp row permutation that converts one pairing into the other."""

import pytest
import torch
from lmbook.positional import apply_rope, rope_inv_freq
from lmbook.pretrained import interleaved_to_half_rows

llama = pytest.importorskip("transformers.models.llama.modeling_llama")
roformer = pytest.importorskip("transformers.models.roformer.modeling_roformer")


@pytest.mark.parametrize("head_dim,base", [(8, 10000.0), (64, 1e5), (16, 500.0)])
def test_half_pairing_matches_transformers_llama(head_dim, base):
    cfg = llama.LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, max_position_embeddings=512,
                            rope_parameters={"rope_type": "default", "rope_theta": base})
    rotary = llama.LlamaRotaryEmbedding(cfg)
    torch.testing.assert_close(rope_inv_freq(head_dim, base), rotary.inv_freq, atol=0, rtol=0)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 7, head_dim, generator=g), torch.randn(2, 3, 7, head_dim, generator=g)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [100, 101, 102, 200, 300, 301, 400]])  # (B, T)
    cos, sin = rotary(q, positions)
    q_ref, k_ref = llama.apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(apply_rope(q, positions, rope_inv_freq(head_dim, base)), q_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(apply_rope(k, positions, rope_inv_freq(head_dim, base)), k_ref, atol=1e-6, rtol=0)


def test_interleaved_pairing_matches_roformer():
    d, T = 16, 9
    table = roformer.RoFormerSinusoidalPositionalEmbedding(T, d).create_weight()  # (T, d): [sin | cos] halves
    x = torch.randn(1, 2, T, d, generator=torch.Generator().manual_seed(1))
    expected, _ = roformer.RoFormerSelfAttention.apply_rotary_position_embeddings(table[None, None], x, x)
    got = apply_rope(x, torch.arange(T), rope_inv_freq(d), pairing="interleaved")
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_scores_depend_only_on_the_offset(pairing):
    d = 32
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(d, dtype=torch.float64, generator=g), torch.randn(d, dtype=torch.float64, generator=g)
    inv = rope_inv_freq(d)

    def score(m, n):
        qm = apply_rope(q[None], torch.tensor([m]), inv, pairing)
        kn = apply_rope(k[None], torch.tensor([n]), inv, pairing)
        return (qm @ kn.T).item()

    # The angles are float32: m theta is rounded to about 6e-8 of itself, up to 6e-6 rad at m = 104, and turning
    # q and k by that much moves the score by at most about 2 * 6e-6 |q| |k|.
    assert score(7, 3) == pytest.approx(score(104, 100), abs=2e-5 * (q.norm() * k.norm()).item())
    assert score(0, 0) == pytest.approx((q @ k).item(), abs=1e-12)  # position 0 is no rotation
    assert score(7, 3) != pytest.approx(score(3, 7), abs=1e-3)  # the sign of the offset matters


def test_llama_cpp_row_permutation_converts_interleaved_to_half():
    """llama.cpp stores W_Q rows so that interleaved RoPE gives the scores half RoPE gives on the HF rows."""
    heads, head_dim, d_in, T = 3, 8, 12, 6
    g = torch.Generator().manual_seed(2)
    w_file = torch.randn(heads * head_dim, d_in, generator=g, dtype=torch.float64)  # as stored in the GGUF file
    wk_file = torch.randn(heads * head_dim, d_in, generator=g, dtype=torch.float64)
    x = torch.randn(T, d_in, generator=g, dtype=torch.float64)
    inv, pos = rope_inv_freq(head_dim), torch.arange(T)

    def scores(wq, wk, pairing):
        q = apply_rope((x @ wq.T).view(T, heads, head_dim).transpose(0, 1), pos, inv, pairing)
        k = apply_rope((x @ wk.T).view(T, heads, head_dim).transpose(0, 1), pos, inv, pairing)
        return q @ k.transpose(-1, -2)  # (heads, T, T)

    file_scores = scores(w_file, wk_file, "interleaved")
    ours = scores(interleaved_to_half_rows(w_file, heads), interleaved_to_half_rows(wk_file, heads), "half")
    torch.testing.assert_close(ours, file_scores, atol=1e-10, rtol=0)
    # the permutation moves rows only inside a head: file row 2i -> i, 2i+1 -> i + d/2
    perm = interleaved_to_half_rows(torch.arange(heads * head_dim).double()[:, None], heads).flatten().long()
    assert perm[:head_dim].tolist() == [0, 2, 4, 6, 1, 3, 5, 7]


def test_bad_rope_arguments():
    with pytest.raises(ValueError, match="even int"):
        rope_inv_freq(7)
    with pytest.raises(ValueError, match="base must be"):
        rope_inv_freq(8, base=1.0)
    with pytest.raises(ValueError, match="scaling"):  # chapter 12's scaling dicts are tested in test_positional.py
        rope_inv_freq(8, scaling={"type": "stretch", "factor": 2})
    x = torch.randn(2, 5, 8)
    with pytest.raises(ValueError, match="pairing must be one of"):
        apply_rope(x, torch.arange(5), rope_inv_freq(8), pairing="neox")
    with pytest.raises(ValueError, match="positions must be integers"):
        apply_rope(x, torch.arange(4), rope_inv_freq(8))
    with pytest.raises(ValueError, match="inv_freq has 2 frequencies"):
        apply_rope(x, torch.arange(5), rope_inv_freq(4))
