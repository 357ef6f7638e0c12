"""Codebook usage on the test split (App. E.3): the assignment is forward's, the counts add up to
the chunks the windows hold, the metrics follow from the counts, and a run without a codebook is
refused in one line."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import jsonschema
import pytest
import torch

from evals.codebook import CodebookEvalError, chunk_codes, evaluate_codebook
from evals.perplexity import load_trained
from models.quantizers import COLLAPSE_FRACTION, codebook_usage
from tests.conftest import TINY_RUN
from trainer.data import open_split, sequential_windows
from trainer.train import Trainer
from workflows.cli import main

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "config" / "schemas" / "result.schema.json").read_text())


def train(arch: str, tokens: Path, run_dir: Path) -> Path:
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"]["arch"] = arch
    cfg["train"].update(steps=2, log_interval=1, eval_interval=2, checkpoint_interval=2)
    Trainer(cfg, tokens, run_dir).run()
    return run_dir


@pytest.fixture(scope="module")
def concept_run(tiny_data, tmp_path_factory) -> Path:
    return train("conceptlm_gpt2", tiny_data["tokens"], tmp_path_factory.mktemp("conceptlm"))


def test_result_validates_and_metrics_follow_from_counts(concept_run, tiny_data, tmp_path):
    r = evaluate_codebook(concept_run / "final", tiny_data["tokens"], tmp_path / "codebook.json", batch_size=3)
    jsonschema.validate(r, SCHEMA)
    assert json.loads((tmp_path / "codebook.json").read_text()) == r and r["eval"] == "codebook"
    m, d = r["metrics"], r["details"]
    counts = torch.tensor(d["counts"])
    S, N = d["n_segments"], d["codebook_size"]
    assert counts.shape == (S, N) and (counts.sum(1) == m["test/chunks"]).all()
    p = counts / counts.sum(1, keepdim=True)
    ppl = [math.exp(-sum(q * math.log(q) for q in row if q > 0)) for row in p.tolist()]
    assert m["test/utilisation_pct"] == pytest.approx(100 * (counts > 0).sum().item() / (S * N))
    assert m["test/dead_codes"] == (counts == 0).sum().item()
    assert m["test/usage_ppl_mean"] == pytest.approx(sum(ppl) / S, rel=1e-5)
    assert m["test/usage_ppl_min"] == pytest.approx(min(ppl), rel=1e-5)
    assert m["test/collapse"] == float(min(ppl) < max(2.0, COLLAPSE_FRACTION * N))
    manifest = json.loads((concept_run / "final" / "manifest.json").read_text())
    assert m["model/params"] == manifest["non_embedding_params"]


def test_chunks_are_those_of_the_windows_and_assigned_as_in_forward(concept_run, tiny_data, tmp_path):
    r = evaluate_codebook(concept_run / "final", tiny_data["tokens"], tmp_path / "codebook.json")
    tokens, k = open_split(tiny_data["tokens"], "test"), r["details"]["chunk_size"]
    assert r["metrics"]["test/chunks"] == sum(n // k for _, n in sequential_windows(len(tokens), 32))
    model, _ = load_trained(concept_run / "final")
    block = torch.from_numpy(tokens[:2 * 33].astype("int64")).view(2, 33)
    with torch.no_grad():
        index = chunk_codes(model, block[:, :-1], model.quantizer.codes())
        assert model(block[:, :-1], block[:, 1:])["metrics"] == codebook_usage(index, r["details"]["codebook_size"])


def test_run_without_codebook_is_refused_in_one_line(tiny_data, tmp_path, capsys):
    run = train("gpt2", tiny_data["tokens"], tmp_path / "gpt2")
    with pytest.raises(CodebookEvalError, match="'gpt2'.*ConceptLM runs only") as e:
        evaluate_codebook(run / "final", tiny_data["tokens"], tmp_path / "codebook.json")
    assert "\n" not in str(e.value) and not (tmp_path / "codebook.json").exists()
    capsys.readouterr()
    assert main(["eval-codebook", "--run-dir", str(run), "--tokens", str(tiny_data["tokens"]),
                 "--out", str(tmp_path / "codebook.json")]) == 2
    assert capsys.readouterr().err == f"error: {e.value}\n"


def test_cli_writes_the_result(concept_run, tiny_data, tmp_path, capsys):
    out = tmp_path / "eval" / "codebook.json"
    assert main(["eval-codebook", "--run-dir", str(concept_run), "--tokens", str(tiny_data["tokens"]),
                 "--out", str(out), "--threads", "1"]) == 0
    r = json.loads(out.read_text())
    assert f"tiny seed 0: codebook utilisation {r['metrics']['test/utilisation_pct']:.1f}%" in capsys.readouterr().out
