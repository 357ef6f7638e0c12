"""A small synthetic world tokenised once per module: the DLCM evaluations' tests train tiny runs on it."""
from __future__ import annotations

import pytest

from corpora.corpus import write_corpus
from corpora.tokenization import load_tokenizer, tokenize_corpus, train_bpe


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("world")
    write_corpus({"id": "w", "source": "synthetic", "seed": 3,
                  "synthetic": {"train_docs": 120, "valid_docs": 10, "test_docs": 10}}, root / "corpus")
    train_bpe(root / "corpus", 300, 2, root / "tokenizer.json")
    tokenize_corpus(root / "corpus", load_tokenizer({"kind": "bpe"}, root / "tokenizer.json"), root / "tokens")
    return {"root": root, "corpus": root / "corpus", "tokenizer": root / "tokenizer.json", "tokens": root / "tokens"}
