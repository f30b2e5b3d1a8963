"""Bad-input cases for lmbook.treebank (chapter 4): the CoNLL-U reader and the EWT snapshot."""

from lmbook import treebank

from ._case import Case

CONLLU = "# sent_id = s1\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n"

CASES = [
    Case("parse_conllu", lambda: (treebank.parse_conllu, {"text": CONLLU}),
         kinds={"text": ("list", "none", "bytes")}),  # any str is CoNLL-U text; an empty one has no sentences
    Case("load_ewt", lambda: (treebank.load_ewt, {"split": "dev"})),
]

SKIP = {"ewt_info": "takes no arguments",
        "snapshot_ewt": "rebuilds the shipped data from a git mirror; run by hand, never with user input",
        "Sentence": "a named tuple that parse_conllu and load_ewt return"}
