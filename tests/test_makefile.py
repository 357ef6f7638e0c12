"""`make reproduce` runs any profile on any executor (README, "Profiles"): the command line it composes, and
an executor that does not exist refused in one line before anything runs."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def dry(*args: str) -> subprocess.CompletedProcess:
    """``make -n reproduce ARGS`` as a user types it: none of the variables an outer make (make test CORES=4)
    or the shell passes down."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "CORES", "PROFILE", "EXECUTOR", "SNAKEFLAGS")}
    return subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "reproduce", *args],
                          capture_output=True, text=True, timeout=60, env=env)


def snakemake_line(run: subprocess.CompletedProcess) -> str:
    return " ".join(run.stdout.split("snakemake ", 1)[1].replace("\\\n", " ").split())


def test_reproduce_runs_the_profile_on_the_executor_asked_for():
    assert snakemake_line(dry()) == "--profile workflows/profiles/local --cores 2 --configfile config/default.yaml"
    line = snakemake_line(dry("EXECUTOR=slurm", "PROFILE=config/paper-dlcm.yaml", "SNAKEFLAGS=-n"))
    assert line == "--profile workflows/profiles/slurm --configfile config/paper-dlcm.yaml -n"  # its own job sizes
    assert "--cores 4" in snakemake_line(dry("CORES=4"))


def test_an_unknown_executor_is_one_line_before_anything_runs():
    run = dry("EXECUTOR=kubernetes")
    assert run.returncode == 2 and run.stdout == ""
    assert "EXECUTOR=kubernetes: no workflows/profiles/kubernetes/; use local, gpu or slurm" in run.stderr
