"""DLCM's boundaries evaluation (evals/boundaries.py): the truth re-derived from the world's concept spans
tiles each document into exactly those spans; matching with tolerance counts one to one; the scores of
the truth itself are perfect and of a shifted truth are near zero exactly (hits only where concepts abut)
and near perfect within one token; an
end-to-end run writes a valid result with the training ratio curve; a changed corpus and a non-DLCM run
are refused."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch

from evals.boundaries import BoundaryEvalError, boundary_scores, evaluate_boundaries, match, true_boundaries
from tests.conftest import TINY_RUN
from trainer.data import open_split
from trainer.train import Trainer

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "config" / "schemas" / "result.schema.json").read_text())
L = 32


@pytest.fixture(scope="module")
def dlcm_run(world, tmp_path_factory) -> Path:
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"] = {"arch": "dlcm_gpt2", "seq_len": L, "d_model": 32, "n_layer": 2, "n_head": 2, "d_concept": 32,
                    "concept_heads": 2, "concept_layers": 1}
    cfg["train"].update(steps=6, log_interval=2, eval_interval=6, checkpoint_interval=6, snapshot_interval=2,
                        loss_weights={"ntp": 1.0, "aux": 1.0})
    run_dir = tmp_path_factory.mktemp("dlcm_run")
    Trainer(cfg, world["tokens"], run_dir, threads=1).run()
    return run_dir


def test_match_pairs_predictions_one_to_one_within_the_tolerance():
    assert match(np.array([1, 5, 9]), np.array([1, 5, 9]), 0) == 3
    assert match(np.array([2, 6]), np.array([1, 5, 9]), 0) == 0
    assert match(np.array([2, 6]), np.array([1, 5, 9]), 1) == 2
    assert match(np.array([4, 5, 6]), np.array([5]), 1) == 1      # one true boundary is matched once


def test_the_truth_tiles_each_document_into_the_worlds_concepts(world):
    tokens = open_split(world["tokens"], "test")
    truth = true_boundaries(world["corpus"], world["tokenizer"], tokens, len(tokens))
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(world["tokenizer"]))
    doc = json.loads((world["corpus"] / "test.jsonl").read_text().splitlines()[0])
    n = len(tok.encode(doc["text"]).ids)
    opens = np.flatnonzero(truth.opens[1:1 + n]).tolist() + [n]
    pieces = [tok.decode(tokens[1 + a:1 + b].tolist()).strip() for a, b in zip(opens, opens[1:])]
    spans = [doc["text"][a:b].strip() for a, b in doc["concepts"]]
    assert truth.anchors_inside_token == 0 and pieces == spans
    assert not truth.scored[0] and not truth.scored[1 + n] and truth.scored[1:1 + n].all()  # end-of-text tokens
    assert set(truth.types) <= {"story", "entry", "recipe", "dialogue"}


def test_scores_of_the_truth_are_perfect_and_of_a_shifted_truth_zero_exactly(world):
    tokens = open_split(world["tokens"], "test")
    n = (len(tokens) - 1) // L * L
    truth = true_boundaries(world["corpus"], world["tokenizer"], tokens, n)
    b = truth.opens[:n].reshape(-1, L).copy()
    b[:, 0] = True
    exact = boundary_scores(b, truth, L)
    assert exact["test/f1_tol0"] == pytest.approx(1.0) and exact["test/f1_tol1"] == pytest.approx(1.0)
    assert exact["test/tokens_per_concept"] == pytest.approx(n / b.sum())
    shifted = np.zeros_like(b)
    shifted[:, 1:] = b[:, :-1]                               # every boundary one token late
    shifted[:, 0] = True
    late = boundary_scores(shifted, truth, L)
    scored = truth.scored[:n].reshape(b.shape).copy()
    scored[:, 0] = False
    opens = truth.opens[:n].reshape(b.shape) & scored
    pred = shifted & scored                                  # exact hits only where two concepts abut
    assert late["test/f1_tol0"] == pytest.approx(2 * (pred & opens).sum() / (pred.sum() + opens.sum()))
    assert late["test/f1_tol0"] < 0.2 and late["test/f1_tol1"] > 0.85  # losses: window ends, end-of-text


def test_a_run_is_measured_end_to_end_with_its_training_ratio(world, dlcm_run, tmp_path):
    out = tmp_path / "eval" / "boundaries.json"
    result = evaluate_boundaries(dlcm_run / "final", world["tokens"], out, world["tokenizer"])
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    m = result["metrics"]
    assert m["test/tokens_per_concept"] >= 1 and 0 <= m["test/f1_tol0"] <= m["test/f1_tol1"] <= 1
    assert m["model/target_ratio"] == 4.0 and 0 < m["params/concept_share"] < 1
    assert [m[f"train/tokens_{i}"] for i in (1, 2, 3)] == [2 * 4 * L, 4 * 4 * L, 6 * 4 * L]
    assert all(m[f"train/ratio_{i}"] >= 1 for i in (1, 2, 3))
    assert any(key.startswith(("story/", "entry/", "recipe/", "dialogue/")) for key in m)
    # over training: the snapshots at steps 2 and 4, then the final weights
    assert [m[f"over/tokens_{i}"] for i in (1, 2, 3)] == [2 * 4 * L, 4 * 4 * L, 6 * 4 * L] and "over/tokens_4" not in m
    assert all(m[f"over/{k}_3"] == m[f"test/{k}"] for k in ("tokens_per_concept", "f1_tol0", "f1_tol1"))
    # both decision rules on the same p: inference's threshold and training's sharpened Bernoulli (alpha 0.5)
    assert m["test/tokens_per_concept_train_rule"] >= 1
    assert "b = [p >= 0.5]" in result["details"]["decisions"] and "Bernoulli" in result["details"]["decisions"]


def test_both_rules_agree_when_training_thresholds_and_differ_when_it_samples(world):
    from evals.boundaries import both_rules
    from models.registry import build_model

    windows = torch.from_numpy(open_split(world["tokens"], "test")[:4 * L].astype("int64")).view(4, L)
    shape = {"arch": "dlcm_gpt2", "d_model": 32, "n_layer": 2, "n_head": 2, "d_concept": 32, "concept_heads": 2,
             "concept_layers": 1}
    torch.manual_seed(0)
    thresholded = build_model({**shape, "boundary_temperature": 0.0}, vocab_size=4096, seq_len=L).eval()
    infer, train = both_rules(thresholded, windows, 2)
    assert np.array_equal(infer, train)
    torch.manual_seed(0)
    sampled = build_model({**shape, "boundary_temperature": 0.5}, vocab_size=4096, seq_len=L).eval()
    infer2, train2 = both_rules(sampled, windows, 2)
    assert np.array_equal(infer2, infer) and not np.array_equal(train2, infer2)
    assert np.array_equal(train2, both_rules(sampled, windows, 2)[1])  # seeded: the same draw


def test_boundaries_over_training_score_each_snapshot_and_refuse_a_changed_one(world, dlcm_run, tmp_path):
    from evals.boundaries import predicted_boundaries
    from evals.perplexity import load_trained
    from trainer.checkpoint import CheckpointError, load_model_weights

    m = evaluate_boundaries(dlcm_run / "final", world["tokens"], tmp_path / "b.json", world["tokenizer"])["metrics"]
    model, _ = load_trained(dlcm_run / "final")
    load_model_weights(model, dlcm_run / "train" / "snapshots" / "step-000002.safetensors")
    tokens = open_split(world["tokens"], "test")
    n = min(64, (len(tokens) - 1) // L)
    windows = torch.from_numpy(tokens[:n * L].astype(np.int64)).view(n, L)
    truth = true_boundaries(world["corpus"], world["tokenizer"], tokens, n * L)
    early = boundary_scores(predicted_boundaries(model, windows, 16), truth, L)
    assert m["over/f1_tol0_1"] == pytest.approx(early["test/f1_tol0"])
    assert m["over/tokens_per_concept_1"] == pytest.approx(early["test/tokens_per_concept"])
    changed = tmp_path / "run"
    shutil.copytree(dlcm_run, changed)
    snapshot = changed / "train" / "snapshots" / "step-000004.safetensors"
    snapshot.write_bytes(snapshot.read_bytes()[:-8] + bytes(8))
    with pytest.raises(CheckpointError, match="step-000004.safetensors: missing or not the snapshot"):
        evaluate_boundaries(changed / "final", world["tokens"], tmp_path / "c.json", world["tokenizer"])


def test_a_changed_corpus_and_a_token_model_are_refused(world, dlcm_run, tmp_path):
    changed = tmp_path / "data"
    (changed / "corpus").mkdir(parents=True)
    lines = (world["corpus"] / "test.jsonl").read_text().splitlines()
    doc = json.loads(lines[0])
    doc["text"] = "Changed " + doc["text"]
    (changed / "corpus" / "test.jsonl").write_text("\n".join([json.dumps(doc)] + lines[1:]) + "\n")
    tokens = open_split(world["tokens"], "test")
    with pytest.raises(BoundaryEvalError, match="does not re-tokenise"):
        true_boundaries(changed / "corpus", world["tokenizer"], tokens, len(tokens))
    cfg = copy.deepcopy(TINY_RUN)
    cfg["train"].update(steps=1, checkpoint_interval=1, eval_interval=1)
    Trainer(cfg, world["tokens"], tmp_path / "gpt2", threads=1).run()
    with pytest.raises(BoundaryEvalError, match="dlcm_"):
        evaluate_boundaries(tmp_path / "gpt2" / "final", world["tokens"], tmp_path / "b.json", world["tokenizer"])
