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


def metrics_rows(run_dir):
    """The training log without its timings."""
    return [{k: v for k, v in json.loads(line).items() if k != "tok_per_s"}
            for line in (run_dir / "train" / "metrics.jsonl").read_text().splitlines()]


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
    assert metrics_rows(tmp_path / "full") == metrics_rows(tmp_path / "cut")


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


def test_changed_config_sets_stale_checkpoint_aside_and_trains_afresh(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run(stop_after=4)
    run_cfg["train"]["lr"] = 1e-3
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "fresh").run()
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run()  # no error, no resume
    assert (tmp_path / "cut" / "ckpt.stale" / "step-000004" / "COMPLETE").is_file()
    a, b = final_weights(tmp_path / "fresh"), final_weights(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert metrics_rows(tmp_path / "fresh") == metrics_rows(tmp_path / "cut")


def test_changed_tokens_set_stale_checkpoint_aside(tiny_data, run_cfg, tmp_path, capsys):
    import shutil
    from corpora.tokenization import load_tokenizer, tokenize_corpus

    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "run").run(stop_after=4)
    tokens = tmp_path / "tokens"  # the same corpus tokenized again after an edit of one document
    shutil.copytree(tiny_data["corpus"], tmp_path / "corpus")
    lines = (tmp_path / "corpus" / "train.jsonl").read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "text": "the cat sleeps."})
    (tmp_path / "corpus" / "train.jsonl").write_text("\n".join(lines) + "\n")
    tokenize_corpus(tmp_path / "corpus", load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"]), tokens)
    manifest = Trainer(run_cfg, tokens, tmp_path / "run").run()
    out = capsys.readouterr().out
    assert "data.splits.train" in out and "resuming at step" not in out
    assert manifest["data"]["splits"]["train"] == \
        json.loads((tokens / "manifest.json").read_text())["splits"]["train"]["sha256"]


def test_completed_run_keeps_no_checkpoint_so_a_rerun_retrains(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()
    assert not (tmp_path / "ckpt").exists()
    first = final_weights(tmp_path)
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()  # a forced re-run: trains all 12 steps again
    assert [r["step"] for r in metrics_rows(tmp_path) if "loss" in r] == [2, 4, 6, 8, 10, 12]
    assert all(torch.equal(first[k], v) for k, v in final_weights(tmp_path).items())


def test_resume_restores_the_log_from_the_checkpoint(tiny_data, run_cfg, tmp_path):
    """A log cut mid-line by a kill, or deleted by Snakemake, is rebuilt from the checkpoint's copy."""
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "full").run()
    for damage in ("partial", "deleted"):
        run = tmp_path / damage
        Trainer(run_cfg, tiny_data["tokens"], run).run(stop_after=6)
        log = run / "train" / "metrics.jsonl"
        if damage == "partial":
            log.write_text(log.read_text() + '{"step": 7, "lo')
        else:
            log.unlink()
        Trainer(run_cfg, tiny_data["tokens"], run).run()
        assert metrics_rows(run) == metrics_rows(tmp_path / "full"), damage


def test_interrupted_checkpoint_debris_is_removed(tiny_data, run_cfg, tmp_path):
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run(stop_after=8)
    ckpt = tmp_path / "ckpt"
    (ckpt / ".tmp-step-000012-999").mkdir()
    (ckpt / ".tmp-step-000012-999" / "model.safetensors").write_bytes(b"half")
    (ckpt / "step-000004" / "COMPLETE").unlink()  # a prune killed half-way
    trainer = Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    assert trainer.resume()[0] == 8
    assert sorted(p.name for p in ckpt.iterdir()) == ["step-000008"]


def test_short_validation_split_is_a_clear_error_before_training(tiny_data, run_cfg, tmp_path):
    run_cfg["model"]["seq_len"] = 4096
    with pytest.raises(DataError, match="valid split has .* fewer than one window"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path)


def test_a_small_validation_split_is_said_before_training(tiny_data, run_cfg, tmp_path, capsys):
    """Enough for one window but not for the eval_batches x micro-batch windows valid/loss should average."""
    from trainer.data import open_split

    windows = (len(open_split(tiny_data["tokens"], "valid")) - 1) // run_cfg["model"]["seq_len"]
    run_cfg["train"]["eval_batches"] = windows + 5
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "small")
    out = capsys.readouterr().out
    assert "warning: the valid split has" in out and "fewer than train.eval_batches" in out
    run_cfg["train"]["eval_batches"] = 1
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "enough")
    assert "valid split" not in capsys.readouterr().out


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


def test_a_second_trainer_on_the_same_run_folder_is_refused(tiny_data, run_cfg, tmp_path):
    import subprocess
    import sys
    import time
    from trainer.train import TrainingLockError

    holder = subprocess.Popen([sys.executable, "-c", (  # another trainer: the lock, and its pid beside it
        "import os, sys, time; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(); "
        "open(sys.argv[2], 'w').write(str(os.getpid())); print('locked', flush=True); time.sleep(30)"),
        str(tmp_path / ".train.lock"), str(tmp_path / ".train.owner")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(TrainingLockError, match=f"another process \\(pid {holder.pid}\\)"):
            Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    assert Trainer(run_cfg, tiny_data["tokens"], tmp_path).run() is not None  # the lock died with its holder
    assert not (tmp_path / ".train.owner").exists()  # released with its pid: no stale holder named later


def test_stray_world_size_is_a_one_line_error(tiny_data, run_cfg, tmp_path, monkeypatch):
    from common.errors import ReproError

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with pytest.raises(ReproError, match="WORLD_SIZE=2 is set, but not by torchrun"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path)


def test_snapshots_survive_a_resume_and_never_outlive_their_run(tiny_data, run_cfg, tmp_path):
    """A resumed run lists the snapshots of an uninterrupted one (same sha256); snapshots written after the
    resumed checkpoint, and every snapshot of a run that starts afresh under other settings, are deleted."""
    run_cfg["train"]["snapshot_interval"] = 3
    full = Trainer(run_cfg, tiny_data["tokens"], tmp_path / "full").run()
    assert [s["step"] for s in full["snapshots"]] == [3, 6, 9]  # not 12: the final weights are final/
    assert [s["tokens"] for s in full["snapshots"]] == [3 * 4 * 32, 6 * 4 * 32, 9 * 4 * 32]
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run(stop_after=4)
    stray = tmp_path / "cut" / "train" / "snapshots" / "step-000010.safetensors"
    stray.write_bytes(b"written after the checkpoint the run resumes from")
    resumed = Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run()
    assert resumed["snapshots"] == full["snapshots"]
    run_cfg["train"]["lr"] = 1e-3
    run_cfg["train"]["snapshot_interval"] = 5
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "full").run(stop_after=4)  # afresh: final/ is no checkpoint
    assert not list((tmp_path / "full" / "train" / "snapshots").glob("*.safetensors"))


@pytest.mark.slow
def test_compile_compiles_each_block_in_place_and_trains_as_eager(tiny_data, run_cfg, tmp_path):
    """``train.compile``: every transformer block compiled (one graph for blocks of one shape), the weights'
    names unchanged, the training log as the eager run's (within compiled kernels' rounding)."""
    run_cfg["train"]["steps"] = 4
    eager = Trainer(run_cfg, tiny_data["tokens"], tmp_path / "eager")
    eager.run()
    run_cfg["train"]["compile"] = True
    compiled = Trainer(run_cfg, tiny_data["tokens"], tmp_path / "compiled")
    assert all(block._compiled_call_impl is not None for block in compiled.model.blocks)
    compiled.run()
    assert final_weights(tmp_path / "compiled").keys() == final_weights(tmp_path / "eager").keys()
    for a, b in zip(metrics_rows(tmp_path / "eager"), metrics_rows(tmp_path / "compiled")):
        assert a.keys() == b.keys()
        for key, value in a.items():
            assert b[key] == (pytest.approx(value, rel=1e-4, abs=1e-5) if isinstance(value, float) else value), key
