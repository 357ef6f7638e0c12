"""GPU training throughput of our GPT-2 124M Base, PM and ConceptLM beside ``transformers``' GPT2LMHeadModel,
one run, the settings a GPU run of the trainer uses: bf16 autocast, ``torch.compile``, fused AdamW.

A prepared script for a lent GPU (``make bench-gpu``; not a test). Arms, at GPT-2 124M's shape (d 768,
12 layers, 12 heads, vocabulary 50,257, sequence 1,024, batch 16): ``hf`` (GPT2LMHeadModel, SDPA
attention, compiled), ``base`` (our GPT-2), ``pm`` (+2 token layers), ``conceptlm`` (ConceptLM on
GPT-2, k 4, every loss on). One step = forward + backward + fused AdamW on the same batch; the arms
alternate step by step after compilation and warm-up (``benchmarks.common.interleaved_step_times``).
Reported per arm: tokens/s, median step time and its inter-quartile range, peak CUDA memory, FLOPs per
token (the registry's formulas, nanoGPT's convention: 6 N + 12 L T d per token) and MFU against the
bf16 dense peak (989 TFLOP/s for H100 / H200 SXM; ``--peak-tflops`` for another GPU).

Targets: base / hf tokens/s >= 1.5; conceptlm / pm step time <= 0.92 (paper 0.89).
Reference (an H200 measurement at the same settings): HF compiled 351k tokens/s (~30 % MFU), eager
195k; a 60-line plain-PyTorch GPT-2 469k.

    python -m benchmarks.gpu_throughput [--steps 20 --warmup 5 --no-compile]
    python -m benchmarks.gpu_throughput --device cpu --tiny      # the script's own check, on a CPU

Writes ``results/benchmarks/gpu_throughput.json``.
"""
from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from types import SimpleNamespace

import torch

from benchmarks.common import BenchmarkError, MachineLoad, environment, interleaved_step_times, judge_target, summarize
from benchmarks.concept_step_time import arm_config
from common.errors import entry_point
from common.io import atomic_write_json
from models.registry import build_model, flops_per_token

ARMS = ("hf", "base", "pm", "conceptlm")
TARGETS = {"base_over_hf_tokens_per_s_min": 1.5, "conceptlm_over_pm_step_time_max": 0.92}
SHAPE = {"d_model": 768, "layers": 12, "heads": 12, "vocab": 50257, "seq": 1024, "batch": 16, "chunk": 4}
TINY = {"d_model": 64, "layers": 2, "heads": 2, "vocab": 512, "seq": 128, "batch": 2, "chunk": 4}


def build_arm(name: str, a, device: torch.device):
    """(model, one training step) of arm ``name``."""
    torch.manual_seed(0)
    shape = SimpleNamespace(backbone="gpt2", **{k: v for k, v in a.shape.items() if k not in ("vocab", "batch")})
    if name == "hf":
        from transformers import GPT2Config, GPT2LMHeadModel

        s = a.shape
        cfg = GPT2Config(vocab_size=s["vocab"], n_positions=s["seq"], n_embd=s["d_model"], n_layer=s["layers"],
                         n_head=s["heads"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                         attn_implementation="sdpa")
        model = GPT2LMHeadModel(cfg).to(device)
        loss_of = lambda m, x: m(input_ids=x[:, :-1], labels=x[:, :-1]).loss
    else:
        model = build_model(arm_config(name, shape), vocab_size=a.shape["vocab"], seq_len=a.shape["seq"]).to(device)
        loss_of = lambda m, x: sum(m(x[:, :-1], x[:, 1:])["losses"].values())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model) if a.compile else model
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda" else nullcontext

    def step(x):
        with autocast():
            loss = loss_of(forward, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step


def arm_flops(name: str, a) -> float:
    shape = SimpleNamespace(backbone="gpt2", **{k: v for k, v in a.shape.items() if k not in ("vocab", "batch")})
    cfg = arm_config("base" if name == "hf" else name, shape)
    return flops_per_token(cfg, vocab_size=a.shape["vocab"], seq_len=a.shape["seq"])


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5, help="rounds discarded (compilation happens in the first)")
    p.add_argument("--no-compile", dest="compile", action="store_false")
    p.add_argument("--tiny", action="store_true", help="a small shape, for checking the script on a CPU")
    p.add_argument("--device", default="cuda")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="bf16 dense peak of the GPU (H100 / H200: 989)")
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    p.add_argument("--out", default="results/benchmarks/gpu_throughput.json")
    a = p.parse_args(argv)
    a.shape = TINY if a.tiny else SHAPE
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchmarkError("--device cuda but torch sees no CUDA device; run on a GPU machine "
                             "(or --device cpu --tiny)")
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    arms = {name: build_arm(name, a, device) for name in a.arms}
    x = torch.randint(0, a.shape["vocab"], (a.shape["batch"], a.shape["seq"] + 1), device=device)
    load = MachineLoad()
    times, peak = interleaved_step_times({name: step for name, (_, step) in arms.items()}, x, a.steps, a.warmup)
    load = load.finish()
    tokens = a.shape["batch"] * a.shape["seq"]
    result = {"benchmark": "gpu_throughput", "config": {k: v for k, v in vars(a).items()}, "device": str(device),
              "arms": {}}
    for name in a.arms:
        r = summarize(times[name], tokens)
        f = arm_flops(name, a)
        result["arms"][name] = {**r, "flops_per_token": f, "peak_cuda_mib": peak[name],
                                "mfu": f * r["tokens_per_s"] / (a.peak_tflops * 1e12)}
    arm = result["arms"]
    ratios = {}
    if {"base", "hf"} <= set(arm):
        ratios["base_over_hf_tokens_per_s"] = arm["base"]["tokens_per_s"] / arm["hf"]["tokens_per_s"]
    if {"conceptlm", "pm"} <= set(arm):
        ratios["conceptlm_over_pm_step_time"] = arm["conceptlm"]["median_step_s"] / arm["pm"]["median_step_s"]
    result["ratios"] = ratios
    judged = {"base_over_hf": judge_target(ratios.get("base_over_hf_tokens_per_s", 0)
                                           >= TARGETS["base_over_hf_tokens_per_s_min"], load),
              "conceptlm_over_pm": judge_target(ratios.get("conceptlm_over_pm_step_time", 9)
                                                <= TARGETS["conceptlm_over_pm_step_time_max"], load)}
    result["targets"] = {**TARGETS, "met": {k: v["met"] for k, v in judged.items()}, "refused": load["why"]}
    result["load_avg_1min"] = load
    result["environment"] = environment(torch.get_num_threads(), device)
    atomic_write_json(a.out, result)
    for name, r in arm.items():
        print(f"{name:9s} {r['tokens_per_s'] / 1e3:8.1f}k tok/s  step {r['median_step_s'] * 1e3:7.1f} ms  "
              f"MFU {100 * r['mfu']:5.1f} %  peak {r['peak_cuda_mib']:.0f} MiB")
    print(", ".join(f"{k} {v:.3f}" for k, v in ratios.items()) + f" -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
