"""What keeping attention's products out of MKL would cost: ATen's flash kernel against an exact fp32
attention whose products go through oneDNN, forward + backward, one run, arms interleaved.

Why it is asked (docs/embedded.md, "Same numbers on another host"): the first operation whose output
differs between an AMD and an Intel host is the attention's probabilities times V, an MKL product inside
ATen's CPU flash kernel, and MKL's reproducibility pin does not hold on AMD CPUs. oneDNN's products agree
between the two hosts. torch exposes no batched fp32 oneDNN product (ATen's ``bmm`` goes to MKL unless a
reduced precision is allowed), so the ``onednn`` arm makes one ``torch.ops.mkldnn._linear_pointwise``
product per batch row and head: Q K^T, P V and, backward, dO V^T, P^T dO, dS K and dS^T Q, with ATen's
masked softmax between. Both arms are checked against each other (outputs and the three input gradients).

    python -m benchmarks.mkl_free_attention [--batch 8 --heads 4 --seq 256 --head-dim 16 --threads 1]

Defaults: the embedded s shape at the DAG's one thread. Writes ``results/benchmarks/mkl_free_attention.json``:
per arm the median and inter-quartile range in ms, the ratio onednn / flash, the largest differences, the
load average and the host.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.common import BenchmarkError, MachineLoad, environment, interleaved_step_times
from common.errors import entry_point
from common.io import atomic_write_json


def _products(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a[i] @ b[i].T`` for every i of (G, n, k) and (G, m, k), one oneDNN product each, into one output.
    Either operand may be a transposed view (oneDNN reads the strides: no copy)."""
    linear, out = torch.ops.mkldnn._linear_pointwise, a.new_empty(len(a), a.shape[1], b.shape[1])
    for i in range(len(a)):
        out[i] = linear(a[i], b[i], None, "none", [], "")
    return out


def _t(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(1, 2)


class OneDNNAttention(torch.autograd.Function):
    """Causal softmax attention of (B, H, T, D) tensors with every product in oneDNN (exact fp32)."""

    @staticmethod
    def forward(ctx, q, k, v):
        b, h, t, d = q.shape
        q = (q * d ** -0.5).reshape(b * h, t, d)
        k, v = k.reshape(b * h, t, d), v.reshape(b * h, t, d)
        future = torch.ones(t, t, dtype=torch.bool).triu(1)
        p = torch.softmax(_products(q, k).masked_fill_(future, float("-inf")), -1)
        ctx.save_for_backward(q, k, v, p)
        return _products(p, _t(v)).view(b, h, t, d)

    @staticmethod
    def backward(ctx, grad):
        q, k, v, p = ctx.saved_tensors
        shape, d = grad.shape, grad.shape[-1]
        grad = grad.reshape(q.shape).contiguous()
        grad_v = _products(_t(p), _t(grad))
        grad_s = torch.ops.aten._softmax_backward_data(_products(grad, v), p, -1, torch.float32)
        grad_q = _products(grad_s, _t(k)) * d ** -0.5
        grad_k = _products(_t(grad_s), _t(q))
        return grad_q.view(shape), grad_k.view(shape), grad_v.view(shape)


def flash(q, k, v) -> torch.Tensor:
    """ATen's causal attention: on CPU in fp32 its flash kernel, whose products are MKL's."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


ARMS = {"flash": flash, "onednn": OneDNNAttention.apply}


def arms(q, k, v, grad) -> dict:
    def run(attend):
        def step(_):
            attend(q, k, v).backward(grad)
        return step
    return {name: run(attend) for name, attend in ARMS.items()}


def agreement(q, k, v, grad) -> dict:
    """The largest absolute difference of the output and of each input gradient, onednn against flash."""
    outs = []
    for attend in ARMS.values():
        out = attend(q, k, v)
        outs.append((out, *torch.autograd.grad(out, (q, k, v), grad)))
    return {name: (a - b).abs().max().item() for name, a, b in zip(("output", "grad_q", "grad_k", "grad_v"), *outs)}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--head-dim", type=int, default=16)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="results/benchmarks/mkl_free_attention.json")
    a = p.parse_args(argv)
    least = {"warmup": 0, "rounds": 2}  # the rest at least 1; two rounds for a median and quartiles
    small = [f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items() if isinstance(v, int) and v < least.get(k, 1)]
    if small:
        raise BenchmarkError(f"{', '.join(small)}: sizes and threads must be at least 1, rounds 2, warm-up 0")
    if Path(a.out).is_dir():  # before the timing, not after it
        raise BenchmarkError(f"--out {a.out}: is a folder; give the path of the JSON file to write")
    if not torch.backends.mkldnn.is_available():
        raise BenchmarkError("this torch build has no oneDNN: the onednn arm cannot run; use a build with it")
    torch.set_num_threads(a.threads)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(a.batch, a.heads, a.seq, a.head_dim, generator=gen, requires_grad=True) for _ in range(3))
    grad = torch.randn(a.batch, a.heads, a.seq, a.head_dim, generator=gen)
    agree = agreement(q, k, v, grad)
    load = MachineLoad()
    times, _ = interleaved_step_times(arms(q, k, v, grad), q, a.rounds, a.warmup)
    load = load.finish()
    result = {"benchmark": "mkl_free_attention", "config": vars(a), "arms": {}, "agreement_max_abs": agree}
    for name, ts in times.items():
        q1, med, q3 = statistics.quantiles(ts, n=4)
        result["arms"][name] = {"median_ms": med * 1e3, "iqr_ms": [q1 * 1e3, q3 * 1e3]}
    result["ratio_onednn_over_flash"] = result["arms"]["onednn"]["median_ms"] / result["arms"]["flash"]["median_ms"]
    result["load_avg_1min"] = load
    result["environment"] = environment(a.threads, torch.device("cpu"))
    atomic_write_json(a.out, result)
    ms = {n: r["median_ms"] for n, r in result["arms"].items()}
    print(f"attention forward + backward, batch {a.batch} x {a.heads} heads x {a.seq} x {a.head_dim}, "
          f"{a.threads} thread(s): flash {ms['flash']:.2f} ms, oneDNN products {ms['onednn']:.2f} ms "
          f"({result['ratio_onednn_over_flash']:.2f}x); largest difference {max(agree.values()):.1e}"
          + (f"; {load['why']}" if load["loaded"] else "") + f" -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
