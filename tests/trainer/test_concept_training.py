"""The unchanged trainer trains the concept-level families: every loss term and metric is logged,
the losses fall, and a ConceptLM run (frozen random codes are a buffer) resumes bit-exactly."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from trainer.train import Trainer

FAMILIES = {
    "conceptlm_gpt2": ({"ntp", "ncp", "vq"}, {"vq_util_pct", "vq_ppl_mean", "vq_dead_codes", "vq_collapse"}),
    "contextlm_pythia": ({"ntp"}, set()),
    "mtp_gpt2": ({"ntp", "mtp"}, set()),
}


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "train" / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("arch", sorted(FAMILIES))
def test_trainer_logs_every_term_and_losses_fall(arch, tiny_data, run_cfg, tmp_path):
    run_cfg["model"]["arch"] = arch
    run_cfg["train"].update(steps=20, log_interval=2)
    manifest = Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()
    train = [r for r in rows(tmp_path) if "loss" in r]
    losses, metrics = FAMILIES[arch]
    assert {k.split("/", 1)[1] for k in train[0] if k.startswith("loss/")} == losses
    assert metrics <= {k.split("/", 1)[1] for k in train[0] if k.startswith("metric/")}
    assert train[-1]["loss/ntp"] < train[0]["loss/ntp"] - 0.5
    assert manifest["flops_per_token"] > 0 and manifest["final_valid_loss"] is not None


def test_conceptlm_resume_is_bitwise_equal(tiny_data, run_cfg, tmp_path):
    run_cfg["model"]["arch"] = "conceptlm_pythia"
    run_cfg["train"].update(steps=8)
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "full").run()
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run(stop_after=4)
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run()
    a = load_file(str(tmp_path / "full" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "cut" / "final" / "model.safetensors"))
    assert "quantizer.base_codes" in a and a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_codebook_collapse_is_reported_once_and_withdrawn_on_recovery(tiny_data, run_cfg, tmp_path, capsys):
    run_cfg["model"]["arch"] = "conceptlm_gpt2"
    trainer = Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    trainer._alert({"metric/vq_collapse": 0.0}, 2)
    assert "collapse" not in capsys.readouterr().out
    for step in (4, 6):
        trainer._alert({"metric/vq_collapse": 1.0}, step)
    out = capsys.readouterr().out
    assert out.count("codebook collapse") == 1 and "warning at step 4" in out
    trainer._alert({"loss": 1.0}, 7)  # a row without the metric says nothing either way
    trainer._alert({"metric/vq_collapse": 0.0}, 8)  # usage recovered: the warning is withdrawn
    trainer._alert({"metric/vq_collapse": 0.0}, 9)
    trainer._alert({"metric/vq_collapse": 1.0}, 10)  # and raised again if it collapses again
    out = capsys.readouterr().out
    assert out.count("cleared at step") == 1 and "cleared at step 8: vq_collapse" in out
    assert out.count("codebook collapse") == 1 and "warning at step 10" in out
