"""Which profile runs what: the tables say of every row, column or table that this profile does
not reproduce which other profile does, instead of one "not reproduced" line per cell.

``profiles.json`` (written by ``python -m workflows.coverage``) maps each profile file to its experiments
and the evaluations each runs; a cell's result reference is filled by a profile that runs one of the
reference's experiments with the reference's evaluation.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .results import profile_runs, result_files
from .specs import ResultRef
from .validation import DataError


def _runs(runs: dict[str, list[str] | None], refs: list[ResultRef]) -> bool:
    """Whether ``runs`` (experiment -> evaluations, None for all) runs one of ``refs``."""
    return any(experiment in runs and (runs[experiment] is None or ref.eval in runs[experiment])
               for ref in refs for experiment in ref.experiments)


@dataclass(frozen=True)
class Coverage:
    """profile file -> experiment -> evaluations (empty when no ``profiles.json`` was given), and what
    this profile runs (``current``: the runs index of the results folder)."""

    profiles: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    current: dict[str, list[str] | None] = field(default_factory=dict)
    unavailable: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (experiment, eval) -> tasks
    # without a local copy (a result's ``details.unavailable_tasks``)
    measured: frozenset[tuple[str, str]] = frozenset()  # (experiment, eval) with a result file of this profile

    def where(self, refs: list[ResultRef]) -> str:
        """"small.yaml, paper-conceptlm-gpt2.yaml" (the profiles that run one of ``refs``), or why none is named."""
        if not refs:
            return "no experiment is mapped to it"
        if _runs(self.current, refs):
            uncopied = sorted({task for ref in refs for experiment in ref.experiments
                               if (task := ref.key.split("/", 1)[0])
                               in self.unavailable.get((experiment, ref.eval), ())})
            if uncopied:
                return f"no local copy of {', '.join(uncopied)} in the profile's local_tasks"
            if any((experiment, ref.eval) in self.measured for ref in refs for experiment in ref.experiments):
                # which other profile measures this very row is not indexed (profiles.json lists
                # experiments and evaluations, not the rows an evaluation's settings cover)
                return ("this profile's runs do not measure it: the metric does not apply to the row, or the "
                        "profile's evaluation settings cover fewer rows")
            return "this profile runs it but its results are missing: re-run snakemake"
        if not self.profiles:
            return "profiles not indexed"
        return self._others(refs) or "no profile runs it yet"

    def _others(self, refs: list[ResultRef]) -> str:
        return ", ".join(Path(profile).name for profile, runs in self.profiles.items() if _runs(runs, refs))


def load_coverage(path: Path | None, results: Path) -> Coverage:
    """The profiles of ``path`` (none when None) and the runs of ``results`` (its runs index)."""
    current = profile_runs(results)
    unavailable = _unavailable(results)
    measured = frozenset((path.parts[-4], path.stem) for path in result_files(results))
    if path is None:
        return Coverage(current=current, unavailable=unavailable, measured=measured)
    try:
        data = json.loads(path.read_text())
        profiles = {str(name): {str(exp): list(evals) for exp, evals in runs.items()}
                    for name, runs in data["profiles"].items()}
    except FileNotFoundError:
        raise DataError(path, None, "(file)", "missing; write it with `python -m workflows.coverage --out "
                        f"{path} config/*.yaml` or leave out --coverage") from None
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise DataError(path, None, "profiles", f"unreadable profile index ({error}); delete it and re-run") from None
    return Coverage(profiles, current, unavailable, measured)


def _unavailable(results: Path) -> dict[tuple[str, str], set[str]]:
    """(experiment, eval) -> the tasks its results left out for want of a local copy."""
    out: dict[tuple[str, str], set[str]] = {}
    for path in result_files(results):
        try:
            details = json.loads(path.read_text()).get("details") or {}
        except (json.JSONDecodeError, AttributeError):
            continue  # the tables' own reading names a malformed file
        if isinstance(details, dict) and details.get("unavailable_tasks"):
            out.setdefault((path.parts[-4], path.stem), set()).update(details["unavailable_tasks"])
    return out
