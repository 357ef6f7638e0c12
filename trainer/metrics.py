"""Training metrics as JSON lines: one object per logged step (``step``, ``tokens``, ``loss``,
``loss/<term>``, ``lr``, ``grad_norm``, ``tok_per_s``; on CUDA ``peak_mem_gib``) and per validation (``split: valid``,
``valid/loss``).

The trainer owns the file (it is a declared output of the ``pretrain`` rule, never a Snakemake
``log:``, which Snakemake erases before a job). Every checkpoint stores the log up to its step, and
a resumed run starts the file again from that copy: so the log of a resumed run equals that of an
uninterrupted one (timings aside), whatever happened to the file in between (a kill mid-line,
Snakemake deleting the outputs of the failed job).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from common.io import atomic_write_text


def read_rows(path: Path) -> list[dict]:
    """The rows of a training log ``path`` (``train/metrics.jsonl``); [] when there is none. A malformed
    line raises ``json.JSONDecodeError``."""
    path = Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def is_validation_step(done: int, train: dict) -> bool:
    """Whether the trainer logs a validation loss after ``done`` steps of a run with ``train`` settings:
    every ``eval_interval`` steps and after the last."""
    return done % train["eval_interval"] == 0 or done == train["steps"]


def validation_steps(train: dict, first: int = 1) -> list[int]:
    """The steps >= ``first`` after which ``is_validation_step`` holds, in order, without visiting every step."""
    every, steps = train["eval_interval"], train["steps"]
    start = -(-max(first, 1) // every) * every  # the first multiple of eval_interval at or after first
    return sorted(set(range(start, steps + 1, every)) | ({steps} if steps >= first else set()))


def validation_tokens(exp: dict, fit_from: float) -> set[int]:
    """Training tokens at the validation rows a run (a resolved experiment) logs from ``fit_from`` of its
    training on: the D of its scaling-law points (``evals.scaling_fit``)."""
    t = exp["train"]
    per_step = t["batch_size"] * exp["model"]["seq_len"]
    return {s * per_step for s in validation_steps(t, math.ceil(fit_from * t["steps"]))}


class MetricsLog:
    def __init__(self, path: Path, text: str = "", enabled: bool = True):
        """Start the log at ``path`` with ``text`` (the rows a checkpoint stored; empty for a fresh run).
        ``enabled=False`` (DDP ranks other than 0) keeps rows in memory only."""
        self.path = Path(path) if enabled else None
        self.rows: list[dict] = [json.loads(line) for line in text.splitlines() if line.strip()]  # as read_rows
        if self.path is not None:
            atomic_write_text(self.path, self.text())

    def text(self) -> str:
        return "".join(json.dumps(r) + "\n" for r in self.rows)

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if self.path is None:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def last(self, key: str):
        return next((r[key] for r in reversed(self.rows) if key in r), None)
