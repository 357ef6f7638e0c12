"""DLCM Table 6 as a result: the decoder cross-attention's latency, FlexAttention against concept replication,
at the rows a profile's ``kernel_benchmarks`` entry names. Writes ``results/runs/<id>/seed0/eval/kernel.json``,
which the tables read like any evaluation (``tables/specs/dlcm/table06.yaml``).

The timing is ``evals.dlcm_kernels`` (arms interleaved, order rotated every round, medians): its
``replicate`` arm is the ``flash`` column (K, V of the concepts gathered to the token positions, one causal
SDPA call, which PyTorch dispatches to its flash kernel on CPU and CUDA: the paper's FlashAttention varlen
plus concept replication, batch 1), its ``flex_compiled`` (or ``flex_eager``) arm the ``flex`` column, and
``mask`` (SDPA over the concept rows with an explicit mask) a third column of ours. Row ids are Table 6's:
``s<seq / 1024>k_h<hidden>`` (``s2k_h1024``). What makes a measurement other than the paper's (another device,
dtype or pass) is written to ``details.caveats``, which every cell of it carries.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

from common.errors import ConfigError, ReproError
from common.io import atomic_write_json
from evals.result import settings_record

KERNEL_DEFAULTS = {"heads": 32, "interval": 6, "pass": "forward", "flex": "compiled", "device": "auto",
                   "dtype": "auto", "rounds": 3, "warmup": 1, "concept_mult": 2, "seed": 0}
PAPER_SETTING = "a GPU (type not stated), dtype and forward / backward not stated, batch 1, 32 heads, interval 6"


def row_id(seq_len: int, hidden: int) -> str:
    """Table 6's row id of a size: ``s2k_h1024``; a length that is no multiple of 1024 is written out (``s640_h64``)."""
    return f"s{seq_len // 1024}k_h{hidden}" if seq_len % 1024 == 0 else f"s{seq_len}_h{hidden}"


def _device_dtype(settings: dict):
    import torch

    device = torch.device("cuda" if settings["device"] == "auto" and torch.cuda.is_available()
                          else "cpu" if settings["device"] == "auto" else settings["device"])
    name = settings["dtype"] if settings["dtype"] != "auto" else "bfloat16" if device.type == "cuda" else "float32"
    return device, getattr(torch, name), name


def caveats(settings: dict, device, dtype_name: str, flex_arm: str) -> list[str]:
    """What makes these latencies other than Table 6's."""
    out = []
    if device.type != "cuda":
        out.append(f"measured on {device.type} ({os.cpu_count()} cores visible), the paper on a GPU")
    if flex_arm == "flex_eager":
        out.append("FlexAttention unfused (eager), not compiled")
    if settings["heads"] != 32 or settings["interval"] != 6:
        out.append(f"{settings['heads']} heads, interval {settings['interval']} (the paper: 32, 6)")
    out.append(f"{settings['pass'].replace('_', ' + ')} pass, {dtype_name} (the paper states neither)")
    return out


def measure(kernel_id: str, settings: dict, threads: int) -> tuple[dict, dict]:
    """(metrics, details) of every row: ``<row>/flex_ms``, ``<row>/flash_ms``, ``<row>/mask_ms`` (medians)."""
    import torch

    from evals.dlcm_kernels import run_case

    torch.set_num_threads(threads)
    device, dtype, dtype_name = _device_dtype(settings)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ReproError(f"kernel_benchmarks.{kernel_id}.device=cuda: this machine has no CUDA; "
                         "run the job on a GPU node or set device: auto")
    flex_arm = f"flex_{settings['flex']}"
    a = SimpleNamespace(flex=[settings["flex"]], seed=settings["seed"], concept_mult=settings["concept_mult"],
                        heads=settings["heads"], rounds=settings["rounds"], warmup=settings["warmup"])
    metrics, cases, failed = {}, {}, []
    for row in settings["rows"]:
        rid = row_id(row["seq_len"], row["hidden"])
        case = run_case(a, row["seq_len"], settings["interval"], row["hidden"] // settings["heads"], device, dtype,
                        first=not cases, passes=(settings["pass"],))
        arms = case[settings["pass"]]["arms"]
        for column, arm in (("flex", flex_arm), ("flash", "replicate"), ("mask", "mask")):
            metrics[f"{rid}/{column}_ms"] = arms.get(arm, {}).get("median_ms")
            # e.g. no FlexAttention backward on CPU: the cell stays empty, and says why
            if "error" in arms.get(arm, {}):
                failed.append(f"{column} arm did not run at {rid}: {arms[arm]['error'].splitlines()[0][:160]}")
        cases[rid] = case
    details = {"cases": cases, "columns": {"flash_ms": "replicate", "flex_ms": flex_arm, "mask_ms": "mask"},
               "device": str(device), "dtype": dtype_name, "pass": settings["pass"], "threads": threads,
               "paper_setting": PAPER_SETTING, "caveats": caveats(settings, device, dtype_name, flex_arm) + failed,
               "load_avg_1min": os.getloadavg()[0]}
    return metrics, details


def evaluate_kernel(kernel_id: str, settings: dict, out_path: Path, threads: int = 1) -> dict:
    """Time ``settings`` (a resolved ``kernel_benchmarks`` entry); write and return the result."""
    t0 = time.perf_counter()
    metrics, details = measure(kernel_id, settings, threads)
    if all(value is None for value in metrics.values()):
        errors = {rid: {arm: r.get("error") for arm, r in case[settings["pass"]]["arms"].items()}
                  for rid, case in details["cases"].items()}
        raise ReproError(f"kernel_benchmarks.{kernel_id}: no arm ran ({errors}); see the log")
    record = settings_record(kernel_id, settings, out_path, metrics, details, t0)
    atomic_write_json(out_path, record)
    return record


def resolve_benchmarks(section: dict, experiments: dict, source: str = "kernel_benchmarks") -> dict[str, dict]:
    """A profile's ``kernel_benchmarks`` (``section``) by id with defaults filled in: each a result folder of
    its own, ``results/runs/<id>/seed0/eval/kernel.json``. The entry kind's resolver (``evals/registry.py``)."""
    kernels = {}
    for kernel_id, entry in section.items():
        where = f"{source}.{kernel_id}"
        settings = {**KERNEL_DEFAULTS, **entry}
        for i, row in enumerate(settings["rows"]):
            if row["hidden"] % settings["heads"]:
                raise ConfigError(f"{where}.rows[{i}].hidden: {row['hidden']} is not divisible by heads "
                                  f"{settings['heads']}; pick a multiple")
        ids = [row_id(row["seq_len"], row["hidden"]) for row in settings["rows"]]
        if len(set(ids)) < len(ids):
            raise ConfigError(f"{where}.rows: {max(ids, key=ids.count)} is listed twice; drop one")
        kernels[kernel_id] = settings
    return kernels
