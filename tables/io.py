"""Atomic file writes: a temporary file in the target folder, then ``os.replace``."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, data) -> Path:
    """Atomic, stable JSON (sorted keys are not used: the order of lists and keys is meaningful)."""
    return write_atomic(path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
