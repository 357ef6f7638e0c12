"""When does ``train.compile`` pay on this host? Eager against the trainer's compiled blocks, per shape.

``train.compile`` compiles every transformer block in place (``trainer.train.compile_blocks``: regional
compilation with the inductor backend; embeddings, heads and the fused loss kernel stay eager). It pays
when a run's steps save more than its compilation costs: ``break_even_steps`` = compile seconds / (eager -
compiled seconds per step), None ("never") where the compiled step is not faster. Compile seconds are
measured twice per shape, each in a fresh process: ``cold`` with an empty inductor cache and ``warm`` with
the cache the cold process left (what the second and third seed of a DAG pay: inductor keeps its compiled
graphs on disk, ``TORCHINDUCTOR_CACHE_DIR``). In the warm process the two arms then alternate step by
step (``benchmarks.common``), the median of the timed steps reported. The shapes are
``benchmarks.train_throughput``'s (d128 and the embedded s), GPT-2 as the embedded profile builds it.

    python -m benchmarks.compile_threshold [--shapes s d128 --steps 20 --threads 1]

Writes ``results/benchmarks/compile_threshold.json``; the 1-minute load average and the host fingerprint
beside the figures. ``--threads 1`` by default: the embedded DAG runs every training job on one thread.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from types import SimpleNamespace

import torch

from benchmarks.common import MachineLoad, environment, interleaved_step_times, run_in_child, summarize
from benchmarks.train_throughput import SHAPES, build_arm
from common.errors import entry_point
from common.io import atomic_write_json


def build_step(shape: SimpleNamespace, compiled: bool):
    """``train_throughput``'s "ours" arm (model, AdamW, one step), its blocks compiled in place when ``compiled``."""
    from trainer.train import compile_blocks

    model, step = build_arm("ours", shape)
    if compiled:
        compile_blocks(model)
    return step


def run_shape(shape: dict, a, cache_dir: str, time_steps: bool) -> dict:
    """In a fresh process: the compiled arm's first step (compilation included) against the eager arm's,
    then, when ``time_steps``, both arms interleaved."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    s = SimpleNamespace(**shape)
    x = torch.randint(0, s.vocab, (s.batch, s.seq + 1))
    eager = build_step(s, False)
    t0 = time.perf_counter()
    eager(x)
    first_eager = time.perf_counter() - t0
    compiled = build_step(s, True)
    t0 = time.perf_counter()
    compiled(x)
    out = {"first_step_s": {"eager": first_eager, "compiled": time.perf_counter() - t0}}
    if time_steps:
        times, _ = interleaved_step_times({"eager": eager, "compiled": compiled}, x, a.steps, a.warmup)
        out["arms"] = {name: summarize(ts, s.batch * s.seq) for name, ts in times.items()}
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=["s", "d128"], choices=list(SHAPES))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="results/benchmarks/compile_threshold.json")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    load = MachineLoad()
    result = {"benchmark": "compile_threshold", "config": vars(a), "shapes": {}}
    for name in a.shapes:
        with tempfile.TemporaryDirectory() as cache:
            cold = run_in_child(run_shape, SHAPES[name], a, cache, False)
            warm = run_in_child(run_shape, SHAPES[name], a, cache, True)
        arms = warm["arms"]
        compile_s = {k: r["first_step_s"]["compiled"] - r["first_step_s"]["eager"]
                     for k, r in (("cold", cold), ("warm", warm))}
        saved = arms["eager"]["median_step_s"] - arms["compiled"]["median_step_s"]
        result["shapes"][name] = {
            "config": SHAPES[name], "arms": arms, "compile_s": compile_s,
            "compiled_over_eager_step": arms["compiled"]["median_step_s"] / arms["eager"]["median_step_s"],
            "break_even_steps": {k: (v / saved if saved > 0 else None) for k, v in compile_s.items()}}
    result["load_avg_1min"] = load.finish()
    result["environment"] = environment(a.threads, torch.device("cpu"))
    atomic_write_json(a.out, result)
    for name, r in result["shapes"].items():
        even = r["break_even_steps"]
        words = ("never (the compiled step is slower)" if even["warm"] is None else
                 f"{even['cold']:.0f} steps cold, {even['warm']:.0f} warm")
        print(f"{name:5s} eager {r['arms']['eager']['median_step_s'] * 1e3:7.1f} ms  compiled "
              f"{r['arms']['compiled']['median_step_s'] * 1e3:7.1f} ms ({r['compiled_over_eager_step']:.3f}x)  compile "
              f"{r['compile_s']['cold']:.1f} s cold, {r['compile_s']['warm']:.1f} s warm  -> pays after {words}")
    load = result["load_avg_1min"]
    print(f"{a.threads} thread(s); load average {load['before']:.1f} -> {load['after']:.1f} on {load['cores']} cores"
          + (f" ({load['why']})" if load["loaded"] else "") + f"; {result['environment']['host_line']}  -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
