"""Figures built from whatever results exist: reproduced-vs-reported scatter per table and figure analogues.

``figures.yaml`` entries of the default kind are drawn here; kinds ``iso_ppl``
and ``codebook_usage`` by :mod:`reports.iso_ppl` and :mod:`reports.codebook`.

Nothing here fails for lack of data: each function returns ``None`` for the
figure and a sentence naming what is missing.
"""
from __future__ import annotations

from pathlib import Path

from tables.numbers import parse_printed
from tables.results import Metric, Reproduced
from tables.validation import DataError, load_yaml, schema

from .plotting import png, pyplot

FIGURES = Path(__file__).resolve().parent / "figures.yaml"


def scatter(table: dict) -> tuple[bytes | None, str]:
    """Reproduced mean (± std) against the printed value, one colour per column."""
    points = [record for record in table["records"]
              if record["decimals"] != "" and record["reproduced_mean"] != ""]
    if not points:
        return None, f"{table['title']}: no cell has both a printed and a reproduced value yet."
    figure, axes = pyplot().subplots(figsize=(5.6, 4.0))
    for index, column in enumerate(dict.fromkeys(record["column_label"] for record in points)):
        chosen = [record for record in points if record["column_label"] == column]
        axes.errorbar([parse_printed(str(record["reported"])).value for record in chosen],
                      [record["reproduced_mean"] for record in chosen],
                      yerr=[record["reproduced_std"] or 0.0 for record in chosen],
                      fmt="o", color=f"C{index % 10}", label=column, capsize=3)
        for record in chosen:
            axes.annotate(record["row_label"], (parse_printed(str(record["reported"])).value, record["reproduced_mean"]),
                          fontsize=6, xytext=(3, 3), textcoords="offset points")
    axes.set(xlabel="reported (paper)", ylabel="reproduced (mean ± std over seeds)", title=table["title"][:70])
    axes.legend(fontsize=7)
    return png(figure), (f"{table['title']}: reproduced against reported, {len(points)} cell(s). "
                         "The reproduction runs at a smaller scale; read the order of the points, not the diagonal.")


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


def analogue(spec: dict, results: dict[Metric, Reproduced]) -> tuple[bytes | None, str]:
    """One figure analogue: y (or y / x with ``per_x``) against x for each series, naming experiments without results."""
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
    gaps = f" Missing results: {', '.join(missing)}." if missing else ""
    if not plotted:
        pyplot().close(figure)
        return None, f"{spec['title']}: no results yet.{gaps}"
    axes.set(xlabel=spec["x"]["label"], ylabel=spec["y"]["label"], title=spec["title"][:70])
    if spec.get("log_x"):
        axes.set_xscale("log")
    axes.legend(fontsize=7)
    return png(figure), f"{spec['title']} ({plotted} point(s)).{gaps}"
