"""lmbook.utils, lmbook.data and lmbook.show."""

import gzip
import json

import lmbook
import numpy as np
import pytest
import torch
from lmbook import data, utils


def test_seed_everything_makes_runs_repeat():
    utils.seed_everything(3)
    a = (np.random.rand(), torch.rand(1).item())
    utils.seed_everything(3)
    assert (np.random.rand(), torch.rand(1).item()) == a
    with pytest.raises(TypeError, match="seed"):
        utils.seed_everything(1.5)


def test_default_device_honours_the_environment(monkeypatch):
    monkeypatch.delenv("LMBOOK_DEVICE", raising=False)
    assert utils.default_device() == torch.device("cpu")
    monkeypatch.setenv("LMBOOK_DEVICE", "not-a-device")
    with pytest.raises(ValueError, match="LMBOOK_DEVICE"):
        utils.default_device()
    if not torch.cuda.is_available():
        monkeypatch.setenv("LMBOOK_DEVICE", "cuda")
        with pytest.raises(ValueError, match="no CUDA"):
            utils.default_device()
    if not torch.backends.mps.is_available():
        monkeypatch.setenv("LMBOOK_DEVICE", "mps")
        with pytest.raises(ValueError, match="no Apple-silicon GPU"):
            utils.default_device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a machine with one GPU
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LMBOOK_DEVICE", "cuda:7")
    with pytest.raises(ValueError, match="'cuda:7' but torch sees 1 CUDA device"):
        utils.default_device()
    monkeypatch.setenv("LMBOOK_DEVICE", "cuda:0")
    assert utils.default_device() == torch.device("cuda:0")
    monkeypatch.setenv("LMBOOK_DEVICE", "meta")  # a torch device the book does not run on
    with pytest.raises(ValueError, match="'cpu', 'cuda' or 'mps', got 'meta'"):
        utils.default_device()


def test_setup_notebook_keeps_torchs_thread_count_unless_told(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.delenv("LMBOOK_THREADS", raising=False)
        torch.set_num_threads(3)
        utils.setup_notebook()
        assert torch.get_num_threads() == 3  # a reader keeps all their cores
        monkeypatch.setenv("LMBOOK_THREADS", "2")
        utils.setup_notebook()
        assert torch.get_num_threads() == 2
        for bad in ("0", "two", "-1"):
            monkeypatch.setenv("LMBOOK_THREADS", bad)
            with pytest.raises(ValueError, match=f"LMBOOK_THREADS must be a positive integer, got '{bad}'"):
                utils.setup_notebook()
    finally:
        torch.set_num_threads(before)


def test_progress_is_quiet_under_test():
    bar = utils.progress(range(3))
    assert bar.disable and list(bar) == [0, 1, 2]


def test_check_positive():
    utils.check_positive("k1", 1.2)
    utils.check_positive("b", 0, allow_zero=True)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="k1"):
            utils.check_positive("k1", bad)
    with pytest.raises(TypeError, match="k1"):
        utils.check_positive("k1", "2")


def test_manual_snapshot_is_the_real_manual_with_provenance():
    docs = data.documents()
    assert len(docs) == 79 and 400_000 < sum(map(len, docs.values())) < 550_000
    info = data.manual_info()
    assert info["python_version"].startswith("3.") and "Python Software Foundation" in info["license"]
    assert "keyword arguments" in data.text()


def test_snapshot_is_reproducible(tmp_path):
    from pydoc_data.topics import topics

    path = data.snapshot_manual(tmp_path / "m.json.gz")
    with gzip.open(path, "rt") as f:
        assert json.load(f)["topics"] == dict(sorted(topics.items()))


def test_split_is_fixed_disjoint_and_complete():
    train, val = data.split("train"), data.split("validation")
    assert not set(train) & set(val) and set(train) | set(val) == set(data.documents())
    assert 0.05 < sum(map(len, val.values())) / len(data.text()) < 0.25
    assert list(val) == list(data.split("validation"))
    with pytest.raises(ValueError, match="part"):
        data.split("test")


def test_words_and_sentences():
    assert data.words("Use x[0].") == ["use", "x", "[", "0", "]", "."]
    assert data.words("Use x", lowercase=False) == ["Use", "x"]
    assert data.sentences("Title\n=====\n\nOne line. Two lines!") == [["title"], ["one", "line", "."],
                                                                      ["two", "lines", "!"]]
    with pytest.raises(TypeError, match="str"):
        data.words(["a"])


def test_show_renders_real_source():
    src = lmbook.show(data.words)
    assert repr(src).startswith("def words(") and src._repr_markdown_().startswith("```python")
    with pytest.raises(TypeError, match="function"):
        lmbook.show(3)
