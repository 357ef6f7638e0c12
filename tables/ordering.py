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
    proxy: str | None = None                                       # reproduced values taken from this column

    @property
    def verdict(self) -> str:
        if len(self.rows) < 2:
            return "insufficient"
        if not self.flips:
            return "agrees"
        return "differs only within seed noise" if len(self.noise_flips) == len(self.flips) else "differs"


def kendall_tau_b(xs: list[float], ys: list[float], comparable: list[tuple[int, int]] | None = None) -> float | None:
    """Kendall's tau-b (ties counted on each side) over the index pairs ``comparable`` (default all);
    None when either side is constant over them."""
    index_pairs = comparable if comparable is not None else list(combinations(range(len(xs)), 2))
    concordance = [(xs[i] - xs[j]) * (ys[i] - ys[j]) for i, j in index_pairs]
    untied_x = sum(xs[i] != xs[j] for i, j in index_pairs)
    untied_y = sum(ys[i] != ys[j] for i, j in index_pairs)
    if not untied_x or not untied_y:
        return None
    return (sum(c > 0 for c in concordance) - sum(c < 0 for c in concordance)) / math.sqrt(untied_x * untied_y)


def compare_order(column: str, pairs: dict[str, tuple[float, float]], noise: float | dict[str, float] | None = None,
                  proxy: str | None = None, groups: dict[str, str] | None = None) -> ColumnOrder:
    """``pairs`` maps row id -> (reported, reproduced mean); ``noise`` is a seed standard deviation, for
    all rows or per row (rows without one have no noise estimate); ``proxy`` names the column the
    reproduced means come from when it is not ``column``. With
    ``groups`` (row id -> block, e.g. a model size) only rows of the same block are compared: Table 1
    asks whether ConceptLM beats Base at each size, not across sizes or corpora."""
    everyone = list(pairs)
    same = [(i, j) for i, j in combinations(range(len(everyone)), 2)
            if groups is None or groups.get(everyone[i]) == groups.get(everyone[j])]
    rows = [row for k, row in enumerate(everyone) if any(k in pair for pair in same)]  # rows with a partner
    flips = [(everyone[i], everyone[j]) for i, j in same
             if (pairs[everyone[i]][0] - pairs[everyone[j]][0]) * (pairs[everyone[i]][1] - pairs[everyone[j]][1]) < 0]
    tau = kendall_tau_b([pairs[row][0] for row in everyone], [pairs[row][1] for row in everyone], same) if same else None
    sigma = {row: noise for row in pairs} if isinstance(noise, (int, float)) else (noise or {})
    within = [(a, b) for a, b in flips
              if a in sigma and b in sigma and abs(pairs[a][1] - pairs[b][1]) <= 2 * max(sigma[a], sigma[b])]
    return ColumnOrder(column, rows, tau, flips, max(sigma.values()) if sigma else None, within, proxy)
