"""Atomic file writes and content hashes: the one writer of every file the suite writes.

``atomic_write(path)`` is a context manager: the block writes a temporary file in the destination
folder (a unique name, ``.<name>.<random>.tmp``); on leaving it the file is flushed and fsync'd, renamed
over ``path`` with ``os.replace`` and the folder fsync'd, so a reader, or the machine after a crash,
sees the old file or the new one, never half of one. An exception in the block removes the temporary
file and leaves ``path`` as it was; a failed write (typically a full disk) is one ``WriteError`` naming
the file. ``atomic_write_text`` / ``atomic_write_bytes`` / ``atomic_write_json`` (the suite's one JSON
style) write a whole value through it; ``python -m common.io PATH`` writes its standard input through it
(the Snakemake rules that write settings files). What may bypass it, and why, is listed in
``tests/common/test_io.py`` (append-only logs, lock files, folders written by other libraries).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from common.errors import USER_ERROR, ReproError, entry_point

MODES = ("w", "wb")  # text (UTF-8, no newline translation) or binary


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


class WriteError(ReproError, OSError):
    """Writing an artifact failed (typically: disk full); nothing was replaced. Its text is the message alone
    (the errno stays in ``.errno``)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


@contextmanager
def atomic_write(path: str | Path, mode: str = "w"):
    """``with atomic_write(path, mode) as f: f.write(...)``: ``f`` is the temporary file, open in ``mode``
    ('w' text, 'wb' binary), renamed over ``path`` when the block ends without an exception. A library that
    writes by file name (safetensors' ``save_file``) is handed ``f.name``; the file is synced by name."""
    if mode not in MODES:
        raise ValueError(f"atomic_write mode {mode!r}: use one of {list(MODES)}")
    path = Path(path)
    try:  # a parent that is a file, or a folder that cannot be written: one line, as a failed write below
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        file = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        why = f"{file} is a file, not a folder" if file else e.strerror or str(e)
        raise WriteError(e.errno, f"could not write {path}: {why}; give a path in a writable folder") from e
    os.close(fd)
    try:
        with open(tmp, mode, **({"encoding": "utf-8", "newline": ""} if mode == "w" else {})) as f:
            yield f
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the file the usual permissions
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and not isinstance(e, ReproError):
            hint = "the disk is full: free space and re-run" if e.errno == errno.ENOSPC else str(e)
            raise WriteError(e.errno, f"could not write {path}: {hint}; the previous file, if any, is intact") from e
        raise
    _fsync(path.parent)  # the rename itself survives a crash


def _fsync(path: str | Path) -> None:
    """fsync the file or folder ``path`` (by name: a library may have replaced the file the block opened)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:  # a file system that cannot sync folders
            raise
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_write(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_write(path) as f:
        f.write(text)


def json_text(obj) -> str:
    """The suite's one JSON style for files: keys sorted, indented by 2, a final newline."""
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def atomic_write_json(path: str | Path, obj) -> None:
    atomic_write_text(path, json_text(obj))


def remove_debris(folder: str | Path, name: str = "*") -> None:
    """Delete the temporary files that killed writes (a SIGKILL skips the clean-up) of the files ``name``
    (a glob) in ``folder`` left behind."""
    for tmp in Path(folder).glob(f".{name}.*.tmp"):
        tmp.unlink(missing_ok=True)


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


def read_settings(path: str | Path, keys=()) -> dict:
    """A settings JSON the DAG wrote (a job's ``--settings`` / ``--config``), holding ``keys``; else a
    one-line ``ReproError`` naming the file and the fix."""
    try:
        settings = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ReproError(f"{path}: cannot read settings ({e}); re-run snakemake to rewrite it") from e
    missing = [key for key in keys if not isinstance(settings, dict) or key not in settings]
    if missing:
        raise ReproError(f"{path}: no {missing[0]!r} in the settings; re-run snakemake to rewrite it")
    return settings


@entry_point
def main(argv: list[str] | None = None) -> int:
    """``python -m common.io PATH``: write standard input to PATH atomically, byte for byte."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m common.io PATH < data", file=sys.stderr)
        return USER_ERROR
    if Path(argv[0]).is_dir():  # before reading the input: nothing is consumed for a write that cannot happen
        raise WriteError(f"{argv[0]}: is a folder; give the path of the file to write")
    atomic_write_bytes(argv[0], sys.stdin.buffer.read())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
