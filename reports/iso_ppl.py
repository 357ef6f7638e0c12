"""ConceptLM Fig. 1 analogue: PPL against parameters, tokens and FLOPs, with iso-PPL ratios (Sec. 4.2, p. 7).

A ``figures.yaml`` entry of kind ``iso_ppl`` names a baseline and a candidate
series and one panel per x.  ``source: results`` puts one point per experiment
(x and y are result metrics, mean over seeds).  ``source: curve`` reads the
validation curve of each series' last (largest) experiment: x is tokens,
times the metric ``x`` names when it names one (tokens × FLOPs/token = FLOPs),
and y is exp(valid/loss), the mean over seeds at each token count; ``fit_from``
keeps the points from that fraction of the curve's last x on.  Each panel
gets the fits and the iso-PPL ratio of :mod:`reports.scaling`, set beside the
paper's reading, which comes from the tables' reported data.
"""
from __future__ import annotations

import math
from statistics import fmean

import numpy as np

from tables.numbers import Printed, format_float
from tables.reported import ReportedCell
from tables.results import Metric, Reproduced

from .curves import Curve
from .document import Table
from .figures import gaps as figure_gaps
from .plotting import png, pyplot
from .scaling import IsoRatio, Point, fit, iso_ratio, loggable


def _result_points(series: dict, panel: dict, results: dict[Metric, Reproduced], missing: list[str]) -> list[Point]:
    points = []
    for experiment in series["experiments"]:
        x = results.get((experiment, panel["x"]["eval"], panel["x"]["key"]))
        y = results.get((experiment, panel["y"]["eval"], panel["y"]["key"]))
        if x is None or y is None:
            missing.append(experiment)
        else:
            points.append((x.mean, y.mean))
    return points


def _curve_points(series: dict, panel: dict, results: dict[Metric, Reproduced], curves: dict[str, list[Curve]],
                  missing: list[str]) -> list[Point]:
    experiment = series["experiments"][-1]
    scale: float | None = 1.0
    if "key" in panel["x"]:
        found = results.get((experiment, panel["x"]["eval"], panel["x"]["key"]))
        scale = found.mean if found else None
    by_tokens: dict[float, list[float]] = {}
    for curve in curves.get(experiment, []):
        for row in curve.valid:
            by_tokens.setdefault(row["tokens"], []).append(math.exp(row["valid/loss"]))
    if scale is None or not by_tokens:
        missing.append(f"{experiment} ({panel['x']['key'] if scale is None else 'validation curve'})")
        return []
    points = sorted((tokens * scale, fmean(ppls)) for tokens, ppls in by_tokens.items())
    start = panel.get("fit_from", 0.0) * points[-1][0]  # warm-up and the first steps are no power law
    return [point for point in points if point[0] >= start]


def direction(reading: IsoRatio, reported: Printed | None) -> str:
    """Whether the reproduced ratio falls on the paper's side of 1 (below 1: the candidate needs less)."""
    if reading.ratio is None:
        return "not read"
    if reported is None:
        return "less" if reading.ratio < 1 else "not less"
    return "agrees" if (reading.ratio < 1) == (reported.value < 1) else "differs"


def _direction_sentence(candidate: str, rows: list[list[str]]) -> str:
    by_verdict: dict[str, list[str]] = {}
    for row in rows:
        by_verdict.setdefault(row[-1], []).append(row[0])
    parts = [f"{verdict} for {', '.join(panels)}" for verdict, panels in by_verdict.items()]
    return f"Direction against the paper (below 1: {candidate} needs less): {'; '.join(parts)}."


def _compact(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def _ratio_text(reading: IsoRatio) -> str:
    if reading.ratio is None:
        return f"— ({reading.reason})"
    return format_float(reading.ratio, 2) + (" (extrapolated)" if reading.extrapolated else "")


def _draw(axes, panel: dict, points: list[tuple[str, list[Point]]], reading: IsoRatio, letter: str) -> None:
    """Points and fitted power laws on log x; the candidate's fit is drawn out to the x where it meets the target."""
    for index, (label, series_points) in enumerate(points):
        usable = loggable(series_points)
        law = fit(usable)
        if usable:
            axes.plot(*zip(*usable), "o", color=f"C{index}", label=None if law else label)
        if law:
            span = [usable[0][0], usable[-1][0]] + ([reading.x_cand] if index == 1 and reading.x_cand else [])
            xs = np.geomspace(min(span), max(span), 50)
            axes.plot(xs, [law(x) for x in xs], "-", color=f"C{index}", label=f"{label} (b = {law.b:.3f})")
    if reading.target is not None:
        axes.axhline(reading.target, color="grey", linestyle=":", linewidth=1)
    axes.set(xlabel=panel["x"]["label"], ylabel=panel["y"]["label"], xscale="log")
    axes.set_title(f"({letter}) iso-PPL ratio {format_float(reading.ratio, 2) or '—'}", fontsize=8)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=9)


def iso_ppl(spec: dict, results: dict[Metric, Reproduced], curves: dict[str, list[Curve]],
            reported: dict[tuple[str, str, str], ReportedCell],
            current: dict | None = None) -> tuple[bytes | None, str, Table | None]:
    """The panels as one figure, a caption with the ratios beside the paper's, and the table of the readings."""
    base, cand = spec["baseline"], spec["candidate"]
    missing: list[str] = []
    figure, all_axes = pyplot().subplots(1, len(spec["panels"]), figsize=(4.2 * len(spec["panels"]), 3.6),
                                         squeeze=False)
    rows, plotted = [], 0
    for panel, axes, letter in zip(spec["panels"], all_axes[0], "abcdefgh"):
        points = [(series["label"], _curve_points(series, panel, results, curves, missing) if panel["source"] == "curve"
                   else _result_points(series, panel, results, missing)) for series in (base, cand)]
        plotted += sum(len(series_points) for _, series_points in points)
        reading = iso_ratio(points[0][1], points[1][1], cand["label"])
        cell = reported.get(tuple(panel["reported"][key] for key in ("table", "row", "column")))
        paper = cell.printed if cell else None
        _draw(axes, panel, points, reading, letter)
        rows.append([panel["x"]["label"], format_float(reading.target, 2), _compact(reading.x_base),
                     _compact(reading.x_cand), _ratio_text(reading), paper.text if paper else "—",
                     direction(reading, paper)])
    gaps = figure_gaps(missing, current)
    if not plotted:
        pyplot().close(figure)
        return None, f"{spec['title']}: no results yet.{gaps}", None
    caption = (f"{spec['title']}. Iso-PPL ratios ({cand['label']} ÷ {base['label']} at the PPL {base['label']} "
               f"reaches at its largest x; reproduced vs paper, {spec['where']}): "
               f"{'; '.join(f'{row[0]} {row[4]} vs {row[5]}' for row in rows)}. "
               f"{_direction_sentence(cand['label'], rows)}{gaps}")
    figure.suptitle(spec["title"][:110], fontsize=9)
    header = ["Panel", f"Target PPL ({base['label']} at its largest x)", f"x {base['label']}", f"x {cand['label']}",
              "Ratio (reproduced)", "Ratio (paper)", "Direction"]
    return png(figure), caption, Table(header, rows)
