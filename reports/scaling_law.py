"""DLCM's scaling-law fit (kind ``scaling_law``): the law's prediction against every observed validation
loss of the grid (``details.points`` of a ``law`` result, ``evals/scaling_fit.py``), one colour per
target R, held-out runs as crosses, the diagonal for a perfect fit; the caption gives R^2 on the fitted
and held-out points and names the constants the grid cannot determine, or says that the constants are not
identifiable from the grid (``law/constants_identifiable`` 0, ``evals/scaling_fit.py``)."""
from __future__ import annotations

from pathlib import Path
from textwrap import fill

from tables.numbers import format_float

from .plotting import png, pyplot, read_result_details

POINT_KEYS = {"run", "R", "loss", "predicted", "heldout"}


def read_points(result: dict) -> list[dict]:
    """``details.points`` of a law result, checked; ValueError says what is wrong."""
    points = (result.get("details") or {}).get("points") if isinstance(result, dict) else None
    if not isinstance(points, list) or not points:
        raise ValueError("details.points is missing or empty")
    for i, point in enumerate(points):
        if not isinstance(point, dict) or not POINT_KEYS <= point.keys():
            raise ValueError(f"details.points[{i}] needs {', '.join(sorted(POINT_KEYS))}")
    return points


def constants_sentence(metrics: dict, details: dict, unsure: list[str]) -> str:
    """What the caption says of the constants: not identifiable (the known-answer check failed: only the
    prediction errors count), else the ones the intervals leave undetermined."""
    if metrics.get("law/constants_identifiable") == 0:
        lost = (details.get("identifiability") or {}).get("not_recovered") or []
        return ("Constants not identifiable from this grid" + (f" (synthetic losses from the fitted constants give "
                f"back wrong {', '.join(lost)})" if lost else "") + ": only the prediction errors are reported.")
    return f"Not determined by this grid: {', '.join(unsure)}." if unsure else "Every constant is determined."


def law_fit(spec: dict, runs: Path) -> tuple[bytes | None, str]:
    found = read_result_details(spec, runs, read_points)
    if isinstance(found, str):
        return None, found
    _, result, points = found
    figure, axes = pyplot().subplots(figsize=(5.0, 4.2))
    for index, ratio in enumerate(sorted({p["R"] for p in points})):
        for held, marker in ((False, "o"), (True, "x")):
            chosen = [p for p in points if p["R"] == ratio and bool(p["heldout"]) == held]
            if chosen:
                axes.scatter([p["loss"] for p in chosen], [p["predicted"] for p in chosen], marker=marker,
                             color=f"C{index % 10}", s=18, label=f"R {ratio:g}{' (held out)' if held else ''}")
    low = min(min(p["loss"], p["predicted"]) for p in points)
    high = max(max(p["loss"], p["predicted"]) for p in points)
    axes.plot([low, high], [low, high], color="0.5", linewidth=0.8)
    axes.set(xlabel="observed validation loss (nats / token)", ylabel="Eq. 22 prediction",
             title=fill(spec["title"], 60))
    axes.legend(fontsize=7)
    m, unsure = result.get("metrics", {}), result["details"].get("ill_determined", [])
    held = m.get("law/r2_heldout")
    caption = (f"{spec['title']}: {int(m.get('law/points') or 0)} fitted points of {int(m.get('law/runs') or 0)} runs, "
               f"R^2 {format_float(m.get('law/r2_fit'), 3) or 'n/a'}; held-out runs "
               f"{', '.join(result['details'].get('heldout_runs', [])) or 'none'}"
               + (f", R^2 {format_float(held, 3)}, RMSE {format_float(m.get('law/rmse_heldout'), 3)} nats"
                  if held is not None else "")
               + ". " + constants_sentence(m, result["details"], unsure))
    return png(figure), caption
