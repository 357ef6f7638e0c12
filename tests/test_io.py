"""Atomic writes: a failed write (disk full) leaves the previous file intact and says so."""
from __future__ import annotations

import errno
import os

import pytest
import torch

from common.io import WriteError, atomic_write_json, atomic_write_text


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_disk_full_keeps_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    atomic_write_json(target, {"old": 1})
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(WriteError, match=r"result.json: the disk is full: free space and re-run"):
        atomic_write_text(target, "new")
    assert target.read_text().strip().startswith("{")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left behind


def test_disk_full_during_checkpoint_keeps_earlier_ones(tiny_data, run_cfg, tmp_path, monkeypatch):
    import safetensors.torch

    from trainer import checkpoint
    from trainer.train import Trainer

    trainer = Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    trainer.run(stop_after=4)
    monkeypatch.setattr(checkpoint, "save_file", _disk_full)
    with pytest.raises(WriteError, match="disk is full.*earlier checkpoints are intact"):
        trainer.checkpoint(8)
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["step-000004"]
