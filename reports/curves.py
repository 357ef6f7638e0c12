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
from textwrap import fill

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
    for path in [run / "train" / "metrics.jsonl" for run in run_folders(runs)
                 if (run / "train" / "metrics.jsonl").is_file()]:
        seed = path.parts[-3].removeprefix("seed")
        if seed.isdigit():
            curves.setdefault(path.parts[-4], []).append(read_curve(path, int(seed)))
    return curves


MAIN_LOSSES = ("loss/ntp", "loss/nelbo")  # the next-token (or diffusion) loss every arm of a comparison shares


def _main_key(curve: Curve) -> str:
    keys = {key for row in curve.train for key in row}
    return next((key for key in MAIN_LOSSES if key in keys), "loss")


def _aux_keys(curve: Curve) -> list[str]:
    keys = {key for row in curve.train for key in row if key.startswith("loss/")}
    return sorted(keys - {_main_key(curve)})


def _series(curve: Curve, key: str) -> tuple[list[float], list[float]]:
    points = [(row["tokens"], row[key]) for row in curve.train if isinstance(row.get(key), (int, float))]
    return ([x for x, _ in points], [y for _, y in points]) if points else ([], [])


def plot_arms(title: str, arms: list[tuple[str, list[Curve]]]) -> tuple[bytes | None, str]:
    """The compared arms of one row group on shared axes: each arm's main loss (train line, validation
    dots; every seed, one colour per arm), and the auxiliary losses (NCP, VQ, ...) on their own
    log-scaled axes beside it, so that a loss of 0.01 is not drawn flat on the NTP axis."""
    drawn = [(label, curves) for label, curves in arms if any(curve.train or curve.valid for curve in curves)]
    if not drawn:
        return None, f"{title}: the training logs have no readable rows."
    aux = any(_aux_keys(curve) for _, curves in drawn for curve in curves)
    figure, axes = pyplot().subplots(1, 2 if aux else 1, figsize=(8.4 if aux else 5.6, 3.2), squeeze=False)
    main = axes[0][0]
    for index, (label, curves) in enumerate(drawn):
        colour = f"C{index % 10}"
        for seed, curve in enumerate(curves):
            main.plot(*_series(curve, _main_key(curve)), color=colour, alpha=0.85, lw=1,
                      label=label if seed == 0 else None)
            main.plot([row["tokens"] for row in curve.valid], [row["valid/loss"] for row in curve.valid], "o",
                      color=colour, ms=3)
            if aux:
                for style, key in zip(["-", "--", ":", "-."] * 4, _aux_keys(curve)):
                    axes[0][1].plot(*_series(curve, key), style, color=colour, lw=1,
                                    label=f"{label} {key.removeprefix('loss/')}" if seed == 0 else None)
    keys = sorted({_main_key(curve).removeprefix("loss/") for _, curves in drawn for curve in curves})
    main.set(xlabel="tokens", ylabel=f"{' / '.join(keys)}: train line, valid dots")
    main.legend(fontsize=9)
    if aux:
        axes[0][1].set(xlabel="tokens", ylabel="auxiliary loss", yscale="log")
        axes[0][1].legend(fontsize=9)
    figure.suptitle(fill(title, 90), fontsize=10)
    skipped = sum(curve.skipped for _, curves in drawn for curve in curves)
    seeds = ", ".join(f"{label} {len(curves)}" for label, curves in drawn)
    caption = f"{title}: loss against tokens (seeds: {seeds})" + (
        "; auxiliary losses on their own axis" if aux else "")
    if skipped:
        caption += f"; {skipped} unreadable log line(s) skipped"
    return png(figure), caption
