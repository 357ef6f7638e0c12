"""ConceptLM Fig. 5 analogue: how often each code of each segment is used (App. E.3, p. 21).

Reads ``results/runs/{experiment}/seed{seed}/eval/{eval}.json`` itself, because
``tables.results.load_results`` keeps only the metrics: ``details.counts`` holds
S lists (segments) of N counts (codes), with ``details.n_segments`` = S and
``details.codebook_size`` = N.  One bar chart per segment, codes in index order
as in the paper, titled with the segment's utilisation (codes used at least
once) and usage perplexity (exp of the entropy of its usage, N when uniform).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from tables.numbers import format_float
from tables.results import run_folders
from tables.validation import display_path

from .plotting import png, pyplot

COLUMNS = 4


def read_counts(result: dict) -> list[list[int]]:
    """``details.counts`` of a result, checked to be S x N non-negative integers; ValueError says what is wrong."""
    details = result.get("details") if isinstance(result, dict) else None
    if not isinstance(details, dict) or not {"counts", "codebook_size", "n_segments"} <= details.keys():
        raise ValueError("details needs counts, codebook_size and n_segments")
    counts, size, segments = details["counts"], details["codebook_size"], details["n_segments"]
    if not isinstance(counts, list) or len(counts) != segments or not segments:
        raise ValueError(f"details.counts has {len(counts) if isinstance(counts, list) else 'no'} segment(s), "
                         f"n_segments is {segments}")
    for index, row in enumerate(counts):
        if not isinstance(row, list) or len(row) != size or not size:
            raise ValueError(f"segment {index} does not have codebook_size = {size} counts")
        if not all(isinstance(count, int) and not isinstance(count, bool) and count >= 0 for count in row):
            raise ValueError(f"segment {index} has a count that is not a non-negative integer")
    return counts


def segment_usage(counts: list[int]) -> tuple[float, float | None]:
    """(utilisation %, usage perplexity) of one segment; the perplexity is None when nothing was counted."""
    total = sum(counts)
    used = sum(count > 0 for count in counts)
    if not total:
        return 0.0, None
    entropy = -sum(count / total * math.log(count / total) for count in counts if count)
    return 100.0 * used / len(counts), math.exp(entropy)


def _result_file(runs: Path, experiment: str, eval_name: str) -> Path | None:
    """The result of the lowest seed found (seed 0 when it exists)."""
    by_seed: dict[int, Path] = {}
    for path in [run / "eval" / f"{eval_name}.json" for run in run_folders(runs) if run.parent.name == experiment
                 and (run / "eval" / f"{eval_name}.json").is_file()]:
        seed = path.parts[-3].removeprefix("seed")
        if seed.isdigit():
            by_seed[int(seed)] = path
    return by_seed[min(by_seed)] if by_seed else None


def codebook_usage(spec: dict, runs: Path) -> tuple[bytes | None, str]:
    """One histogram panel per segment; a missing or malformed result file is a one-line caption."""
    experiment, eval_name = spec["experiment"], spec["eval"]
    path = _result_file(runs, experiment, eval_name)
    if path is None:
        return None, f"{spec['title']}: no results yet. Missing results: {experiment} (eval {eval_name})."
    try:
        result = json.loads(path.read_text())
        counts = read_counts(result)
    except ValueError as error:  # json.JSONDecodeError included
        return None, f"{spec['title']}: {display_path(path)} is malformed ({error})."
    rows = math.ceil(len(counts) / COLUMNS)
    columns = min(len(counts), COLUMNS)
    figure, axes = pyplot().subplots(rows, columns, figsize=(3.0 * columns, 2.2 * rows), squeeze=False)
    for index, (segment, panel) in enumerate(zip(counts, axes.flat)):
        utilisation, perplexity = segment_usage(segment)
        panel.bar(range(len(segment)), segment, width=1.0, color="C0")
        panel.set_title(f"segment {index}: {utilisation:.0f}% used, usage PPL {format_float(perplexity, 1) or 'n/a'}",
                        fontsize=8)
        panel.set(xlabel="code index", ylabel="count")
    for panel in list(axes.flat)[len(counts):]:
        panel.axis("off")
    metrics = ", ".join(f"{key} {format_float(value, 2)}" for key, value in result.get("metrics", {}).items()
                        if isinstance(value, (int, float)))
    seed = path.parts[-3]
    figure.suptitle(f"{experiment} {seed}: code usage per segment", fontsize=9)
    return png(figure), (f"{spec['title']}: {experiment} {seed}, {len(counts)} segment(s) × {len(counts[0])} codes, "
                         f"codes in index order. Metrics of the file: {metrics or 'none'}.")
