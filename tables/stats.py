"""The significance of a reproduced difference, stated once for every verdict of the tables.

A difference d = mean_a - mean_b between two rows (or between the two sides of a paper's claim) is
tested at ``ALPHA`` two-sided:

- **paired** t-test on the per-seed differences when both rows ran the same seeds with the same data
  order (common random numbers: seed k of either row read the same windows in the same order, so the
  seed-to-seed noise they share cancels); df = n - 1;
- **Welch**'s t-test otherwise (unequal variances; Welch-Satterthwaite df);
- no test when a row has a single seed (no spread to judge by).

Within a family (the pairs of one column of one table; the parts of one claim) the p-values are
adjusted by Holm-Bonferroni, which bounds the family-wise error at ``ALPHA``.  Beside each test the
minimum detectable difference (MDE) of the design: the smallest |d| this spread and this number of
seeds detect with probability ``POWER`` at the Bonferroni level ALPHA / m (Holm's first step; the
noncentral t of the test's df), so an
inconclusive verdict says how large an effect the grid could have seen.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import fmean, stdev

from scipy import optimize, stats

ALPHA = 0.05
POWER = 0.80
RULE = ("Each difference between two rows is tested at 95 % two-sided: a paired t-test on the per-seed "
        "differences when both rows ran the same seeds with the same data order, Welch's t-test (Welch-Satterthwaite "
        "df) otherwise; rows with one seed are not judged (n=1). Holm-Bonferroni adjusts the p-values within each "
        "family (the pairs of one column of one table; the parts of one claim). A pair agrees when its adjusted p < "
        "0.05 and our difference has the paper's sign, differs when p < 0.05 with the opposite sign, and is "
        "inconclusive otherwise, with the minimum detectable difference (MDE: 80 % power at the Bonferroni level "
        "0.05/m) of the design. '±' in the tables is one standard deviation over seeds; intervals are 95 % "
        "confidence intervals of the difference.")


@dataclass(frozen=True)
class Test:
    """The test of one difference d = a - b: its standard error, degrees of freedom and two-sided p."""

    d: float
    se: float
    df: float
    p: float
    paired: bool
    n: tuple[int, int]
    correlation: float | None = None   # between the rows' per-seed values, for a paired test

    @property
    def kind(self) -> str:
        return "paired" if self.paired else "Welch"

    def interval(self, alpha: float = ALPHA) -> tuple[float, float]:
        """The (1 - alpha) confidence interval of d."""
        half = _t(1 - alpha / 2, self.df) * self.se
        return self.d - half, self.d + half

    def mde(self, family: int = 1, alpha: float = ALPHA, power: float = POWER) -> float:
        """The smallest |d| detected with probability ``power`` at level alpha / family (two-sided): the
        noncentrality at which the noncentral t of this test's df reaches that power, times se."""
        critical = _t(1 - alpha / (2 * family), self.df)
        if self.se == 0 or not math.isfinite(self.df):
            return (critical + _t(power, self.df)) * self.se

        def shortfall(delta: float) -> float:
            upper, lower = (float(stats.nct.sf(critical, self.df, delta)),
                            float(stats.nct.cdf(-critical, self.df, delta)))
            upper = 1.0 if math.isnan(upper) else upper  # far out in the noncentral tail
            return upper + (0.0 if math.isnan(lower) else lower) - power

        high = critical + _t(power, self.df)  # the t + t approximation, a little short of the power
        while shortfall(high) < 0:
            high *= 1.5
        return float(optimize.brentq(shortfall, 0.0, high)) * self.se


def _t(q: float, df: float) -> float:
    return float(stats.t.ppf(q, df)) if math.isfinite(df) else float(stats.norm.ppf(q))


def _p(d: float, se: float, df: float) -> float:
    if se == 0:  # no spread: a difference either is there or is not (float rounding is not one)
        return 1.0 if math.isclose(d, 0.0, abs_tol=1e-12) else 0.0
    return float(2 * stats.t.sf(abs(d / se), df))


def welch(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int) -> Test:
    """Welch's two-sample t-test from the rows' means, sample standard deviations and seed counts."""
    va, vb = sd_a ** 2 / n_a, sd_b ** 2 / n_b
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1)) if se > 0 else math.inf
    d = mean_a - mean_b
    return Test(d, se, df, _p(d, se, df), False, (n_a, n_b))


def paired(a: Sequence[float], b: Sequence[float]) -> Test:
    """A paired t-test on the differences a_k - b_k of matched seeds."""
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    se = stdev(diffs) / math.sqrt(n)
    d = fmean(diffs)
    sa, sb = stdev(a), stdev(b)
    corr = ((sum((x - fmean(a)) * (y - fmean(b)) for x, y in zip(a, b)) / ((n - 1) * sa * sb))
            if sa > 0 and sb > 0 else None)
    return Test(d, se, n - 1.0, _p(d, se, n - 1.0), True, (n, n), corr)


def compare(a: Mapping[int, float], b: Mapping[int, float], same_order: bool) -> Test | None:
    """The test of mean(a) - mean(b) over per-seed values (seed -> value): paired when ``same_order`` and
    both ran exactly the same seeds, Welch otherwise; None when either has fewer than two seeds."""
    if len(a) < 2 or len(b) < 2:
        return None
    if same_order and set(a) == set(b):
        seeds = sorted(a)
        return paired([a[s] for s in seeds], [b[s] for s in seeds])
    xa, xb = list(a.values()), list(b.values())
    return welch(fmean(xa), stdev(xa), len(xa), fmean(xb), stdev(xb), len(xb))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (reject at ALPHA where adjusted < ALPHA), in the input order."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted
