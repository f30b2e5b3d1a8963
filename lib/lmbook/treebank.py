"""A part-of-speech corpus for chapter 4: the English Web Treebank (EWT) of Universal Dependencies, with its
official train / dev / test split, snapshotted into the package (CC BY-SA 4.0).

- :data:`UPOS` lists the 17 universal part-of-speech tags, each with a short gloss;
- :func:`parse_conllu` reads CoNLL-U text into sentences of (word, UPOS) pairs;
- :func:`load_ewt` returns one split of the shipped snapshot; :func:`ewt_info` its provenance;
- :func:`snapshot_ewt` rebuilds the snapshot from a git mirror of ``UD_English-EWT``.

What counts as a word: CoNLL-U lists *syntactic words*. A multiword token such as "don't" has a range line
(``3-4	don't``) followed by its words ``do`` (AUX) and ``n't`` (PART); we keep the words, which carry the tags, and
drop the range line. Empty nodes (ids such as ``8.1``, used for elided predicates) have no UPOS and are dropped.
Left out on purpose: lemmas, features and the dependency trees.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from . import validate

__all__ = ["UPOS", "Sentence", "parse_conllu", "load_ewt", "ewt_info", "snapshot_ewt"]

EWT_PATH = Path(__file__).parent / "data" / "ud_english_ewt.json.gz"
EWT_LICENSE_PATH = Path(__file__).parent / "data" / "ud_english_ewt_LICENSE.txt"
EWT_NOTICE_PATH = Path(__file__).parent / "data" / "ud_english_ewt_NOTICE.txt"
SPLITS = ("train", "dev", "test")

UPOS = {  # the Universal POS tags (de Marneffe et al. 2021), open classes first
    "NOUN": "common noun", "PROPN": "proper noun", "VERB": "verb", "ADJ": "adjective", "ADV": "adverb",
    "INTJ": "interjection", "PRON": "pronoun", "DET": "determiner", "ADP": "adposition (preposition)",
    "AUX": "auxiliary verb", "CCONJ": "coordinating conjunction", "SCONJ": "subordinating conjunction",
    "NUM": "numeral", "PART": "particle", "PUNCT": "punctuation", "SYM": "symbol", "X": "other",
}


class Sentence(NamedTuple):
    """One sentence: its id in the treebank, its syntactic words and their UPOS tags (same length)."""

    sent_id: str
    words: tuple[str, ...]
    tags: tuple[str, ...]


def parse_conllu(text: str) -> list[Sentence]:
    """Sentences of a CoNLL-U file: the FORM and UPOS columns of each syntactic word.

    Range lines of multiword tokens (id ``3-4``) and empty nodes (id ``8.1``) are skipped (see the module notes).
    """
    validate.string("text", text, empty=True)
    sentences, sent_id, words, tags = [], "", [], []
    for line in text.splitlines() + [""]:
        if line.startswith("# sent_id = "):
            sent_id = line[len("# sent_id = "):].strip()
        elif line.startswith("#"):
            continue
        elif not line.strip():
            if words:
                sentences.append(Sentence(sent_id, tuple(words), tuple(tags)))
            sent_id, words, tags = "", [], []
        else:
            cols = line.split("\t")
            if len(cols) != 10:
                raise ValueError(f"text must be CoNLL-U with 10 tab-separated columns, got the line {line!r}")
            if "-" in cols[0] or "." in cols[0]:  # a multiword token's range line, or an empty node
                continue
            words.append(cols[1])
            tags.append(cols[3])
    return sentences


@lru_cache(maxsize=1)
def _load() -> dict:
    with gzip.open(EWT_PATH, "rt", encoding="utf-8") as f:
        return json.load(f)


def load_ewt(split: str) -> list[Sentence]:
    """One split ("train", "dev" or "test") of UD English EWT as a list of :class:`Sentence`."""
    validate.choice("split", split, SPLITS)
    return [Sentence(i, tuple(w.split(" ")), tuple(t.split(" "))) for i, w, t in _load()["splits"][split]]


def ewt_info() -> dict:
    """Where the snapshot came from: source, commit, version, licence, and what was kept."""
    return dict(_load()["meta"])


def _git_show(repo: Path, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], check=True, capture_output=True,
                          text=True).stdout


def _rebuild_split(repo: Path, split: str) -> str:
    """The official split file, rebuilt by concatenating the sources listed in ``files.<split>`` in order."""
    names = _git_show(repo, f"not-to-release/file-lists/files.{split}").split()
    return "".join(_git_show(repo, f"not-to-release/sources/{name}") for name in names)


def snapshot_ewt(repo: Path | str, path: Path | str = EWT_PATH) -> Path:
    """Write the train / dev / test splits of a ``UD_English-EWT`` git mirror to ``path`` (gzip JSON).

    The train file is rebuilt from ``not-to-release/sources``; the same rebuild of dev must equal the released
    ``en_ewt-ud-dev.conllu`` byte for byte, or nothing is written. Forms contain no spaces in EWT (checked).
    """
    repo = Path(repo)
    dev_released = _git_show(repo, "en_ewt-ud-dev.conllu")
    if _rebuild_split(repo, "dev") != dev_released:
        raise ValueError(f"repo {repo}: rebuilding dev from not-to-release/sources does not reproduce the release")
    texts = {"train": _rebuild_split(repo, "train"), "dev": dev_released,
             "test": _git_show(repo, "en_ewt-ud-test.conllu")}
    splits, multiword, empty = {}, {}, {}
    for split, text in texts.items():
        sents = parse_conllu(text)
        if any(" " in w for s in sents for w in s.words):
            raise ValueError(f"split {split} has a form with a space; the snapshot format cannot store it")
        splits[split] = [[s.sent_id, " ".join(s.words), " ".join(s.tags)] for s in sents]
        ids = [line.split("\t", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
        multiword[split], empty[split] = sum("-" in i for i in ids), sum("." in i for i in ids)
    readme = _git_show(repo, "README.md")
    meta = {
        "source": "Universal Dependencies English Web Treebank, https://github.com/UniversalDependencies/UD_English-EWT",
        "commit": subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                                 text=True).stdout.strip(),
        "version": readme.split("# Changelog", 1)[1].split("**")[1].strip(),
        "license": "CC BY-SA 4.0 (see ud_english_ewt_LICENSE.txt); Silveira et al. 2014, de Marneffe et al. 2021",
        "kept": "sent_id, FORM and UPOS of each syntactic word; multiword-token range lines and empty nodes dropped",
        "train_rebuilt_from": "not-to-release/sources in the order of not-to-release/file-lists/files.train",
        "multiword_tokens": multiword, "empty_nodes": empty,
    }
    path = Path(path)
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime=0: byte-identical snapshots
        f.write(json.dumps({"meta": meta, "splits": splits}, ensure_ascii=False).encode("utf-8"))
    EWT_LICENSE_PATH.write_text(_git_show(repo, "LICENSE.txt"))
    EWT_NOTICE_PATH.write_text(
        f"{path.name}: the train, dev and test splits of the Universal Dependencies English Web Treebank\n"
        f"(UD_English-EWT {meta['version']}, git commit {meta['commit']}), {meta['source'].split(', ')[1]}.\n"
        f"Kept: {meta['kept']}. The train split was rebuilt from {meta['train_rebuilt_from']}.\n"
        f"Licence: CC BY-SA 4.0 (the full text is in {EWT_LICENSE_PATH.name}); this derived file is shared under\n"
        "the same licence. Cite: Silveira et al. (2014), A Gold Standard Dependency Corpus for English, LREC;\n"
        "de Marneffe et al. (2021), Universal Dependencies, Computational Linguistics 47(2).\n"
        "Rebuild: python -m lmbook.treebank <path to a git mirror of UD_English-EWT>\n")
    return path


if __name__ == "__main__":
    import sys

    print(snapshot_ewt(sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/UniversalDependencies+UD_English-EWT/repo"))
