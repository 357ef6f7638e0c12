"""Re-runs through Snakemake, as a user makes them: a training job killed with SIGKILL and re-run,
a forced re-run, an edited tokenizer, a failing job's error on the console.

The kill is real: ``REPRO_SIGKILL_AFTER_STEP=N`` makes the training process SIGKILL itself after
step N (``trainer.train._fault_point``), after its log rows and any checkpoint of that step, and
Snakemake sees a failed job (it deletes the job's outputs, as it does after any failure).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from tests.workflows.test_workflow import ROOT, SNAKEMAKE, micro_profile

EXPERIMENTS = ("base_s", "pm_s")


def rerun_profile() -> dict:
    config = micro_profile()
    config["experiments"] = [{"id": "base_s", "evals": ["ppl"]},
                             {"id": "pm_s", "base": "base_s", "overrides": {"model.n_layer": 2}}]
    return config


def targets(workdir: Path) -> list[str]:
    """The result files, relative to the working directory as Snakemake wants them."""
    return [f"results/micro/runs/{e}/seed0/eval/ppl.json" for e in EXPERIMENTS]


def snakemake(workdir: Path, *args: str, kill_after: int | None = None):
    import subprocess

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("REPRO_SIGKILL_AFTER_STEP", None)
    if kill_after is not None:
        env["REPRO_SIGKILL_AFTER_STEP"] = str(kill_after)
    return subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "micro.yaml"), "--cores", "2",
                                       *args], capture_output=True, text=True, env=env, timeout=600)


def run_dir(workdir: Path, exp: str) -> Path:
    return workdir / f"results/micro/runs/{exp}/seed0"


def weights(workdir: Path, exp: str) -> dict:
    return load_file(str(run_dir(workdir, exp) / "final" / "model.safetensors"))


def log_rows(workdir: Path, exp: str) -> list[dict]:
    text = (run_dir(workdir, exp) / "train" / "metrics.jsonl").read_text()
    return [{k: v for k, v in json.loads(line).items() if k != "tok_per_s"} for line in text.splitlines()]


def result(workdir: Path, exp: str) -> dict:
    r = json.loads((run_dir(workdir, exp) / "eval" / "ppl.json").read_text())
    for key in ("wall_time_s", "created", "host", "git_dirty"):
        r["provenance"].pop(key, None)
    return r


def pretrain_log(workdir: Path, exp: str) -> str:
    return (run_dir(workdir, exp) / "logs" / "pretrain.log").read_text()


def assert_same_runs(a: Path, b: Path) -> None:
    for exp in EXPERIMENTS:
        wa, wb = weights(a, exp), weights(b, exp)
        assert wa.keys() == wb.keys() and all(bool((wa[k] == wb[k]).all()) for k in wa), exp
        assert log_rows(a, exp) == log_rows(b, exp), exp
        assert result(a, exp) == result(b, exp), exp


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    (workdir / "micro.yaml").write_text(yaml.safe_dump(rerun_profile()))
    run = snakemake(workdir, *targets(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    return workdir


@pytest.mark.slow
def test_killed_training_resumes_to_the_uninterrupted_result_and_edits_retrain(reference, tmp_path):
    workdir = tmp_path
    (workdir / "micro.yaml").write_text(yaml.safe_dump(rerun_profile()))

    # killed mid-run (checkpoint at 40, log rows to 50), then killed after the last checkpoint (80 of 80)
    assert snakemake(workdir, *targets(workdir), kill_after=50).returncode != 0
    assert not (run_dir(workdir, "base_s") / "final").exists()
    assert snakemake(workdir, *targets(workdir), kill_after=80).returncode != 0
    run = snakemake(workdir, *targets(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    for exp in EXPERIMENTS:
        assert "resuming at step 80" in pretrain_log(workdir, exp)
        assert not (run_dir(workdir, exp) / "ckpt").exists()  # a completed run keeps no checkpoint
        assert json.loads((run_dir(workdir, exp) / "final" / "manifest.json").read_text())["final_valid_loss"]
    assert_same_runs(reference, workdir)

    # a forced re-run of a completed run trains afresh (nothing to resume), here killed at step 50
    assert snakemake(workdir, *targets(workdir), "--forcerun", "pretrain", kill_after=50).returncode != 0
    assert "resuming" not in pretrain_log(workdir, "base_s")
    assert (run_dir(workdir, "base_s") / "ckpt" / "step-000040" / "COMPLETE").is_file()

    # an edited tokenizer: every dependent run retrains, the stale checkpoint (old tokenizer) is set aside
    tokenizer = workdir / "results/micro/data/world/tokenizer.json"
    tokenizer.write_text(tokenizer.read_text() + "\n")  # same vocabulary, another file and hash
    run = snakemake(workdir, *targets(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    new_hash = json.loads((workdir / "results/micro/data/world/tokens/manifest.json").read_text())["tokenizer_sha256"]
    for exp in EXPERIMENTS:
        log = pretrain_log(workdir, exp)
        assert "belong to another run (data.tokenizer_sha256" in log and "resuming" not in log, log
        manifest = json.loads((run_dir(workdir, exp) / "final" / "manifest.json").read_text())
        assert manifest["data"]["tokenizer_sha256"] == new_hash
    assert_same_runs(reference, workdir)  # same token ids, so the same training, now bound to the new file


@pytest.mark.slow
def test_changed_setting_retrains_without_a_manual_step(reference, tmp_path):
    workdir = tmp_path
    shutil.copytree(reference / "results", workdir / "results")
    shutil.copytree(reference / ".snakemake", workdir / ".snakemake")
    config = rerun_profile()
    (workdir / "micro.yaml").write_text(yaml.safe_dump(config))
    # a checkpoint left by an interrupted run of the old settings must not stop the new one
    assert snakemake(workdir, *targets(workdir), "--forcerun", "pretrain", kill_after=50).returncode != 0
    config["experiments"][1]["overrides"]["train.lr"] = 1e-3
    (workdir / "micro.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(workdir, *targets(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    log = pretrain_log(workdir, "pm_s")
    assert "belong to another run (config_hash" in log and "resuming" not in log
    assert result(workdir, "base_s") == result(reference, "base_s")  # unchanged settings, result kept

    # an edit whose re-training fails: the next plain run re-trains, it never keeps the old result
    config["experiments"][1]["overrides"]["train.lr"] = 2e-3
    (workdir / "micro.yaml").write_text(yaml.safe_dump(config))
    assert snakemake(workdir, kill_after=50).returncode != 0
    run = snakemake(workdir)
    assert run.returncode == 0 and "Nothing to be done" not in run.stdout + run.stderr, run.stderr[-2000:]
    assert json.loads((run_dir(workdir, "pm_s") / "final" / "manifest.json").read_text())["config"]["train"]["lr"] == \
        2e-3
    assert result(workdir, "pm_s")["config"]["train"]["lr"] == 2e-3
    assert weights(workdir, "pm_s")["blocks.0.attn.qkv.weight"].ne(
        weights(reference, "pm_s")["blocks.0.attn.qkv.weight"]).any()


@pytest.mark.slow
def test_failing_job_shows_its_own_error_on_the_console(tmp_path):
    config = rerun_profile()
    config["corpus"]["synthetic"]["valid_docs"] = 1  # shorter than one training window
    config["defaults"]["model"]["seq_len"] = 1024
    config["experiments"] = config["experiments"][:1]
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(tmp_path, targets(tmp_path)[0])
    assert run.returncode != 0
    console = run.stdout + run.stderr
    assert "error: " in console and "fewer than one window of model.seq_len+1=1025" in console, console[-3000:]
    assert "not found" not in console.lower()


@pytest.mark.slow
def test_killed_tokenisation_resumes_from_its_finished_shards(reference, tmp_path):
    """Shards of 50 documents (REPRO_SHARD_DOCS), the tokenize job SIGKILLed after its third finished shard:
    Snakemake sees a failed job; the re-run keeps the three shards and writes the uninterrupted tokens."""
    import subprocess

    workdir = tmp_path
    (workdir / "micro.yaml").write_text(yaml.safe_dump(rerun_profile()))
    target = "results/micro/data/world/tokens/manifest.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "REPRO_SHARD_DOCS": "50"}
    run = lambda **extra: subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "micro.yaml"),
                                                      "--cores", "2", target], capture_output=True, text=True,
                                         env={**env, **extra}, timeout=600)
    assert run(REPRO_SIGKILL_AFTER_SHARD="3").returncode != 0
    tokens = workdir / "results/micro/data/world/tokens"
    assert len(list((tokens / ".parts").glob("*.json"))) == 3 and not (tokens / "train.bin").exists()
    resumed = run()
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    log = (workdir / "results/micro/data/world/logs/tokenize.log").read_text()
    assert "train: 3 of 6 shards kept from an interrupted run" in log, log
    for name in ("train.bin", "valid.bin", "test.bin"):
        assert (tokens / name).read_bytes() == (reference / "results/micro/data/world/tokens" / name).read_bytes()


# Loaded by every Python process of the run below (PYTHONPATH): safetensors' writer fails as it does on a full
# disk (its own error, the OS error in its text) for the rolling checkpoints, whatever else it writes.
DISK_FULL = '''
import safetensors.torch
from safetensors import SafetensorError

_save_file = safetensors.torch.save_file


def save_file(tensors, filename, metadata=None):
    if "/ckpt/" in str(filename):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    return _save_file(tensors, filename, metadata)


safetensors.torch.save_file = save_file
'''


@pytest.mark.slow
def test_a_full_disk_during_a_checkpoint_is_one_line_and_leaves_nothing_partial(reference, tmp_path):
    """The disk fills while a run writes its first checkpoint: Snakemake shows one line naming the checkpoint
    and the cause (it was safetensors' traceback), no temporary file is left in ckpt/, and once space is
    free the plain re-run trains to the uninterrupted weights."""
    import subprocess

    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "micro.yaml").write_text(yaml.safe_dump(rerun_profile()))
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(DISK_FULL)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(hooks), str(ROOT)])}
    env.pop("REPRO_SIGKILL_AFTER_STEP", None)
    target = "results/micro/runs/base_s/seed0/final/model.safetensors"
    run = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "micro.yaml"), "--cores", "1",
                                      target], capture_output=True, text=True, env=env, timeout=600)
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "Traceback" not in said and "SafetensorError" not in said, said[-3000:]
    line = next(line for line in said.splitlines() if line.startswith("error: "))
    assert re.fullmatch(r"error: could not write checkpoint \S+/runs/base_s/seed0/ckpt/step-000040: the disk is full: "
                        r"free space and resume; earlier checkpoints are intact", line), line
    ckpt = run_dir(workdir, "base_s") / "ckpt"
    assert not ckpt.exists() or not [p for p in ckpt.rglob("*") if p.is_file()]
    run = snakemake(workdir, target, "results/micro/runs/pm_s/seed0/final/model.safetensors")
    assert run.returncode == 0, run.stderr[-3000:]
    for exp in EXPERIMENTS:
        assert weights(workdir, exp).keys() == weights(reference, exp).keys()
        assert all(bool((weights(workdir, exp)[k] == weights(reference, exp)[k]).all())
                   for k in weights(reference, exp))


@pytest.mark.slow
def test_a_changed_setting_retrains_in_a_results_folder_without_snakemake_metadata(reference, tmp_path):
    workdir = tmp_path
    shutil.copytree(reference / "results", workdir / "results")   # copied without .snakemake/: no metadata
    config = rerun_profile()
    config["experiments"][1]["overrides"]["train.lr"] = 1e-3
    (workdir / "micro.yaml").write_text(yaml.safe_dump(config))
    plan = snakemake(workdir, *targets(workdir), "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    planned = plan.stdout + plan.stderr
    assert ("runs/pm_s/seed0/final/model.safetensors" in planned
            and "runs/base_s/seed0/final" not in planned), planned[-3000:]
    run = snakemake(workdir, *targets(workdir))
    assert run.returncode == 0, run.stderr[-3000:]
    assert result(workdir, "pm_s")["config"]["train"]["lr"] == 1e-3
    assert result(workdir, "base_s") == result(reference, "base_s")  # its settings did not change: kept
    again = snakemake(workdir, *targets(workdir), "-n")
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-2000:]
