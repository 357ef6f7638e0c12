"""Token streams on disk and the deterministic order in which training reads them.

A split is one flat memmap of token ids (``{split}.bin``) described by ``manifest.json``: dtype,
token count and sha256 of every file, the tokenizer's hash and the corpus hash. Opening a split
re-hashes the file; a mismatch is an error, never a silent rebuild (Pythia's
``shard_hashes.txt`` habit).

Training examples are the windows ``tokens[i*T : i*T + T + 1]`` (inputs and shifted targets).
Their order is a pure function of (seed, manifest hash, epoch) — a PCG64 permutation per epoch —
and of nothing else: no global RNG, so a resumed run reads exactly the batches an uninterrupted
run would (OLMo's global-indices idea, computed rather than stored).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from common.errors import ReproError
from common.io import sha256_file

MANIFEST = "manifest.json"


class DataError(ReproError, RuntimeError):
    """A token file is missing, truncated or does not match its manifest."""


def read_manifest(tokens_dir: Path) -> dict:
    path = Path(tokens_dir) / MANIFEST
    if not path.is_file():
        raise DataError(f"{path}: token manifest missing; run the 'tokenize' rule (snakemake) to create it")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DataError(f"{path}: unreadable manifest ({e}); delete the tokens folder and re-run 'tokenize'") from e


def open_split(tokens_dir: Path, split: str, verify: bool = True) -> np.memmap:
    """The token ids of ``split`` as a read-only memmap, after checking size and sha256."""
    tokens_dir = Path(tokens_dir)
    manifest = read_manifest(tokens_dir)
    if split not in manifest["splits"]:
        raise DataError(f"{tokens_dir / MANIFEST}: no split {split!r}; available: {sorted(manifest['splits'])}")
    entry = manifest["splits"][split]
    path = tokens_dir / entry["file"]
    if not path.is_file():
        raise DataError(f"{path}: token file missing; re-run 'tokenize'")
    dtype = np.dtype(entry["dtype"])
    if path.stat().st_size != entry["n_tokens"] * dtype.itemsize:
        raise DataError(f"{path}: {path.stat().st_size} bytes, manifest says {entry['n_tokens']} tokens of "
                        f"{dtype}; the file is truncated or stale: delete {tokens_dir} and re-run 'tokenize'")
    if verify and sha256_file(path) != entry["sha256"]:
        raise DataError(f"{path}: sha256 differs from {tokens_dir / MANIFEST}; the tokens were modified: "
                        f"delete {tokens_dir} and re-run 'tokenize'")
    return np.memmap(path, dtype=dtype, mode="r")


def data_binding(manifest: dict) -> dict:
    """What a model trained on these tokens is bound to: the tokenizer's hash, the corpus manifest's
    hash and every split's sha256. Recorded in checkpoints and ``final/manifest.json``."""
    return {"tokenizer_sha256": manifest["tokenizer_sha256"], "corpus_sha256": manifest.get("corpus_sha256"),
            "splits": {split: entry["sha256"] for split, entry in sorted(manifest["splits"].items())}}


def check_data(recorded: dict | None, tokens_dir: Path, where: Path) -> None:
    """Refuse token files other than those the checkpoint in ``where`` was trained on."""
    if not isinstance(recorded, dict):
        raise DataError(f"{where}: the checkpoint records no token data (written by an older version); "
                        "delete its final/ folder and re-run 'pretrain'")
    given = data_binding(read_manifest(tokens_dir))
    for key in ("tokenizer_sha256", "splits"):
        if recorded.get(key) != given[key]:
            raise DataError(f"{tokens_dir}: {key} {_short(given[key])} differs from {_short(recorded.get(key))} that "
                            f"{where} was trained on; evaluate with the run's own tokens, or re-run 'pretrain'")


def _short(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {str(v)[:12]}" for k, v in value.items()) + "}"
    return str(value)[:16]


def order_key(manifest: dict, split: str) -> int:
    """64-bit integer tying the data order to the exact token content of ``split``."""
    return int(manifest["splits"][split]["sha256"][:16], 16)


class WindowOrder:
    """Maps a global example index to a window of the token stream, epoch by epoch (``seq_len``: the
    stride between windows, a paired layout's record; ``View.offset`` is added by the reader)."""

    def __init__(self, n_tokens: int, seq_len: int, seed: int, key: int):
        self.seq_len = seq_len
        self.n_windows = (n_tokens - 1) // seq_len
        if self.n_windows < 1:
            raise DataError(f"{n_tokens} tokens cannot fill one window of model.seq_len={seq_len}+1; "
                            "use a larger corpus or a shorter seq_len")
        self.seed, self.key = seed, key

    @lru_cache(maxsize=2)  # noqa: B019 (an order lives as long as its run: two epochs kept)
    def permutation(self, epoch: int) -> np.ndarray:
        rng = np.random.Generator(np.random.PCG64([self.seed, self.key, epoch]))
        return rng.permutation(self.n_windows)

    def window_starts(self, first: int, count: int) -> np.ndarray:
        idx = np.arange(first, first + count)
        epochs, pos = np.divmod(idx, self.n_windows)
        return np.array([self.permutation(e)[p] for e, p in zip(epochs, pos)], dtype=np.int64) * self.seq_len


def gather_windows(tokens: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets, each (len(starts), seq_len) int64."""
    block = np.stack([np.asarray(tokens[s:s + seq_len + 1], dtype=np.int64) for s in starts])
    block = torch.from_numpy(block)
    return block[:, :-1], block[:, 1:]


@dataclass(frozen=True)
class View:
    """How a run reads its windows: window i starts at ``i * stride + offset`` and holds ``seq_len``
    tokens; its first ``n_source`` are a source prefix (their targets are not scored, ``mask_source``).

    * a plain stream: stride = seq_len, offset 0, no source;
    * paired examples (``corpora.tokenization.tokenize_pairs``, records of source_len + target_len):
      stride = the record; a run with model.seq_len = source_len + target_len reads whole examples
      (source, then target: conditional models), one with model.seq_len = target_len reads the targets
      only (offset source_len: target-side text, e.g. NCM's tokenizer of stage 1)."""
    stride: int
    offset: int
    seq_len: int
    n_source: int

    def starts(self, indices: np.ndarray) -> np.ndarray:
        return np.asarray(indices, dtype=np.int64) * self.stride + self.offset

    def count(self, n_tokens: int) -> int:
        """Full windows in a split of ``n_tokens`` tokens."""
        return (n_tokens - 1) // self.stride


def view(manifest: dict, run_cfg: dict, tokens_dir: Path) -> View:
    """The run's ``View`` of these tokens, after checking that they are laid out as the run expects and
    that model.seq_len is one example or its target."""
    layout, expected = manifest.get("layout"), run_cfg.get("layout")
    seq_len = run_cfg["model"]["seq_len"]
    if layout != expected:
        raise DataError(f"{tokens_dir}: tokens laid out as {layout or 'one stream'}, "
                        f"and run {run_cfg.get('id')} expects "
                        f"{expected or 'one stream'}; train it on its own dataset's tokens (experiment key data:)")
    if layout is None:
        return View(seq_len, 0, seq_len, 0)
    P, L = layout["source_len"], layout["target_len"]
    if seq_len == P + L:
        return View(P + L, 0, seq_len, P)
    if seq_len == L:
        return View(P + L, P, seq_len, 0)
    raise DataError(f"{tokens_dir}: one example is {P} + {L} tokens and model.seq_len is {seq_len}; set model.seq_len: "
                    f"{P + L} (source and target) or {L} (the targets only)")


def mask_source(targets: torch.Tensor, view: View) -> torch.Tensor:
    """Next-token targets of paired windows with every target that is not a token of this example's
    target set to -100 (not scored): those predicted from the first source_len - 1 positions, and the
    last one (the next example's first token). Unchanged for a plain stream."""
    if view.stride == view.seq_len and not view.offset and not view.n_source:
        return targets
    targets = targets.clone()
    if view.n_source:
        targets[:, :view.n_source - 1] = -100
    targets[:, -1] = -100
    return targets


def sequential_windows(n_tokens: int, seq_len: int):
    """Disjoint evaluation windows (start, length) covering every target position 1..n-1 once."""
    for start in range(0, n_tokens - 1, seq_len):
        yield start, min(seq_len, n_tokens - 1 - start)
