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

Writes ``results/benchmarks/concept_step_time.json``. Target (issue 4): ConceptLM / PM <= 0.92.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import platform
import statistics
import time
from contextlib import nullcontext

import torch

from common.io import atomic_write_json
from common.provenance import git_state, library_versions
from models.registry import build_model, flops_per_token

TARGET = 0.92
PAPER_RATIO = 71 / 80  # Table 6, ConceptLM-8B / PM-8B training hours


def arm_config(name: str, a) -> dict:
    shape = {"d_model": a.d_model, "n_head": a.heads, "n_layer": a.layers + (2 if name == "pm" else 0)}
    if name == "conceptlm":
        return {"arch": f"conceptlm_{a.backbone}", **shape, "chunk_size": a.chunk}
    return {"arch": a.backbone, **shape}


def build_arm(name: str, a, device: torch.device):
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


def _peak_rss_child(name, a, queue):
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    _, step = build_arm(name, a, torch.device("cpu"))
    x = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    for _ in range(2):
        step(x)
    queue.put(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024)


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
    times = {name: [] for name in names}
    peak = {name: 0.0 for name in names}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for r in range(a.warmup + a.steps):
        for name, (_, step) in arms.items():
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            sync()
            t0 = time.perf_counter()
            step(x)
            sync()
            if r >= a.warmup:
                times[name].append(time.perf_counter() - t0)
            if device.type == "cuda":
                peak[name] = max(peak[name], torch.cuda.max_memory_allocated() / 2**20)
    if device.type == "cpu":
        peak = {name: peak_rss_mib(name, a) for name in names}
    tokens = a.batch * a.seq
    result = {"benchmark": "concept_step_time", "config": vars(a), "device": str(device), "arms": {}}
    for name in names:
        q1, med, q3 = statistics.quantiles(times[name], n=4)
        result["arms"][name] = {
            "model": arm_config(name, a), "median_step_s": med, "iqr_step_s": [q1, q3], "tokens_per_s": tokens / med,
            "flops_per_token": flops_per_token(arm_config(name, a), vocab_size=a.vocab, seq_len=a.seq),
            "non_embedding_params": arms[name][0].num_params(),
            ("peak_cuda_mib" if device.type == "cuda" else "peak_rss_mib"): peak[name]}
    arm = result["arms"]
    ratio = lambda key, num, den: arm[num][key] / arm[den][key]
    result["ratios"] = {f"{kind}_{num}_over_{den}": ratio(key, num, den)
                        for kind, key in (("step_time", "median_step_s"), ("flops", "flops_per_token"))
                        for num, den in (("conceptlm", "pm"), ("conceptlm", "base"), ("pm", "base"))}
    result["target"] = {"conceptlm_over_pm_max": TARGET, "paper_table6": PAPER_RATIO,
                        "met": result["ratios"]["step_time_conceptlm_over_pm"] <= TARGET}
    commit, dirty = git_state()
    result["environment"] = {"git_commit": commit, "git_dirty": dirty, "versions": library_versions(),
                             "cpu": platform.processor() or platform.machine(), "threads": a.threads,
                             "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None}
    atomic_write_json(a.out, result)
    mem_key = "peak_cuda_mib" if device.type == "cuda" else "peak_rss_mib"
    for name, r in arm.items():
        print(f"{name:9s} step {r['median_step_s'] * 1e3:8.1f} ms (IQR {r['iqr_step_s'][0] * 1e3:.1f}-"
              f"{r['iqr_step_s'][1] * 1e3:.1f})  {r['flops_per_token'] / 1e6:7.1f} MFLOP/token  "
              f"{r['non_embedding_params'] / 1e6:6.2f}M params  peak {r[mem_key]:.0f} MiB")
    rt = result["ratios"]
    print(f"ConceptLM/PM step {rt['step_time_conceptlm_over_pm']:.3f} (FLOPs {rt['flops_conceptlm_over_pm']:.3f}), "
          f"ConceptLM/Base step {rt['step_time_conceptlm_over_base']:.3f} (FLOPs {rt['flops_conceptlm_over_base']:.3f}); "
          f"target <= {TARGET} {'met' if result['target']['met'] else 'NOT met'} on {device} -> {a.out}")
    return result


if __name__ == "__main__":
    main()
