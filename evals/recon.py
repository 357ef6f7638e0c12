"""Exact token reconstruction of an NCM tokenizer on the test split (NCM Table 1 analogue and its curve
over the scales used; Kumbong et al., arXiv 2610.14162, Table 1; docs/sources.md, "NCM: what the paper
specifies").

The run is an ``ncm_tokenizer`` run, or an ``ncm`` generator run, whose frozen tokenizer
(``model.tokenizer``, saved in its checkpoint) is measured. The test stream is read in the disjoint
windows of ``seq_len`` tokens that the perplexity evaluation scores (``evals.perplexity``); the
tokenizer encodes exactly ``seq_len`` tokens, so only full windows count (a shorter trailing window is
left out), and only the first ``max_windows`` of them (default 256; None: all), a deterministic choice
recorded in ``details``. Every window is encoded to its K scales of codes (``NCMTokenizer.encode``) and
decoded, argmax, from its first k scales for every k = 1..K (``models.ncm_tokenizer.reconstruction_accuracy``,
in eval mode: no nested dropout). Metrics:

* ``test/token_acc_k{k}``: the fraction of tokens whose argmax reconstruction from the first k scales
  equals the input, k = 1..K; ``test/token_acc`` is k = K (all scales: NCM Table 1);
* ``test/seq_exact``: the fraction of windows reconstructed exactly, every token, from all K scales;
* ``model/K``, ``model/seq_len`` and ``model/params`` (the tokenizer's non-embedding parameters, as
  ``NCMTokenizer.num_params``; for an ``ncm`` run the tokenizer's, not the generator's).

Counts are integers summed over windows, so the result does not depend on ``batch_size``.
"""
from __future__ import annotations

import json

import time
from pathlib import Path

import numpy as np
import torch

from common.errors import ReproError
from common.io import atomic_write_json
from evals.perplexity import load_trained
from evals.result import result_record
from models.ncm_tokenizer import NCMTokenizer, reconstruction_accuracy
from trainer.data import View, check_data, gather_windows, open_split, read_manifest, sequential_windows


class ReconEvalError(ReproError, ValueError):
    """The run has no NCM tokenizer to measure, or the test split has no window to measure it on."""


def recon_tokenizer(model: torch.nn.Module) -> NCMTokenizer | None:
    """The NCM tokenizer of a loaded model: itself (``ncm_tokenizer``), its frozen ``tokenizer`` (``ncm``),
    else None."""
    if isinstance(model, NCMTokenizer):
        return model
    tokenizer = getattr(model, "tokenizer", None)
    return tokenizer if isinstance(tokenizer, NCMTokenizer) else None


def recon_windows(tokens: np.ndarray, seq_len: int, max_windows: int | None,
                  layout: dict | None = None) -> tuple[torch.Tensor, int]:
    """(the first ``max_windows`` full disjoint ``seq_len`` windows of ``tokens`` as (N, seq_len) int64,
    the number of full windows available). Paired examples (``layout``): the target of each example."""
    if layout is not None:  # the targets-only view of the records (trainer.data.View)
        targets = View(layout["source_len"] + layout["target_len"], layout["source_len"], seq_len, 0)
        starts = targets.starts(np.arange(targets.count(len(tokens)))).tolist()
    else:
        starts = [s for s, n in sequential_windows(len(tokens), seq_len) if n == seq_len]
    chosen = np.asarray(starts[:max_windows] if max_windows is not None else starts, dtype=np.int64)
    if not len(chosen):
        return torch.zeros((0, seq_len), dtype=torch.int64), len(starts)
    return gather_windows(tokens, chosen, seq_len)[0], len(starts)


@torch.no_grad()
def tier_accuracy(tokenizer: NCMTokenizer, windows: torch.Tensor, tokens_dir: Path, layout: dict | None,
                  batch_size: int) -> dict:
    """``<tier>/token_acc`` from all K scales for paired examples whose corpus rows name a tier (Sudoku's
    difficulty), else nothing."""
    corpus = Path(tokens_dir).parent / "corpus" / "test.jsonl"
    if layout is None or not corpus.is_file():
        return {}
    with open(corpus) as f:
        tiers = [json.loads(line).get("tier") for _, line in zip(range(len(windows)), f)]
    out = {}
    for tier in sorted({t for t in tiers if t is not None}):
        rows = torch.tensor([i for i, t in enumerate(tiers) if t == tier])
        out[f"{tier}/token_acc"] = reconstruction_accuracy(tokenizer, windows[rows],
                                                           batch_size=batch_size)[tokenizer.cfg.K]
    return out


def exact_windows(tokenizer: NCMTokenizer, windows: torch.Tensor, batch_size: int) -> int:
    """Number of ``windows`` (N, L) whose argmax reconstruction from all K scales equals them everywhere."""
    was_training = tokenizer.training
    tokenizer.eval()
    device = next(tokenizer.parameters()).device
    exact = 0
    for start in range(0, len(windows), batch_size):
        x = windows[start:start + batch_size].to(device)
        codes = tokenizer.encode(x)
        pred = tokenizer.tokens(tokenizer.decode(tokenizer.cumulative(codes, tokenizer.cfg.K)))
        exact += int((pred == x).all(1).sum().item())
    tokenizer.train(was_training)
    return exact


def evaluate_recon(final_dir: Path, tokens_dir: Path, out_path: Path, batch_size: int = 16,
                   max_windows: int | None = 256) -> dict:
    """Reconstruction accuracy from the first k scales, k = 1..K, on the first ``max_windows`` full
    disjoint ``seq_len`` windows of the test split (module docstring); writes and returns the result."""
    t0 = time.perf_counter()
    model, manifest = load_trained(final_dir)
    check_data(manifest.get("data"), tokens_dir, final_dir)
    run_cfg = manifest["config"]
    arch = run_cfg["model"]["arch"]
    tokenizer = recon_tokenizer(model)
    if tokenizer is None:
        raise ReconEvalError(f"{final_dir}: model.arch={arch!r} has no NCM tokenizer; the reconstruction "
                             "evaluation applies to ncm_tokenizer and ncm runs only")
    if max_windows is not None and max_windows < 1:
        raise ReconEvalError(f"max_windows={max_windows}: give a positive number of windows, or None for all")
    seq_len, K = tokenizer.cfg.seq_len, tokenizer.cfg.K
    tokens = open_split(tokens_dir, "test")
    layout = read_manifest(tokens_dir).get("layout")
    windows, available = recon_windows(tokens, seq_len, max_windows, layout)
    if not len(windows):
        raise ReconEvalError(f"{tokens_dir}: the test split has {len(tokens)} tokens, not one full window of "
                             f"{seq_len} (+1) tokens; the tokenizer encodes exactly model.seq_len tokens")
    acc = reconstruction_accuracy(tokenizer, windows, batch_size=batch_size)
    exact = exact_windows(tokenizer, windows, batch_size)
    metrics = {"test/token_acc": acc[K], **{f"test/token_acc_k{k}": acc[k] for k in range(1, K + 1)},
               "test/seq_exact": exact / len(windows), "model/K": K, "model/params": tokenizer.num_params(),
               "model/seq_len": seq_len, **tier_accuracy(tokenizer, windows, tokens_dir, layout, batch_size)}
    details = {"scale_lengths": list(tokenizer.lengths), "windows": len(windows), "windows_available": available,
               "max_windows": max_windows, "tokens": windows.numel(), "exact_windows": exact,
               "window": (f"the targets of the first {len(windows)} of the {available} paired test examples"
                          if layout else f"the first {len(windows)} of the {available} full disjoint windows of "
                          f"{seq_len} tokens of the test split (a shorter trailing window is left out)"),
               "tokenizer": "the run's own model" if tokenizer is model else
                            f"the frozen tokenizer (model.tokenizer) of the {arch} run",
               "decoding": "argmax of the decoder from the first k scales, k = 1..K, eval mode",
               "batch_size": batch_size}
    result = result_record(manifest, out_path, metrics, details, t0)
    atomic_write_json(out_path, result)
    return result
