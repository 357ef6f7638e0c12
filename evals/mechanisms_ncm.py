"""Mechanism checks of an NCM run (Kumbong et al., arXiv 2610.14162): does each stage do what the paper
says it does, measured on a few test windows? Called by the ``mechanisms`` evaluation for a run of arch
``ncm_tokenizer`` (stage 1) or ``ncm`` (stage 2) as ``check_ncm(model, manifest, final_dir, tokens_dir)``.

Windows: the run's own view of the test split (``trainer.data.view``: disjoint ``seq_len`` windows of a
stream, or paired examples -- whole, source then target, for a conditional generator, or their targets),
``max_windows`` full ones (default 64) evenly spaced over the split (window i * available // n, as
``evals.mechanisms`` chooses them), a deterministic choice. The tokenizer sees each
window's L target tokens; an ``ncm`` run is measured through its frozen tokenizer (``model.tokenizer``,
the upstream ``ncm_tokenizer`` run's weights saved in its checkpoint, as ``evals.recon`` does). Forward
passes only, eval mode (no nested dropout, no perturbation), no sampling.

Tokenizer (both arches; NCM Sec. 3.2):

* ``mech/recon_k{k}``: exact token accuracy of the decoder's argmax from the first k scales, k = 1..K
  (``models.ncm_tokenizer.reconstruction_accuracy``, the function ``evals.recon`` reports);
  ``mech/recon_half`` is k = ceil(K/2);
* ``mech/mft_floor``: the share of the most frequent token among the scored target tokens, what a
  decoder that outputs that one token everywhere scores;
* ``mech/code_entropy_s{k}``: the entropy (nats) of scale k's empirical code usage over the windows, and
  ``mech/code_entropy_max`` = ln |V| (uniform usage of the codebook; with per-scale sizes
  ``model.codebook_sizes`` the largest, each scale's ln |V_k| in ``details.code_entropy_max``).

Generator (``ncm`` only; NCM Sec. 3.3, Eq. 10):

* ``mech/gen_ce_s{k}``: teacher-forced cross-entropy (nats per code) of scale k's codes, the per-scale
  term ``ce_s<k>`` of the training loss, read from ``NCM.forward`` itself (clean conditioning codes in
  eval mode), averaged over windows;
* ``mech/marginal_ce_s{k}``: the cross-entropy of the same codes under scale k's own code unigram,
  counted on ``marginal_windows`` train windows, evenly spaced (``details.marginal_split``) with add-one
  smoothing, as the suite's unigram baseline (``evals.perplexity.unigram_nll``);
* ``mech/gen_over_marginal_scales``: the number of judged scales with gen_ce < marginal_ce (scales 2..K
  for an unconditional generator, every scale for a conditional one; ``details.judged_scales``);
* ``mech/gen_code_nll_window`` = sum_k l_k gen_ce_s{k}, the generator's code NLL per window, and
  ``mech/tokens_per_window`` = L: the ELBO's generative term (NCM Sec. 3.1: -log p(x) <= -log p(r) plus
  the reconstruction term) beside an AR baseline's test NLL per token x L.

``mech/intact_nll`` is the main number whose seed spread the tables show: for ``ncm`` the generator's
mean code NLL per code (gen_code_nll_window / sum_k l_k), for ``ncm_tokenizer`` 1 - recon_k{K}.

Checks (``details.checks``, judged by the tables: a floor check passes when the value exceeds ``floor``):

* ``recon_half_above_floor`` (gate): the coarse half of the scales carries content beyond the most
  frequent token, recon_half > mft_floor + 0.05 (nested dropout trains every prefix of scales to
  decode, NCM Sec. 3.2);
* ``recon_full`` (no gate): all K scales reconstruct > 99 % of tokens (the paper: 99.98 %, Table 1);
* ``gen_beats_marginal`` (gate, ``ncm`` only): every judged scale's codes are predicted better than by
  their unigram, gen_over_marginal_scales > judged - 0.5 -- the coarser reconstruction the generator
  conditions on carries information about the next scale (NCM Sec. 3.3). Unconditionally (no source
  prefix), block 1's input is the learned start embedding alone (``NCM.block_input``): scale 1 can at
  best match a per-position unigram of its l_1 codes, so it is reported and not judged.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from common.errors import ReproError
from evals.recon import recon_tokenizer
from evals.registry import NCM_ARCHS
from models.ncm_tokenizer import NCMTokenizer, reconstruction_accuracy
from trainer.data import check_data, gather_windows, open_split, read_manifest, view

MAX_WINDOWS = 64          # test windows measured
MARGINAL_WINDOWS = 1024   # train windows the code unigrams are counted on
SMOOTHING = 1.0           # add-one, as the suite's unigram baseline


class MechanismsNCMError(ReproError, ValueError):
    """The run is no NCM run, or its split has no full window to measure."""


def split_windows(tokens: np.ndarray, run_view, n: int | None) -> tuple[torch.Tensor, int]:
    """(``n`` full windows of the run's view of ``tokens``, evenly spaced -- window i * available // n --,
    as (n, seq_len) int64; the number of full windows available); None or n >= available = all."""
    available = run_view.count(len(tokens))
    count = available if n is None else min(n, available)
    if count < 1:
        return torch.zeros((0, run_view.seq_len), dtype=torch.int64), available
    chosen = np.arange(count, dtype=np.int64) * available // count
    return gather_windows(tokens, run_view.starts(chosen), run_view.seq_len)[0], available


@torch.no_grad()
def encode_windows(tokenizer: NCMTokenizer, targets: torch.Tensor, batch_size: int) -> list[torch.Tensor]:
    """K code tensors (n, l_k) on the CPU of the target windows (n, L): ``NCMTokenizer.encode`` in eval mode
    (NCM Sec. 3.2, the residual quantiser)."""
    was_training = tokenizer.training
    tokenizer.eval()
    device = next(tokenizer.parameters()).device
    parts = [[c.cpu() for c in tokenizer.encode(targets[i:i + batch_size].to(device))]
             for i in range(0, len(targets), batch_size)]
    tokenizer.train(was_training)
    return [torch.cat(scale) for scale in zip(*parts)]


def code_counts(codes: list[torch.Tensor], codebook_size: int) -> torch.Tensor:
    """(K, |V|) int64 usage counts of every scale's codes; with per-scale codebooks of several sizes
    ``codebook_size`` is the largest and a smaller scale's row ends in zeros."""
    return torch.stack([torch.bincount(c.flatten(), minlength=codebook_size) for c in codes])


def entropy(counts: torch.Tensor) -> list[float]:
    """Entropy in nats of each row of usage ``counts`` (K, |V|) (0 log 0 = 0; NCM Sec. 3.2, code usage)."""
    p = counts.double() / counts.sum(1, keepdim=True).clamp_min(1)
    return (-(p * p.clamp_min(1e-300).log()).sum(1)).clamp_min(0.0).tolist()


def marginal_ce(test: torch.Tensor, train: torch.Tensor, smoothing: float = SMOOTHING,
                sizes: list[int] | None = None) -> list[float]:
    """Cross-entropy (nats per code) of each scale's ``test`` counts (K, |V|) under the scale's unigram of
    the ``train`` counts (K, |V|), add-``smoothing`` over the scale's ``sizes[k]`` codes (default |V|)."""
    sizes = torch.tensor(sizes if sizes is not None else [train.shape[1]] * len(train), dtype=torch.float64)
    q = (train.double() + smoothing) / (train.sum(1, keepdim=True).double() + smoothing * sizes[:, None])
    return (-(test.double() * q.log()).sum(1) / test.sum(1).clamp_min(1)).tolist()


def most_frequent_share(tokens: torch.Tensor) -> float:
    """The share of the most frequent token in ``tokens``: the accuracy of a decoder that outputs it
    everywhere (the floor of reconstruction accuracy)."""
    flat = tokens.flatten()
    return torch.bincount(flat).max().item() / flat.numel() if flat.numel() else 0.0


@torch.no_grad()
def generator_ce(model: torch.nn.Module, windows: torch.Tensor, batch_size: int) -> list[float]:
    """Per-scale teacher-forced cross-entropy (nats per code) over ``windows`` (n, P + L): the ``ce_s<k>``
    terms of the training loss (``NCM.forward`` with targets, Eq. 10), in eval mode (clean conditioning
    codes, no source dropout), each batch's mean weighted by its windows."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total = [0.0] * model.K
    for i in range(0, len(windows), batch_size):
        x = windows[i:i + batch_size].to(device)
        metrics = model(x, x)["metrics"]
        total = [t + metrics[f"ce_s{k + 1}"] * len(x) for k, t in enumerate(total)]
    model.train(was_training)
    return [t / len(windows) for t in total]


def floor_check(name: str, key: str, floor: float, gate: bool, what: str) -> dict:
    """One ``details.checks`` entry: passes when ``metrics[key]`` > ``floor`` (judged by the tables)."""
    return {"name": name, "key": key, "kind": "floor", "floor": float(floor), "gate": gate, "what": what}


def tokenizer_part(tokenizer: NCMTokenizer, targets: torch.Tensor, codes: list[torch.Tensor],
                   batch_size: int) -> tuple[dict, dict]:
    """Reconstruction per k, the most-frequent-token floor and per-scale code entropies (NCM Sec. 3.2)."""
    K, sizes = tokenizer.cfg.K, tokenizer.cfg.sizes
    V = max(sizes)
    acc = reconstruction_accuracy(tokenizer, targets, batch_size=batch_size)
    ent = entropy(code_counts(codes, V))
    metrics = {**{f"mech/recon_k{k}": acc[k] for k in range(1, K + 1)},
               "mech/recon_half": acc[math.ceil(K / 2)], "mech/mft_floor": most_frequent_share(targets),
               **{f"mech/code_entropy_s{k + 1}": h for k, h in enumerate(ent)},
               "mech/code_entropy_max": math.log(V)}
    details = {"recon": [acc[k] for k in range(1, K + 1)], "code_entropy": ent, "codebook_sizes": list(sizes),
               "code_entropy_max": [math.log(v) for v in sizes]}
    return metrics, details


def generator_part(model: torch.nn.Module, windows: torch.Tensor, codes: list[torch.Tensor],
                   train_codes: list[torch.Tensor], batch_size: int, first: int) -> tuple[dict, dict]:
    """Per-scale generator and unigram cross-entropies, the code NLL per window (NCM Sec. 3.3, Eq. 10)."""
    sizes, lengths = model.tokenizer.cfg.sizes, model.lengths
    V = max(sizes)
    gen = generator_ce(model, windows, batch_size)
    marg = marginal_ce(code_counts(codes, V), code_counts(train_codes, V), sizes=list(sizes))
    per_window = sum(l * ce for l, ce in zip(lengths, gen))
    metrics = {**{f"mech/gen_ce_s{k + 1}": v for k, v in enumerate(gen)},
               **{f"mech/marginal_ce_s{k + 1}": v for k, v in enumerate(marg)},
               "mech/gen_over_marginal_scales": float(sum(g < m for g, m in list(zip(gen, marg))[first - 1:])),
               "mech/gen_code_nll_window": per_window, "mech/tokens_per_window": float(model.tokenizer.cfg.seq_len),
               "mech/intact_nll": per_window / sum(lengths)}
    return metrics, {"gen_ce": gen, "marginal_ce": marg, "gen_below_marginal": [g < m for g, m in zip(gen, marg)],
                     "judged_scales": list(range(first, len(gen) + 1))}


def checks(metrics: dict, K: int, generator: bool, first: int = 1) -> list[dict]:
    """The floor checks of the module docstring."""
    out = [floor_check("recon_half_above_floor", "mech/recon_half", metrics["mech/mft_floor"] + 0.05, True,
                       f"reconstruction from the first {math.ceil(K / 2)} of {K} scales beats the most frequent "
                       "token by 5 points: the coarse scales carry content"),
           floor_check("recon_full", f"mech/recon_k{K}", 0.99, False,
                       f"reconstruction from all {K} scales above 99 % of tokens (the paper: 99.98 %)")]
    if generator:
        judged = K - first + 1
        out.append(floor_check("gen_beats_marginal", "mech/gen_over_marginal_scales", judged - 0.5, True,
                               f"the generator predicts the codes of every one of scales {first}..{K} better than "
                               "their unigram"))
    return out


def check_ncm(model: torch.nn.Module, manifest: dict, final_dir: Path, tokens_dir: Path,
              max_windows: int = MAX_WINDOWS, batch_size: int = 16, marginal_windows: int = MARGINAL_WINDOWS,
              marginal_split: str = "train") -> tuple[dict, dict]:
    """(metrics, details) of the NCM mechanism checks of a loaded ``ncm_tokenizer`` or ``ncm`` run (module
    docstring) on ``max_windows`` test windows; the code unigrams of an ``ncm`` run on ``marginal_windows``
    windows of ``marginal_split`` ("test": the measured windows themselves)."""
    run_cfg = manifest["config"]
    arch = run_cfg["model"]["arch"]
    tokenizer = recon_tokenizer(model)
    if arch not in NCM_ARCHS or tokenizer is None:
        raise MechanismsNCMError(f"{final_dir}: model.arch={arch!r}; the NCM mechanism checks apply to ncm_tokenizer "
                                 "and ncm runs only")
    if max_windows < 1 or marginal_windows < 1:
        raise MechanismsNCMError(f"max_windows={max_windows}, marginal_windows={marginal_windows}: give positive "
                                 "numbers of windows")
    check_data(manifest.get("data"), tokens_dir, final_dir)
    run_view = view(read_manifest(tokens_dir), run_cfg, Path(tokens_dir))
    windows, available = split_windows(open_split(tokens_dir, "test"), run_view, max_windows)
    if not len(windows):
        raise MechanismsNCMError(f"{tokens_dir}: the test split has no full window of {run_view.seq_len} tokens")
    P, K = run_view.seq_len - tokenizer.cfg.seq_len, tokenizer.cfg.K
    first = 1 if P > 0 else 2  # unconditional: scale 1 sees the start embedding alone (module docstring)
    targets = windows[:, P:]
    codes = encode_windows(tokenizer, targets, batch_size)
    metrics, per_scale = tokenizer_part(tokenizer, targets, codes, batch_size)
    details = {"windows": len(windows), "windows_available": available, "max_windows": max_windows,
               "tokens": targets.numel(), "K": K, "codebook_size": max(tokenizer.cfg.sizes),
               "scale_lengths": list(tokenizer.lengths), "recon_half_k": math.ceil(K / 2),
               "window": f"window i * {available} // {len(windows)} of the {available} full windows of the test "
                         f"split as the run reads them ({run_view.seq_len} tokens; the tokenizer encodes the last "
                         f"{tokenizer.cfg.seq_len})",
               "tokenizer": "the run's own model" if tokenizer is model else
                            f"the frozen tokenizer (model.tokenizer) of the {arch} run",
               "batch_size": batch_size, **per_scale}
    if arch == "ncm":
        if marginal_split == "test":
            train_codes, n_train = codes, len(windows)
        else:
            train = split_windows(open_split(tokens_dir, marginal_split), run_view, marginal_windows)[0]
            train_codes, n_train = encode_windows(tokenizer, train[:, P:], batch_size), len(train)
        gen_metrics, gen_details = generator_part(model, windows, codes, train_codes, batch_size, first)
        metrics.update(gen_metrics)
        details.update(gen_details, marginal_split=marginal_split, marginal_windows=n_train,
                       marginal_smoothing=f"add-{SMOOTHING:g} over each scale's {list(tokenizer.cfg.sizes)} codes",
                       code_positions=sum(tokenizer.lengths))
    else:
        metrics["mech/intact_nll"] = 1.0 - metrics[f"mech/recon_k{K}"]
    details["checks"] = checks(metrics, K, arch == "ncm", first)
    return metrics, details
