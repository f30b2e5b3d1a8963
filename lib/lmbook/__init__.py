"""lmbook: the reference implementations behind *Understanding Language Models*.

The package has three layers, and imports point down only:

- the concept modules, one per idea: the code each chapter shows with :func:`lmbook.show`. By chapter:

  ==  =======================================================================================
  1   ``metrics``, ``ngram``
  2   ``edit_distance``, ``cooccurrence``, ``retrieval`` (TF-IDF), ``bm25``, ``ranking``
  3   ``graphs`` (PageRank), ``textrank``
  4   ``treebank`` (UD English EWT), ``tagging`` (baseline, HMM, Viterbi), ``neural_tagger`` (BiLSTM)
  5   ``pretokenization``, ``tokenization`` (BPE), ``unigram``, ``gguf_tokenizer``
  6   ``embeddings``, ``word2vec``, ``hierarchical_softmax``, ``fasttext``, ``embedding_eval``, ``dense_retrieval``
  7   ``attention``, ``attention_fast``, ``additive_attention``
  8   ``efficient_attention``
  9   ``normalization``, ``model``, ``training``, ``pretrained``
  10  ``decoding``, ``beam_search``
  11  ``kv_cache``, ``inference_cost``, ``paged_cache``, ``batching``, ``speculative``
  12  ``positional``, ``rope_scaling``
  13  ``seq2seq``, ``spelling``
  14  ``moe``
  15  ``lora``, ``finetuning_cost``
  16  ``preference``, ``dpo``
  17  ``reasoning`` (scratchpads, verifier), ``policy_gradient`` (REINFORCE, GRPO), ``rlvr``
  18  ``rag`` (passages, retrieval, prompts), ``agents`` (tool calls, constrained decoding), ``sandbox``
  ==  =======================================================================================

- ``lmbook.experiments``: the slow runs whose results the chapters load from ``lmbook/data``;
- ``lmbook.teaching``: the exercises' self-checks (``lmbook.checks``), the student edition and the grader.

Book helpers sit beside them: ``show``, ``plotting``, ``utils``, ``data`` and ``validate``.
"""

__version__ = "0.1.0"

from . import checks, utils  # noqa: E402  (light modules the notebooks use as lmbook.checks / lmbook.utils)
from .show import show  # noqa: E402

__all__ = ["show", "checks", "utils", "__version__"]
