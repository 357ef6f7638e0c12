"""Reproduced numbers: result JSONs under ``results/runs/{experiment}/seed{seed}/eval/{eval}.json``.

Files follow ``config/schemas/result.schema.json`` (the foundation contract); a
file that does not is an error naming it.  A missing or empty results folder is
not an error: every cell is then "not reproduced".
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean, stdev

from .validation import DataError, schema, validate

Metric = tuple[str, str, str]  # (experiment, eval, metric key)
RESULT_SCHEMA = Path(__file__).resolve().parents[1] / "config" / "schemas" / "result.schema.json"
_SEED = re.compile(r"^seed(\d+)$")


@dataclass(frozen=True)
class Reproduced:
    """Mean and sample standard deviation over the seeds found (std is None for one seed), and the
    experiments the values came from (for a value computed by a paper's formula, those of its inputs)."""

    per_seed: dict[int, float]
    experiments: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.per_seed)

    @property
    def mean(self) -> float:
        return fmean(self.per_seed.values())

    @property
    def std(self) -> float | None:
        return stdev(self.per_seed.values()) if self.n > 1 else None


RUNS_INDEX = "index.json"


def run_folders(root: Path) -> list[Path]:
    """The run folders ``root/{experiment}/seed{k}`` to read: those of the profile, listed in
    ``root/index.json`` (written by the workflow's ``runs_index`` rule), so a run dropped from the
    profile is never read again; every folder found when there is no index (a hand-made folder)."""
    return sorted(listed_runs(root))


def first_seed_result(root: Path, experiment: str, eval_name: str) -> Path | None:
    """The result file ``eval_name`` of the lowest seed of ``experiment`` among the runs and evaluations to
    read (``listed_runs``; seed 0 when it exists), for figures that read a result's details; None when there is none."""
    by_seed: dict[int, Path] = {}
    for run, evals in listed_runs(root).items():
        path = run / "eval" / f"{eval_name}.json"
        seed = run.name.removeprefix("seed")
        if run.parent.name == experiment and path.is_file() and seed.isdigit() and (evals is None or eval_name in evals):
            by_seed[int(seed)] = path
    return by_seed[min(by_seed)] if by_seed else None


def listed_runs(root: Path) -> dict[Path, list[str] | None]:
    """Run folder -> the evaluations to read (None: every one found)."""
    if not root.is_dir():
        return {}
    index = root / RUNS_INDEX
    if not index.is_file():
        return {path: None for path in root.glob("*/seed*") if path.is_dir()}
    try:
        listed = json.loads(index.read_text())["runs"]
        runs = listed if isinstance(listed, dict) else dict.fromkeys(listed)
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise DataError(index, None, "runs", f"unreadable run index ({error}); re-run snakemake to rewrite it") from None
    return {root / run: evals for run, evals in runs.items() if (root / run).is_dir()}


def result_files(root: Path) -> list[Path]:
    """The result JSONs to read: the listed evaluations of the listed runs (an evaluation dropped from an
    experiment's ``evals`` is not read, though its old file stays on disk)."""
    files = []
    for run, evals in sorted(listed_runs(root).items()):
        found = sorted(run.glob("eval/*.json"))
        files += found if evals is None else [path for path in found if path.stem in evals]
    return files


def load_results(root: Path) -> dict[Metric, Reproduced]:
    """Every finite metric of every result file of the runs to read (``run_folders``), grouped over seeds."""
    per_seed: dict[Metric, dict[int, float]] = {}
    for path in result_files(root):
        experiment, seed_dir = path.parts[-4], path.parts[-3]
        match = _SEED.match(seed_dir)
        if not match:
            continue
        try:
            result = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise DataError(path, error.lineno, "(json)", error.msg) from None
        validate(result, schema(str(RESULT_SCHEMA)), path)
        expected = {"experiment": experiment, "seed": int(match[1]), "eval": path.stem}
        for field, value in expected.items():
            if result[field] != value:
                raise DataError(path, None, field, f"{result[field]!r} differs from the path ({value!r})")
        for key, value in result["metrics"].items():
            if value is not None and math.isfinite(value):
                per_seed.setdefault((experiment, path.stem, key), {})[int(match[1])] = float(value)
    return {ref: Reproduced(seeds, (ref[0],)) for ref, seeds in per_seed.items()}
