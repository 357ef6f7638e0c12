"""Evaluate one trained checkpoint on task suites with the unforked lm-evaluation-harness.

Four steps (every bad input is a one-line ``HarnessError`` before the first request is scored):

1. ``plan``: resolve suites and task names (``evals/tasks/suites.yaml``), check the task folders, the
   checkpoint's manifest and the local-data config (``--local-data``); nothing heavy is imported;
2. ``load``: validate and convert local data, write its task YAMLs; set ``HF_HUB_OFFLINE`` /
   ``HF_DATASETS_OFFLINE`` for offline suites (embedded, local) or ``offline=True``; load the checkpoint
   (sha256, registered family, expected family, tokenizer vocabulary); index the task folders (lm-eval's
   ~15k built-in tasks only when a name is not found there), reject unknown names, load every task's data;
3. ``run``: ``lm_eval.simple_evaluate`` once per n-shot with ``log_samples=True``;
4. ``record``: write the result JSON (``config/schemas/result.schema.json``) and the per-sample log beside it.

``evaluate`` (``plan`` then ``execute``: load, run, record) does all four.

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
from dataclasses import dataclass
from pathlib import Path

from common.io import atomic_write_bytes, atomic_write_json, atomic_write_text, sha256_file
from evals.harness.errors import HarnessError
from evals.harness.suites import TaskPlan, resolve, split_names
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


@dataclass(frozen=True)
class EvalPlan:
    """What one evaluation runs, checked before anything heavy is loaded (``plan``)."""
    final_dir: Path                   # the checkpoint (its manifest read)
    tokenizer: Path
    out: Path                         # the result JSON; its stem is the eval name
    samples: Path                     # the per-sample log (``.gz``: compressed)
    requested: list[str]              # the names given (suites and tasks)
    tasks: TaskPlan                   # the suites resolved: task -> n-shot, the table metrics
    task_dirs: list[Path]             # folders of task YAMLs
    local: dict | None = None         # local-data config (``evals.tasks.local_data.read_config``)
    local_dir: Path | None = None     # where ``load`` writes the local tasks' YAMLs
    offline: bool = True              # no network for the hub and datasets
    limit: float | int | None = None
    num_fewshot: int | None = None
    batch_size: int = 16
    cache_dir: Path | None = None
    expect_arch: str | None = None
    rolling_context_len: int = 1
    bootstrap_iters: int = 1000
    device: str = "auto"


def plan(run_dir: str | Path, tokenizer: str | Path, tasks: str | list[str], out: str | Path, *,
         task_dirs: list[str | Path] = (), num_fewshot: int | None = None, local_data: str | Path | None = None,
         local_root: str | Path | None = None, local_dir: str | Path | None = None,
         samples_path: str | Path | None = None, offline: bool | None = None, suites: dict | None = None,
         local_only: bool = False, **options) -> EvalPlan:
    """The plan of evaluating the run in ``run_dir`` (its ``final/`` checkpoint) on ``tasks`` into ``out``:
    suites resolved, task folders, checkpoint manifest and local-data config checked (one-line
    ``HarnessError``s), nothing loaded. ``local_only``: only the tasks with a local copy (the others listed
    in the result as unavailable). Offline when asked, when every suite is, or when every task reads
    local files (a local copy or a task folder). ``options``: the other fields of ``EvalPlan``."""
    from evals.harness.checkpoints import read_final_manifest

    out, run_dir = Path(out), Path(run_dir)
    final_dir = run_dir / "final" if (run_dir / "final").is_dir() else run_dir
    requested = split_names(tasks)
    resolved = resolve(requested, suites, num_fewshot)
    dirs = [Path(d).resolve() for d in task_dirs]
    for d in dirs:
        if not d.is_dir():
            raise HarnessError(f"{d}: task folder not found (--task-dir)")
    read_final_manifest(final_dir)
    local = None
    if local_data is not None:
        from evals.tasks.local_data import read_config

        local = read_config(local_data, local_root)
        local_dir = Path(local_dir) if local_dir else out.parent / f".{out.stem}_local_tasks"
    if local_only:
        if local is None:
            raise HarnessError("--local-only needs --local-data (a local-data manifest)")
        resolved = resolved.only(local)
    on_disk = set(local or ()) | {path.stem for d in dirs for path in d.glob("*.yaml")}
    if offline is None:
        offline = resolved.offline or set(resolved.tasks) <= on_disk
    return EvalPlan(final_dir, Path(tokenizer), out,
                    Path(samples_path) if samples_path else out.with_name(f"{out.stem}.samples.jsonl.gz"), requested,
                    resolved, dirs, local, local_dir, bool(offline), num_fewshot=num_fewshot, **options)


@dataclass
class Loaded:
    """What ``load`` built for a plan: the model, the task manager and the tasks with their data."""
    lm: object                        # evals.harness.adapter.ReproLM
    tm: object                        # lm_eval.tasks.TaskManager
    objects: dict                     # task name -> built lm-eval Task / Group
    task_dirs: list[Path]             # the plan's, and the local tasks' folder
    local_manifest: dict
    cache: str | None                 # lm-eval's request cache prefix


def load(p: EvalPlan) -> Loaded:
    """Local data validated and converted, then the checkpoint (sha256, family, tokenizer), then every
    task and its data: each refusal a one-line ``HarnessError`` before the first request is scored."""
    task_dirs, local_manifest = list(p.task_dirs), {}
    if p.local is not None:
        from evals.tasks.local_data import prepare_local_tasks

        local_manifest = prepare_local_tasks(p.local, p.local_dir, [t for t in p.tasks.tasks if t in p.local])
        task_dirs.append(Path(p.local_dir).resolve())
    if p.offline:
        configure_offline()
    os.environ.setdefault("DISABLE_MULTIPROC", "1")  # lm-eval's bootstrap: serial, no process pool

    from evals.harness.adapter import ReproLM

    lm = ReproLM.from_run(p.final_dir, p.tokenizer, expect_arch=p.expect_arch, batch_size=p.batch_size,
                          rolling_context_len=p.rolling_context_len, device=p.device)
    tm = _task_manager(task_dirs, list(p.tasks.tasks))
    return Loaded(lm, tm, _load_tasks(tm, list(p.tasks.tasks)), task_dirs, local_manifest,
                  cache_prefix(Path(p.cache_dir), lm) if p.cache_dir else None)


def _task_manager(task_dirs: list[Path], names: list[str]):
    """lm-eval's TaskManager over ``task_dirs`` (its ~15k built-in tasks indexed only when a name is not
    found there); an unknown name is refused with the nearest ones."""
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=[str(d) for d in task_dirs] or None, include_defaults=False)
    missing = [t for t in names if t not in tm.all_tasks]
    if missing:
        tm = TaskManager(include_path=[str(d) for d in task_dirs] or None, include_defaults=True)
        unknown = [t for t in missing if t not in tm.all_tasks]
        if unknown:
            close = difflib.get_close_matches(unknown[0], tm.all_tasks, n=3)
            from evals.harness.suites import load_suites
            raise HarnessError(f"unknown task {unknown[0]!r}: not a suite ({', '.join(sorted(load_suites()))}), "
                               f"not in --task-dir, not an lm-eval task"
                               + (f"; did you mean {close}?" if close else ""))
    return tm


def run(p: EvalPlan, loaded: Loaded) -> dict:
    """``lm_eval.simple_evaluate`` once per n-shot, with every sample logged; lm-eval's outputs merged."""
    import lm_eval

    merged = {"results": {}, "versions": {}, "n-shot": {}, "n-samples": {}, "configs": {}, "samples": {},
              "higher_is_better": {}}
    for shots, names in p.tasks.by_fewshot().items():
        res = lm_eval.simple_evaluate(model=loaded.lm, tasks=[loaded.objects[n] for n in names],
                                      task_manager=loaded.tm, num_fewshot=shots, limit=p.limit,
                                      bootstrap_iters=p.bootstrap_iters, log_samples=True, use_cache=loaded.cache,
                                      **LMEVAL_SEEDS)
        for part in merged:
            merged[part].update(res.get(part) or {})
        merged["results"].update(res.get("groups") or {})
        for task in res.get("results", {}):
            merged["n-shot"].setdefault(task, shots)
    return merged


def record(p: EvalPlan, loaded: Loaded, merged: dict, started: float) -> dict:
    """The result JSON (``config/schemas/result.schema.json``) and the sample log, written; the result."""
    metrics, table = _metrics(merged["results"], p.tasks.table_metrics)
    n_samples = _write_samples(p.samples, merged["samples"], merged["n-shot"])
    lm = loaded.lm
    details = {
        "harness": {"lm_eval": importlib.metadata.version("lm_eval"), "paper_harness": {
            "conceptlm": "v0.4.4 per the paper; 0.4.9.2 bundled with its code"}, "model_info": lm.get_model_info(),
            "adapter_stats": dict(lm.stats)},
        "suites": p.tasks.suites, "requested": p.requested, "tasks": _task_details(merged),
        "table_metrics": table, "external_metrics": p.tasks.external, "limit": p.limit,
        "num_fewshot_override": p.num_fewshot, "batch_size": p.batch_size, "seeds": LMEVAL_SEEDS,
        "bootstrap_iters": p.bootstrap_iters, "offline": os.environ.get("HF_DATASETS_OFFLINE") == "1",
        "request_cache": loaded.cache, "task_dirs": [str(d) for d in loaded.task_dirs],
        "local_data": loaded.local_manifest or None, "unavailable_tasks": p.tasks.unavailable,
        "samples": {"file": p.samples.name, "n": n_samples, "sha256": sha256_file(p.samples)}}
    result = result_record(lm.info["manifest"], p.out, metrics, details, started)
    atomic_write_json(p.out, json.loads(json.dumps(result, default=str)))
    return result


def execute(p: EvalPlan) -> dict:
    """load -> run -> record: evaluate a plan and write its result JSON."""
    started = time.perf_counter()
    loaded = load(p)
    return record(p, loaded, run(p, loaded), started)


def evaluate(run_dir: str | Path, tokenizer: str | Path, tasks: str | list[str], out: str | Path, **kwargs) -> dict:
    """Evaluate the run in ``run_dir`` and write the result JSON ``out`` (``plan``'s arguments)."""
    return execute(plan(run_dir, tokenizer, tasks, out, **kwargs))


def _metrics(results: dict, table_metrics: list) -> tuple[dict, dict]:
    """(``<task>/<metric>`` -> value for every metric lm-eval reported, plus the suites' table keys; the
    table keys' provenance)."""
    metrics = {}
    for task, values in results.items():
        for name, value in values.items():
            key = metric_key(task, name) if name not in _NOT_METRICS else None
            if key:
                metrics[key] = _number(value)
    table = {}
    for tm_ in table_metrics:
        raw = metric_key(tm_.task, tm_.metric if "," in tm_.metric else f"{tm_.metric},none")
        if raw not in metrics:
            raise HarnessError(f"task {tm_.task}: lm-eval reported no metric {tm_.metric!r} (got "
                               f"{sorted(k.split('/', 1)[1] for k in metrics if k.startswith(tm_.task + '/'))}); "
                               "fix evals/tasks/suites.yaml")
        metrics[tm_.key] = metrics[raw]
        table[tm_.key] = {"task": tm_.task, "metric": tm_.metric, "lm_eval_key": raw, "basis": tm_.basis,
                          "note": tm_.note, "suite": tm_.suite}
    return metrics, table


def _task_details(merged: dict) -> dict:
    """Per task: version, n-shot, sample counts, output type, data source, direction of its metrics."""
    details = {}
    for task in merged["results"]:
        cfg = merged["configs"].get(task, {})
        details[task] = {
            "version": merged["versions"].get(task), "n_shot": merged["n-shot"].get(task),
            "n_samples": merged["n-samples"].get(task), "output_type": cfg.get("output_type"),
            "dataset_path": cfg.get("dataset_path"), "dataset_name": cfg.get("dataset_name"),
            "data_files": (cfg.get("dataset_kwargs") or {}).get("data_files"),
            "local_data": (cfg.get("metadata") or {}).get("local_data"),
            "higher_is_better": merged["higher_is_better"].get(task)}
    return details


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
