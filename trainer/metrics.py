"""Training metrics as JSON lines: one object per logged step (``step``, ``tokens``, ``loss``,
``loss/<term>``, ``lr``, ``grad_norm``, ``tok_per_s``) and per validation (``split: valid``,
``valid/loss``). On resume, rows past the checkpoint are dropped first, so the log of a resumed
run equals that of an uninterrupted one (timings aside)."""
from __future__ import annotations

import json
from pathlib import Path

from common.io import atomic_write_text


class MetricsLog:
    def __init__(self, path: Path, keep_through_step: int, enabled: bool = True):
        """``enabled=False`` (DDP ranks other than 0) keeps rows in memory only."""
        self.path = Path(path) if enabled else None
        self.rows: list[dict] = []
        if self.path is None:
            return
        if self.path.is_file():
            rows = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]
            self.rows = [r for r in rows if r["step"] <= keep_through_step]
        atomic_write_text(self.path, "".join(json.dumps(r) + "\n" for r in self.rows))

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if self.path is None:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def last(self, key: str):
        return next((r[key] for r in reversed(self.rows) if key in r), None)
