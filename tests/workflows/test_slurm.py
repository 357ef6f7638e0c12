"""The SLURM profile submits what it means: every job's sbatch command, built by the installed
snakemake-executor-plugin-slurm's own code from the resources Snakemake resolves for that job (a dry run of
the full-scale profiles under ``workflows/profiles/slurm``), asks for the GPUs, tasks, CPUs, memory and time
the rule needs. ``make floors`` runs these tests at the plugin's floor too."""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "workflows" / "profiles" / "slurm"
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
# together they plan every rule that runs on the cluster: training, data, each evaluation kind, the law
PROFILES = ("paper-dlcm.yaml", "paper-ncm-tinystories.yaml", "paper-ncm-conditional.yaml")
GPU_RULES = {"pretrain", "evaluate_tokens", "evaluate_boundaries", "evaluate_harness", "evaluate_genppl",
             "evaluate_conditional", "kernel_bench"}


def dry_run(workdir: Path, configfile: Path, profile: Path = PROFILE, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(workdir),
                           "--profile", str(profile), "--configfile", str(configfile), "-n", *extra],
                          capture_output=True, text=True, env=OFFLINE, timeout=600)


def _value(text: str):
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def planned_jobs(stdout: str) -> dict[str, dict]:
    """{rule: resources} of the first job of every non-local rule in a dry run's job listing, the resources
    as Snakemake resolved them for that job (default-resources, the rule's own, set-resources, attempt 1)."""
    jobs = {}
    for block in re.split(r"\n(?=\[[^\]]+\]\n)", stdout):
        rule = re.search(r"^rule (\w+):$", block, re.M)  # "localrule" jobs run on the login node
        resources = re.search(r"^\s+resources: (.*)$", block, re.M)
        if rule and resources and rule.group(1) not in jobs:
            jobs[rule.group(1)] = {key: _value(value) for key, value in
                                   (item.split("=", 1) for item in resources.group(1).split(", "))}
    return jobs


class _Resources(dict):
    """What the plugin reads: ``resources.get(key)`` and ``resources.key``."""

    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None


def sbatch(rule: str, resources: dict) -> str:
    """The sbatch command the installed plugin builds for a job of ``rule`` with ``resources`` (its submit
    string and its GPU string, as ``Executor.run_job`` joins them)."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = SimpleNamespace(name=rule, resources=_Resources(resources), threads=resources.get("_cores", 1),
                          is_group=lambda: False)
    params = {"run_uuid": "run", "slurm_logfile": f"logs/{rule}/%j.log", "comment_str": f"rule_{rule}",
              "account": "-A 'acct'", "partition": "-p 'part'", "workdir": "/work"}
    extra = {"settings": None} if "settings" in inspect.signature(get_submit_command).parameters else {}
    return get_submit_command(job, params, **extra) + set_gres_string(job)


def flag(call: str, name: str):
    """The value of ``name`` (``--gpus``, ``-t``, ...) in an sbatch command, None when absent."""
    match = re.search(rf"(?:^|\s){re.escape(name)}[=\s]'?([^'\s]+)'?", call)
    return _value(match.group(1)) if match else None


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, dict]:
    planned = {}
    for name in PROFILES:
        run = dry_run(tmp_path_factory.mktemp(name.split(".")[0]), ROOT / "config" / name)
        assert run.returncode == 0, run.stderr[-3000:]
        planned.update({rule: res for rule, res in planned_jobs(run.stdout).items() if rule not in planned})
    return planned


@pytest.mark.slow
def test_every_cluster_job_asks_sbatch_for_what_it_means(jobs):
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    defaults, overrides = profile["default-resources"], profile["set-resources"]
    assert GPU_RULES <= set(jobs), sorted(jobs)
    assert {"corpus", "tokenizer", "tokenize", "fit_law"} <= set(jobs), sorted(jobs)
    for rule, resources in jobs.items():
        call = sbatch(rule, resources)
        declared = {**defaults, **overrides.get(rule, {})}
        assert flag(call, "--cpus-per-task") == declared["cpus_per_task"], (rule, call)
        assert flag(call, "--mem") == declared["mem_mb"], (rule, call)
        assert flag(call, "--ntasks-per-gpu") is None, (rule, call)  # one task, never one per GPU
        if rule in GPU_RULES:
            assert flag(call, "--gpus") == resources["gpu"] >= 1, (rule, call)
            assert flag(call, "--ntasks") is None, (rule, call)  # sbatch's default: one task
        else:
            assert flag(call, "--gpus") is None and flag(call, "--ntasks") == 1, (rule, call)
    train = sbatch("pretrain", jobs["pretrain"])
    assert flag(train, "--gpus") == 8 and flag(train, "--nodes") == 1 and flag(train, "--cpus-per-task") == 64
    assert flag(train, "-t") == 4320  # minutes, the first attempt
    assert profile["set-threads"]["pretrain"] == 64  # the CLI's --threads, the CPUs it was given


def test_training_jobs_are_retried_with_more_time():
    """Snakemake evaluates a set-resources string as a Python expression of ``attempt`` (the dry run above
    shows attempt 1); a retried training job resumes from ckpt/ with a day more each time."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    assert profile["retries"] >= 1
    runtime = profile["set-resources"]["pretrain"]["runtime"]
    assert [eval(runtime, {"attempt": attempt}) for attempt in (1, 2, 3)] == [4320, 5760, 7200]


@pytest.mark.slow
@pytest.mark.parametrize("extra, message", [
    (("--set-resources", "pretrain:nodes=2"),
     "pretrain's nodes=2: training runs on one node (torchrun --standalone, one process per GPU); multi-node "
     "training is not supported"),
    (("--resources", "gpus_per_node=4"),
     "pretrain's gpu=8 but the profile declares gpus_per_node=4 (resources:): a training job runs on one node"),
])
def test_a_training_job_no_node_can_give_is_refused_before_any_job(tmp_path, extra, message):
    run = dry_run(tmp_path, ROOT / "config" / "paper-dlcm.yaml", PROFILE, *extra)
    assert run.returncode != 0
    assert message in run.stdout + run.stderr, (run.stdout + run.stderr)[-2000:]
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_the_declared_gpus_per_node_in_the_profile_itself_are_read(tmp_path):
    """``resources: gpus_per_node: N`` written in a copy of the profile, as its comment says to."""
    profile = yaml.safe_load((PROFILE / "config.yaml").read_text())
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / "config.yaml").write_text(yaml.safe_dump({**profile, "resources": {"gpus_per_node": 4}}))
    run = dry_run(tmp_path, ROOT / "config" / "paper-dlcm.yaml", tmp_path / "slurm")
    assert run.returncode != 0 and "declares gpus_per_node=4" in run.stdout + run.stderr
    (tmp_path / "slurm" / "config.yaml").write_text(yaml.safe_dump({**profile, "resources": {"gpus_per_node": 8}}))
    assert dry_run(tmp_path, ROOT / "config" / "paper-dlcm.yaml", tmp_path / "slurm").returncode == 0
