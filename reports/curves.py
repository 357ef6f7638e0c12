"""Training curves per experiment from ``results/runs/{experiment}/seed{seed}/train/metrics.jsonl``.

Each logged row has ``step``, ``tokens``, ``loss`` and optionally ``loss/<name>``
components; validation rows carry ``split: "valid"`` and ``valid/loss``.  Bad
lines are skipped and counted, and the caption says so: the report never fails
on a half-written log.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tables.results import run_folders

from .plotting import png, pyplot


@dataclass
class Curve:
    """The logged rows of one experiment and seed."""

    seed: int
    train: list[dict] = field(default_factory=list)
    valid: list[dict] = field(default_factory=list)
    skipped: int = 0


def read_curve(path: Path, seed: int) -> Curve:
    curve = Curve(seed)
    for line in filter(str.strip, path.read_text().splitlines()):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            curve.skipped += 1
            continue
        if not isinstance(row, dict) or "tokens" not in row:
            curve.skipped += 1
        elif row.get("split") == "valid" and "valid/loss" in row:
            curve.valid.append(row)
        elif "loss" in row:
            curve.train.append(row)
    return curve


def read_curves(runs: Path) -> dict[str, list[Curve]]:
    """experiment -> curves of its seeds, for every metrics.jsonl found."""
    curves: dict[str, list[Curve]] = {}
    for path in [run / "train" / "metrics.jsonl" for run in run_folders(runs) if (run / "train" / "metrics.jsonl").is_file()]:
        seed = path.parts[-3].removeprefix("seed")
        if seed.isdigit():
            curves.setdefault(path.parts[-4], []).append(read_curve(path, int(seed)))
    return curves


def plot_curves(experiment: str, curves: list[Curve]) -> tuple[bytes, str]:
    """Loss against tokens for every seed (train solid, components dashed, validation dots)."""
    figure, axes = pyplot().subplots(figsize=(6.4, 3.6))
    for index, curve in enumerate(curves):
        colour = f"C{index}"
        tokens = [row["tokens"] for row in curve.train]
        axes.plot(tokens, [row["loss"] for row in curve.train], color=colour, label=f"seed {curve.seed} train")
        components = sorted({key for row in curve.train for key in row if key.startswith("loss/")})
        for style, key in zip(["--", ":", "-."] * 4, components):
            points = [(row["tokens"], row[key]) for row in curve.train if key in row]
            axes.plot(*zip(*points), style, color=colour, alpha=0.6, label=f"seed {curve.seed} {key}")
        if curve.valid:
            axes.plot([row["tokens"] for row in curve.valid], [row["valid/loss"] for row in curve.valid], "o",
                      color=colour, label=f"seed {curve.seed} valid")
    axes.set(xlabel="tokens", ylabel="loss", title=f"{experiment}: training curves")
    axes.legend(fontsize=7, ncol=2)
    skipped = sum(curve.skipped for curve in curves)
    caption = f"{experiment}: loss against tokens, {len(curves)} seed(s)"
    if skipped:
        caption += f"; {skipped} unreadable log line(s) skipped"
    return png(figure), caption
