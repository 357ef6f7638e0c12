"""A tiny paired corpus (local .tsv: word sequences -> the same words reversed), tokenized into the
paired layout with the real code."""
from __future__ import annotations

import copy
import random

import pytest

from tests.conftest import TINY_RUN, WORDS

LAYOUT = {"source_len": 12, "target_len": 10}


def write_pairs(path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            words = [rng.choice(WORDS) for _ in range(rng.randint(2, 5))]
            f.write(" ".join(words) + "\t" + " ".join(reversed(words)) + "\n")


@pytest.fixture(scope="session")
def tiny_pairs(tmp_path_factory) -> dict:
    from corpora.corpus import write_corpus
    from corpora.tokenization import load_tokenizer, tokenize_pairs, train_bpe

    root = tmp_path_factory.mktemp("tiny_pairs")
    for split, n, seed in (("train", 300, 1), ("valid", 30, 2), ("test", 30, 3)):
        write_pairs(root / f"{split}.tsv", n, seed)
    corpus_cfg = {"id": "pairs", "source": "pairs",
                  "pairs": {"task": "wmt14_deen", "n": {"train": 300, "valid": 30, "test": 30},
                            "local": {s: str(root / f"{s}.tsv") for s in ("train", "valid", "test")}}}
    data = root / "data"
    write_corpus(corpus_cfg, data / "corpus")
    train_bpe(data / "corpus", 300, 2, root / "tokenizer.json")
    tokenize_pairs(data / "corpus", load_tokenizer({"kind": "bpe"}, root / "tokenizer.json"), data / "tokens", LAYOUT)
    return {"root": root, "corpus_cfg": corpus_cfg, "corpus": data / "corpus", "tokens": data / "tokens",
            "tokenizer": root / "tokenizer.json"}


@pytest.fixture
def pair_run(tiny_pairs) -> dict:
    run = copy.deepcopy(TINY_RUN)
    run.update(id="pairs_ar", corpus=tiny_pairs["corpus_cfg"], layout=dict(LAYOUT))
    run["model"]["seq_len"] = LAYOUT["source_len"] + LAYOUT["target_len"]
    return run
