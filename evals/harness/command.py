"""The lm-eval evaluations' arguments and run (subcommands of ``python -m workflows.cli``): evaluate one run
on task suites and write its result JSON. ``eval-<name>`` runs the registry's suite of that name
(``evals/registry.py``); ``lm-eval`` runs any suites or tasks.

    python -m workflows.cli eval-embedded --run-dir results/runs/base_gpt2_s/seed0 \\
        --tokenizer results/data/world/tokenizer.json --task-dir results/data/world/tasks \\
        --out results/runs/base_gpt2_s/seed0/eval/embedded.json

    # the papers' real tasks that have local copies (offline cluster; the run's own tokenizer found
    # beside it); skips cleanly when the data folder is absent
    python -m workflows.cli lm-eval --run-dir ... --tasks conceptlm_zeroshot,conceptlm_ppl,dlcm_zeroshot --local-only \\
        --local-data evals/tasks/local_data.yaml --local-root DATA_DIR --skip-missing-root \\
        --out results/runs/base_gpt2_s/seed0/eval/local.json

Bad input (unknown task or suite, missing or malformed local data, a checkpoint of another model
family, a tokenizer that does not fit) is one line on stderr and exit code 2, before any evaluation.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from evals.config import EvalConfig


def _limit(text: str) -> float | int:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("--limit must be > 0 (a count, or a fraction below 1)")
    return int(value) if value >= 1 else value


def arguments(p: argparse.ArgumentParser, evaluation=None) -> None:
    """The options; for an evaluation of the registry (``eval-<name>``) ``--tasks`` defaults to its suite."""
    suite = evaluation.suite if evaluation is not None else None
    p.add_argument("--run-dir", required=True, help="run folder (its final/ checkpoint) or the final/ folder itself")
    p.add_argument("--tokenizer", help="tokenizer.json of the run's corpus (default: the one beside the run, "
                                       "<results>/data/*/tokenizer.json, that it was trained with)")
    p.add_argument("--tasks", required=suite is None, default=suite,
                   help="comma-separated suites (evals/tasks/suites.yaml) and/or lm-eval tasks"
                        + (f" (default: {suite})" if suite else ""))
    p.add_argument("--out", required=True, help="result JSON; its stem is the eval name (e.g. eval/embedded.json)")
    p.add_argument("--task-dir", action="append", default=[],
                   help="folder of task YAMLs (repeatable), e.g. embedded tasks")
    p.add_argument("--limit", type=_limit, help="documents per task (testing only; recorded in the result)")
    p.add_argument("--batch-size", type=int, default=EvalConfig.batch_size, help="lm-eval's batch (the profile's "
                   f"eval.batch_size; default {EvalConfig.batch_size})")
    p.add_argument("--num-fewshot", type=int, help="override every task's n-shot")
    p.add_argument("--local-data", help="local-data config (evals/tasks/local_data.yaml format)")
    p.add_argument("--local-root", help="override the config's root folder")
    p.add_argument("--local-only", action="store_true",
                   help="only the tasks with a local copy in --local-data; the others are listed as unavailable")
    p.add_argument("--skip-missing-root", action="store_true",
                   help="exit 0 without writing anything when the local data root does not exist")
    p.add_argument("--cache-dir", help="lm-eval request cache folder (the file name carries the checkpoint sha256)")
    p.add_argument("--samples", help="per-sample log (default: <out stem>.samples.jsonl.gz beside --out, "
                   "gzip-compressed; a name without .gz: plain JSON lines)")
    p.add_argument("--expect-arch", help="refuse a checkpoint of another model family (e.g. gpt2)")
    p.add_argument("--rolling-context", type=int, default=1,
                   help="context_len of rolling windows (1 = lm-eval's hf backend)")
    p.add_argument("--bootstrap-iters", type=int, default=1000)
    p.add_argument("--device", default="auto", help="cuda, cpu, ... (default: the GPU when there is one)")
    p.add_argument("--threads", type=int, help="torch threads")
    p.add_argument("--offline", action="store_true", help="set HF_HUB_OFFLINE/HF_DATASETS_OFFLINE (automatic for "
                                                          "embedded and local suites)")


def run(a: argparse.Namespace) -> int:
    if a.local_data and a.skip_missing_root:
        import yaml
        root = a.local_root or (yaml.safe_load(Path(a.local_data).read_text()) or {}).get("root", ".")
        if not Path(root).is_dir():
            print(f"skipped: local data root {root} not found")
            return 0
    from evals.harness.checkpoints import run_tokenizer
    from evals.harness.run import execute, plan

    final = Path(a.run_dir) / "final" if (Path(a.run_dir) / "final").is_dir() else Path(a.run_dir)
    tokenizer = a.tokenizer or run_tokenizer(final)
    p = plan(a.run_dir, tokenizer, a.tasks, a.out, task_dirs=a.task_dir, num_fewshot=a.num_fewshot,
             local_data=a.local_data, local_root=a.local_root, local_only=a.local_only, samples_path=a.samples,
             offline=True if a.offline else None, limit=a.limit, batch_size=a.batch_size, cache_dir=a.cache_dir,
             expect_arch=a.expect_arch, rolling_context_len=a.rolling_context, bootstrap_iters=a.bootstrap_iters,
             device=a.device)
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    r = execute(p)
    table = r["details"]["table_metrics"]
    shown = {k: r["metrics"][k] for k in table} or {k: v for k, v in r["metrics"].items() if not k.endswith("_stderr")}
    print(f"{r['experiment']} seed {r['seed']} -> {a.out}: " +
          ", ".join(f"{k} {v:.4g}" if v is not None else f"{k} n/a" for k, v in shown.items()))
    return 0
