"""Fixtures of the harness tests: a tiny trained run (the shared tiny corpus), embedded tasks of a
small synthetic world, and helpers to build lm-eval requests. Offline from the first import."""
from __future__ import annotations

import copy
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("DISABLE_MULTIPROC", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

from tests.conftest import TINY_RUN  # noqa: E402

SMALL_WORLD = {"train_docs": 10, "valid_docs": 5, "test_docs": 60}


@pytest.fixture(scope="session")
def harness_run(tiny_data, tmp_path_factory) -> dict:
    """{'run_dir', 'final', 'tokenizer'}: TINY_RUN (GPT-2, seq_len 32) trained for a few steps."""
    from trainer.train import Trainer

    cfg = copy.deepcopy(TINY_RUN)
    cfg["train"].update(steps=24, checkpoint_interval=24, eval_interval=24)
    run_dir = tmp_path_factory.mktemp("harness_run")
    Trainer(cfg, tiny_data["tokens"], run_dir).run()
    return {"run_dir": run_dir, "final": run_dir / "final", "tokenizer": tiny_data["tokenizer"]}


@pytest.fixture(scope="session")
def world_run(tmp_path_factory) -> dict:
    """{'run_dir', 'final', 'tokenizer'}: a GPT-2 (seq_len 64) trained briefly on a small synthetic
    world with its own BPE, so that the embedded tasks' sentences fit the window (lm-eval's hf backend
    asserts that every continuation does)."""
    from corpora.corpus import write_corpus
    from corpora.tokenization import load_tokenizer, tokenize_corpus, train_bpe
    from trainer.train import Trainer

    root = tmp_path_factory.mktemp("world_run")
    corpus = {"id": "world", "source": "synthetic", "seed": 0, "synthetic": {**SMALL_WORLD, "train_docs": 300}}
    write_corpus(corpus, root / "corpus")
    train_bpe(root / "corpus", 400, 2, root / "tokenizer.json")
    tokenize_corpus(root / "corpus", load_tokenizer({"kind": "bpe"}, root / "tokenizer.json"), root / "tokens")
    cfg = copy.deepcopy(TINY_RUN)
    cfg.update(id="world_tiny", corpus=corpus, tokenizer={"kind": "bpe", "vocab_size": 400, "min_frequency": 2})
    cfg["model"]["seq_len"] = 64
    cfg["train"].update(steps=40, checkpoint_interval=40, eval_interval=40)
    Trainer(cfg, root / "tokens", root / "run").run()
    return {"run_dir": root / "run", "final": root / "run" / "final", "tokenizer": root / "tokenizer.json"}


@pytest.fixture(scope="session")
def embedded_dir(tmp_path_factory):
    from evals.tasks.embedded import build_embedded_tasks

    out = tmp_path_factory.mktemp("embedded_tasks")
    build_embedded_tasks(SMALL_WORLD, 0, out, n_items=24, n_ppl_docs=8)
    return out


@pytest.fixture(scope="session")
def lm(harness_run):
    from evals.harness.adapter import ReproLM

    return ReproLM.from_run(harness_run["final"], harness_run["tokenizer"], batch_size=4)


@pytest.fixture(scope="session")
def make_requests():
    """make_requests(kind, [args, ...]) -> lm-eval Instances (task 'unit', doc ids 0..n-1)."""
    from lm_eval.api.instance import Instance

    def make(kind: str, args: list[tuple]) -> list:
        return [Instance(request_type=kind, doc={}, arguments=a, idx=0, metadata=("unit", i, 1))
                for i, a in enumerate(args)]
    return make
