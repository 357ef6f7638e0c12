"""Evaluate one trained checkpoint on task suites with the unforked lm-evaluation-harness.

Order of work (every bad input is a one-line ``HarnessError`` before the first request is scored):

1. resolve suites and task names (``evals/tasks/suites.yaml``);
2. validate and convert local data (``--local-data``), write its task YAMLs;
3. set ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` for offline suites (embedded, local) or ``offline=True``;
4. load the checkpoint (sha256, registered family, expected family, tokenizer vocabulary);
5. index the task folders (lm-eval's ~15k built-in tasks only when a name is not found there),
   reject unknown names, load every task's data;
6. ``lm_eval.simple_evaluate`` once per n-shot with ``log_samples=True``;
7. write the result JSON (``config/schemas/result.schema.json``) and the per-sample log beside it.

Result keys are ``<task>/<metric>`` for every metric lm-eval reports (``<metric>:<filter>`` for
filters other than ``none``; ``<task>/<metric>_stderr`` for standard errors; 'N/A' becomes null),
plus the table keys of the suites (``lambada_openai/ppl`` = lambada_openai's ``perplexity``).
``details`` records the lm-eval and adapter versions, each task's version, n-shot, sample counts,
data source and the metric the tables use (and why), the limit, the seeds, bootstrap iterations,
adapter statistics (truncated contexts, ...) and the sample log's sha256.
"""
from __future__ import annotations

import difflib
import importlib.metadata
import json
import math
import os
import time
from pathlib import Path

from common.io import atomic_write_bytes, atomic_write_json, atomic_write_text, sha256_file
from evals.harness.errors import HarnessError
from evals.harness.suites import Plan, resolve, split_names
from evals.result import result_record

LMEVAL_SEEDS = {"random_seed": 0, "numpy_random_seed": 1234, "torch_random_seed": 1234, "fewshot_random_seed": 1234}
_NOT_METRICS = {"alias", "name", "sample_len", "samples", " ", ""}


def configure_offline() -> None:
    """No network for the hub and datasets, also when those libraries are already imported."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    import sys
    if "datasets" in sys.modules:
        sys.modules["datasets"].config.HF_DATASETS_OFFLINE = True
    if "huggingface_hub" in sys.modules:
        try:
            sys.modules["huggingface_hub"].constants.HF_HUB_OFFLINE = True
        except AttributeError:
            pass


def cache_prefix(cache_dir: Path, lm) -> str:
    """lm-eval's request cache keys on the request only: the path carries everything else that matters."""
    from evals.harness.adapter import ADAPTER_VERSION

    info = lm.info
    name = (f"{info.get('checkpoint_sha256', 'nockpt')[:16]}_tok{str(info.get('tokenizer_sha256', ''))[-12:]}"
            f"_a{ADAPTER_VERSION}_bs{lm.batch_size}_L{lm.max_length}_c{lm.rolling_context_len}")
    return str(Path(cache_dir) / name)


def metric_key(task: str, name: str) -> str | None:
    """``acc,none`` -> ``task/acc``; ``acc_stderr,none`` -> ``task/acc_stderr``; others -> None."""
    if "," not in name:
        return None
    metric, filt = name.split(",", 1)
    return f"{task}/{metric}" if filt == "none" else f"{task}/{metric}:{filt}"


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _load_tasks(tm, names: list[str]) -> dict:
    """Built Task/Group objects by name (data loaded now, so a missing dataset fails before evaluation)."""
    objects = {}
    for name in names:
        try:
            loaded = tm.load([name])
        except Exception as e:  # lm-eval / datasets raise many types; report one line
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            hint = (" (offline: give the task a local copy with --local-data, or populate the HF cache)"
                    if os.environ.get("HF_DATASETS_OFFLINE") == "1" else "")
            raise HarnessError(f"task {name}: could not be loaded: {e.__class__.__name__}: {first[:300]}{hint}") from e
        objects[name] = loaded["groups"].get(name) or loaded["tasks"].get(name) or name
    return objects


def evaluate(run_dir: str | Path, tokenizer: str | Path, tasks: str | list[str], out: str | Path, *,
             task_dirs: list[str | Path] = (), limit: float | None = None, batch_size: int = 16,
             num_fewshot: int | None = None, local_data: str | Path | None = None,
             local_root: str | Path | None = None, local_dir: str | Path | None = None,
             cache_dir: str | Path | None = None, samples_path: str | Path | None = None,
             expect_arch: str | None = None, rolling_context_len: int = 1, bootstrap_iters: int = 1000,
             device: str = "auto", offline: bool | None = None, suites: dict | None = None) -> dict:
    """Evaluate the run in ``run_dir`` (its ``final/`` checkpoint) and write the result JSON ``out``."""
    t0 = time.perf_counter()
    out = Path(out)
    run_dir = Path(run_dir)
    final_dir = run_dir / "final" if (run_dir / "final").is_dir() else run_dir
    plan: Plan = resolve(split_names(tasks), suites, num_fewshot)
    task_dirs = [Path(d).resolve() for d in task_dirs]
    for d in task_dirs:
        if not d.is_dir():
            raise HarnessError(f"{d}: task folder not found (--task-dir)")

    local_manifest = {}
    if local_data is not None:
        from evals.tasks.local_data import prepare_local_tasks, read_config

        config = read_config(local_data, local_root)
        local_dir = Path(local_dir) if local_dir else out.parent / f".{out.stem}_local_tasks"
        local_manifest = prepare_local_tasks(config, local_dir, [t for t in plan.tasks if t in config])
        task_dirs.append(Path(local_dir).resolve())

    if offline or (offline is None and plan.offline):
        configure_offline()
    os.environ.setdefault("DISABLE_MULTIPROC", "1")  # lm-eval's bootstrap: serial, no process pool

    from evals.harness.adapter import ReproLM

    lm = ReproLM.from_run(final_dir, tokenizer, expect_arch=expect_arch, batch_size=batch_size,
                          rolling_context_len=rolling_context_len, device=device)

    import lm_eval
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=[str(d) for d in task_dirs] or None, include_defaults=False)
    missing = [t for t in plan.tasks if t not in tm.all_tasks]
    if missing:
        tm = TaskManager(include_path=[str(d) for d in task_dirs] or None, include_defaults=True)
        unknown = [t for t in missing if t not in tm.all_tasks]
        if unknown:
            close = difflib.get_close_matches(unknown[0], tm.all_tasks, n=3)
            from evals.harness.suites import load_suites
            raise HarnessError(f"unknown task {unknown[0]!r}: not a suite ({', '.join(sorted(load_suites()))}), "
                               f"not in --task-dir, not an lm-eval task" + (f"; did you mean {close}?" if close else ""))
    objects = _load_tasks(tm, list(plan.tasks))

    cache = cache_prefix(Path(cache_dir), lm) if cache_dir else None
    merged = {"results": {}, "versions": {}, "n-shot": {}, "n-samples": {}, "configs": {}, "samples": {},
              "higher_is_better": {}}
    for shots, names in plan.by_fewshot().items():
        res = lm_eval.simple_evaluate(model=lm, tasks=[objects[n] for n in names], task_manager=tm,
                                      num_fewshot=shots, limit=limit, bootstrap_iters=bootstrap_iters,
                                      log_samples=True, use_cache=cache, **LMEVAL_SEEDS)
        for part in merged:
            merged[part].update(res.get(part) or {})
        merged["results"].update(res.get("groups") or {})
        for task in res.get("results", {}):
            merged["n-shot"].setdefault(task, shots)

    metrics = {}
    for task, values in merged["results"].items():
        for name, value in values.items():
            key = metric_key(task, name) if name not in _NOT_METRICS else None
            if key:
                metrics[key] = _number(value)
    table = {}
    for tm_ in plan.table_metrics:
        raw = metric_key(tm_.task, tm_.metric if "," in tm_.metric else f"{tm_.metric},none")
        if raw not in metrics:
            raise HarnessError(f"task {tm_.task}: lm-eval reported no metric {tm_.metric!r} (got "
                               f"{sorted(k.split('/', 1)[1] for k in metrics if k.startswith(tm_.task + '/'))}); "
                               "fix evals/tasks/suites.yaml")
        metrics[tm_.key] = metrics[raw]
        table[tm_.key] = {"task": tm_.task, "metric": tm_.metric, "lm_eval_key": raw, "basis": tm_.basis,
                          "note": tm_.note, "suite": tm_.suite}

    samples_path = Path(samples_path) if samples_path else out.with_name(f"{out.stem}.samples.jsonl")
    n_samples = _write_samples(samples_path, merged["samples"], merged["n-shot"])

    task_details = {}
    for task in merged["results"]:
        cfg = merged["configs"].get(task, {})
        task_details[task] = {
            "version": merged["versions"].get(task), "n_shot": merged["n-shot"].get(task),
            "n_samples": merged["n-samples"].get(task), "output_type": cfg.get("output_type"),
            "dataset_path": cfg.get("dataset_path"), "dataset_name": cfg.get("dataset_name"),
            "data_files": (cfg.get("dataset_kwargs") or {}).get("data_files"),
            "local_data": (cfg.get("metadata") or {}).get("local_data"),
            "higher_is_better": merged["higher_is_better"].get(task)}
    manifest = lm.info["manifest"]
    details = {
        "harness": {"lm_eval": importlib.metadata.version("lm_eval"), "paper_harness": {
            "conceptlm": "v0.4.4 per the paper; 0.4.9.2 bundled with its code"}, "model_info": lm.get_model_info(),
            "adapter_stats": dict(lm.stats)},
        "suites": plan.suites, "requested": split_names(tasks), "tasks": task_details, "table_metrics": table,
        "external_metrics": plan.external, "limit": limit, "num_fewshot_override": num_fewshot,
        "batch_size": batch_size, "seeds": LMEVAL_SEEDS, "bootstrap_iters": bootstrap_iters,
        "offline": os.environ.get("HF_DATASETS_OFFLINE") == "1", "request_cache": cache,
        "task_dirs": [str(d) for d in task_dirs], "local_data": local_manifest or None,
        "samples": {"file": samples_path.name, "n": n_samples, "sha256": sha256_file(samples_path)}}
    result = result_record(manifest, out, metrics, details, t0)
    atomic_write_json(out, json.loads(json.dumps(result, default=str)))
    return result


def _write_samples(path: Path, samples: dict, n_shot: dict) -> int:
    """One JSON line per (task, document): the requests' arguments, responses and per-sample metrics
    (gzip-compressed when the path ends in .gz)."""
    from lm_eval.utils import handle_non_serializable

    lines = []
    for task in sorted(samples):
        for s in samples[task]:
            lines.append(json.dumps({"task": task, "n_shot": n_shot.get(task), **s}, default=handle_non_serializable,
                                    sort_keys=True))
    text = "\n".join(lines) + ("\n" if lines else "")
    if path.suffix == ".gz":
        import gzip

        atomic_write_bytes(path, gzip.compress(text.encode("utf-8"), mtime=0))
    else:
        atomic_write_text(path, text)
    return len(lines)
