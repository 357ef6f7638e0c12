"""Wall-clock sampling of NCM against the KV-cached AR model and masked diffusion, one run, side by side.

NCM (arXiv 2610.14162) samples L tokens in K generator calls (one per scale) plus one pass of its
frozen tokenizer's decoder; the paper reports 21x faster sampling than DUO on an H100. Here three arms
of the same generator size (``--d-model``, ``--layers``, ``--heads``; the embedded ``s`` size d 64,
4 layers, 4 heads, vocabulary 2048 by default), batch and machine each produce ``--batch`` sequences
of L tokens (128 by default) per call:

* ``ncm``: ``models.ncm.sample`` -- K generator calls (``--scales``, 12; ``--schedule``),
  each on the current scale's positions only, then the tokenizer's decoder and head. The tokenizer
  (width ``--d-model``, ``--tok-layers`` decoder blocks, ``--codebook`` codes of width ``--d-code``
  per scale, ``--schedule`` of scale lengths: 4 blocks, 64 codes of 32, quadratic, as the embedded
  profile's ``ncm_tok_s``) is not counted in the
  generator's size (it is the decoder), but its decode is in NCM's sampling time;
* ``ar``: GPT-2 (``gpt2``) ``TokenLM.generate`` with its KV cache from a one-token prompt
  (``--prompt-id``, 0 = our BPE's ``<|endoftext|>``, which starts every document), L - 1 new tokens
  (one prefill call and L - 2 decode calls), no EOS stop;
* ``mdlm``: the masked-diffusion baseline on GPT-2 blocks (``mdlm_gpt2``) ``MDLM.sample`` with
  ``--steps`` ancestral steps (L by default) and its caching sampler: a step that unmasks nothing
  reuses the last network call, so NFE <= steps + 1; the NFE actually made is recorded per batch.

Batches: ``--batch`` takes several sizes (1 and 16 by default): batch 1 is the latency regime, where
a call's fixed cost dominates and NCM's K calls against AR's L - 1 pay; at larger batches the work per
call counts. Beside each batch's measurement, the bound (``sampling_cost``): network calls, blocks run,
positions and forward FLOPs per sample of NCM and of AR, and the two ratios AR / NCM -- the speed-up
if a call cost the same whatever its size (``block_calls``) and if time followed the FLOPs
(``flops``); a measured speed-up lies between them.

All arms sample at temperature 1 without top-k / top-p, each from its own seeded ``torch.Generator``.
Protocol (``benchmarks.common``): the arms alternate batch by batch (round-robin, ABCABC...) in one
process, so machine noise hits all alike; the first ``--warmup`` rounds are discarded; the median and
inter-quartile range of the seconds per batch of the rest are reported, with samples/s, NFE,
seconds per NFE, and the speed-ups of NCM over AR and over MDLM (ratios of the medians). The 1-minute
load average before and after goes into the result (a loaded machine slows every arm, the ratios
less). Beside each arm: the mean unigram entropy of its timed samples (``evals.genppl.protocol``,
nats, every id of the L counts, the AR prompt included).

Weights are freshly initialised by default (speed does not depend on training); Gen. PPL of untrained
models means nothing, so it is only computed for arms loaded from trained runs (``--runs``) and scored
by a judge (``--judge`` a transformers folder, ``--tokenizer`` the runs' ``tokenizer.json`` to decode
the ids), with the MDLM/DUO protocol of ``evals.genppl`` (max_length L).

    python -m benchmarks.ncm_sampling [--seq-len 128 --scales 12 --batch 16 --rounds 20 --threads 2]
    python -m benchmarks.ncm_sampling --runs ncm=results/runs/ncm_s/seed0 ar=results/runs/base_gpt2_s/seed0 \\
        mdlm=results/runs/mdlm_s/seed0 --judge results/judges/world_gpt2 --tokenizer results/data/world/tokenizer.json

Writes ``results/benchmarks/ncm_sampling.json`` (``batches``: one entry per batch size). Target: NCM >= 8x
faster than AR on CPU at batch 1, judged only on an unloaded machine (``benchmarks.common``).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

from benchmarks.common import (BenchmarkError, MachineLoad, environment, interleaved_step_times, judge_target,
                               target_words)
from common.errors import entry_point
from common.io import atomic_write_json
from evals.genppl.protocol import mean_entropy
from models.configs import SCHEDULES
from models.ncm_tokenizer import block_flops
from models.registry import build_model
from models.token_lm import block_matmul_params

TARGET = 8.0        # NCM / AR sampling speed-up on CPU
TARGET_BATCH = 1    # ... at batch 1, the latency regime
PAPER = {"ratio": 21.0, "against": "DUO", "hardware": "H100"}
ARMS = ("ncm", "ar", "mdlm")
TEMPERATURE = 1.0


def arm_config(name: str, a) -> dict:
    """The model config (registry dict, without vocab_size / seq_len) of a freshly initialised arm."""
    shape = {"d_model": a.d_model, "n_layer": a.layers, "n_head": a.heads}
    if name == "ncm":
        tokenizer = {"arch": "ncm_tokenizer", "d_model": a.d_model, "n_layer": a.tok_layers or a.layers,
                     "n_head": a.heads, "n_scales": a.scales, "length_schedule": a.schedule,
                     "codebook_size": a.codebook, "d_code": a.d_code}
        return {"arch": "ncm", **shape, "tokenizer": tokenizer}
    return {"arch": "gpt2" if name == "ar" else "mdlm_gpt2", **shape}


def final_dir(run: str) -> Path:
    """A run folder's ``final/`` (or the folder itself when it is one)."""
    path = Path(run)
    return path / "final" if (path / "final" / "manifest.json").is_file() else path


def load_arm(name: str, run: str, a, device: torch.device) -> tuple[torch.nn.Module, dict]:
    """(model, info) of an arm loaded from a trained run, checked against the benchmark's L."""
    from evals.perplexity import load_trained

    final = final_dir(run)
    model, manifest = load_trained(final, str(device))
    arch, seq_len = manifest["config"]["model"]["arch"], manifest["config"]["model"]["seq_len"]
    want = {"ncm": ("ncm",), "ar": ("gpt2", "pythia", "llama"), "mdlm": ("mdlm_gpt2", "mdlm_pythia", "mdlm_llama")}
    if arch not in want[name]:
        raise BenchmarkError(f"--runs {name}={run}: a {arch!r} run, the {name} arm needs one of {list(want[name])}")
    if (seq_len != a.seq_len) if name == "ncm" else (seq_len < a.seq_len):
        raise BenchmarkError(f"--runs {name}={run}: model.seq_len {seq_len} does not fit --seq-len {a.seq_len}; "
                             f"pass --seq-len {seq_len}"
                             + (" (NCM samples exactly its window)" if name == "ncm" else ""))
    if manifest["vocab_size"] != a.vocab:
        raise BenchmarkError(f"--runs {name}={run}: vocabulary {manifest['vocab_size']}, not --vocab {a.vocab}; "
                             f"pass --vocab {manifest['vocab_size']}")
    if name == "ncm" and model.K != a.scales:
        raise BenchmarkError(f"--runs ncm={run}: K = {model.K} scales, not --scales {a.scales}; "
                             f"pass --scales {model.K}")
    return model, {"run": str(final), "model": manifest["config"]["model"],
                   "tokenizer_sha256": (manifest.get("data") or {}).get("tokenizer_sha256")}


def sampling_cost(ncm, ar, seq_len: int) -> dict:
    """Work per sample of L tokens, counted from the models: network calls, blocks run (calls x layers),
    positions the blocks process and forward FLOPs (2 x matmul weights per position, 4 d x keys attended
    for the attention, the output heads; embeddings and the samplers left out). NCM: K generator calls on
    the scales' positions (block-diagonal: a scale attends to itself) with each scale's code head, then one
    pass of the tokenizer's (bidirectional) decoder over L positions and its token head; with block-causal
    attention a generator scale attends to the coarser scales as well. The tokenizer's phi convolutions are
    left out (about 2 % of NCM's FLOPs at the embedded size). AR: one prefill call on the
    prompt token and L - 2 KV-cached decode calls, position t attending to t keys, the LM head on each.
    ``ratio_ar_over_ncm``: the speed-up bound if every block call cost the same (``block_calls``) and if
    time followed the FLOPs (``flops``)."""
    gen, tok = ncm.cfg, ncm.tokenizer.cfg
    fwd = lambda cfg, attended: block_flops(cfg, attended) / 3  # noqa: E731 -- forward = 1/3 of training
    lengths = list(ncm.lengths)
    causal = gen.attention == "block_causal"  # a scale attends to every coarser one as well (VAR's KV cache)
    keys = [sum(lengths[:k + 1]) if causal else l for k, l in enumerate(lengths)]
    ncm_flops = sum(l * (gen.n_layer * fwd(gen, n) + 2 * gen.d_model * v) for l, n, v in zip(lengths, keys, ncm.sizes))
    ncm_flops += seq_len * (tok.decoder_layers * fwd(tok, seq_len) + 2 * tok.d_model * tok.vocab_size)
    a = ar.cfg
    matmul = a.n_layer * block_matmul_params(a)
    positions = range(1, seq_len)  # prompt at position 1, then L - 2 decoded tokens
    ar_flops = sum(2 * matmul + 4 * a.d_model * t * a.n_layer + 2 * a.d_model * a.vocab_size for t in positions)
    cost = {"ncm": {"calls": ncm.K + 1, "block_calls": ncm.K * gen.n_layer + tok.decoder_layers,
                    "positions": sum(lengths) * gen.n_layer + seq_len * tok.decoder_layers, "flops": ncm_flops},
            "ar": {"calls": seq_len - 1, "block_calls": (seq_len - 1) * a.n_layer,
                   "positions": (seq_len - 1) * a.n_layer, "flops": ar_flops}}
    cost["ratio_ar_over_ncm"] = {k: cost["ar"][k] / cost["ncm"][k] for k in ("calls", "block_calls", "flops")}
    return cost


def cost_model(cost: dict, res: dict) -> dict:
    """Seconds per sample = o x block calls + c x FLOPs, solved exactly from the two arms (NCM, AR) at one
    batch size: ``per_block_call_s`` o and ``per_mflop_s`` c, and what the target would take:
    ``compute_speedup_needed``, the factor by which NCM's FLOP time must fall for NCM to take AR's time / TARGET,
    with ``need`` saying which case holds -- ``met`` (NCM is that fast already), ``faster_flops``, ``impossible``
    (NCM's block calls alone take longer) or ``unfitted`` (the two arms do not determine o and c >= 0)."""
    (bn, fn), (ba, fa) = ((cost[k]["block_calls"], cost[k]["flops"] / 1e6) for k in ("ncm", "ar"))
    tn, ta = (res["arms"][k]["median_s"] / res["batch"] for k in ("ncm", "ar"))
    det = bn * fa - ba * fn
    o, c = ((tn * fa - ta * fn) / det, (bn * ta - ba * tn) / det) if det else (None, None)
    out = {"per_block_call_s": o, "per_mflop_s": c, "compute_speedup_needed": None}
    if tn <= ta / TARGET:
        return {**out, "need": "met"}
    if o is None or o < 0 or c <= 0:
        return {**out, "need": "unfitted"}
    room = ta / TARGET - o * bn  # seconds NCM's FLOPs may take at the target
    if room <= 0:
        return {**out, "need": "impossible"}
    return {**out, "need": "faster_flops", "compute_speedup_needed": c * fn / room}


def make_sampler(name: str, model: torch.nn.Module, a, batch: int, device: torch.device, record: list):
    """A step for ``interleaved_step_times``: one batch of ``batch`` samples of L tokens; appends
    (ids, nfe) to ``record`` (ids stay where they were made, so the step times no transfer)."""
    from models.ncm import sample as ncm_sample

    generator = torch.Generator(device=device).manual_seed(a.seed + ARMS.index(name))
    if name == "ncm":
        def draw():
            out = ncm_sample(model, batch, temperature=TEMPERATURE, generator=generator)
            return out["ids"], out["nfe"]
    elif name == "ar":
        prompt = torch.full((batch, 1), a.prompt_id, dtype=torch.long, device=device)

        def draw():
            return model.generate(prompt, a.seq_len - 1, temperature=TEMPERATURE, generator=generator, use_cache=True)
    else:
        def draw():
            return model.sample(batch, a.steps, length=a.seq_len, generator=generator, cache=True)

    def step(_):
        ids, nfe = draw()
        record.append((ids, nfe))

    return step


def judge_arms(samples: dict[str, list[list[int]]], a) -> dict[str, dict]:
    """Gen. PPL (``evals.genppl``) of each trained arm's samples under the judge ``a.judge``."""
    from evals.genppl.protocol import GenPPLError, Protocol, Samples, gen_ppl, load_judge, load_model_tokenizer

    tok = load_model_tokenizer(a.tokenizer)
    if tok.vocab_size != a.vocab:
        raise BenchmarkError(f"--tokenizer {a.tokenizer}: {tok.vocab_size} tokens, the runs have {a.vocab}; "
                             "pass the runs' tokenizer.json")
    for name, info in a.loaded.items():
        if info["tokenizer_sha256"] and tok.sha256 != info["tokenizer_sha256"]:
            raise BenchmarkError(f"--tokenizer {a.tokenizer}: not the tokenizer the {name} run was trained with; "
                                 "pass the tokenizer.json of the runs' corpus")
    judge = load_judge(a.judge, a.device)
    out = {}
    for name, ids in samples.items():
        try:
            r = gen_ppl(Samples(ids, tok.decode_batch(ids), f"benchmark:{name}"), [judge],
                        Protocol(max_length=a.seq_len))
        except GenPPLError as e:
            raise BenchmarkError(f"Gen PPL of the {name} arm: {e}") from e
        out[name] = {"gen_ppl": r["metrics"]["genppl/ppl"], "nll": r["metrics"][f"genppl/nll/{judge.key}"],
                     "judged_tokens": r["metrics"][f"genppl/tokens/{judge.key}"], "judge": judge.info["name"],
                     "max_length": a.seq_len}
    return out


def parse_runs(items: list[str] | None, parser) -> dict[str, str]:
    runs = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or name not in ARMS or not path:
            parser.error(f"--runs {item!r}: give ARM=DIR with ARM one of {list(ARMS)}")
        runs[name] = path
    return runs


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq-len", "-L", type=int, default=128, help="tokens per sample, every arm (NCM's window L)")
    p.add_argument("--scales", "-K", type=int, default=12, help="NCM scales K (generator calls)")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=2048)
    p.add_argument("--tok-layers", type=int, help="NCM tokenizer encoder/decoder blocks (default --layers)")
    p.add_argument("--codebook", type=int, default=64, help="NCM codes per scale (the embedded ncm_tok_s: 64)")
    p.add_argument("--schedule", default="quadratic", choices=list(SCHEDULES),
                   help="NCM scale lengths (the embedded ncm_tok_s: quadratic)")
    p.add_argument("--d-code", type=int, default=32, help="NCM code width (VAR's 32, the embedded ncm_tok_s)")
    p.add_argument("--steps", type=int, help="MDLM sampling steps (default --seq-len)")
    p.add_argument("--prompt-id", type=int, default=0, help="the AR arm's one-token prompt (0 = <|endoftext|>)")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 16], help="batch sizes, each timed (1: the target's)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--runs", nargs="+", metavar="ARM=DIR", help="load arms from trained runs (their final/)")
    p.add_argument("--judge", help="a transformers judge folder: Gen PPL of the arms loaded with --runs")
    p.add_argument("--tokenizer", help="the runs' tokenizer.json (decodes the ids for the judge)")
    p.add_argument("--out", default="results/benchmarks/ncm_sampling.json")
    a = p.parse_args(argv)
    a.steps = a.steps or a.seq_len
    runs = parse_runs(a.runs, p)
    if a.judge and not (runs and a.tokenizer):
        p.error("--judge needs --runs (Gen PPL of untrained weights means nothing) and --tokenizer (to decode the ids)")
    if a.rounds < 2:
        p.error("--rounds must be >= 2 (median and IQR)")
    small = [f"--{k.replace('_', '-')} {v}"
             for k, v in (("warmup", a.warmup), ("seq_len", a.seq_len), ("threads", a.threads))
             if v < (0 if k == "warmup" else 1)] + [f"--batch {b}" for b in a.batch if b < 1]
    if small:
        p.error(f"{', '.join(small)}: give positive sizes (--warmup may be 0)")
    device = torch.device(a.device)
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)

    models, a.loaded = {}, {}
    for name in ARMS:
        if name in runs:
            models[name], a.loaded[name] = load_arm(name, runs[name], a, device)
        else:
            torch.manual_seed(a.seed)
            try:
                models[name] = build_model(arm_config(name, a), vocab_size=a.vocab, seq_len=a.seq_len).to(device).eval()
            except ValueError as error:  # a shape the model refuses (heads not dividing the width, K > L, ...)
                raise BenchmarkError(f"the {name} arm at these sizes: {error}") from None
    load = MachineLoad()
    result = {"benchmark": "ncm_sampling",
              "config": {k: v for k, v in vars(a).items() if k != "loaded"} | {"temperature": TEMPERATURE},
              "device": str(device), "batches": {}}
    samples = {name: [] for name in ARMS}
    for batch in a.batch:
        result["batches"][str(batch)] = measure_batch(models, batch, a, device, samples)
    result["cost"] = sampling_cost(models["ncm"], models["ar"], a.seq_len)
    for res in result["batches"].values():
        res["cost_model"] = cost_model(result["cost"], res)
    result["load_avg_1min"] = load.finish()
    if TARGET_BATCH in a.batch:
        met = result["batches"][str(TARGET_BATCH)]["speedup"]["ncm_over_ar"] >= TARGET
        result["target"] = {"ncm_over_ar_min": TARGET, "batch": TARGET_BATCH, "applies_to": "cpu", "paper": PAPER,
                            **judge_target(met, result["load_avg_1min"])}
    else:
        result["target"] = {"ncm_over_ar_min": TARGET, "batch": TARGET_BATCH, "met": None, "measured_met": None,
                            "refused": f"batch {TARGET_BATCH} not measured (--batch {' '.join(map(str, a.batch))})"}
    if a.judge:
        judged = judge_arms({name: samples[name] for name in a.loaded}, a)
        result["gen_ppl"] = {name: judged.get(name, {"gen_ppl": None, "why": "fresh weights: not judged"})
                             for name in ARMS}
    else:
        result["gen_ppl"] = {name: {"gen_ppl": None, "why": "Gen PPL needs trained runs: --runs ARM=DIR ... "
                                                            "--judge FOLDER --tokenizer tokenizer.json"}
                             for name in ARMS}
    result["environment"] = environment(a.threads, device)
    atomic_write_json(a.out, result)
    report(result, a)
    return result


def measure_batch(models: dict, batch: int, a, device: torch.device, samples: dict) -> dict:
    """The arms interleaved at one batch size: per arm the timing, NFE and entropy of its timed samples
    (added to ``samples``), and the speed-ups (ratios of the medians)."""
    records = {name: [] for name in ARMS}
    steps = {name: make_sampler(name, models[name], a, batch, device, records[name]) for name in ARMS}
    times, _ = interleaved_step_times(steps, torch.empty(0, device=device), a.rounds, a.warmup)
    out = {"batch": batch, "arms": {}}
    for name in ARMS:
        timed = records[name][a.warmup:]
        ids = torch.cat([r[0] for r in timed]).cpu()
        nfes = [int(r[1]) for r in timed]
        if ids.shape[1] != a.seq_len:
            raise RuntimeError(f"the {name} arm returned {ids.shape[1]} tokens per sample, not {a.seq_len}")
        samples[name] += ids.tolist()
        q1, med, q3 = statistics.quantiles(times[name], n=4)
        model = models[name]
        arm = {"model": a.loaded[name]["model"] if name in a.loaded else arm_config(name, a),
               "weights": a.loaded[name]["run"] if name in a.loaded else "fresh initialisation (seed %d)" % a.seed,
               "generator_params": model.num_params(non_embedding=False),
               "generator_non_embedding_params": model.num_params(),
               "median_s": med, "iqr_s": [q1, q3], "samples_per_s": batch / med,
               "tokens_per_s": batch * a.seq_len / med,
               "nfe": statistics.median(nfes), "nfe_range": [min(nfes), max(nfes)],
               "s_per_nfe": med / statistics.median(nfes),
               "entropy": mean_entropy(ids.tolist()), "entropy_samples": len(ids)}
        if name == "ncm":
            arm["tokenizer_params"] = sum(t.numel() for t in model.tokenizer.parameters())
            arm["scale_lengths"] = list(model.lengths)
        out["arms"][name] = arm
    arms = out["arms"]
    out["speedup"] = {"ncm_over_ar": arms["ar"]["median_s"] / arms["ncm"]["median_s"],
                      "ncm_over_mdlm": arms["mdlm"]["median_s"] / arms["ncm"]["median_s"],
                      "mdlm_over_ar": arms["ar"]["median_s"] / arms["mdlm"]["median_s"]}
    return out


def report(result: dict, a) -> None:
    for batch, res in result["batches"].items():
        for name, r in res["arms"].items():
            ppl = result["gen_ppl"][name]["gen_ppl"]
            print(f"batch {batch:>3s} {name:5s} {r['median_s'] * 1e3:8.1f} ms/batch (IQR {r['iqr_s'][0] * 1e3:.1f}-"
                  f"{r['iqr_s'][1] * 1e3:.1f})  {r['samples_per_s']:7.1f} samples/s  NFE {r['nfe']:g} "
                  f"({r['s_per_nfe'] * 1e3:.2f} ms each)  entropy {r['entropy']:.2f}  Gen PPL "
                  f"{'-' if ppl is None else f'{ppl:.2f}'}  {r['generator_non_embedding_params'] / 1e6:.2f}M params")
        s = res["speedup"]
        m = res["cost_model"]
        fit = ("" if m["per_block_call_s"] is None else f"; per sample {m['per_block_call_s'] * 1e3:.3f} ms per block "
               f"call + {m['per_mflop_s'] * 1e3:.4f} ms per MFLOP")
        need = (f"{TARGET}x needs NCM's FLOPs {m['compute_speedup_needed']:.1f}x faster" if m["need"] == "faster_flops"
                else {"met": f"{TARGET}x is met here", "unfitted": "the two arms do not fit the cost model",
                      "impossible": f"{TARGET}x needs fewer block calls (they alone take longer)"}[m["need"]])
        print(f"batch {batch:>3s} NCM over AR {s['ncm_over_ar']:.2f}x, over MDLM {s['ncm_over_mdlm']:.2f}x "
              f"(MDLM over AR {s['mdlm_over_ar']:.2f}x){fit}: {need}")
    c = result["cost"]
    print(f"bound, per sample: NCM {c['ncm']['calls']} calls / {c['ncm']['block_calls']} block calls / "
          f"{c['ncm']['flops'] / 1e6:.0f} MFLOP, AR {c['ar']['calls']} / {c['ar']['block_calls']} / "
          f"{c['ar']['flops'] / 1e6:.0f} MFLOP: AR / NCM {c['ratio_ar_over_ncm']['block_calls']:.1f}x in block calls, "
          f"{c['ratio_ar_over_ncm']['flops']:.2f}x in FLOPs")
    t = result["target"]
    load = result["load_avg_1min"]
    print(f"target NCM/AR >= {TARGET}x at batch {TARGET_BATCH}: {target_words(t)} on {a.device}, L {a.seq_len}, "
          f"K {a.scales}, {a.threads} threads; load average {load['before']:.1f} -> {load['after']:.1f} on "
          f"{load['cores']} cores; {result['environment']['host_line']}  -> {a.out}")


if __name__ == "__main__":
    sys.exit(entry_point(main)())
