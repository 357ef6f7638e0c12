"""Beyond one machine: every profile resolves its whole DAG offline, the training rule launches one
process per GPU under torchrun, and the launch problems are one-line errors before any job."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from workflows.experiments import load_profile, resolve

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
# the full-scale profiles and the executor profile each is meant for (not the CPU ones: the embedded default
# and its opt-in diagnostics, which tests/workflows/test_config.py resolves)
FULL_SCALE = {path.name: "slurm" if path.name.startswith("paper-") else "gpu"
              for path in sorted((ROOT / "config").glob("*.yaml"))
              if path.name not in ("default.yaml", "diagnostics.yaml")}


def dry_run(workdir: Path, configfile: Path, profile: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--profile", str(ROOT / "workflows" / "profiles" / profile),
                                       "--configfile", str(configfile), "-n", "--quiet", "rules", *extra],
                          capture_output=True, text=True, env=OFFLINE, timeout=600)


def planned(stdout: str) -> dict[str, int]:
    """{rule: jobs} of a ``snakemake -n --quiet rules`` plan."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", stdout, re.M)}


def write_local_corpus_stand_ins(configfile: Path, root: Path) -> None:
    """A stand-in under ``root`` at each path of the profile's local corpus (LongCtxEng is not distributed)."""
    corpus = yaml.safe_load(configfile.read_text())["corpus"]
    for split in ("train", "valid", "test") if corpus["source"] == "local" else ():
        if split in corpus["local"]:
            (root / corpus["local"][split]).parent.mkdir(parents=True, exist_ok=True)
            (root / corpus["local"][split]).write_text('{"text": "a stand-in document"}\n')


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FULL_SCALE))
def test_every_full_scale_profile_resolves_its_whole_dag_offline(name, tmp_path, monkeypatch):
    """No GPU, no network: the whole DAG plans with the executor profile it is meant for, one training job
    per run; data, judges and pretrained weights load inside the jobs, never at planning time. A corpus that
    is not distributed (a local file: LongCtxEng) gets a stand-in at the profile's path."""
    configfile = ROOT / "config" / name
    write_local_corpus_stand_ins(configfile, tmp_path)
    monkeypatch.chdir(tmp_path)  # relative paths start at the working directory, as snakemake -d sets it
    run = dry_run(tmp_path, configfile, FULL_SCALE[name])
    assert run.returncode == 0, run.stderr[-3000:]
    experiments = resolve(load_profile(configfile))
    runs = sum(len(exp["seeds"]) for exp in experiments.values())
    assert planned(run.stdout)["pretrain"] == runs
    assert planned(run.stdout)["report"] == 1


def test_the_slurm_profile_asks_for_the_gpus_the_launch_uses():
    profile = yaml.safe_load((ROOT / "workflows" / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"
    assert profile["set-resources"]["pretrain"]["gpu"] == 8
    assert profile["set-threads"]["pretrain"] == profile["set-resources"]["pretrain"]["cpus_per_task"]
    import snakemake_executor_plugin_slurm  # noqa: F401  (installed with the suite)


@pytest.mark.slow
def test_a_process_count_that_cannot_split_the_batch_is_refused_before_any_job(tmp_path):
    """3 processes cannot split the embedded batch (micro-batches of 16, one per step): one line naming the
    experiment, the key and the fix, from the plan alone."""
    run = dry_run(tmp_path, ROOT / "config" / "default.yaml", "local", "--set-resources", "pretrain:gpu=3")
    assert run.returncode != 0
    assert re.search(r"experiment \w+ with pretrain's gpu=3: train.batch_size=\d+ is not a multiple of "
                     r"train.micro_batch_size=\d+ x 3 processes", run.stdout + run.stderr), run.stderr[-2000:]


@pytest.mark.slow
def test_declared_gpus_on_a_machine_without_cuda_are_refused_before_any_job(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text((ROOT / "config" / "default.yaml").read_text())
    run = subprocess.run(SNAKEMAKE + ["-d", str(tmp_path), "--profile", str(ROOT / "workflows" / "profiles" / "gpu"),
                                      "--configfile", str(config), "--cores", "1", "ncm"],
                         capture_output=True, text=True, env=OFFLINE, timeout=600)
    assert run.returncode != 0
    assert "the profile declares gpu=1 (resources:) but this machine has no CUDA device" in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()  # nothing ran


@pytest.mark.slow
def test_the_cli_launches_one_process_per_gpu_under_torchrun(tiny_data, run_cfg, tmp_path):
    """``--nproc 2`` (the rule's gpu resource) re-runs the command under torchrun, 2 gloo ranks on CPU: the
    logged losses and the final weights equal one process's with the same global batch."""
    from safetensors.torch import load_file

    from workflows.cli import main

    (tmp_path / "config.json").write_text(json.dumps(run_cfg))
    args = ["pretrain", "--config", str(tmp_path / "config.json"), "--tokens", str(tiny_data["tokens"]),
            "--tokenizer", str(tiny_data["tokenizer"]), "--threads", "2", "--run-dir"]
    two = subprocess.run([sys.executable, "-m", "workflows.cli", *args, str(tmp_path / "two"), "--nproc", "2"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert two.returncode == 0, two.stderr[-2000:]
    assert "torch.distributed.run" in two.stdout and "--nproc-per-node=2" in two.stdout
    assert main([*args, str(tmp_path / "one")]) == 0
    losses = lambda d: [r["loss"] for r in map(json.loads, (d / "train" / "metrics.jsonl").read_text().splitlines())
                        if "loss" in r]
    assert losses(tmp_path / "two") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    a, b = (load_file(tmp_path / d / "final" / "model.safetensors") for d in ("one", "two"))
    assert a.keys() == b.keys()
    for key in a:
        assert (a[key] - b[key]).abs().max() < 1e-5, key


def test_a_process_count_that_cannot_split_the_batch_is_a_one_line_cli_error(tiny_data, run_cfg, tmp_path, capsys):
    from workflows.cli import main

    (tmp_path / "config.json").write_text(json.dumps(run_cfg))
    code = main(["pretrain", "--config", str(tmp_path / "config.json"), "--tokens", str(tiny_data["tokens"]),
                 "--tokenizer", str(tiny_data["tokenizer"]), "--run-dir", str(tmp_path / "run"), "--nproc", "3"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "x 3 processes" in err
    assert not (tmp_path / "run").exists()


def _train_cli(args: list[str], nproc: int, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workflows.cli", *args, "--nproc", str(nproc)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_fsdp_shards_train_resume_and_write_the_single_process_weights(tiny_data, run_cfg, tmp_path):
    """train.parallel fsdp on 2 gloo ranks: the losses and final/model.safetensors equal one process's
    with the same global batch; a run killed after a sharded checkpoint (shards/ per rank, hashed)
    resumes to the same weights."""
    from safetensors.torch import load_file

    from trainer.train import Trainer

    run_cfg["train"]["parallel"] = "fsdp"
    (tmp_path / "config.json").write_text(json.dumps(run_cfg))
    args = ["pretrain", "--config", str(tmp_path / "config.json"), "--tokens", str(tiny_data["tokens"]),
            "--tokenizer", str(tiny_data["tokenizer"]), "--threads", "2", "--run-dir"]
    full = _train_cli([*args, str(tmp_path / "fsdp")], 2)
    assert full.returncode == 0, full.stderr[-3000:]
    cut = _train_cli([*args, str(tmp_path / "cut")], 2, {"REPRO_SIGKILL_AFTER_STEP": "8"})
    assert cut.returncode != 0
    shards = tmp_path / "cut" / "ckpt" / "step-000008"
    state = json.loads((shards / "state.json").read_text())
    assert {"rng-0.safetensors", "rng-1.safetensors"} <= set(state["sha256"])
    assert any(name.startswith("shards/") for name in state["sha256"])
    from trainer.checkpoint import CheckpointError
    with pytest.raises(CheckpointError, match="sharded across 2 processes, this run would hold it unsharded; resume "
                                              "with the pretrain rule's gpu=2"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path / "cut").run()
    resumed = _train_cli([*args, str(tmp_path / "cut")], 2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at step 8" in resumed.stdout
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "one").run()
    losses = lambda d: [r["loss"] for r in map(json.loads, (d / "train" / "metrics.jsonl").read_text().splitlines())
                        if "loss" in r]
    assert losses(tmp_path / "fsdp") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    assert losses(tmp_path / "cut") == pytest.approx(losses(tmp_path / "one"), rel=1e-5)
    one = load_file(tmp_path / "one" / "final" / "model.safetensors")
    for run in ("fsdp", "cut"):
        other = load_file(tmp_path / run / "final" / "model.safetensors")
        assert other.keys() == one.keys()
        for key in one:
            assert (other[key] - one[key]).abs().max() < 1e-5, (run, key)


@pytest.mark.slow
def test_fsdp_shards_conceptlm_to_the_single_process_result(tiny_data, run_cfg, tmp_path):
    """ConceptLM-Llama (Table 3's family: token blocks, concept blocks, the codebook's transform at the root)
    under FSDP on 2 gloo ranks: the losses (NTP + NCP + VQ) and the final weights equal one process's."""
    from safetensors.torch import load_file

    from trainer.train import Trainer

    run_cfg["model"].update(arch="conceptlm_llama", chunk_size=4, codebook_size=16, concept_layers=1)
    run_cfg["train"].update(parallel="fsdp", steps=6, loss_weights={"ntp": 1.0, "ncp": 1.0, "vq": 1.0})
    (tmp_path / "config.json").write_text(json.dumps(run_cfg))
    sharded = _train_cli(["pretrain", "--config", str(tmp_path / "config.json"), "--tokens", str(tiny_data["tokens"]),
                          "--tokenizer", str(tiny_data["tokenizer"]), "--threads", "2", "--run-dir",
                          str(tmp_path / "fsdp")], 2)
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "one").run()
    rows = lambda d: [r for r in map(json.loads, (d / "train" / "metrics.jsonl").read_text().splitlines())
                      if "loss" in r]
    one, two = rows(tmp_path / "one"), rows(tmp_path / "fsdp")
    assert [r["loss"] for r in two] == pytest.approx([r["loss"] for r in one], rel=1e-5)
    assert [r["loss/vq"] for r in two] == pytest.approx([r["loss/vq"] for r in one], rel=1e-5)
    a, b = (load_file(tmp_path / d / "final" / "model.safetensors") for d in ("one", "fsdp"))
    assert a.keys() == b.keys() and any(key.startswith("concept_blocks.") for key in a)
    for key in a:
        assert (a[key] - b[key]).abs().max() < 1e-5, key


def test_fsdp_for_a_family_that_cannot_shard_is_refused_naming_the_key(tmp_path):
    from workflows.experiments import ConfigError, validate

    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config.pop("scaling_laws")
    for arch in ("dlcm_gpt2", "contextlm_llama"):  # the parser's statistics; not tested sharded
        config["experiments"] = [{"id": "c", "overrides": {"model.arch": arch, "train.parallel": "fsdp"}}]
        with pytest.raises(ConfigError, match=f"train.parallel=fsdp: model.arch={arch} is not shardable"):
            resolve(validate(config))
    config["experiments"] = [{"id": "t", "overrides": {"model.tie_embeddings": True, "train.parallel": "fsdp"}}]
    with pytest.raises(ConfigError, match="shards untied models only; set model.tie_embeddings=false"):
        resolve(validate(config))


@pytest.mark.slow
def test_a_failing_rank_is_the_last_line_of_a_launched_job(tiny_data, run_cfg, tmp_path):
    """Under --nproc 2 a rank's one-line error (here: the run folder is locked by another trainer) ends the
    job's console, where the rule's log tail shows it; a missing input is refused before any rank starts."""
    (tmp_path / "config.json").write_text(json.dumps(run_cfg))
    args = ["pretrain", "--config", str(tmp_path / "config.json"), "--tokens", str(tiny_data["tokens"]),
            "--tokenizer", str(tiny_data["tokenizer"]), "--run-dir", str(tmp_path / "run")]
    missing = _train_cli([*args[:4], str(tmp_path / "nowhere"), *args[5:]], 2)
    assert missing.returncode == 2 and "torch.distributed.run" not in missing.stdout
    assert missing.stderr.strip().splitlines()[-1].startswith(f"error: {tmp_path / 'nowhere'}")
    (tmp_path / "run").mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('locked', flush=True); time.sleep(60)"), str(tmp_path / "run" / ".train.lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        locked = _train_cli(args, 2)
    finally:
        holder.kill()
        holder.wait()
    assert locked.returncode == 2
    last = locked.stderr.strip().splitlines()[-1]
    assert last.startswith("error: rank 0: ") and "is being trained by another process" in last
