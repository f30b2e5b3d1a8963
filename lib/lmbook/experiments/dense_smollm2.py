"""The slow run behind chapter 6's dense retrieval with SmolLM2, run once and stored:
``python -m lmbook.experiments.dense_smollm2`` writes ``data/smollm2_dense.npz``.

Every document of the manual (``lmbook.data.documents()``, truncated to its first ``MAX_TOKENS`` tokens) and
every labelled query (``lmbook.ranking.manual_queries()``) goes through SmolLM2-135M (float32, CPU), preceded
by ``<|endoftext|>`` (id 0) as a BOS token, since SmolLM2's tokenizer adds none; the residual stream after each
layer in ``LAYERS`` is averaged over the real tokens, leaving out that BOS position, where the model parks
attention (:func:`lmbook.dense_retrieval.mean_pooled_states`). Stored in float16: ``docs`` (len(LAYERS), 79, 576),
``queries`` (len(LAYERS), Q, 576), ``layers``, ``topics`` (document order), ``query_texts`` (query order) and
``doc_tokens`` (tokens kept per document) and ``doc_chars`` (characters of the document those tokens cover, so
that other retrievers can index the same truncated text). Takes a few minutes on one thread.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import torch

from .. import data
from ..dense_retrieval import mean_pooled_states
from ..pretrained import load_smollm2
from ..ranking import manual_queries
from ..tokenization import BPETokenizer

DENSE_PATH = Path(__file__).resolve().parents[1] / "data" / "smollm2_dense.npz"
MAX_TOKENS = 512  # the first 512 tokens of each document: the whole manual (113k tokens) would take an hour
BOS = 0  # <|endoftext|>: prepended to every text and left out of the mean
LAYERS = (0, 10, 20, 30)  # 0 = the static embeddings, 30 = the last block's output


def pooled(model, tokenizer, texts, layers) -> np.ndarray:
    out = []
    for text in texts:
        ids = torch.tensor([BOS] + tokenizer.encode(text)[:MAX_TOKENS])  # (1 + T,)
        out.append(mean_pooled_states(model, ids, list(layers)))  # (len(layers), d)
    return np.stack(out, axis=1)  # (len(layers), N, d)


def main(path: Path = DENSE_PATH, layers=LAYERS) -> None:
    torch.set_num_threads(int(os.environ.get("LMBOOK_THREADS", "1")))
    model, tokenizer = load_smollm2(), BPETokenizer.from_gguf()
    docs = data.documents()
    queries = [q for q, _ in manual_queries()]
    doc_vectors = pooled(model, tokenizer, list(docs.values()), layers)
    query_vectors = pooled(model, tokenizer, queries, layers)
    kept = [tokenizer.encode(t)[:MAX_TOKENS] for t in docs.values()]
    doc_chars = [len(tokenizer.decode(ids)) for ids in kept]  # the truncated text is text[:doc_chars]
    np.savez_compressed(path, docs=doc_vectors.astype(np.float16), queries=query_vectors.astype(np.float16),
                        layers=np.array(layers), topics=np.array(list(docs)), query_texts=np.array(queries),
                        doc_tokens=np.array([len(ids) for ids in kept]), doc_chars=np.array(doc_chars))
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DENSE_PATH)
