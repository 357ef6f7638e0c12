"""Arms timed step by step in alternation: the one protocol of the suite's timings (the kernel evaluation and
the benchmarks)."""
from __future__ import annotations

import resource
import time
from typing import Callable

import torch


def interleaved_step_times(steps: dict[str, Callable], x: torch.Tensor, rounds: int, warmup: int,
                           minor_faults: dict[str, list[int]] | None = None
                           ) -> tuple[dict[str, list[float]], dict[str, float]]:
    """(seconds per timed step, peak CUDA MiB) for each arm; peaks are 0 on CPU. ``minor_faults``, when
    given, receives each arm's minor page faults per timed step (pages the kernel had to map and zero:
    on CPU a cost of freeing and re-allocating large tensors, which glibc returns to the system)."""
    cuda = x.device.type == "cuda"
    times = {name: [] for name in steps}
    peak = {name: 0.0 for name in steps}
    for r in range(warmup + rounds):
        for name, step in steps.items():
            if cuda:
                torch.cuda.reset_peak_memory_stats()
                torch.cuda.synchronize()
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            step(x)
            if cuda:
                torch.cuda.synchronize()
                peak[name] = max(peak[name], torch.cuda.max_memory_allocated() / 2**20)
            if r >= warmup:
                times[name].append(time.perf_counter() - t0)
                if minor_faults is not None:
                    minor_faults.setdefault(name, []).append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    return times, peak
