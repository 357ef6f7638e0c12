"""Training step time of ConceptLM against PM and Base at identical width and depth, one run.

ConceptLM §5.5 / Table 6: at 8B, ConceptLM (32 token layers + 2 concept layers on T/k positions)
trains in 71 h where PM (34 token layers) takes 80 h, a ratio of 0.89. Here the three arms share the
backbone (``--backbone``, default GPT-2), width, heads and vocabulary: Base has ``--layers`` token
layers, PM two more, ConceptLM ``--layers`` token layers plus its two concept layers with every loss
on (NTP + NCP + VQ and the codebook metrics). One step = forward + backward + AdamW on the same
batch; arms alternate step by step so machine noise hits all alike; the first ``--warmup`` rounds
are discarded; median and inter-quartile range of the rest. On CUDA the step runs under bf16
autocast as the trainer does, and peak memory is ``max_memory_allocated`` per arm; on CPU it is the
peak RSS of a fresh child process per arm. FLOPs per token come from the registry formulas.

    python -m benchmarks.concept_step_time [--d-model 256 --layers 8 --seq 1024 --chunk 4 --device auto]

Writes ``results/benchmarks/concept_step_time.json``. Target: ConceptLM / PM <= 0.92.
"""
from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext

import torch

from benchmarks.common import (MachineLoad, environment, interleaved_step_times, judge_target, peak_rss_mib, summarize,
                               target_words)
from common.errors import entry_point
from common.io import atomic_write_json
from models.registry import build_model, flops_per_token

TARGET = 0.92
PAPER_RATIO = 71 / 80  # Table 6, ConceptLM-8B / PM-8B training hours


def arm_config(name: str, a) -> dict:
    shape = {"d_model": a.d_model, "n_head": a.heads, "n_layer": a.layers + (2 if name == "pm" else 0)}
    if name == "conceptlm":
        return {"arch": f"conceptlm_{a.backbone}", **shape, "chunk_size": a.chunk}
    return {"arch": a.backbone, **shape}


def build_arm(name: str, a, device: torch.device | str = "cpu"):
    torch.manual_seed(0)
    model = build_model(arm_config(name, a), vocab_size=a.vocab, seq_len=a.seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if device.type == "cuda" else nullcontext

    def step(x):
        with autocast():
            loss = sum(model(x[:, :-1], x[:, 1:])["losses"].values())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backbone", default="gpt2", choices=["gpt2", "pythia", "llama"])
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--chunk", type=int, default=4)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="auto", help="auto (cuda when available), cpu or cuda")
    p.add_argument("--out", default="results/benchmarks/concept_step_time.json")
    a = p.parse_args(argv)
    device = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                          "cpu" if a.device == "auto" else a.device)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    names = ("base", "pm", "conceptlm")
    arms = {name: build_arm(name, a, device) for name in names}
    x = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=device)
    load = MachineLoad()
    times, peak = interleaved_step_times({name: step for name, (_, step) in arms.items()}, x, a.steps, a.warmup)
    load = load.finish()
    if device.type == "cpu":
        peak = {name: peak_rss_mib(build_arm, name, a) for name in names}
    tokens = a.batch * a.seq
    result = {"benchmark": "concept_step_time", "config": vars(a), "device": str(device), "arms": {}}
    for name in names:
        result["arms"][name] = {
            "model": arm_config(name, a), **summarize(times[name], tokens),
            "flops_per_token": flops_per_token(arm_config(name, a), vocab_size=a.vocab, seq_len=a.seq),
            "non_embedding_params": arms[name][0].num_params(),
            ("peak_cuda_mib" if device.type == "cuda" else "peak_rss_mib"): peak[name]}
    arm = result["arms"]
    ratio = lambda key, num, den: arm[num][key] / arm[den][key]
    result["ratios"] = {f"{kind}_{num}_over_{den}": ratio(key, num, den)
                        for kind, key in (("step_time", "median_step_s"), ("flops", "flops_per_token"))
                        for num, den in (("conceptlm", "pm"), ("conceptlm", "base"), ("pm", "base"))}
    result["target"] = {"conceptlm_over_pm_max": TARGET, "paper_table6": PAPER_RATIO,
                        **judge_target(result["ratios"]["step_time_conceptlm_over_pm"] <= TARGET, load)}
    result["load_avg_1min"] = load
    result["environment"] = environment(a.threads, device)
    atomic_write_json(a.out, result)
    mem_key = "peak_cuda_mib" if device.type == "cuda" else "peak_rss_mib"
    for name, r in arm.items():
        print(f"{name:9s} step {r['median_step_s'] * 1e3:8.1f} ms (IQR {r['iqr_step_s'][0] * 1e3:.1f}-"
              f"{r['iqr_step_s'][1] * 1e3:.1f})  {r['flops_per_token'] / 1e6:7.1f} MFLOP/token  "
              f"{r['non_embedding_params'] / 1e6:6.2f}M params  peak {r[mem_key]:.0f} MiB")
    rt = result["ratios"]
    print(f"ConceptLM/PM step {rt['step_time_conceptlm_over_pm']:.3f} (FLOPs {rt['flops_conceptlm_over_pm']:.3f}), "
          f"ConceptLM/Base step {rt['step_time_conceptlm_over_base']:.3f} "
          f"(FLOPs {rt['flops_conceptlm_over_base']:.3f}); "
          f"target <= {TARGET} {target_words(result['target'])} on {device} -> {a.out}")
    return result


if __name__ == "__main__":
    sys.exit(entry_point(main)())
