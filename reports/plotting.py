"""Matplotlib set-up shared by all figures: a non-interactive backend and reproducible PNG bytes."""
from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported late so the backend is set first)."""
    import matplotlib.pyplot as plt

    plt.rcParams.update(LEGIBLE)
    return plt


LEGIBLE = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 9, "xtick.labelsize": 9,
           "ytick.labelsize": 9}
"""Every figure readable at its displayed size (80 dpi PNGs shown at their width): text of 9 pt and more."""


PALETTE = 128  # colours of a figure's PNG: line plots need few, and the report stays small (< 1 MB)


def png(figure) -> bytes:
    """The figure as an indexed-colour PNG (``PALETTE`` colours, optimised) without a timestamp or
    version in its metadata; the figure is closed."""
    from PIL import Image

    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=80, metadata={"Software": None})
    pyplot().close(figure)
    image = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB").quantize(PALETTE, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="png", optimize=True)
    return out.getvalue()


def read_result_details(spec: dict, runs: Path, read: Callable[[dict], object]) -> tuple[Path, dict, object] | str:
    """``(path, result, read(result))`` of the first seed's result file that a figure of ``spec`` (``experiment``,
    ``eval``) draws from its details, or the caption saying why there is none (missing, malformed:
    ``read`` raises ValueError naming what is wrong)."""
    from tables.results import first_seed_result
    from tables.validation import display_path

    experiment, eval_name = spec["experiment"], spec["eval"]
    path = first_seed_result(runs, experiment, eval_name)
    if path is None:
        return f"{spec['title']}: no results yet. Missing results: {experiment} (eval {eval_name})."
    try:
        result = json.loads(path.read_text())
        return path, result, read(result)
    except ValueError as error:  # json.JSONDecodeError included
        return f"{spec['title']}: {display_path(path)} is malformed ({error})."
