"""``write_atomic``, the name tables/ and reports/ write text or bytes by: the suite's one atomic writer
(``common.io``: temporary file in the target folder, fsync, ``os.replace``, usual permissions)."""
from __future__ import annotations

from pathlib import Path

from common.io import atomic_write_bytes


def write_atomic(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half of one."""
    atomic_write_bytes(path, data.encode() if isinstance(data, str) else data)
    return path
