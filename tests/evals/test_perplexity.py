"""Perplexity evaluation: exact token accounting, references, provenance, determinism."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from evals.perplexity import evaluate_perplexity, stream_nll, unigram_nll
from trainer.checkpoint import CheckpointError
from trainer.data import open_split
from trainer.train import Trainer

TIMING_KEYS = {"wall_time_s", "created", "host"}


def strip_timings(result: dict) -> dict:
    result = json.loads(json.dumps(result))
    for key in TIMING_KEYS:
        result["provenance"].pop(key, None)
    return result


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory):
    import copy
    from tests.conftest import TINY_RUN
    cfg = copy.deepcopy(TINY_RUN)
    cfg["train"].update(steps=80, checkpoint_interval=80)
    run_dir = tmp_path_factory.mktemp("run")
    Trainer(cfg, tiny_data["tokens"], run_dir).run()
    return run_dir


def test_every_target_scored_once_independent_of_batching(trained, tiny_data):
    from evals.perplexity import load_trained
    model, _ = load_trained(trained / "final")
    tokens = open_split(tiny_data["tokens"], "test")
    nll_a, n_a = stream_nll(model, tokens, 32, batch_size=3)
    nll_b, n_b = stream_nll(model, tokens, 32, batch_size=64)
    assert n_a == n_b == len(tokens) - 1
    assert nll_a == pytest.approx(nll_b, rel=1e-9)


def test_result_json_has_provenance_and_is_deterministic(trained, tiny_data, tmp_path):
    a = evaluate_perplexity(trained / "final", tiny_data["tokens"], tmp_path / "a" / "ppl.json")
    b = evaluate_perplexity(trained / "final", tiny_data["tokens"], tmp_path / "b" / "ppl.json")
    assert strip_timings(a) == strip_timings(b)
    m = a["metrics"]
    assert m["test/ppl"] < m["test/unigram_ppl"]  # it learned something
    assert m["test/oracle_ppl"] is None  # a local corpus has no oracle
    prov = a["provenance"]
    assert prov["checkpoint_sha256"] == json.loads((trained / "final" / "manifest.json").read_text())["model_sha256"]
    assert {"git_commit", "config_hash", "versions", "seed"} <= set(prov)
    import jsonschema
    from pathlib import Path
    schema = json.loads((Path(__file__).parents[2] / "config" / "schemas" / "result.schema.json").read_text())
    jsonschema.validate(a, schema)


def test_unigram_reference_is_smoothed_frequency():
    train = np.array([0, 1, 1, 2], dtype=np.uint16)
    # p = (counts + 1) / (4 + 3) = [2, 3, 2] / 7; targets of [0, 1, 2] are [1, 2]
    assert unigram_nll(train, np.array([0, 1, 2]), 3) == pytest.approx(-math.log(3 / 7) - math.log(2 / 7))


def test_corrupted_final_weights_are_refused(trained, tiny_data, tmp_path):
    import shutil
    final = tmp_path / "final"
    shutil.copytree(trained / "final", final)
    data = bytearray((final / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (final / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="sha256 differs"):
        evaluate_perplexity(final, tiny_data["tokens"], tmp_path / "ppl.json")


def test_same_seed_gives_identical_results(tiny_data, run_cfg, tmp_path):
    results = []
    for name in ("a", "b"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path / name).run()
        results.append(strip_timings(evaluate_perplexity(tmp_path / name / "final", tiny_data["tokens"],
                                                         tmp_path / name / "ppl.json")))
    assert results[0] == results[1]
    run_cfg["seed"] = 1
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "c").run()
    other = evaluate_perplexity(tmp_path / "c" / "final", tiny_data["tokens"], tmp_path / "c" / "ppl.json")
    assert other["metrics"]["test/ppl"] != results[0]["metrics"]["test/ppl"]


def test_foreign_tokens_are_refused_naming_both_hashes(trained, tiny_data, tmp_path):
    """Tokens of another corpus (same tokenizer, same vocabulary) are not scored as this run's."""
    import shutil
    from corpora.tokenization import load_tokenizer, tokenize_corpus
    from trainer.data import DataError

    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_data["corpus"], corpus)
    test = corpus / "test.jsonl"
    test.write_text(test.read_text().replace("cat", "dog"))
    tokenize_corpus(corpus, load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"]), tmp_path / "tokens")
    ours = json.loads((trained / "final" / "manifest.json").read_text())["data"]["splits"]["test"][:12]
    with pytest.raises(DataError, match=f"splits .*differs from .*test: {ours}"):
        evaluate_perplexity(trained / "final", tmp_path / "tokens", tmp_path / "ppl.json")
    assert not (tmp_path / "ppl.json").exists()


def test_checkpoint_without_data_record_is_refused(trained, tiny_data, tmp_path):
    import shutil
    from trainer.data import DataError

    final = tmp_path / "final"
    shutil.copytree(trained / "final", final)
    manifest = json.loads((final / "manifest.json").read_text())
    del manifest["data"]
    (final / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="records no token data .* re-run 'pretrain'"):
        evaluate_perplexity(final, tiny_data["tokens"], tmp_path / "ppl.json")
