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

import torch

from benchmarks.common import environment, interleaved_step_times, peak_rss_mib, summarize
from common.io import atomic_write_json


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
    times, _ = interleaved_step_times(arms, x, a.steps, a.warmup)
    result = {"benchmark": "train_throughput", "config": vars(a), "arms": {}}
    for name in arms:
        result["arms"][name] = {**summarize(times[name], a.batch * a.seq),
                                "peak_rss_mib": peak_rss_mib(build_arm, name, a)}
    result["ratio_ours_over_hf"] = result["arms"]["ours"]["tokens_per_s"] / result["arms"]["hf"]["tokens_per_s"]
    result["environment"] = environment(a.threads, torch.device("cpu"))
    atomic_write_json(a.out, result)
    for name, arm in result["arms"].items():
        print(f"{name:5s} {arm['tokens_per_s']:9.0f} tok/s  step {arm['median_step_s'] * 1e3:6.1f} ms "
              f"(IQR {arm['iqr_step_s'][0] * 1e3:.1f}-{arm['iqr_step_s'][1] * 1e3:.1f})  peak RSS "
              f"{arm['peak_rss_mib']:.0f} MiB")
    print(f"ours / HF = {result['ratio_ours_over_hf']:.2f}x  -> {a.out}")
    return result


if __name__ == "__main__":
    main()
