"""One prepared device check for a CUDA machine (``make gpu-check``): the code paths of a GPU run exercised,
with the figures a first GPU run needs, in one JSON.

1. Smoke mode of ``config/small.yaml`` on the GPU (``workflows/smoke.py``, device ``cuda``: the GPU
   Snakemake profile, bf16 autocast and ``torch.compile`` as the profile sets them, ``GPU_SLOTS`` jobs
   sharing the first GPU), for one experiment of every model family the profile trains (the first in
   the profile's order, with its runs upstream) and of every evaluation rule, with its evaluations, plus
   the kernel benchmark: every family's training and every evaluation kind on CUDA, not every row.
2. ``benchmarks.gpu_throughput`` (GPT-2 124M Base / PM / ConceptLM beside ``transformers``, compiled, bf16)
   with ``--steps 10 --warmup 3``.

Writes ``results/benchmarks/gpu_check.json``: the wall time of each part and of the whole; per training
run its family, tokens/s, peak CUDA memory and MFU of its last step (the trainer's log) and the job's
wall time; per evaluation its wall time; the throughput benchmark's arms. Each call measures afresh: it
starts by removing its own earlier results (``results/small-smoke-gpu/``, the JSON files). On a machine without CUDA it
stops in one line before any work. Target: the whole check within 5 minutes on one H100 / H200.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from benchmarks.common import BenchmarkError, wait_for_quiet
from common.errors import entry_point
from common.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "config" / "small.yaml"
MFU = re.compile(r"([\d.]+)% MFU")


def one_per_family(config: dict) -> dict[str, dict]:
    """The smoke profile's first experiment of each model family (``model.arch``), then the first of each
    evaluation rule no chosen one runs (conditional generation runs on a paired set's generator), resolved:
    ``{arch or rule: experiment}``."""
    from evals.registry import find
    from workflows.experiments import resolve, validate

    resolved = resolve(validate(copy.deepcopy(config), "the smoke profile"))
    rules = {exp_id: {find(e).rule for e in exp["evals"] if find(e)} for exp_id, exp in resolved.items()}
    chosen: dict[str, dict] = {}
    for exp_id, exp in resolved.items():
        chosen.setdefault(exp["model"]["arch"], {"id": exp_id, **exp})
    covered = set().union(*(rules[exp["id"]] for exp in chosen.values()))
    for exp_id, exp in resolved.items():
        for rule in sorted(rules[exp_id] - covered):
            chosen[rule] = {"id": exp_id, **exp}
            covered |= rules[exp_id]
    return chosen


def targets(config: dict) -> list[str]:
    """The result files of ``one_per_family`` and of every entry of a kind that asks for a GPU and reads no run
    (the kernel benchmarks; Snakemake makes what they need)."""
    from evals.registry import ENTRY_KINDS

    runs = f"results/{config['profile']}/runs"
    files = [f"{runs}/{exp['id']}/seed{exp['seeds'][0]}/{name}" for exp in one_per_family(config).values()
             for name in ["final/manifest.json", *(f"eval/{e}.json" for e in exp["evals"])]]
    return files + [f"{runs}/{k}/seed0/eval/{e.name}.json" for e in ENTRY_KINDS if e.kind.gpu and not e.kind.reads
                    for k in config.get(e.kind.section) or {}]


def _job_seconds(bench: Path) -> float | None:
    """The wall time Snakemake's ``benchmark:`` file recorded for a job."""
    if not bench.is_file():
        return None
    rows = list(csv.DictReader(bench.open(), delimiter="\t"))
    return float(rows[-1]["s"]) if rows else None


def run_figures(folder: Path) -> dict:
    """A training run's figures: the last logged step's tokens/s and peak CUDA memory, its MFU (log line)."""
    from trainer.metrics import read_rows

    train = [row for row in read_rows(folder / "train" / "metrics.jsonl") if row.get("split") != "valid"]
    last = train[-1] if train else {}
    log = folder / "logs" / "pretrain.log"
    mfu = MFU.findall(log.read_text()) if log.is_file() else []
    evals = {bench.name.removeprefix("eval_").removesuffix(".bench.tsv"): _job_seconds(bench)
             for bench in sorted((folder / "logs").glob("eval_*.bench.tsv"))}
    return {"tok_per_s": last.get("tok_per_s"), "peak_mem_gib": last.get("peak_mem_gib"),
            "mfu_pct": float(mfu[-1]) if mfu else None,
            "train_job_s": _job_seconds(folder / "logs" / "pretrain.bench.tsv"), "eval_job_s": evals}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cores", type=int, default=16)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "gpu_check.json")
    a = p.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        raise BenchmarkError("make gpu-check needs a CUDA GPU and torch sees none (a CPU build of torch, or no "
                             "device): run it on a GPU machine with a CUDA torch (make gpu-check TORCH_SPEC=...)")
    from workflows import smoke

    shutil.rmtree(ROOT / "results" / f"small-{smoke.SUFFIX['cuda']}", ignore_errors=True)  # each call measures
    for stale in (a.out, a.out.parent / "gpu_throughput.json"):
        stale.unlink(missing_ok=True)
    start = time.monotonic()
    summary = smoke.run(PROFILE, cores=a.cores, device="cuda", targets=targets)
    config = yaml.safe_load(Path(summary["smoke_profile"]).read_text())
    runs = ROOT / summary["results"] / "runs"
    families = {key: {"experiment": exp["id"], "arch": exp["model"]["arch"],
                      **run_figures(runs / exp["id"] / f"seed{exp['seeds'][0]}")}
                for key, exp in one_per_family(config).items()}
    result = {"benchmark": "gpu_check", "gpu": torch.cuda.get_device_name(),
              "smoke": {"wall_s": time.monotonic() - start, "problems": summary["problems"], "families": families}}
    atomic_write_json(a.out, result)  # kept if the benchmark below does not finish
    bench_out = a.out.parent / "gpu_throughput.json"
    result["quiet_wait_s"] = wait_for_quiet()  # the smoke DAG's load average must not refuse the targets
    t0 = time.monotonic()
    bench = subprocess.run([sys.executable, "-m", "benchmarks.gpu_throughput", "--steps", "10", "--warmup", "3",
                            "--out", str(bench_out)], cwd=ROOT)
    result["throughput"] = {"wall_s": time.monotonic() - t0, "exit": bench.returncode,
                            "result": json.loads(bench_out.read_text()) if bench_out.is_file() else None}
    result["wall_s"] = time.monotonic() - start
    atomic_write_json(a.out, result)
    for arch, row in families.items():
        print(f"{arch:18s} {row['tok_per_s'] or 0:10.0f} tok/s  peak {row['peak_mem_gib'] or 0:6.2f} GiB  "
              f"MFU {row['mfu_pct'] if row['mfu_pct'] is not None else '-'} %  train job {row['train_job_s']} s")
    print(f"gpu check: {result['wall_s']:.0f} s (smoke {result['smoke']['wall_s']:.0f} s) -> {a.out}")
    return 1 if summary["problems"] or bench.returncode else 0


if __name__ == "__main__":
    sys.exit(entry_point(main)())
