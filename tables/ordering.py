"""Does the reproduced ranking of a column agree with the reported one? (issue 3, "compare orderings")

Reproduction at embedded scale is not expected to match absolute values, so
the verdict is about order: Kendall's tau-b between reported and reproduced
values of the rows that have both, and the pairs of rows whose order flips.
Pairs tied in the paper cannot flip. When some row of the table was run with
several seeds, a flip whose reproduced difference is within twice the largest
seed standard deviation is told apart: one seed's luck could reverse it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations


@dataclass(frozen=True)
class ColumnOrder:
    """Ordering verdict for one column."""

    column: str
    rows: list[str]
    tau: float | None
    flips: list[tuple[str, str]]
    noise: float | None = None                                     # largest seed std of the column
    noise_flips: list[tuple[str, str]] = field(default_factory=list)  # flips within 2 x noise

    @property
    def verdict(self) -> str:
        if len(self.rows) < 2:
            return "insufficient"
        if not self.flips:
            return "agrees"
        return "differs only within seed noise" if len(self.noise_flips) == len(self.flips) else "differs"


def kendall_tau_b(xs: list[float], ys: list[float]) -> float | None:
    """Kendall's tau-b (ties counted on each side); None when either side is constant."""
    concordance = [(x1 - x2) * (y1 - y2) for (x1, y1), (x2, y2) in combinations(zip(xs, ys), 2)]
    untied_x = sum(x1 != x2 for x1, x2 in combinations(xs, 2))
    untied_y = sum(y1 != y2 for y1, y2 in combinations(ys, 2))
    if not untied_x or not untied_y:
        return None
    return (sum(c > 0 for c in concordance) - sum(c < 0 for c in concordance)) / math.sqrt(untied_x * untied_y)


def compare_order(column: str, pairs: dict[str, tuple[float, float]], noise: float | None = None) -> ColumnOrder:
    """``pairs`` maps row id -> (reported, reproduced mean); ``noise`` is a seed standard deviation."""
    rows = list(pairs)
    flips = [(a, b) for a, b in combinations(rows, 2)
             if (pairs[a][0] - pairs[b][0]) * (pairs[a][1] - pairs[b][1]) < 0]
    tau = kendall_tau_b([pairs[row][0] for row in rows], [pairs[row][1] for row in rows]) if len(rows) >= 2 else None
    within = [(a, b) for a, b in flips if noise is not None and abs(pairs[a][1] - pairs[b][1]) <= 2 * noise]
    return ColumnOrder(column, rows, tau, flips, noise, within)
