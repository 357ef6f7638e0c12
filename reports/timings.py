"""Job seconds from Snakemake's benchmark files (``logs/*.bench.tsv`` beside every data, training and
evaluation job): where the embedded budget goes, slowest first. Wall time of a parallel DAG is about the
job seconds over the cores, plus Snakemake's own start-up per job."""
from __future__ import annotations

import csv
from pathlib import Path


def job_seconds(results: Path) -> dict[str, float]:
    """{"<experiment>/<seed>/<job>" or "data/<dataset>/<job>": wall seconds} for every benchmark file."""
    seconds = {}
    for path in sorted(results.rglob("logs/*.bench.tsv")):
        with path.open() as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        if rows:  # Snakemake writes one row per repeat; we never repeat
            owner = path.parent.parent.relative_to(results).as_posix()
            seconds[f"{owner}/{path.name.removesuffix('.bench.tsv')}"] = float(rows[0]["s"])
    return seconds


def timings_table(seconds: dict[str, float], top: int = 25) -> str:
    """The ``top`` slowest jobs, then the total and the job count."""
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    width = max((len(name) for name, _ in ranked[:top]), default=10)
    lines = [f"{name:<{width}}  {value:8.1f} s" for name, value in ranked[:top]]
    lines.append(f"{'total job seconds':<{width}}  {sum(seconds.values()):8.1f} s over {len(seconds)} jobs")
    return "\n".join(lines) + "\n"
