"""Bad-input cases for lmbook.batching (chapter 11): requests and the scheduler simulation."""

from lmbook import batching as B

from ._case import Case

CASES = [
    Case("Request", lambda: (B.Request, {"prompt_len": 4, "output_len": 3, "arrival": 2}),
         ok={"arrival": {"zero"}}),  # arrival at step 0 is the default
    Case("simulate", lambda: (B.simulate, {"requests": [B.Request(4, 3), B.Request(2, 5, 1)], "policy": "static",
                                           "max_batch": 2, "kv_blocks": 4, "block_size": 4}),
         ok={"requests": {"single"}}),  # one Request is not a list: that is checked, see below
]

SKIP = {}
