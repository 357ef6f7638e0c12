"""Atomic file writes for tables and reports, through the suite's one implementation
(``common.io``: temporary file in the target folder, fsync, ``os.replace``, usual permissions)."""
from __future__ import annotations

import json
from pathlib import Path

from common.io import atomic_write_bytes


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half of one."""
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)
    return path


def write_json(path: Path, data) -> Path:
    """Atomic, stable JSON (sorted keys are not used: the order of lists and keys is meaningful)."""
    return write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
