"""Conditional generation of a trained run on its paired test split, scored (the DAG's ``cond`` evaluations):
the arguments and run of ``python -m workflows.cli eval-cond``.

    python -m workflows.cli eval-cond --run-dir results/runs/ncm_wmt_s/seed0 \\
        --tokenizer results/data/world/tokenizer.json \\
        --tokens results/data/world_translate/tokens --eval cond_mbr8 --settings '{"examples": 200}' \\
        --out results/runs/ncm_wmt_s/seed0/eval/cond_mbr8.json

Exit status 0 on success, 2 with a one-line error on bad input (``common.errors.entry_point``).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def arguments(p: argparse.ArgumentParser, evaluation=None) -> None:
    p.add_argument("--run-dir", required=True, help="the run folder (its final/ is evaluated)")
    p.add_argument("--tokenizer", required=True, help="the run's tokenizer.json")
    p.add_argument("--tokens", required=True, help="the run's paired token folder (its corpus/ beside it)")
    p.add_argument("--eval", default="cond", help="cond, cond_mbr<n>, cond_cfg<w> or both (cond_mbr16_cfg1.5)")
    p.add_argument("--settings", default="{}", help="JSON: the profile's conditional section")
    p.add_argument("--out", required=True, help="result JSON; the samples go beside it as <stem>.samples.jsonl")
    p.add_argument("--threads", type=int, help="torch threads")


def run(a: argparse.Namespace) -> int:
    import torch

    from evals.conditional import SETTINGS_DEFAULTS, ConditionalEvalError, evaluate_conditional
    from evals.commands import settings_object

    if a.threads:
        torch.set_num_threads(a.threads)
    settings = settings_object(a.settings, SETTINGS_DEFAULTS, "conditional", ConditionalEvalError)
    run = Path(a.run_dir)
    r = evaluate_conditional(run / "final" if (run / "final").is_dir() else run, a.tokenizer, a.tokens, a.out,
                             settings, a.eval)
    print(json.dumps(r["metrics"], indent=1))
    return 0
