"""Shared fixtures: a tiny real corpus (local jsonl files -> BPE -> token memmaps) and run settings.

Nothing here needs the network or the local data copies (docs/sources.md, "Local copies of real data");
every file is created under pytest's tmp dirs.
"""
from __future__ import annotations

import copy
import json
import random
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
WORDS = ("the cat dog bird sees finds a red blue small big house tree river near under over and then "
         "quickly slowly runs jumps sleeps because while").split()

TINY_RUN = {
    "id": "tiny", "seed": 0,
    "corpus": {"id": "tiny", "source": "local"}, "tokenizer": {"kind": "bpe", "vocab_size": 300, "min_frequency": 2},
    "model": {"arch": "gpt2", "seq_len": 32, "d_model": 32, "n_layer": 2, "n_head": 2, "dropout": 0.0},
    "train": {"steps": 12, "batch_size": 4, "micro_batch_size": 2, "lr": 3e-3, "min_lr_ratio": 0.1,
              "warmup_steps": 2, "weight_decay": 0.1, "betas": [0.9, 0.95], "eps": 1e-8, "grad_clip": 1.0,
              "log_interval": 2, "eval_interval": 6, "eval_batches": 2, "checkpoint_interval": 4,
              "keep_checkpoints": 2, "compile": False, "precision": "auto", "loss_weights": {"ntp": 1.0}},
}


def pytest_collection_modifyitems(config, items):
    """The modules with slow tests (Snakemake DAGs, launched processes) run first, the others keep their order.
    ``make test`` hands whole modules to two workers as they free up, in collection order (``-n 2 --dist
    loadscope --no-loadscope-reorder``; xdist's own order, most tests first, would start the many quick
    checks first and end on the DAGs); ending on short modules, both workers finish together."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.set_num_threads(1)
    yield


def write_docs(path: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(n):
            text = ". ".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))
                             for _ in range(rng.randint(2, 5))) + "."
            f.write(json.dumps({"text": text}) + "\n")


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> dict:
    """{'root', 'corpus', 'tokenizer', 'tokens'} of a tiny local corpus, built with the real code."""
    from corpora.corpus import write_corpus
    from corpora.tokenization import load_tokenizer, tokenize_corpus, train_bpe

    root = tmp_path_factory.mktemp("tiny_data")
    for split, n, seed in (("train", 400, 1), ("valid", 40, 2), ("test", 40, 3)):
        write_docs(root / f"raw_{split}.jsonl", n, seed)
    corpus_cfg = {"id": "tiny", "source": "local",
                  "local": {s: str(root / f"raw_{s}.jsonl") for s in ("train", "valid", "test")}}
    write_corpus(corpus_cfg, root / "corpus")
    train_bpe(root / "corpus", 300, 2, root / "tokenizer.json")
    tokenize_corpus(root / "corpus", load_tokenizer({"kind": "bpe"}, root / "tokenizer.json"), root / "tokens")
    return {"root": root, "corpus": root / "corpus", "tokenizer": root / "tokenizer.json", "tokens": root / "tokens"}


@pytest.fixture
def run_cfg() -> dict:
    return copy.deepcopy(TINY_RUN)


# A small synthetic world tokenised once per module: the DLCM evaluations' tests train tiny runs on it.
@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    from corpora.corpus import write_corpus
    from corpora.tokenization import load_tokenizer, tokenize_corpus, train_bpe

    root = tmp_path_factory.mktemp("world")
    write_corpus({"id": "w", "source": "synthetic", "seed": 3,
                  "synthetic": {"train_docs": 120, "valid_docs": 10, "test_docs": 10}}, root / "corpus")
    train_bpe(root / "corpus", 300, 2, root / "tokenizer.json")
    tokenize_corpus(root / "corpus", load_tokenizer({"kind": "bpe"}, root / "tokenizer.json"), root / "tokens")
    return {"root": root, "corpus": root / "corpus", "tokenizer": root / "tokenizer.json", "tokens": root / "tokens"}


# A tiny paired corpus (local .tsv: word sequences -> the same words reversed), tokenized into the paired
# layout with the real code.
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
