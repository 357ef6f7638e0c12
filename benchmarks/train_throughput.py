"""Training throughput of our GPT-2 against ``transformers``' GPT2LMHeadModel, one run, side by side.

Protocol: per shape, identical models (fp32, same width, depth, heads, vocabulary, head tying as
our default, no dropout), the same thread count and the same AdamW (the trainer's
``make_optimizer``); one training step = forward + backward + optimizer step on the same batch. The
arms alternate step by step (ABAB...) so machine noise hits both alike; the first ``warmup`` rounds
are discarded; the median and inter-quartile range of the rest are reported, with each arm's minor
page faults per step. Each shape runs in a fresh process, as a training run does: one shape's grown
heap would otherwise spare the next shape's arms the page faults of their large short-lived
tensors. Peak RSS is measured per arm in a further fresh child process (the shape's process holds
both models). Two shapes by default:

* ``d128``: d 128, 4 layers, 4 heads, seq 256, vocab 4096, batch 16 (the first throughput target's shape);
* ``s``: the embedded profile's ``s`` size (``config/default.yaml``: d 64, 4 layers, 4 heads of 16,
  seq 256, vocab 2048, micro-batch 8), where per-operation overhead weighs most.

    python -m benchmarks.train_throughput [--shapes d128 s --steps 30 --threads 2]
    python -m benchmarks.train_throughput --d-model 96 --heads 6 --vocab 2048 --batch 8   # one custom shape

Writes ``results/benchmarks/train_throughput.json``: per shape the arms' tokens/s, step times, peak
RSS and ``ratio_ours_over_hf``; the 1-minute load average before and after (a loaded machine
lowers both arms, the ratio less). Target: ours / HF >= 1.5x at both shapes.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from types import SimpleNamespace

import torch

from benchmarks.common import (MachineLoad, environment, interleaved_step_times, judge_target, peak_rss_mib,
                               run_in_child, summarize, target_words)
from common.errors import entry_point
from common.io import atomic_write_json

TARGET = 1.5
SHAPES = {
    "d128": {"d_model": 128, "layers": 4, "heads": 4, "seq": 256, "vocab": 4096, "batch": 16},
    "s": {"d_model": 64, "layers": 4, "heads": 4, "seq": 256, "vocab": 2048, "batch": 8},
}
# AdamW settings of both arms (the trainer's make_optimizer: decay on matrices only)
OPTIMIZER = {"lr": 1e-4, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}


def build_arm(name: str, a) -> tuple[torch.nn.Module, callable]:
    from models.registry import build_model
    from trainer.train import make_optimizer

    torch.manual_seed(0)
    ours = build_model({"arch": "gpt2", "d_model": a.d_model, "n_layer": a.layers, "n_head": a.heads},
                       vocab_size=a.vocab, seq_len=a.seq)
    if name == "ours":
        model = ours
        loss_fn = lambda x: model(x[:, :-1], x[:, 1:])["losses"]["ntp"]
    else:
        from transformers import GPT2Config, GPT2LMHeadModel

        cfg = GPT2Config(vocab_size=a.vocab, n_positions=a.seq, n_embd=a.d_model, n_layer=a.layers, n_head=a.heads,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                         tie_word_embeddings=ours.cfg.tie_embeddings, attn_implementation="sdpa")
        model = GPT2LMHeadModel(cfg)
        loss_fn = lambda x: model(input_ids=x[:, :-1], labels=x[:, :-1]).loss
    opt = make_optimizer(model, OPTIMIZER)

    def step(x):
        loss_fn(x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step


def run_shape(shape: dict, a) -> dict:
    """Both arms at one shape, interleaved; run in a fresh process per shape (``run_in_child``), so a
    shape does not inherit the heap the previous one grew (which hides page faults from an arm)."""
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    arm_args = SimpleNamespace(**shape, threads=a.threads)
    arms = {name: build_arm(name, arm_args)[1] for name in ("ours", "hf")}
    x = torch.randint(0, shape["vocab"], (shape["batch"], shape["seq"] + 1))
    faults = {}
    times, _ = interleaved_step_times(arms, x, a.steps, a.warmup, minor_faults=faults)
    result = {"config": shape, "arms": {}}
    for name in arms:
        result["arms"][name] = {**summarize(times[name], shape["batch"] * shape["seq"]),
                                "minor_page_faults_per_step": statistics.median(faults[name]),
                                "peak_rss_mib": peak_rss_mib(build_arm, name, arm_args)}
    result["ratio_ours_over_hf"] = result["arms"]["ours"]["tokens_per_s"] / result["arms"]["hf"]["tokens_per_s"]
    return result


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    for flag in ("d-model", "layers", "heads", "seq", "vocab", "batch"):
        p.add_argument(f"--{flag}", type=int, help="a custom shape (the d128 shape with this changed) instead")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="results/benchmarks/train_throughput.json")
    a = p.parse_args(argv)
    custom = {k: getattr(a, k) for k in SHAPES["d128"] if getattr(a, k) is not None}
    shapes = {"custom": {**SHAPES["d128"], **custom}} if custom else {name: SHAPES[name] for name in a.shapes}
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    load = MachineLoad()
    result = {"benchmark": "train_throughput", "config": {"steps": a.steps, "warmup": a.warmup, "threads": a.threads},
              "target": TARGET, "shapes": {name: run_in_child(run_shape, shape, a) for name, shape in shapes.items()}}
    result["load_avg_1min"] = load.finish()
    for res in result["shapes"].values():
        res["target"] = judge_target(res["ratio_ours_over_hf"] >= TARGET, result["load_avg_1min"])
    result["environment"] = environment(a.threads, torch.device("cpu"))
    atomic_write_json(a.out, result)
    for name, res in result["shapes"].items():
        for arm_name, arm in res["arms"].items():
            print(f"{name:6s} {arm_name:5s} {arm['tokens_per_s']:9.0f} tok/s  "
                  f"step {arm['median_step_s'] * 1e3:6.1f} ms "
                  f"(IQR {arm['iqr_step_s'][0] * 1e3:.1f}-{arm['iqr_step_s'][1] * 1e3:.1f})  peak RSS "
                  f"{arm['peak_rss_mib']:.0f} MiB  page faults/step {arm['minor_page_faults_per_step']:.0f}")
        print(f"{name:6s} ours / HF = {res['ratio_ours_over_hf']:.2f}x "
              f"(target >= {TARGET}x {target_words(res['target'])})")
    load = result["load_avg_1min"]
    print(f"load average {load['before']:.1f} -> {load['after']:.1f} on {load['cores']} cores; "
          f"{result['environment']['host_line']}  -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
