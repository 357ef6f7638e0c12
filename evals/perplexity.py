"""Perplexity of a trained model on the valid and test token streams, beside two references
computed on exactly the same target tokens:

* the **oracle** PPL: exp of the synthetic world's exact document NLL (generator log-probabilities,
  end-of-document included) divided by the number of target tokens — the floor no model can beat
  in expectation; absent (null) for real corpora;
* the **unigram** PPL: add-one-smoothed token frequencies of the training split.

The model scores the stream in disjoint windows of ``seq_len`` (every target token once, each
conditioned on the tokens since its window start). The oracle conditions on the whole document, so
the gap between them includes what a window boundary hides; ``details.window`` records the choice.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from common.io import atomic_write_json, sha256_file
from evals.result import result_record
from models.registry import build_model
from common.errors import CheckpointError
from models.weights import load_model_weights
from trainer.data import check_data, open_split, read_manifest, sequential_windows


def load_trained(final_dir: Path, device: str | None = None) -> tuple[torch.nn.Module, dict]:
    """The model in ``final_dir`` (on ``device``; default the GPU when there is one) and its manifest,
    after checking the weights' sha256."""
    final_dir = Path(final_dir)
    manifest_path = final_dir / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{manifest_path}: unreadable ({e}); re-run the 'pretrain' rule") from e
    weights = final_dir / "model.safetensors"
    if not weights.is_file() or sha256_file(weights) != manifest["model_sha256"]:
        raise CheckpointError(f"{weights}: missing or sha256 differs from {manifest_path}; the checkpoint is "
                              "truncated or was replaced: delete the run's final/ folder and re-run 'pretrain'")
    model_cfg = {k: v for k, v in manifest["config"]["model"].items() if k != "seq_len"}
    model = build_model(model_cfg, vocab_size=manifest["vocab_size"], seq_len=manifest["config"]["model"]["seq_len"])
    load_model_weights(model, weights)
    return model.eval().to(device or ("cuda" if torch.cuda.is_available() else "cpu")), manifest


def window_batches(tokens: np.ndarray, seq_len: int, batch_size: int, extra: int = 0) -> Iterator[torch.Tensor]:
    """(B, n + extra) int64 blocks of the disjoint ``seq_len`` windows of ``tokens`` (n tokens each,
    ``extra`` more for targets), ``batch_size`` windows at a time: full windows batched, the short tail alone."""
    windows = list(sequential_windows(len(tokens), seq_len))
    for i in range(0, len(windows), batch_size):
        group = windows[i:i + batch_size]
        for length in sorted({n for _, n in group}):
            yield torch.from_numpy(np.stack([np.asarray(tokens[s:s + length + extra], dtype=np.int64)
                                             for s, n in group if n == length]))


@torch.no_grad()
def stream_nll(model: torch.nn.Module, tokens: np.ndarray, seq_len: int, batch_size: int) -> tuple[float, int]:
    """(summed NLL in nats, number of targets) over every target position of ``tokens``."""
    total, count = 0.0, 0
    device = next(model.parameters()).device
    for block in window_batches(tokens, seq_len, batch_size, extra=1):
        block = block.to(device)
        logits = model(block[:, :-1])["logits"]
        per_token = F.cross_entropy(logits.flatten(0, 1).float(), block[:, 1:].flatten(), reduction="none")
        total += per_token.double().sum().item()  # fp32 per token, summed in fp64: batching-independent
        count += block[:, 1:].numel()
    return total, count


def unigram_nll(train_tokens: np.ndarray, tokens: np.ndarray, vocab_size: int) -> float:
    counts = np.bincount(np.asarray(train_tokens), minlength=vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[np.asarray(tokens[1:], dtype=np.int64)].sum())


def evaluate_perplexity(final_dir: Path, tokens_dir: Path, out_path: Path, batch_size: int = 16,
                        splits: tuple[str, ...] = ("valid", "test")) -> dict:
    t0 = time.perf_counter()
    model, manifest = load_trained(final_dir)
    check_data(manifest.get("data"), tokens_dir, final_dir)
    tokens_manifest = read_manifest(tokens_dir)
    train_tokens = open_split(tokens_dir, "train")
    seq_len = manifest["config"]["model"]["seq_len"]
    metrics = {"model/params": manifest["non_embedding_params"], "model/flops_per_token": manifest["flops_per_token"],
               "model/seq_len": seq_len, "train/tokens": manifest["tokens"]}
    details = {"window": f"disjoint windows of {seq_len} tokens", "batch_size": batch_size}
    for split in splits:
        tokens = open_split(tokens_dir, split)
        nll, n = stream_nll(model, tokens, seq_len, batch_size)
        oracle = tokens_manifest["splits"][split]["oracle_nll"]
        metrics.update({f"{split}/nll": nll / n, f"{split}/ppl": math.exp(nll / n),
                        f"{split}/oracle_ppl": math.exp(oracle / n) if oracle is not None else None,
                        f"{split}/unigram_ppl": math.exp(unigram_nll(train_tokens, tokens,
                                                                     manifest["vocab_size"]) / n)})
        details[f"{split}/tokens"] = n
    result = result_record(manifest, out_path, metrics, details, t0)
    atomic_write_json(out_path, result)
    return result
