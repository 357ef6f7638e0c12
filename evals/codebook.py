"""Codebook usage of a trained ConceptLM run on the test split (arXiv 2602.08984 App. E.3, Fig. 5).

Every chunk of the test stream is assigned to its nearest code in each of the S segments, exactly
as ``ConceptLM.forward`` assigns it during training: ``encode`` (embeddings and the first
``insert_layer`` blocks), ``chunk_states`` (mean pooling), the transformed codes from
``quantizer.codes()`` and ``quantizer.assign``. The stream is read in the disjoint
windows of ``seq_len`` tokens that the perplexity evaluation scores (``evals.perplexity``); each
window of n input tokens gives floor(n/k) chunks (a trailing partial chunk is left out, as the model
does), so a final window shorter than k gives none. The metrics are those of
``models.quantizers.codebook_usage`` over all test chunks at once; ``details.counts`` keeps the
(S, N) assignment counts they come from.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from common.errors import ReproError
from common.io import atomic_write_json
from evals.perplexity import load_trained, window_batches
from evals.result import result_record
from models.quantizers import ProductVQ, codebook_usage
from trainer.data import check_data, open_split


class CodebookEvalError(ReproError, ValueError):
    """The run has no product codebook to measure."""


@torch.no_grad()
def chunk_codes(model: torch.nn.Module, block: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Code index (B, T // k, S) of every chunk of the token ids ``block`` (B, T), as in ``forward``."""
    return model.quantizer.assign(model.chunk_states(model.encode(block)), codes)


@torch.no_grad()
def stream_codes(model: torch.nn.Module, tokens: np.ndarray, seq_len: int, batch_size: int) -> torch.Tensor:
    """Code index (chunks, S) of every chunk of the disjoint ``seq_len`` windows of ``tokens``."""
    codes = model.quantizer.codes()
    return torch.cat([chunk_codes(model, block.to(codes.device), codes).flatten(0, 1).cpu()
                      for block in window_batches(tokens, seq_len, batch_size)])


def evaluate_codebook(final_dir: Path, tokens_dir: Path, out_path: Path, batch_size: int = 16) -> dict:
    t0 = time.perf_counter()
    model, manifest = load_trained(final_dir)
    check_data(manifest.get("data"), tokens_dir, final_dir)
    run_cfg = manifest["config"]
    if not isinstance(getattr(model, "quantizer", None), ProductVQ):
        raise CodebookEvalError(f"{final_dir}: model.arch={run_cfg['model']['arch']!r} has no product codebook; "
                                "the codebook evaluation applies to ConceptLM runs only")
    cfg, seq_len = model.cfg, run_cfg["model"]["seq_len"]
    S, N = cfg.segments, cfg.codebook_size
    index = stream_codes(model, open_split(tokens_dir, "test"), seq_len, batch_size)
    counts = torch.zeros(S, N, dtype=torch.int64).scatter_add_(1, index.T, torch.ones_like(index.T))
    usage = codebook_usage(index, N)
    metrics = {"model/params": manifest["non_embedding_params"], "test/utilisation_pct": usage["vq_util_pct"],
               "test/usage_ppl_mean": usage["vq_ppl_mean"],
               "test/usage_ppl_min": min(usage[f"vq_ppl_s{s}"] for s in range(S)),
               "test/dead_codes": usage["vq_dead_codes"], "test/collapse": usage["vq_collapse"],
               "test/chunks": index.shape[0]}
    details = {"counts": counts.tolist(), "n_segments": S, "codebook_size": N, "chunk_size": cfg.chunk_size,
               "window": f"disjoint windows of {seq_len} tokens, floor(n/{cfg.chunk_size}) chunks of each",
               "batch_size": batch_size}
    result = result_record(manifest, out_path, metrics, details, t0)
    atomic_write_json(out_path, result)
    return result
