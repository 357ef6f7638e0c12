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

    return plt


def png(figure) -> bytes:
    """The figure as PNG bytes without a timestamp or version in its metadata; the figure is closed."""
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    pyplot().close(figure)
    return buffer.getvalue()


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
