"""What starts often starts light. Reading and checking a profile -- what Snakemake does each time it starts,
dry runs included -- imports neither torch nor scipy's optimiser (the model configs live in ``models.configs``,
the model classes are imported when a model is built); nor do the jobs that need no model (the data jobs, the
law's fit). ``import torch`` alone takes about a second on 2 cores."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

DATA_JOBS = """
import json, sys
from pathlib import Path
from workflows.cli import main
work = Path(sys.argv[1])
settings = work / "settings.json"
settings.write_text(json.dumps({
    "corpus": {"id": "world", "seed": 0, "source": "synthetic",
               "synthetic": {"train_docs": 40, "valid_docs": 4, "test_docs": 4}},
    "tokenizer": {"kind": "bpe", "min_frequency": 2, "vocab_size": 300}}))
for argv in (["corpus", "--settings", settings, "--out", work / "corpus"],
             ["tokenizer", "--settings", settings, "--corpus", work / "corpus", "--out", work / "tokenizer.json"],
             ["tokenize", "--settings", settings, "--corpus", work / "corpus", "--tokenizer", work / "tokenizer.json",
              "--out", work / "tokens"]):
    assert main([str(a) for a in argv]) in (None, 0), argv
print(json.dumps(sorted(m for m in ("torch", "scipy", "transformers") if m in sys.modules)))
"""

VALIDATION_IMPORTS = """
import json, sys
import evals.scaling_fit, workflows.cli
from workflows.experiments import main
assert main([sys.argv[1]]) == 0
print(json.dumps(sorted(m for m in ("torch", "transformers") if m in sys.modules)))
"""

BLOCKED = """
import importlib.abc, runpy, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "torch" or name == "scipy.optimize":
            raise ImportError(f"{name} imported while Snakemake reads the profile")
sys.meta_path.insert(0, Blocked())
sys.argv = ["snakemake", *sys.argv[1:]]
runpy.run_module("snakemake", run_name="__main__")
"""


def run(code: str, *args: str, cwd: Path = ROOT) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_data_jobs_run_without_torch(tmp_path):
    assert run(DATA_JOBS, str(tmp_path)) == []
    assert json.loads((tmp_path / "tokens" / "manifest.json").read_text())  # the jobs did their work


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["default.yaml", "paper-conceptlm-llama8b.yaml"])  # FSDP's check too
def test_checking_a_profile_imports_no_torch(profile, tmp_path):
    # make's check before Snakemake (workflows.experiments): the profile, then the tables' own files; a local
    # corpus the profile names (LongCtxEng) gets a stand-in
    from tests.workflows.test_launch import write_local_corpus_stand_ins

    write_local_corpus_stand_ins(ROOT / "config" / profile, tmp_path)
    assert run(VALIDATION_IMPORTS, str(ROOT / "config" / profile), cwd=tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["default.yaml", "paper-dlcm.yaml"])  # every family; muP and the law at scale
def test_a_snakemake_dry_run_imports_no_torch(profile, tmp_path):
    dry = subprocess.run([sys.executable, "-c", BLOCKED, "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                          "--configfile", str(ROOT / "config" / profile), "-n", "-q"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, (dry.stdout + dry.stderr)[-2000:]


def test_each_family_samples_as_its_model_class_does():
    from evals.genppl.sample import sampler_kind
    from models.registry import NON_CAUSAL, REGISTRY

    assert {arch: spec.sampler for arch, spec in {**REGISTRY, **NON_CAUSAL}.items()} == \
        {arch: sampler_kind(spec.build) for arch, spec in {**REGISTRY, **NON_CAUSAL}.items()}


def test_fsdp_shards_the_families_its_two_rank_tests_cover():
    # token LMs and ConceptLM (tests/workflows/test_launch.py: sharded runs equal one process's)
    from models.registry import NON_CAUSAL, REGISTRY

    shardable = {arch for arch, spec in {**REGISTRY, **NON_CAUSAL}.items() if spec.shardable}
    assert {arch.split("_")[0] for arch in shardable} == {"gpt2", "pythia", "llama", "conceptlm"}
