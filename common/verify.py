"""Every file a manifest lists, checked against the sha256 it records, each time Snakemake plans.

Snakemake decides what to run from declared inputs and modification times. A file edited in place after
its job wrote it (a flipped bit in a token split, a damaged checkpoint) is invisible to it until some
job happens to read the file; and a job made to re-run on a damaged upstream has its own outputs deleted
before it fails. ``damaged(root)`` runs when the Snakefile is read (dry runs too) over the manifests of a
results folder:

    data/<dataset>/corpus/manifest.json     splits.<split>.file / sha256
    data/<dataset>/tokens/manifest.json     splits.<split>.file / sha256
    runs/<run>/seed<k>/final/manifest.json  model.safetensors (model_sha256), train/snapshots/ (snapshots)

A job writes its manifest after the files it lists, so a listed file no newer than its manifest is
taken as written; one that is newer (edited, or copied without its times) is hashed, and a match is
remembered by (size, mtime) in ``<root>/.verified.json`` so it is hashed once. A listed file that is
missing is left to Snakemake. Each line says how to rebuild (``_fix``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from common.io import atomic_write_json, sha256_file

CACHE = ".verified.json"


def listed_files(manifest: Path, content: dict) -> list[tuple[Path, str]]:
    """``[(file, sha256)]`` that the manifest ``content`` at ``manifest`` records."""
    folder = manifest.parent
    if folder.name == "final":
        files = [(folder / "model.safetensors", content["model_sha256"])]
        snapshots = folder.parent / "train" / "snapshots"
        return files + [(snapshots / entry["file"], entry["sha256"]) for entry in content.get("snapshots", [])]
    return [(folder / entry["file"], entry["sha256"]) for entry in content["splits"].values()]


def manifests(root: Path, runs: list[str] | None = None) -> list[Path]:
    """The manifests under ``root``: every dataset's, and the final one of each run folder (of ``runs``,
    ``"<experiment>/seed<k>"`` names, when given: a folder the profile no longer lists is never read)."""
    finals = (root.glob("runs/*/seed*/final/manifest.json") if runs is None
              else (root / "runs" / run / "final" / "manifest.json" for run in runs))
    return sorted([*root.glob("data/*/corpus/manifest.json"), *root.glob("data/*/tokens/manifest.json"),
                   *(path for path in finals if path.is_file())])


def _fix(manifest: Path) -> str:
    """How to rebuild what the manifest lists. A run's outputs are targets, so a deleted run folder is re-trained;
    a deleted data folder is an intermediate Snakemake does not rebuild while the runs on it are complete, so
    its job is forced (which re-trains what was made from it)."""
    if manifest.parent.name == "final":
        return f"delete {manifest.parent.parent} and re-run snakemake, which re-trains it and what builds on it"
    return (f"delete {manifest.parent} and run snakemake --forcerun {manifest}, which rebuilds it and re-trains what "
            "was made from it")


def damaged(root: str | Path, runs: list[str] | None = None) -> list[str]:
    """One line per manifest of ``root`` (its datasets, and its run folders ``runs``, or all) that is unreadable
    or lists a file whose content differs from its recorded sha256, naming the file and the fix ([] when
    everything matches)."""
    root = Path(root)
    cache_path = root / CACHE
    try:
        cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    except (OSError, ValueError):
        cache = {}
    problems, seen = [], {}
    for manifest in manifests(root, runs):
        fix = _fix(manifest)
        try:
            content = json.loads(manifest.read_text())
            files = listed_files(manifest, content)
            written = manifest.stat().st_mtime_ns
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            problems.append(f"{manifest}: unreadable or not a manifest of this suite ({type(error).__name__}); {fix}")
            continue
        for path, digest in files:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            if stat.st_mtime_ns <= written:
                continue
            key, mark = str(path.relative_to(root)), [stat.st_size, stat.st_mtime_ns, digest]
            if cache.get(key) == mark:
                seen[key] = mark
                continue
            if sha256_file(path) != digest:
                problems.append(f"{path}: its content differs from the sha256 in {manifest} (edited or damaged "
                                f"after its job wrote it); {fix}")
                continue
            seen[key] = mark
    if seen != cache and os.access(root, os.W_OK):
        try:
            atomic_write_json(cache_path, seen)
        except OSError:  # a full disk or quota: the cache only saves hashing; planning (dry runs too) goes on
            pass
    return problems
