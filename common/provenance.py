"""The provenance block every result carries: code version, library versions, host."""
from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

_LIBRARIES = ("torch", "numpy", "tokenizers", "transformers", "datasets", "safetensors", "lm_eval", "snakemake")
_ROOT = Path(__file__).resolve().parents[1]


def git_state() -> tuple[str, bool]:
    """(commit, dirty) of the repository this code runs from; ('unknown', False) outside git. Dirty counts
    untracked files too (a new profile in config/ is not the commit), never ignored ones (results/, .venv)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=_ROOT, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=normal"], cwd=_ROOT,
                                    capture_output=True, text=True, check=True).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", False


def library_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            versions[name] = importlib.metadata.version(name.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def provenance(*, config_hash: str, checkpoint_sha256: str | None, seed: int, wall_time_s: float) -> dict:
    commit, dirty = git_state()
    return {"git_commit": commit, "git_dirty": dirty, "config_hash": config_hash,
            "checkpoint_sha256": checkpoint_sha256, "versions": library_versions(), "seed": seed,
            "wall_time_s": round(wall_time_s, 3), "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node()}
