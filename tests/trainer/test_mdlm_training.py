"""The masked-diffusion baseline trains through the suite's one trainer (trainer/train.py)."""
from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from trainer.data import gather_windows, open_split
from trainer.train import Trainer


def mdlm_cfg(run_cfg: dict, arch: str = "mdlm_gpt2") -> dict:
    run_cfg["id"] = "tiny_mdlm"
    run_cfg["model"]["arch"] = arch
    run_cfg["train"]["loss_weights"] = {"nelbo": 1.0}
    return run_cfg


def fixed_batch_loss(model, tokens, seq_len: int) -> float:
    """The eval-mode NELBO (fixed times and masks, models.mdlm.VALID_SEED) on the first 8 windows."""
    x, y = gather_windows(tokens, (torch.arange(8) * seq_len).numpy(), seq_len)
    model.eval()
    with torch.no_grad():
        loss = model(x, y)["losses"]["nelbo"].item()
    model.train()
    return loss


@pytest.mark.parametrize("arch", ["mdlm_gpt2", "mdlm_pythia"])
def test_a_few_trainer_steps_reduce_the_loss(tiny_data, run_cfg, tmp_path, arch):
    trainer = Trainer(mdlm_cfg(run_cfg, arch), tiny_data["tokens"], tmp_path)
    valid = open_split(tiny_data["tokens"], "valid")
    before = fixed_batch_loss(trainer.model, valid, trainer.seq_len)
    rows = [trainer.step(step) for step in range(30)]
    after = fixed_batch_loss(trainer.model, valid, trainer.seq_len)
    assert after < before - 1.0, (before, after)
    assert all(set(r) >= {"loss/nelbo", "metric/mask_frac", "metric/masked_ce"} for r in rows)
    first, last = sum(r["loss"] for r in rows[:5]) / 5, sum(r["loss"] for r in rows[-5:]) / 5
    assert last < first


def test_resume_draws_the_same_masks(tiny_data, run_cfg, tmp_path, monkeypatch):
    """The masks come from torch's global RNG, which checkpoints carry: an interrupted and resumed run
    ends with the same weights as an uninterrupted one. (Validation is stubbed: the trainer's
    valid_loss reads the 'ntp' loss, which this family does not have.)"""
    monkeypatch.setattr(Trainer, "valid_loss", lambda self: 0.0)
    cfg = mdlm_cfg(run_cfg)
    Trainer(cfg, tiny_data["tokens"], tmp_path / "full").run()
    assert Trainer(cfg, tiny_data["tokens"], tmp_path / "cut").run(stop_after=6) is None
    Trainer(cfg, tiny_data["tokens"], tmp_path / "cut").run()
    a = load_file(str(tmp_path / "full" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "cut" / "final" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
