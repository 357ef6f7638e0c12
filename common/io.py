"""Atomic file writes and content hashes, used by every stage.

Every artifact is written to a temporary file in the destination folder, flushed and fsync'd,
then ``os.replace``d into place: a reader sees the old file or the new one, never half of one. A
full disk surfaces as one clear error naming the file; the temporary file is removed.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from pathlib import Path

from common.errors import ReproError


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


class WriteError(ReproError, OSError):
    """Writing an artifact failed (typically: disk full); nothing was replaced."""


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        hint = "the disk is full: free space and re-run" if e.errno == errno.ENOSPC else str(e)
        raise WriteError(e.errno, f"could not write {path}: {hint}; the previous file, if any, is intact") from e


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def config_hash(obj) -> str:
    """sha256 of the canonical JSON of a config (sorted keys, no whitespace)."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())[:16]
