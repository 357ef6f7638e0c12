"""DLCM's decoder cross-attention from tokens to concepts: replication, explicit mask and FlexAttention, one run.

DLCM (arXiv 2512.24617v2, §3.5, Table 6) runs its decoder cross-attention as concept replication: K, V
of the concepts are copied to the token positions and one causal FlashAttention varlen call attends
over them; the paper reports it 1.26-1.73x faster than FlexAttention (batch 1, 32 heads, hidden
1024/2048/4096, seq 2K-16K, "interval 6"; GPU, dtype and forward vs backward not stated). The arms
(``evals.dlcm_kernels``, shared with the kernel evaluation) compute the same attention:
``replicate`` (the model's concept replication, one causal SDPA), ``mask`` (the reference: SDPA over the
null + M concept rows with the replication counts as a bias) and ``flex_eager`` / ``flex_compiled``
(FlexAttention with a block mask built inside the step, as DLCM's boundaries change every batch).

Every arm includes the module's Q, K/V and output projections (a cost all arms share, which dilutes the
ratios of the attention cores). Boundaries are fixed intervals b_t = [t % R == 0] (``--intervals``; the
paper's "interval 6"), M = ceil(T / R) concepts, d_concept = ``--concept-mult`` x hidden (DLCM's default
2). Two passes: forward (no grad) and forward + backward (a fixed cotangent; grads of x, z, weights).
Protocol (``benchmarks.common``): per size and pass, ``--warmup`` untimed rounds, then ``--rounds``
rounds in which every arm runs once, the order rotated each round; median and IQR in ms, and the ratios
of the medians replicate / mask and flex / replicate (the paper's speed-up is the latter). Agreement,
on the first size: max abs difference of each arm's output and input grads from replicate's.

    python -m benchmarks.dlcm_attention [--seq-lens 1024 2048 4096 8192 --intervals 2 4 8 --heads 4 --head-dim 64]
    python -m benchmarks.dlcm_attention --paper   # Table 6's grid for a GPU: 32 heads, hidden 1024/2048/4096,
                                                  # interval 6, seq 2K-16K, bf16

Writes ``results/benchmarks/dlcm_attention.json``.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

from benchmarks.common import MachineLoad, environment
from common.errors import entry_point
from common.io import atomic_write_json
from evals.dlcm_kernels import ARMS, PASSES, run_case

PAPER = {"where": "DLCM Table 6, Sec. 6.3 (arXiv 2512.24617v2)", "flex_over_replicate": [1.26, 1.73],
         "arms": "FlexAttention vs FlashAttention varlen + concept replication",
         "setting": "batch 1, 32 heads, hidden 1024/2048/4096, seq 2048-16384, interval 6; GPU, dtype and "
                    "forward/backward not stated", "source": "tables/reported/dlcm/table06.csv"}
PAPER_PRESET = {"seq_lens": [2048, 4096, 8192, 16384], "intervals": [6], "heads": 32, "head_dim": [32, 64, 128],
                "dtype": "bfloat16"}


def fmt(arm: dict) -> str:
    return f"{arm['median_ms']:9.2f}" if "median_ms" in arm else f"{'error':>9s}"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    p.add_argument("--intervals", type=int, nargs="+", default=[2, 4, 8], help="R: b_t = [t %% R == 0]")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, nargs="+", default=[64], help="head widths (hidden = heads x head dim)")
    p.add_argument("--concept-mult", type=int, default=2, help="d_concept = this x hidden (DLCM's default 2)")
    p.add_argument("--flex", nargs="*", default=["eager", "compiled"], choices=["eager", "compiled"],
                   help="flex_attention arms: as is and/or through torch.compile (none: skip flex)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--paper", action="store_true", help="Table 6's grid (flags given still win): "
                   + ", ".join(f"{k} {v}" for k, v in PAPER_PRESET.items()))
    p.add_argument("--out", default="results/benchmarks/dlcm_attention.json")
    a = p.parse_args(argv)
    if a.paper:
        p.set_defaults(**PAPER_PRESET)
        a = p.parse_args(argv)
    if a.rounds < 2:
        p.error("--rounds must be >= 2 (median and IQR)")
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                          "cpu" if a.device == "auto" else a.device)
    dtype = getattr(torch, a.dtype)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)

    start, load = time.perf_counter(), MachineLoad()
    cases = []
    print(f"{'T':>5s} {'R':>2s} {'hd':>3s} {'pass':16s}" + "".join(f"{n:>14s}" for n in ARMS) + "  ratios (ms/ms)")
    for head_dim in a.head_dim:
        for t in a.seq_lens:
            for r in a.intervals:
                case = run_case(a, t, r, head_dim, device, dtype, first=not cases)
                cases.append(case)
                for name in PASSES:
                    arms = case[name]["arms"]
                    print(f"{t:5d} {r:2d} {head_dim:3d} {name:16s}" + "".join(
                        f"{fmt(arms[n]):>14s}" if n in arms else f"{'-':>14s}" for n in ARMS) + "  " + "  ".join(
                        f"{k.replace('_over_', '/')} {v:.2f}" for k, v in case[name]["ratios"].items() if v))
    result = {"benchmark": "dlcm_attention", "config": vars(a), "device": str(device), "dtype": a.dtype,
              "boundaries": "fixed intervals b_t = [t % R == 0]", "batch": 1,
              "timed_in_every_arm": "the module's Q, K/V, output projections and Q/K norms + the attention; flex "
                                    "arms also build their block mask (create_block_mask, eager)",
              "ratios_are": "ratios of median ms (replicate/mask < 1: replicate faster; flex/replicate > 1: "
                            "replicate faster, the paper's speed-up)",
              "agreement": cases[0].pop("agreement"), "agreement_size": {k: cases[0][k] for k in
                                                                           ("seq_len", "interval", "head_dim")},
              "cases": cases, "paper": PAPER, "wall_s": time.perf_counter() - start,
              "load_avg_1min": load.finish(),
              "environment": environment(a.threads, device)}
    atomic_write_json(a.out, result)
    agree = {n: {k: f"{v:.1e}" if isinstance(v, float) else v for k, v in row.items()}
             for n, row in result["agreement"].items() if isinstance(row, dict)}
    print(f"agreement with replicate (max abs diff, first size): {agree}")
    print(f"{result['wall_s']:.0f} s on {device} ({a.dtype}, {a.threads} threads)  -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
