"""DLCM's decoder cross-attention from tokens to concepts as timed arms: concept replication, the explicit
mask and FlexAttention (DLCM arXiv 2512.24617v2, §3.5, Table 6), for the kernel evaluation
(``evals.kernel_latency``) and the benchmark (``benchmarks.dlcm_attention``). Every arm computes the same thing
(``models.dlcm`` docstring, "Causality rule" and "Concept replication"):
token t sees the null concept and the concepts j < seg(t), concept row r weighted by its replication
count n_tr = #{i <= t : seg(i) = r}:

* ``replicate``: ``models.dlcm.ConceptCrossAttention`` in mode ``replicate`` (the model's default):
  K, V gathered to the T positions, one causal SDPA;
* ``mask``: the same module in mode ``mask`` (the reference): SDPA over the null + M concept rows with
  the bias log n_tr (-inf where 0);
* ``flex_eager`` / ``flex_compiled``: the module's own projections and Q/K norms around
  ``flex_attention`` (as is / through ``torch.compile``) with a block mask (row r visible iff
  r <= seg(t)) and a score_mod adding log n_tr. The block mask is built inside the step: DLCM's
  boundaries, hence the mask, change every batch. Torch 2.13 has no flex backward on CPU: that pass
  records the error.

Every arm includes the module's Q, K/V and output projections (a cost all arms share, which dilutes the
ratios of the attention cores). Boundaries are fixed intervals b_t = [t % R == 0] (``--intervals``; the
paper's "interval 6"), M = ceil(T / R) concepts, d_concept = ``--concept-mult`` x hidden (DLCM's default
2). Two passes: forward (no grad) and forward + backward (a fixed cotangent; grads of x, z, weights).
"""
from __future__ import annotations

import statistics
import time
from functools import partial

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from evals.timing import interleaved_step_times
from models.dlcm import ConceptCrossAttention, segment_ids

ARMS = ("replicate", "mask", "flex_eager", "flex_compiled")
PASSES = ("forward", "forward_backward")
_compiled_flex = None


def fixed_segments(t: int, r: int, device) -> torch.Tensor:
    """seg (1, T) of the boundaries b_t = [t % R == 0]."""
    return segment_ids((torch.arange(t, device=device) % r == 0)[None])


def flex_visibility(seg: torch.Tensor, rows: int):
    """(score_mod, block_mask) for flex_attention: row r (0 = null, r = concept r - 1) is visible to token t
    iff r <= seg(t), with log n_tr added, so flex computes what replication computes."""
    bsz, t = seg.shape
    pos = torch.arange(t, device=seg.device).expand(bsz, t)
    # start[b, r]: first position of segment r; T for the rows past the last segment
    start = torch.full((bsz, rows + 1), t, device=seg.device).scatter_reduce(1, seg, pos, "amin")

    def mask_mod(b, h, q, kv):
        return kv <= seg[b, q]

    def score_mod(score, b, h, q, kv):
        n = torch.minimum(q + 1, start[b, kv + 1]) - start[b, kv]   # tokens of segment kv at or before q
        return score + n.clamp(min=1).to(score.dtype).log()         # clamp: masked entries only

    return score_mod, create_block_mask(mask_mod, bsz, None, t, rows, device=seg.device)


def flex_forward(attn: ConceptCrossAttention, x, z, seg, compiled: bool):
    """``ConceptCrossAttention.forward`` with flex_attention in place of SDPA: the module's own layers; its
    projection lines are repeated here because models.dlcm has no hook for the attention core."""
    global _compiled_flex
    if compiled and _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention)
    flex = _compiled_flex if compiled else flex_attention
    b, t, d = x.shape
    q = attn.q_norm(attn.q(x).view(b, t, attn.n_head, attn.head_dim)).transpose(1, 2)
    k, v = attn.kv(z).view(b, z.shape[1], 2, attn.n_kv_head, attn.head_dim).unbind(2)
    k, v = attn.k_norm(k).transpose(1, 2), v.transpose(1, 2)
    score_mod, block_mask = flex_visibility(seg, z.shape[1])
    y = flex(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=attn.n_kv_head != attn.n_head)
    return attn.proj(y.transpose(1, 2).reshape(b, t, d))


def build_arms(a, d: int, device, dtype) -> dict:
    """{arm: (module, fn(x, z, seg) -> y)}, every module with the same weights (seed a.seed)."""
    arms = {}
    for name in ARMS:
        if name.startswith("flex") and name.removeprefix("flex_") not in a.flex:
            continue
        torch.manual_seed(a.seed)
        attn = ConceptCrossAttention(d, a.concept_mult * d, a.heads, a.heads, bias=False, dropout=0.0, eps=1e-5,
                                     mode="mask" if name == "mask" else "replicate", weighting="count")
        attn = attn.to(device, dtype).eval()
        fn = partial(flex_forward, attn, compiled=name == "flex_compiled") if name.startswith("flex") else attn
        arms[name] = (attn, fn)
    return arms


def make_step(attn, fn, x, z, seg, g, backward: bool):
    """A step for ``interleaved_step_times`` (its argument unused): one forward, or forward + backward
    with the grads dropped after it (so no arm pays for accumulating into old ones)."""
    def step(_):
        if not backward:
            with torch.no_grad():
                fn(x, z, seg)
            return
        fn(x, z, seg).backward(g)
        for p in (x, z, *attn.parameters()):
            p.grad = None
    return step


def agreement(arms: dict, x, z, seg, g) -> dict:
    """Max abs difference of each arm's output, grad x and grad z from replicate's (errors as strings)."""
    ref, out = {}, {}
    for name, (_, fn) in arms.items():
        got, row = {}, {}
        try:
            with torch.no_grad():  # the output alone first: flex has no backward on CPU
                got["output"] = fn(x, z, seg)
            xi, zi = x.detach().clone().requires_grad_(), z.detach().clone().requires_grad_()
            fn(xi, zi, seg).backward(g)
            got["grad_x"], got["grad_z"] = xi.grad, zi.grad
        except Exception as e:  # noqa: BLE001 - recorded, not fatal
            row["error"] = repr(e)
        ref = ref or got
        for key, value in got.items():
            row[key] = (value.detach().float() - ref[key].detach().float()).abs().max().item()
        out[name] = row
    out["replicate_output_max_abs"] = ref["output"].detach().float().abs().max().item()
    return out


def time_pass(arms: dict, x, z, seg, g, backward: bool, a) -> dict:
    """Interleaved, rotating-order timing of one pass; an arm whose first call fails keeps its error."""
    steps, result = {}, {}
    for name, (attn, fn) in arms.items():
        step = make_step(attn, fn, x, z, seg, g, backward)
        try:
            step(None)  # the first call: compilation, and the error if the arm cannot run
            steps[name] = step
        except Exception as e:  # noqa: BLE001
            result[name] = {"error": repr(e)}
    interleaved_step_times(steps, x, rounds=0, warmup=a.warmup)
    times, peak = {name: [] for name in steps}, dict.fromkeys(steps, 0.0)
    for r in range(a.rounds):
        names = list(steps)[r % len(steps):] + list(steps)[:r % len(steps)]
        t, p = interleaved_step_times({n: steps[n] for n in names}, x, rounds=1, warmup=0)
        for n in names:
            times[n] += t[n]
            peak[n] = max(peak[n], p[n])
    for name in steps:
        q1, med, q3 = statistics.quantiles([s * 1e3 for s in times[name]], n=4)
        result[name] = {"median_ms": med, "iqr_ms": [q1, q3]} | ({"peak_mib": peak[name]} if x.is_cuda else {})
    return {name: result[name] for name in arms}


def ratios(arms: dict) -> dict:
    ms = {name: r.get("median_ms") for name, r in arms.items()}
    out = {"replicate_over_mask": ms["replicate"] / ms["mask"] if ms["replicate"] and ms["mask"] else None}
    for name in ("flex_eager", "flex_compiled"):
        if name in ms:
            out[f"{name}_over_replicate"] = ms[name] / ms["replicate"] if ms[name] and ms["replicate"] else None
    return out


def run_case(a, t: int, r: int, head_dim: int, device, dtype, first: bool, passes=PASSES) -> dict:
    torch._dynamo.reset()  # a fresh compile per size: no recompile limit, compile time in the first call
    d = a.heads * head_dim
    arms = build_arms(a, d, device, dtype)
    seg = fixed_segments(t, r, device)
    rows = int(seg[0, -1]) + 2                        # the null + M concepts
    gen = torch.Generator(device=device).manual_seed(a.seed)
    x = torch.randn(1, t, d, device=device, dtype=dtype, generator=gen).requires_grad_()
    z = torch.randn(1, rows, a.concept_mult * d, device=device, dtype=dtype, generator=gen).requires_grad_()
    g = torch.randn(1, t, d, device=device, dtype=dtype, generator=gen)
    case = {"seq_len": t, "interval": r, "concepts": rows - 1, "head_dim": head_dim, "hidden": d}
    if first:
        case["agreement"] = agreement(arms, x, z, seg, g)
    if any(name.startswith("flex") for name in arms):  # one eager build, a part of every flex step
        try:
            t0 = time.perf_counter()
            flex_visibility(seg, rows)
            case["flex_block_mask_ms"] = (time.perf_counter() - t0) * 1e3
        except Exception:  # noqa: BLE001 - the flex arms record the error
            case["flex_block_mask_ms"] = None
    for name in passes:
        case[name] = {"arms": time_pass(arms, x, z, seg, g, name == "forward_backward", a)}
        case[name]["ratios"] = ratios(case[name]["arms"])
    return case
