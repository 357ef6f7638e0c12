"""Does the reproduced ranking of a column agree with the reported one? (issues 3 and 13)

Reproduction at embedded scale is not expected to match absolute values, so
the verdict is about order, judged pair by pair.  For every pair of rows of a
column (same row group, both printed and reproduced) the reproduced difference
d = mean_a - mean_b is read against its standard error from the seeds of *both*
rows (Welch: se = sqrt(s_a^2/n_a + s_b^2/n_b)):

- ``agrees``: d has the sign of the paper's difference and |d| > SE_FACTOR * se;
- ``differs``: d has the opposite sign and |d| > SE_FACTOR * se;
- ``inconclusive``: |d| <= SE_FACTOR * se, or a row has fewer than 2 seeds (no se: "n=1").

Pairs tied in the paper are not judged.  A column's verdict is the count of its
pair verdicts ("agrees 3 / differs 1 / inconclusive 2"); Kendall's tau-b over
the means is kept as a summary.  A column judged through another column of ours
(``order_proxy``: the paper's Avg PPL against our train-distribution PPL)
compares different quantities: its verdicts read "proxy: ..." and are never
counted as agreement or disagreement.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import fmean, stdev

SE_FACTOR = 2.0
"""How many standard errors a reproduced difference must exceed to count: |d| > SE_FACTOR * se.

For a normally distributed difference with known se, +-2 se is a two-sided ~95 % band (z = 1.96).
Our se is estimated from few seeds, and with 3 seeds per row (Welch-Satterthwaite df ~ 4) a t-based
95 % factor would be larger (t = 2.78; at df 4, +-2 se covers only ~88 %).  We keep the fixed normal
factor 2 on purpose: one rule, the same for every pair, that a reader can check by eye; the price is
that a pair called ``agrees`` or ``differs`` on 3 seeds is a ~88 %, not a 95 %, call.  Rows with one
seed have no se and are never judged (``inconclusive``, "n=1")."""

AGREES, DIFFERS, INCONCLUSIVE = "agrees", "differs", "inconclusive"
OUTCOMES = (AGREES, DIFFERS, INCONCLUSIVE)
PROXY = "proxy: "
RULE = (f"a pair of rows agrees when our difference d = mean_a − mean_b has the paper's sign and |d| > "
        f"{SE_FACTOR:g}·se, with se = sqrt(s_a²/n_a + s_b²/n_b) over the seeds of both rows (Welch); it differs when "
        f"d has the opposite sign and |d| > {SE_FACTOR:g}·se; it is inconclusive when |d| ≤ {SE_FACTOR:g}·se or a row "
        f"has a single seed (n=1). Pairs tied in the paper are not judged. A proxy compares the paper's column with "
        f"another column of ours and counts as neither agreement nor disagreement.")


@dataclass(frozen=True)
class Estimate:
    """A reproduced value: mean and sample standard deviation over n seeds (std None for one seed)."""

    mean: float
    std: float | None = None
    n: int = 1


def estimate(value) -> Estimate:
    """An Estimate from a number (one seed), a sequence of per-seed values, or anything with mean, std and n."""
    if isinstance(value, Estimate):
        return value
    if isinstance(value, (int, float)):
        return Estimate(float(value))
    if hasattr(value, "mean") and hasattr(value, "n"):
        return Estimate(value.mean, value.std, value.n)
    values = [float(item) for item in value]
    return Estimate(fmean(values), stdev(values) if len(values) > 1 else None, len(values))


@dataclass(frozen=True)
class PairVerdict:
    """Rows a and b of one column: the paper's difference against ours, with our standard error."""

    a: str
    b: str
    group: str | None
    reported: tuple[float, float]
    ours: tuple[Estimate, Estimate]
    proxy: bool = False

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
        """Welch standard error of d; None when a row has fewer than two seeds."""
        if self.single:
            return None
        return math.sqrt(sum(ours.std ** 2 / ours.n for ours in self.ours))

    @property
    def tied(self) -> bool:
        """Tied in the paper: there is no order to agree or differ with."""
        return self.paper_difference == 0

    @property
    def outcome(self) -> str:
        """agrees, differs or inconclusive (``tied`` for pairs the paper does not order)."""
        if self.tied:
            return "tied"
        se = self.se
        if se is None or abs(self.d) <= SE_FACTOR * se:
            return INCONCLUSIVE
        return AGREES if self.d * self.paper_difference > 0 else DIFFERS

    @property
    def reason(self) -> str:
        """Why a pair is inconclusive: "n=1" (a row has one seed) or "|d| ≤ 2·se"; empty otherwise."""
        if self.outcome != INCONCLUSIVE:
            return ""
        return "n=1" if self.single else f"|d| ≤ {SE_FACTOR:g}·se"

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
        """"agrees 3 / differs 1 / inconclusive 2", prefixed "proxy: " for a proxy column."""
        text = " / ".join(f"{outcome} {count}" for outcome, count in self.counts(group).items())
        return PROXY + text if self.proxy else text

    @property
    def verdict(self) -> str:
        return "insufficient" if len(self.rows) < 2 else self.summary()


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


def compare_order(column: str, pairs: dict[str, tuple[float, Estimate | float | Sequence[float]]],
                  proxy: str | None = None, groups: dict[str, str] | None = None) -> ColumnOrder:
    """``pairs`` maps row id -> (reported, reproduced), the reproduced side an Estimate, a result's
    ``Reproduced``, a list of per-seed values or a bare number (one seed); ``proxy`` names the column
    the reproduced values come from when it is not ``column``.  With ``groups`` (row id -> block, e.g.
    a model size) only rows of the same block are compared: Table 1 asks whether ConceptLM beats Base
    at each size, not across sizes or corpora."""
    everyone = list(pairs)
    ours = {row: estimate(value) for row, (_, value) in pairs.items()}
    same = [(i, j) for i, j in combinations(range(len(everyone)), 2)
            if groups is None or groups.get(everyone[i]) == groups.get(everyone[j])]
    rows = [row for k, row in enumerate(everyone) if any(k in pair for pair in same)]  # rows with a partner
    verdicts = [PairVerdict(a, b, groups.get(a) if groups else None, (pairs[a][0], pairs[b][0]), (ours[a], ours[b]),
                            proxy is not None)
                for a, b in ((everyone[i], everyone[j]) for i, j in same)]
    tau = kendall_tau_b([pairs[row][0] for row in everyone], [ours[row].mean for row in everyone], same) if same else None
    return ColumnOrder(column, rows, tau, verdicts, proxy)
