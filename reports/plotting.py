"""Matplotlib set-up shared by all figures: a non-interactive backend and reproducible PNG bytes."""
from __future__ import annotations

import io

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
