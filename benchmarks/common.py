"""What every benchmark here shares: interleaved timing (``evals.timing``), per-arm peak memory, summaries, the
machine's load and the host.

Protocol: the arms run the same batch and alternate step by step (ABAB...), so machine noise hits
all alike; the first ``warmup`` rounds are discarded; the median and inter-quartile range of the
rest are reported. Peak memory: ``max_memory_allocated`` per arm on CUDA; on CPU, the peak RSS
(VmHWM) of a fresh child process that builds the arm alone and runs a few steps.

Load: ``MachineLoad`` reads the 1-minute load average before and after. A benchmark's own threads
add at most its thread count (<= the cores), so a load above the cores at either end means other
work competed for them: the run says so, and ``judge_target`` then reports no target as met, whatever
the ratio. Host: ``environment`` carries ``common.provenance.host_fingerprint`` (CPU model, vendor,
widest vector extension, the ISA torch dispatches to, cores, torch / oneDNN / BLAS builds, pins), so
a figure names the machine that produced it.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import time
from typing import Callable

import torch

from common.errors import ReproError
from common.provenance import git_state, host_fingerprint, host_summary, library_versions
from evals.timing import interleaved_step_times  # noqa: F401 (the benchmarks' timing, re-exported)


class BenchmarkError(ReproError, ValueError):
    """A benchmark's arguments do not fit (a run of another kind, a device this machine lacks)."""


def summarize(times: list[float], tokens_per_step: int) -> dict:
    q1, med, q3 = statistics.quantiles(times, n=4)
    return {"median_step_s": med, "iqr_step_s": [q1, q3], "tokens_per_s": tokens_per_step / med}


def _child(build: Callable, name: str, args, queue) -> None:
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    step = build(name, args)[1]
    x = torch.randint(0, args.vocab, (args.batch, args.seq + 1))
    for _ in range(2):
        step(x)
    # VmHWM belongs to this exec'd image; ru_maxrss would inherit the parent's peak across fork+exec
    queue.put(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024)


def _call(fn: Callable, args: tuple, queue) -> None:
    try:
        queue.put((True, fn(*args)))
    except BaseException as e:  # noqa: BLE001 - re-raised in the parent
        queue.put((False, repr(e)))
        raise


def run_in_child(fn: Callable, *args):
    """``fn(*args)`` in a fresh spawned process (its own heap and allocator state, so one measurement
    does not inherit another's); ``fn`` must be module-level and its result picklable."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_call, args=(fn, args, queue))
    proc.start()
    ok, value = queue.get()
    proc.join()
    if not ok:
        raise RuntimeError(f"{fn.__name__} failed in its child process: {value}")
    return value


def peak_rss_mib(build: Callable, name: str, args) -> float:
    """Peak RSS of a child that runs ``build(name, args) -> (model, step)`` for two steps on CPU.
    ``build`` must be a module-level function (it is pickled by reference)."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(build, name, args, queue))
    proc.start()
    value = queue.get()
    proc.join()
    return value


def _loaded(load: float) -> bool:
    """A 1-minute load above the cores: other work than the benchmark's own threads competed for them."""
    return load > (os.cpu_count() or 1)


class MachineLoad:
    """The 1-minute load average around a benchmark (``before`` at construction, ``after`` at ``finish``)."""

    def __init__(self):
        self.before, self.cores = os.getloadavg()[0], os.cpu_count() or 1

    def finish(self) -> dict:
        """``{"before", "after", "cores", "loaded", "why"}``; ``loaded`` when either end exceeds the cores."""
        after = os.getloadavg()[0]
        loaded = _loaded(self.before) or _loaded(after)
        why = (f"machine loaded: 1-minute load {self.before:.1f} before, {after:.1f} after, above its {self.cores} "
               "cores (other work competed for them); re-run on a quiet machine" if loaded else None)
        return {"before": self.before, "after": after, "cores": self.cores, "loaded": loaded, "why": why}


def wait_for_quiet(max_s: float = 120.0, poll_s: float = 5.0) -> float:
    """Seconds waited (at most ``max_s``) until the 1-minute load is no longer above the cores: a benchmark
    started right after other work (``make gpu-check``'s smoke DAG) would otherwise be judged loaded by the
    average that work left behind."""
    start = time.monotonic()
    while _loaded(os.getloadavg()[0]) and time.monotonic() - start < max_s:
        time.sleep(poll_s)
    return time.monotonic() - start


def judge_target(met: bool, load: dict) -> dict:
    """``{"met", "measured_met", "refused"}``: a target is met only when the ratio meets it on an unloaded machine."""
    return {"met": bool(met) and not load["loaded"], "measured_met": bool(met), "refused": load["why"]}


def target_words(target: dict) -> str:
    """``met`` / ``NOT met`` / ``not judged (machine loaded ...)`` for a benchmark's printed summary."""
    if target.get("refused"):
        return f"not judged ({target['refused']})"
    return "met" if target["met"] else "NOT met"


def environment(threads: int, device: torch.device) -> dict:
    """Code version, library versions and the host fingerprint (``host``; ``host_line`` in words)."""
    commit, dirty = git_state()
    host = host_fingerprint()
    return {"git_commit": commit, "git_dirty": dirty, "versions": library_versions(),
            "cpu": host["cpu"], "host": host, "host_line": host_summary(host), "threads": threads,
            "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None}
