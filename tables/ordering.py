"""Does the reproduced ranking of a column agree with the reported one?

Reproduction at embedded scale is not expected to match absolute values, so the verdict is about
order, judged pair by pair.  For every pair of rows of a column (same row group, both printed and
reproduced) the reproduced difference d = mean_a - mean_b is tested by the rule of ``tables/stats.py``
(paired on matched seeds and data order, Welch otherwise; Holm-Bonferroni across the pairs of the column):

- ``agrees``: adjusted p < 0.05 and d has the sign of the paper's difference;
- ``differs``: adjusted p < 0.05 and d has the opposite sign;
- ``inconclusive``: adjusted p >= 0.05 (with the design's minimum detectable difference), or a row
  has a single seed (no spread: "n=1");
- ``not exercised``: a row's concept mechanism failed its check (``tables/mechanisms.py``): the pair
  compares mechanisms that were not at work at this budget, so it is counted apart and not tested.

Pairs tied in the paper are not judged.  A column's verdict is the count of its pair verdicts;
Kendall's tau-b over the means (scipy) is kept as a summary.  A column judged through another column
of ours (``order_proxy``: the paper's Avg PPL against our train-distribution PPL) compares different
quantities: its verdicts read "proxy: ..." and are never counted as agreement or disagreement.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from statistics import fmean, stdev

from scipy import stats as scipy_stats

from .stats import ALPHA, RULE, Test, compare, holm, welch

AGREES, DIFFERS, INCONCLUSIVE, NOT_EXERCISED = "agrees", "differs", "inconclusive", "not exercised"
OUTCOMES = (AGREES, DIFFERS, INCONCLUSIVE, NOT_EXERCISED)
PROXY = "proxy: "
__all__ = ["RULE", "ALPHA", "Estimate", "PairVerdict", "ColumnOrder", "compare_order", "estimate", "kendall_tau_b"]


@dataclass(frozen=True)
class Estimate:
    """A reproduced value: mean and sample standard deviation over n seeds (std None for one seed), with
    the per-seed values and each seed's data-order signature where known (for the paired test)."""

    mean: float
    std: float | None = None
    n: int = 1
    per_seed: Mapping[int, float] | None = field(default=None, compare=False)
    orders: Mapping[int, str] | None = field(default=None, compare=False)

    def values(self) -> dict[int, float] | None:
        """seed -> value; None when only the summary is known."""
        return dict(self.per_seed) if self.per_seed is not None else None


def from_seeds(per_seed: Mapping[int, float], orders: Mapping[int, str] | None = None) -> Estimate:
    values = list(per_seed.values())
    return Estimate(fmean(values), stdev(values) if len(values) > 1 else None, len(values), dict(per_seed),
                    dict(orders) if orders else None)


def estimate(value) -> Estimate:
    """An Estimate from a number (one seed), a sequence of per-seed values, a mapping seed -> value, or a
    result's ``Reproduced`` (per-seed values and data orders kept)."""
    if isinstance(value, Estimate):
        return value
    if isinstance(value, (int, float)):
        return Estimate(float(value))
    if hasattr(value, "per_seed"):
        return from_seeds(value.per_seed, getattr(value, "orders", None))
    if isinstance(value, Mapping):
        return from_seeds({int(k): float(v) for k, v in value.items()})
    return from_seeds({k: float(v) for k, v in enumerate(value)})


def same_order(a: Estimate, b: Estimate) -> bool:
    """Both rows ran the same seeds, each seed reading the same data in the same order."""
    if not a.orders or not b.orders or set(a.orders) != set(b.orders):
        return False
    if any(e.per_seed is not None and set(e.per_seed) != set(e.orders) for e in (a, b)):
        return False  # a seed whose data order is unknown: not paired
    return all(a.orders[seed] == b.orders[seed] for seed in a.orders)


def test_pair(a: Estimate, b: Estimate) -> Test | None:
    """The test of a.mean - b.mean by the rule of ``tables/stats.py``; None when a row has one seed."""
    if a.n < 2 or b.n < 2 or a.std is None or b.std is None:
        return None
    if a.per_seed is not None and b.per_seed is not None:
        return compare(a.per_seed, b.per_seed, same_order(a, b))
    return welch(a.mean, a.std, a.n, b.mean, b.std, b.n)


def inconclusive_reason(test: Test | None, p_adjusted: float | None, family: int) -> str:
    """Why a tested difference is inconclusive: one seed, no spread, or the test's p beside the smallest
    difference the design could have seen."""
    if test is None:
        return "n=1"
    if test.se == 0:
        return "no difference and no spread"
    return f"p={p_adjusted:.2g}; could see |d| ≥ {test.mde(family):.3g}"


@dataclass(frozen=True)
class PairVerdict:
    """Rows a and b of one column: the paper's difference against ours, with our test."""

    a: str
    b: str
    group: str | None
    reported: tuple[float, float]
    ours: tuple[Estimate, Estimate]
    proxy: bool = False
    test: Test | None = None
    p_adjusted: float | None = None
    family: int = 1                      # pairs tested together in this column (Holm's m)
    unexercised: str = ""                # why a row's mechanism was not at work ("" when both were)

    @property
    def paper_difference(self) -> float:
        return self.reported[0] - self.reported[1]

    @property
    def d(self) -> float:
        return self.ours[0].mean - self.ours[1].mean

    @property
    def single(self) -> list[str]:
        """Rows with fewer than two seeds: no spread, so the pair cannot be judged."""
        return [row for row, ours in zip((self.a, self.b), self.ours) if ours.n < 2 or ours.std is None]

    @property
    def se(self) -> float | None:
        return self.test.se if self.test else None

    @property
    def mde(self) -> float | None:
        """The smallest |d| this design detects at 80 % power (Bonferroni level over the family)."""
        return self.test.mde(self.family) if self.test else None

    @property
    def tied(self) -> bool:
        """Tied in the paper: there is no order to agree or differ with."""
        return self.paper_difference == 0

    @property
    def outcome(self) -> str:
        """agrees, differs, inconclusive or not exercised (``tied`` for pairs the paper does not order)."""
        if self.tied:
            return "tied"
        if self.unexercised:
            return NOT_EXERCISED
        if self.test is None or self.p_adjusted is None or self.p_adjusted >= ALPHA:
            return INCONCLUSIVE
        return AGREES if self.d * self.paper_difference > 0 else DIFFERS

    @property
    def reason(self) -> str:
        """Why a pair is inconclusive or not exercised; empty otherwise."""
        outcome = self.outcome
        if outcome == NOT_EXERCISED:
            return self.unexercised
        return inconclusive_reason(self.test, self.p_adjusted, self.family) if outcome == INCONCLUSIVE else ""

    @property
    def verdict(self) -> str:
        """The outcome as shown: prefixed "proxy: " when our values come from another column."""
        if self.tied:
            return "not judged (tied in the paper)"
        text = self.outcome + (f" ({self.reason})" if self.reason else "")
        return PROXY + text if self.proxy else text


@dataclass(frozen=True)
class ColumnOrder:
    """Ordering verdict for one column: every pair of rows, Kendall's tau as a summary."""

    column: str
    rows: list[str]
    tau: float | None
    pairs: list[PairVerdict]                 # every same-group pair, tied ones included
    proxy: str | None = None                 # reproduced values taken from this column

    @property
    def judged(self) -> list[PairVerdict]:
        return [pair for pair in self.pairs if not pair.tied]

    @property
    def flips(self) -> list[tuple[str, str]]:
        """Pairs whose reproduced means are ordered against the paper, significant or not (the tau view)."""
        return [(pair.a, pair.b) for pair in self.judged if pair.d * pair.paper_difference < 0]

    @property
    def groups(self) -> list[str | None]:
        """Row groups with at least one pair, in table order."""
        return list(dict.fromkeys(pair.group for pair in self.pairs))

    def counts(self, group: object = ...) -> dict[str, int]:
        """Pair outcomes of the column, or of one row group (``group`` a group name, None for rows without one)."""
        pairs = [pair for pair in self.judged if group is ... or pair.group == group]
        return {outcome: sum(pair.outcome == outcome for pair in pairs) for outcome in OUTCOMES}

    def summary(self, group: object = ...) -> str:
        """"agrees 3 / differs 1 / inconclusive 2 / not exercised 0", prefixed "proxy: " for a proxy column."""
        text = " / ".join(f"{outcome} {count}" for outcome, count in self.counts(group).items())
        return PROXY + text if self.proxy else text

    @property
    def verdict(self) -> str:
        return "insufficient" if len(self.rows) < 2 else self.summary()


def kendall_tau_b(xs: list[float], ys: list[float], comparable: list[tuple[int, int]] | None = None) -> float | None:
    """Kendall's tau-b over the index pairs ``comparable`` (default all: scipy's tau-b); None when either
    side is constant over them.  Restricted to pairs of one row group it is the tau-b of those pairs."""
    if comparable is None:
        if len(set(xs)) < 2 or len(set(ys)) < 2:
            return None
        return float(scipy_stats.kendalltau(xs, ys, variant="b").statistic)
    concordance = [(xs[i] - xs[j]) * (ys[i] - ys[j]) for i, j in comparable]
    untied_x = sum(xs[i] != xs[j] for i, j in comparable)
    untied_y = sum(ys[i] != ys[j] for i, j in comparable)
    if not untied_x or not untied_y:
        return None
    return (sum(c > 0 for c in concordance) - sum(c < 0 for c in concordance)) / math.sqrt(untied_x * untied_y)


def compare_order(column: str, pairs: dict[str, tuple[float, Estimate | float | Sequence[float]]],
                  proxy: str | None = None, groups: dict[str, str] | None = None,
                  unexercised: Mapping[str, str] | None = None) -> ColumnOrder:
    """``pairs`` maps row id -> (reported, reproduced), the reproduced side an Estimate, a result's
    ``Reproduced``, per-seed values or a bare number (one seed); ``proxy`` names the column the reproduced
    values come from when it is not ``column``.  With ``groups`` (row id -> block, e.g. a model size) only
    rows of the same block are compared: Table 1 asks whether ConceptLM beats Base at each size.
    ``unexercised`` maps a row to why its concept mechanism failed its check: its pairs are not tested.
    The tested pairs of the column form one Holm-Bonferroni family."""
    everyone = list(pairs)
    ours = {row: estimate(value) for row, (_, value) in pairs.items()}
    unexercised = unexercised or {}
    same = [(i, j) for i, j in combinations(range(len(everyone)), 2)
            if groups is None or groups.get(everyone[i]) == groups.get(everyone[j])]
    rows = [row for k, row in enumerate(everyone) if any(k in pair for pair in same)]  # rows with a partner
    drafts = []
    for a, b in ((everyone[i], everyone[j]) for i, j in same):
        why = "; ".join(f"{row}: {unexercised[row]}" for row in (a, b) if row in unexercised)
        tied = pairs[a][0] == pairs[b][0]
        drafts.append((a, b, why, None if tied or why else test_pair(ours[a], ours[b])))
    tested = [k for k, draft in enumerate(drafts) if draft[3] is not None]
    adjusted = dict(zip(tested, holm([drafts[k][3].p for k in tested])))
    verdicts = [PairVerdict(a, b, groups.get(a) if groups else None, (pairs[a][0], pairs[b][0]), (ours[a], ours[b]),
                            proxy is not None, test, adjusted.get(k), max(1, len(tested)), why)
                for k, (a, b, why, test) in enumerate(drafts)]
    tau = (kendall_tau_b([pairs[row][0] for row in everyone], [ours[row].mean for row in everyone], same)
           if same else None)
    return ColumnOrder(column, rows, tau, verdicts, proxy)
