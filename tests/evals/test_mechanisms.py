"""Mechanism checks of ConceptLM and ContextLM (evals/mechanisms.py; ConceptLM Sec. 2.3, 3): on a trained
tiny run every intervention moves the NLL, on a model whose concept path is cut none does, the model's
default forward is bit-identical afterwards, ncp_r2 is the NCP loss's pairs' R^2, and a run or profile
without a concept path is refused in one line."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import torch
import yaml

from evals.mechanisms import (MechanismsEvalError, concept_checks, evaluate_mechanisms, intervening, mean_nll,
                              select_windows)
from evals.perplexity import load_trained
from tests.conftest import TINY_RUN
from trainer.data import open_split
from trainer.train import Trainer
from workflows.cli import main
from workflows.experiments import ConfigError, validate

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "config" / "schemas" / "result.schema.json").read_text())
CUT = 1e-6  # |effect| below which a check reads a cut path


def train(arch: str, tokens: Path, run_dir: Path, steps: int = 4, **model) -> Path:
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"].update(arch=arch, **model)
    cfg["train"].update(steps=steps, log_interval=1, eval_interval=steps, checkpoint_interval=steps)
    Trainer(cfg, tokens, run_dir).run()
    return run_dir


@pytest.fixture(scope="module")
def concept_run(tiny_data, tmp_path_factory) -> Path:
    """ConceptLM on Pythia: fusion h + c_hat, NCP on."""
    return train("conceptlm_pythia", tiny_data["tokens"], tmp_path_factory.mktemp("conceptlm"))


@pytest.fixture(scope="module")
def context_run(tiny_data, tmp_path_factory) -> Path:
    """ContextLM on GPT-2: fusion ln_f(h) + ln_f(c), no NCP."""
    return train("contextlm_gpt2", tiny_data["tokens"], tmp_path_factory.mktemp("contextlm"))


def windows_of(tiny_data, n: int = 6) -> torch.Tensor:
    return select_windows(open_split(tiny_data["tokens"], "test"), TINY_RUN["model"]["seq_len"], n)[0]


def cut(model):
    """The concept path cut: the predictor's weights and bias zeroed, so c_hat = 0 (raw coefficients)."""
    with torch.no_grad():
        model.concept_head.weight.zero_()
        model.concept_head.bias.zero_()
    return model


def test_result_on_a_trained_run_validates_and_every_intervention_moves_the_nll(concept_run, tiny_data, tmp_path):
    out = tmp_path / "eval" / "mechanisms.json"
    r = evaluate_mechanisms(concept_run / "final", tiny_data["tokens"], out, batch_size=4, max_windows=8)
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    m, d = r["metrics"], r["details"]
    assert r["eval"] == "mechanisms" and d["family"] == "conceptlm" and d["windows"] == 8
    assert d["tokens"] == 8 * TINY_RUN["model"]["seq_len"]
    assert set(m) == {"mech/intact_nll", "mech/zero", "mech/mean", "mech/swap", "mech/ncp_r2"}
    assert all(abs(m[f"mech/{k}"]) > CUT for k in ("zero", "mean", "swap"))
    assert 0 < m["mech/intact_nll"] < 10
    assert [(c["name"], c["kind"], c["gate"]) for c in d["checks"]] == [
        ("swap", "spread", True), ("ncp_r2", "floor", True), ("zero", "spread", False), ("mean", "spread", False)]
    assert all(c["key"] in m and c["what"] for c in d["checks"])
    assert next(c for c in d["checks"] if c["name"] == "ncp_r2")["floor"] == 0.0


def test_intact_nll_is_the_perplexity_evaluations_on_the_same_windows(concept_run, tiny_data):
    model, _ = load_trained(concept_run / "final")
    windows = windows_of(tiny_data)
    with torch.no_grad():
        logits = model(windows[:, :-1])["logits"]
    direct = torch.nn.functional.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten()).item()
    assert mean_nll(model, windows, 4) == pytest.approx(direct, rel=1e-5)


@pytest.mark.parametrize("which", ["concept", "context"])
def test_a_cut_concept_path_shows_no_effect(which, concept_run, context_run, tiny_data):
    model, _ = load_trained((concept_run if which == "concept" else context_run) / "final")
    metrics, details = concept_checks(cut(model), windows_of(tiny_data), 4)
    assert abs(metrics["mech/zero"]) < CUT and abs(metrics["mech/swap"]) < CUT and abs(metrics["mech/mean"]) < CUT
    if which == "concept":
        assert metrics["mech/ncp_r2"] <= 0.0  # c_hat = 0 predicts no better than the mean: the floor check fails
    else:
        assert "mech/ncp_r2" not in metrics and [c["name"] for c in details["checks"] if c["gate"]] == ["swap"]


def test_interventions_leave_the_default_forward_bit_identical(concept_run, tiny_data):
    model, _ = load_trained(concept_run / "final")
    windows = windows_of(tiny_data)
    with torch.no_grad():
        before = model(windows[:, :-1])["logits"]
        with intervening(model, lambda c, c_hat: c_hat):           # the recording hook's identity
            identity = model(windows[:, :-1])["logits"]
    concept_checks(model, windows, 4)
    with pytest.raises(RuntimeError), intervening(model, lambda c, c_hat: torch.zeros_like(c_hat)):
        raise RuntimeError("an error inside the block")
    with torch.no_grad():
        after = model(windows[:, :-1])["logits"]
    assert "intervention" not in vars(model) and type(model).intervention is None
    assert torch.equal(before, identity) and torch.equal(before, after)


def test_ncp_r2_is_recomputed_from_the_ncp_pairs(concept_run, tiny_data):
    model, _ = load_trained(concept_run / "final")
    windows = windows_of(tiny_data, 3)
    metrics, _ = concept_checks(model, windows, 2)                  # two batches: the pairs are gathered whole
    with torch.no_grad():
        c, c_hat = model.concepts(model.encode(windows[:, :-1]), model.quantizer.codes())
    pred, target = c_hat[:, :-1].double(), c[:, 1:].double()
    sse = (pred - target).pow(2).sum()
    sst = (target - target.mean((0, 1))).pow(2).sum()
    assert metrics["mech/ncp_r2"] == pytest.approx(1 - (sse / sst).item(), rel=1e-6, abs=1e-9)


def test_swap_gives_each_window_the_next_windows_concepts(concept_run, tiny_data):
    model, _ = load_trained(concept_run / "final")
    windows = windows_of(tiny_data, 4)
    metrics, _ = concept_checks(model, windows, 3)
    with torch.no_grad():
        _, c_hat = model.concepts(model.encode(windows[:, :-1]), model.quantizer.codes())
    other = c_hat.roll(-1, 0)
    swapped = mean_nll(model, windows, 4, lambda rows: lambda c, h: other[rows])
    assert metrics["mech/swap"] == pytest.approx(swapped - mean_nll(model, windows, 4), abs=1e-9)


def test_a_run_without_a_concept_path_is_refused_in_one_line(tiny_data, tmp_path, capsys):
    run = train("mtp_pythia", tiny_data["tokens"], tmp_path / "mtp", steps=1)
    with pytest.raises(MechanismsEvalError, match=r"run tiny seed 0 has model.arch='mtp_pythia'.*concept models") as e:
        evaluate_mechanisms(run / "final", tiny_data["tokens"], tmp_path / "mechanisms.json")
    assert "\n" not in str(e.value) and not (tmp_path / "mechanisms.json").exists()
    capsys.readouterr()
    assert main(["eval-mechanisms", "--run-dir", str(run), "--tokens", str(tiny_data["tokens"]),
                 "--out", str(tmp_path / "mechanisms.json")]) == 2
    assert capsys.readouterr().err == f"error: {e.value}\n"


def test_the_profile_check_refuses_mechanisms_without_a_concept_path_and_accepts_ncm():
    profile = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    for exp_id in ("base_gpt2_s", "mtp_pythia_s", "mdlm_s"):
        bad = copy.deepcopy(profile)
        entry = next(e for e in bad["experiments"] if e["id"] == exp_id)
        entry["evals"] = [*entry.get("evals", ["ppl"]), "mechanisms"]
        with pytest.raises(ConfigError, match="evals: mechanisms checks a concept path and model.arch=") as e:
            validate(bad, "default.yaml")
        assert "\n" not in str(e.value)
    assert {"ncm_tok_s", "ncm_s"} <= {e["id"] for e in profile["experiments"] if "mechanisms" in e.get("evals", [])}
    validate(profile, "default.yaml")  # the default lists the checks on NCM's tokenizer and generator


def test_cli_writes_the_result_and_one_line(context_run, tiny_data, tmp_path, capsys):
    out = tmp_path / "eval" / "mechanisms.json"
    assert main(["eval-mechanisms", "--run-dir", str(context_run), "--tokens", str(tiny_data["tokens"]),
                 "--out", str(out), "--threads", "1"]) == 0
    r = json.loads(out.read_text())
    line = capsys.readouterr().out.strip()
    assert r["details"]["family"] == "contextlm" and "mech/ncp_r2" not in r["metrics"]
    assert line.startswith(f"tiny seed 0: intact NLL {r['metrics']['mech/intact_nll']:.4f}") and "swap " in line
    assert "\n" not in line


def test_fewer_than_two_windows_is_refused_in_one_line(concept_run, tiny_data, tmp_path):
    with pytest.raises(MechanismsEvalError, match=r"test split: .* full window.*needs at least 2") as e:
        evaluate_mechanisms(concept_run / "final", tiny_data["tokens"], tmp_path / "m.json", max_windows=1)
    assert "\n" not in str(e.value)


def test_an_ncm_run_is_dispatched_to_the_ncm_checks(tiny_data, tmp_path):
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"] = {"arch": "ncm_tokenizer", "seq_len": 32, "d_model": 32, "n_layer": 1, "n_head": 2,
                    "codebook_size": 32, "d_code": 8, "n_scales": 4}
    cfg["train"].update(steps=1, log_interval=1, eval_interval=1, checkpoint_interval=1,
                        loss_weights={"rec": 1.0, "vq": 1.0})
    Trainer(cfg, tiny_data["tokens"], tmp_path / "tok").run()
    out = tmp_path / "eval" / "mechanisms.json"
    r = evaluate_mechanisms(tmp_path / "tok" / "final", tiny_data["tokens"], out)
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    assert "mech/intact_nll" in r["metrics"] and all(c["key"] in r["metrics"] for c in r["details"]["checks"])
