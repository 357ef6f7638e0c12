"""The trainer: learning, exact resume, non-finite stop, checkpoint integrity, data order."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from trainer.checkpoint import CheckpointError, valid_checkpoints
from trainer.data import DataError, WindowOrder, open_split
from trainer.train import NonFiniteLossError, Trainer


def final_weights(run_dir):
    return load_file(str(run_dir / "final" / "model.safetensors"))


def test_loss_decreases_and_final_written(tiny_data, run_cfg, tmp_path):
    run_cfg["train"]["steps"] = 30
    manifest = Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()
    rows = [json.loads(line) for line in (tmp_path / "train" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert losses[-1] < losses[0] - 1.0
    assert manifest["final_valid_loss"] is not None
    assert (tmp_path / "final" / "model.safetensors").is_file()


def test_resume_is_bitwise_equal_to_uninterrupted(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "full").run()
    assert Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run(stop_after=6) is None
    assert not (tmp_path / "cut" / "final").exists()
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run()
    a, b = final_weights(tmp_path / "full"), final_weights(tmp_path / "cut")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    log = lambda d: [{k: v for k, v in json.loads(line).items() if k != "tok_per_s"}
                     for line in (d / "train" / "metrics.jsonl").read_text().splitlines()]
    assert log(tmp_path / "full") == log(tmp_path / "cut")


def test_nonfinite_loss_stops_before_step_and_keeps_checkpoint(tiny_data, run_cfg, tmp_path, monkeypatch):
    trainer = Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    trainer.run(stop_after=4)
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    real_forward = trainer.forward

    def poisoned(x, y):
        out = real_forward(x, y)
        out["losses"]["ntp"] = out["losses"]["ntp"] * float("nan")
        return out

    trainer.forward = poisoned
    with pytest.raises(NonFiniteLossError, match=r"step 4: loss 'ntp' = nan.*step-000004"):
        trainer.step(4)
    assert all(torch.equal(before[k], v) for k, v in trainer.model.state_dict().items())
    assert [p.name for p in valid_checkpoints(tmp_path / "ckpt")] == ["step-000004"]


def test_truncated_checkpoint_is_a_clear_error(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run(stop_after=4)
    weights = tmp_path / "ckpt" / "step-000004" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="model.safetensors: missing or corrupted"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()


def test_half_written_checkpoint_is_ignored(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run(stop_after=4)
    (tmp_path / "ckpt" / "step-000004" / "COMPLETE").unlink()
    assert valid_checkpoints(tmp_path / "ckpt") == []


def test_resume_refuses_another_config(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run(stop_after=4)
    run_cfg["train"]["lr"] = 1e-3
    with pytest.raises(CheckpointError, match="written by config"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()


def test_token_hash_mismatch_is_an_error(tiny_data, tmp_path):
    import shutil
    tokens = tmp_path / "tokens"
    shutil.copytree(tiny_data["tokens"], tokens)
    data = bytearray((tokens / "valid.bin").read_bytes())
    data[2] ^= 1
    (tokens / "valid.bin").write_bytes(bytes(data))
    with pytest.raises(DataError, match="sha256 differs"):
        open_split(tokens, "valid")
    (tokens / "test.bin").write_bytes(b"\x00")
    with pytest.raises(DataError, match="truncated or stale"):
        open_split(tokens, "test")


def test_window_order_depends_on_seed_and_content_only():
    a = WindowOrder(10_001, 100, seed=0, key=7).window_starts(0, 250)
    assert np.array_equal(a, WindowOrder(10_001, 100, seed=0, key=7).window_starts(0, 250))
    assert not np.array_equal(a, WindowOrder(10_001, 100, seed=1, key=7).window_starts(0, 250))
    assert not np.array_equal(a, WindowOrder(10_001, 100, seed=0, key=8).window_starts(0, 250))
    epoch = sorted(a[:100] // 100)
    assert epoch == list(range(100))  # every window once per epoch


@pytest.mark.slow
def test_ddp_under_torchrun_matches_single_process(tiny_data, run_cfg, tmp_path):
    """Two gloo ranks split each batch; the logged global losses equal one process's."""
    import subprocess
    import sys

    (tmp_path / "config.json").write_text(json.dumps(run_cfg))
    args = ["-m", "workflows.cli", "pretrain", "--config", str(tmp_path / "config.json"), "--tokens",
            str(tiny_data["tokens"]), "--tokenizer", str(tiny_data["tokenizer"]), "--threads", "1", "--run-dir"]
    ddp = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", *args,
                          str(tmp_path / "ddp")], capture_output=True, text=True, timeout=300)
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "one").run()
    losses = lambda d: [r["loss"] for r in map(json.loads, (d / "train" / "metrics.jsonl").read_text().splitlines())
                        if "loss" in r]
    assert losses(tmp_path / "ddp") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
