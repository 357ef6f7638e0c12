"""Training throughput of our GPT-2 against ``transformers``' GPT2LMHeadModel, one run, side by side.

Protocol: identical shape (default d=128, 4 layers, 4 heads, seq 256, vocab 4096, batch 16), fp32,
same thread count, same AdamW; one training step = forward + backward + optimizer step on the same
batch. The arms alternate step by step (ABAB...) so machine noise hits both alike; the first
``warmup`` rounds are discarded; the median and inter-quartile range of the rest are reported.
Peak RSS is measured per arm in a fresh child process (the parent holds both models).

    python -m benchmarks.train_throughput [--d-model 128 --layers 4 --seq 256 --steps 30 --threads 2]

Writes ``results/benchmarks/train_throughput.json``. Target (issue 2): ours / HF >= 1.3x.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import statistics
import time
from pathlib import Path

import torch

from common.io import atomic_write_json
from common.provenance import git_state, library_versions


def build_arm(name: str, a) -> tuple[torch.nn.Module, callable]:
    torch.manual_seed(0)
    if name == "ours":
        from models.registry import build_model

        model = build_model({"arch": "gpt2", "d_model": a.d_model, "n_layer": a.layers, "n_head": a.heads},
                            vocab_size=a.vocab, seq_len=a.seq)
        loss_fn = lambda x: model(x[:, :-1], x[:, 1:])["losses"]["ntp"]
    else:
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.seq, n_embd=a.d_model, n_layer=a.layers, n_head=a.heads,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                         attn_implementation="sdpa")
        model = GPT2LMHeadModel(cfg)
        loss_fn = lambda x: model(input_ids=x[:, :-1], labels=x[:, :-1]).loss
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(x):
        loss_fn(x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step


def _peak_rss_child(name, a, queue):
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    _, step = build_arm(name, a)
    x = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    for _ in range(3):
        step(x)
    # VmHWM belongs to this exec'd image; ru_maxrss would inherit the parent's peak across fork+exec
    hwm_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM"))
    queue.put(hwm_kib / 1024)


def peak_rss_mib(name: str, a) -> float:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_peak_rss_child, args=(name, a, queue))
    proc.start()
    value = queue.get()
    proc.join()
    return value


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="results/benchmarks/train_throughput.json")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    arms = {name: build_arm(name, a)[1] for name in ("ours", "hf")}
    x = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    times = {name: [] for name in arms}
    for r in range(a.warmup + a.steps):
        for name, step in arms.items():
            t0 = time.perf_counter()
            step(x)
            if r >= a.warmup:
                times[name].append(time.perf_counter() - t0)
    tokens = a.batch * a.seq
    result = {"benchmark": "train_throughput", "config": vars(a), "arms": {}}
    for name, ts in times.items():
        q1, med, q3 = statistics.quantiles(ts, n=4)
        result["arms"][name] = {"median_step_s": med, "iqr_step_s": [q1, q3], "tokens_per_s": tokens / med,
                                "peak_rss_mib": peak_rss_mib(name, a)}
    result["ratio_ours_over_hf"] = result["arms"]["ours"]["tokens_per_s"] / result["arms"]["hf"]["tokens_per_s"]
    commit, dirty = git_state()
    result["environment"] = {"git_commit": commit, "git_dirty": dirty, "versions": library_versions(),
                             "cpu": platform.processor() or platform.machine(), "threads": a.threads}
    atomic_write_json(a.out, result)
    for name, arm in result["arms"].items():
        print(f"{name:5s} {arm['tokens_per_s']:9.0f} tok/s  step {arm['median_step_s'] * 1e3:6.1f} ms "
              f"(IQR {arm['iqr_step_s'][0] * 1e3:.1f}-{arm['iqr_step_s'][1] * 1e3:.1f})  peak RSS "
              f"{arm['peak_rss_mib']:.0f} MiB")
    print(f"ours / HF = {result['ratio_ours_over_hf']:.2f}x  -> {a.out}")
    return result


if __name__ == "__main__":
    main()
