"""Bad-input cases for lmbook.speculative (chapter 11): the acceptance rule, prompt lookup, and generation."""

import torch
from lmbook import model as M
from lmbook import speculative as S

from ._case import Case

P = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
Q = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)


def _model():
    torch.manual_seed(0)
    return M.Transformer(M.TransformerConfig(vocab_size=11, context_length=16, d_model=8, n_layers=1,
                                             n_heads=2)).eval()


CASES = [
    Case("residual_distribution", lambda: (S.residual_distribution, {"p": P.clone(), "q": Q.clone()})),
    Case("verify_draft", lambda: (S.verify_draft, {"p": P.clone(), "q": Q.clone(), "x": 1,
                                                   "generator": torch.Generator().manual_seed(0)}),
         ok={"x": {"zero"}}),  # token 0 has q > 0: a valid draft
    Case("output_distribution", lambda: (S.output_distribution, {"p": P.clone(), "q": Q.clone()})),
    Case("expected_tokens_per_pass", lambda: (S.expected_tokens_per_pass, {"alpha": 0.6, "k": 4}),
         ok={"alpha": {"zero"}, "k": {"zero"}}),  # documented: alpha in [0, 1]; k = 0 drafts gives 1 token
    Case("prompt_lookup_draft", lambda: (S.prompt_lookup_draft, {"ids": [1, 2, 3, 1, 2], "k": 2, "max_ngram": 2}),
         ok={"ids": {"huge_item", "single"}}),  # no vocabulary: any id >= 0; one token gives [] (documented)
    Case("speculative_generate", lambda: (S.speculative_generate, {
        "model": _model(), "prompt_ids": torch.tensor([1, 2, 3]), "max_new_tokens": 3,
        "drafter": S.prompt_lookup_draft, "k": 2})),
]

SKIP = {}
