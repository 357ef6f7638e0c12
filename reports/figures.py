"""Figures built from whatever results exist: the paper's figure analogues.

``figures.yaml`` entries of the default kind (``analogue``) and of kinds
``eval_sweep`` (one experiment under several evaluations, y against x of the same
result, e.g. Gen PPL against NFE) and ``metric_curve`` (the numbered metrics
``{prefix}1..n`` of one result against their number, e.g. reconstruction accuracy
from the first k scales) are drawn here; kinds ``iso_ppl`` and ``codebook_usage``
by :mod:`reports.iso_ppl` and :mod:`reports.codebook`.

Nothing here fails for lack of data: each function returns ``None`` for the
figure and a sentence naming what is missing.
"""
from __future__ import annotations

from pathlib import Path
from textwrap import fill

from tables.numbers import format_float
from tables.results import Metric, Reproduced
from tables.validation import DataError, load_yaml, schema

from .plotting import png, pyplot

FIGURES = Path(__file__).resolve().parent / "figures.yaml"


def load_figure_specs(path: Path = FIGURES) -> list[dict]:
    """The entries of ``figures.yaml``; the default kind (no ``kind``) is set to ``analogue``."""
    specs = load_yaml(path, schema(str(path.with_name("figures.schema.json"))))
    for position, spec in enumerate(specs):
        spec.setdefault("kind", "analogue")
        for series in spec["series"] if spec["kind"] == "analogue" else []:
            fixed = "x_values" in series
            if fixed == ("key" in spec["x"]):
                raise DataError(path, None, f"{position}.series", "give either x: {eval, key} or x_values per series")
            if fixed and len(series["x_values"]) != len(series["experiments"]):
                raise DataError(path, None, f"{position}.series.x_values", "one value per experiment")
    return specs


def analogue(spec: dict, results: dict[Metric, Reproduced], current: dict | None = None) -> tuple[bytes | None, str]:
    """One figure analogue: y (or y / x with ``per_x``) against x for each series, naming experiments without
    results."""
    def metric(experiment: str, axis: dict) -> Reproduced | None:
        return results.get((experiment, axis["eval"], axis["key"]))

    figure, axes = pyplot().subplots(figsize=(5.6, 3.8))
    missing, plotted = [], 0
    for index, series in enumerate(spec["series"]):
        xs = series.get("x_values") or [None] * len(series["experiments"])
        points = []
        for experiment, x in zip(series["experiments"], xs):
            y = metric(experiment, spec["y"])
            x_value = x if x is not None else (found.mean if (found := metric(experiment, spec["x"])) else None)
            if y is None or x_value is None:
                missing.append(experiment)
            else:
                scale = x_value if spec["y"].get("per_x") else 1.0
                points.append((x_value, y.mean / scale, (y.std or 0.0) / scale))
        if points:
            points.sort()
            axes.errorbar(*zip(*points), fmt="o-", color=f"C{index}", label=series["label"], capsize=3)
            plotted += len(points)
    gap = gaps(missing, current)
    if not _finish(figure, axes, spec, plotted, gap):
        return None, f"{spec['title']}: no results yet.{gap}"
    return png(figure), f"{spec['title']} ({plotted} point(s)).{gap}"


def _finish(figure, axes, spec: dict, plotted: int, gaps: str) -> bool:
    """Label the axes of a drawn figure (title, log scales, legend); False (figure closed) if nothing was
    plotted."""
    if not plotted:
        pyplot().close(figure)
        return False
    axes.set(xlabel=spec["x"]["label"], ylabel=spec["y"]["label"], title=fill(spec["title"], 60))
    from matplotlib.ticker import NullFormatter

    for log, axis in (("log_x", axes.xaxis), ("log_y", axes.yaxis)):
        if spec.get(log):
            axes.set_xscale("log") if axis is axes.xaxis else axes.set_yscale("log")
            axis.set_minor_formatter(NullFormatter())  # minor labels of a short log range overlap
    axes.legend(fontsize=9)
    return True


def _missing(missing: list[str], what: str = "Missing results") -> str:
    return f" {what}: {', '.join(missing)}." if missing else ""


def gaps(missing: list[str], current: dict | None = None) -> str:
    """The caption's gaps: each entry names its experiment first (``exp`` or ``exp (what)``); with the profile's
    runs (``current``: experiment -> evaluations, ``tables.results.profile_runs``) an experiment this profile does
    not run is "not run in this profile" (another profile's row), the rest "missing" (re-run Snakemake)."""
    missing = list(dict.fromkeys(missing))
    if current is None:
        return _missing(missing)
    absent = [entry for entry in missing if entry.split(" ", 1)[0] not in current]
    return _missing([entry for entry in missing if entry not in absent]) + _missing(absent, "Not run in this profile")


def eval_sweep(spec: dict, results: dict[Metric, Reproduced], current: dict | None = None) -> tuple[bytes | None, str]:
    """Kind ``eval_sweep``: each series is one experiment evaluated under the evaluations ``evals``; one
    point per evaluation, x and y the metrics ``x.key`` and ``y.key`` of that same result (mean ± std
    over seeds), joined in order of x. ``annotate`` writes the value of its metric beside each point.
    Evaluations without both metrics are named as missing."""
    figure, axes = pyplot().subplots(figsize=(5.6, 3.8))
    missing, unannotated, plotted = [], [], 0
    note = spec.get("annotate")
    for index, series in enumerate(spec["series"]):
        experiment, points = series["experiment"], []
        for eval_name in series["evals"]:
            x, y = (results.get((experiment, eval_name, spec[axis]["key"])) for axis in ("x", "y"))
            if x is None or y is None:
                missing.append(f"{experiment} ({eval_name})")
                continue
            noted = results.get((experiment, eval_name, note["key"])) if note else None
            if note and noted is None:
                unannotated.append(f"{experiment} ({eval_name})")
            points.append((x.mean, y.mean, x.std or 0.0, y.std or 0.0, noted))
        if not points:
            continue
        points.sort(key=lambda point: point[0])
        xs, ys, x_err, y_err, notes = zip(*points)
        axes.errorbar(xs, ys, xerr=x_err, yerr=y_err, fmt="o-", color=f"C{index % 10}", label=series["label"],
                      capsize=3)
        for x, y, value in zip(xs, ys, notes):
            if value is not None:
                axes.annotate(f"{note['label']} {format_float(value.mean, 2)}", (x, y), fontsize=8,
                              xytext=(3, 3), textcoords="offset points")
        plotted += len(points)
    gap = gaps(missing, current)
    if not _finish(figure, axes, spec, plotted, gap):
        return None, f"{spec['title']}: no results yet.{gap}"
    shown = ""
    if note:
        shown = f" Beside each point: {note['label']} ({note['key']})." + _missing(unannotated, f"No {note['key']} for")
    return png(figure), f"{spec['title']} ({plotted} point(s)).{shown}{gap}"


def numbered(results: dict[Metric, Reproduced], experiment: str, eval_name: str, prefix: str) -> dict[int, Reproduced]:
    """The metrics ``{prefix}{i}`` (i a positive integer) of one result, by i."""
    found = {}
    for (exp, name, key), value in results.items():
        suffix = key[len(prefix):]
        if exp == experiment and name == eval_name and key.startswith(prefix) and suffix.isdigit() and int(suffix) > 0:
            found[int(suffix)] = value
    return dict(sorted(found.items()))


def metric_curve(spec: dict, results: dict[Metric, Reproduced],
                 current: dict | None = None) -> tuple[bytes | None, str]:
    """Kind ``metric_curve``: for each series (one experiment's result of evaluation ``eval``) the
    metrics ``{y.prefix}{i}`` found in it against i (mean ± std over seeds), e.g. reconstruction
    accuracy from the first k scales against k, or against the metrics ``{x.prefix}{i}`` when x names a
    prefix (e.g. the compression ratio against training tokens). Series without such metrics are named
    as missing."""
    prefix, x_prefix = spec["y"]["prefix"], spec["x"].get("prefix")
    figure, axes = pyplot().subplots(figsize=(5.6, 3.8))
    missing, lengths = [], []
    for index, series in enumerate(spec["series"]):
        experiment, eval_name = series["experiment"], series["eval"]
        curve = numbered(results, experiment, eval_name, prefix)
        if not curve:
            known = any(exp == experiment and name == eval_name for exp, name, _ in results)
            missing.append(f"{experiment} ({eval_name}{f': no {prefix}<i> metric' if known else ''})")
            continue
        xs = numbered(results, experiment, eval_name, x_prefix) if x_prefix else {i: None for i in curve}
        curve = {i: value for i, value in curve.items() if i in xs}
        axes.errorbar([xs[i].mean if x_prefix else i for i in curve], [value.mean for value in curve.values()],
                      yerr=[value.std or 0.0 for value in curve.values()], fmt="o-", color=f"C{index % 10}",
                      label=series["label"], capsize=3)
        lengths.append(f"{series['label']}: i = {min(curve)}..{max(curve)}")
    gap = gaps(missing, current)
    if not _finish(figure, axes, spec, len(lengths), gap):
        return None, f"{spec['title']}: no results yet.{gap}"
    if spec["x"].get("log"):
        axes.set_xscale("log")
    elif not x_prefix:
        axes.xaxis.get_major_locator().set_params(integer=True)
    return png(figure), f"{spec['title']} ({'; '.join(lengths)}; y = {prefix}i).{gap}"
