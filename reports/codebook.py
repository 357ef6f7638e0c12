"""ConceptLM Fig. 5 analogue: how often each code of each segment is used (App. E.3, p. 21).

Reads ``results/runs/{experiment}/seed{seed}/eval/{eval}.json`` itself, because
``tables.results.load_results`` keeps only the metrics: ``details.counts`` holds
S lists (segments) of N counts (codes), with ``details.n_segments`` = S and
``details.codebook_size`` = N.  One bar chart per segment, codes in index order
as in the paper, titled with the segment's utilisation (codes used at least
once) and usage perplexity (exp of the entropy of its usage, N when uniform).
"""
from __future__ import annotations

import math
from pathlib import Path

from tables.numbers import format_float

from .plotting import png, pyplot, read_result_details

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


def codebook_usage(spec: dict, runs: Path) -> tuple[bytes | None, str]:
    """One histogram panel per segment; a missing or malformed result file is a one-line caption."""
    experiment = spec["experiment"]
    found = read_result_details(spec, runs, read_counts)
    if isinstance(found, str):
        return None, found
    path, result, counts = found
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
