"""Power-law fits and iso-perplexity ratios, as ConceptLM reads them off Fig. 1 (Sec. 4.2, p. 7).

Each series is fitted as ``log PPL = a + b log x`` by least squares.  The
iso-PPL ratio asks how much x the candidate needs to reach the baseline's
measured PPL at the baseline's largest x: ``ratio = x_cand / x_base``, where
``x_cand`` solves the candidate's fit for that PPL (the paper's 0.63 of the
parameters, 0.76 of the tokens, 0.81 of the FLOPs; below 1 the candidate needs
less).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Point = tuple[float, float]  # (x, PPL)


@dataclass(frozen=True)
class PowerLaw:
    """``PPL = exp(a) * x**b``."""

    a: float
    b: float

    def __call__(self, x: float) -> float:
        return math.exp(self.a + self.b * math.log(x))

    def solve(self, ppl: float) -> float:
        """The x at which the fit reaches ``ppl`` (``b`` must be non-zero)."""
        return math.exp((math.log(ppl) - self.a) / self.b)


@dataclass(frozen=True)
class IsoRatio:
    """The iso-PPL reading of one panel; ``ratio`` is None and ``reason`` says why when it cannot be read."""

    target: float | None = None
    x_base: float | None = None
    x_cand: float | None = None
    ratio: float | None = None
    extrapolated: bool = False
    reason: str = ""


def loggable(points: list[Point]) -> list[Point]:
    """The points a log-log fit can use: positive x and PPL, sorted by x."""
    return sorted((x, y) for x, y in points if x > 0 and y > 0)


def fit(points: list[Point]) -> PowerLaw | None:
    """Least-squares fit of log PPL on log x; None with fewer than 2 distinct positive x."""
    points = loggable(points)
    if len({x for x, _ in points}) < 2:
        return None
    b, a = np.polyfit(np.log([x for x, _ in points]), np.log([y for _, y in points]), 1)
    return PowerLaw(float(a), float(b))


def iso_ratio(baseline: list[Point], candidate: list[Point], name: str = "candidate") -> IsoRatio:
    """x the candidate's fit needs for the baseline's PPL at its largest x, over that x.

    ``extrapolated`` when that x lies outside the candidate's measured range.
    """
    base = loggable(baseline)
    if not base:
        return IsoRatio(reason="no baseline point")
    x_base, target = base[-1]
    cand = loggable(candidate)
    law = fit(cand)
    if law is None:
        return IsoRatio(target, x_base, reason=f"{name}: fewer than 2 points to fit")
    if law.b >= 0:
        return IsoRatio(target, x_base, reason=f"{name}: PPL does not fall with x (slope b = {law.b:+.3g})")
    x_cand = law.solve(target)
    return IsoRatio(target, x_base, x_cand, x_cand / x_base, not cand[0][0] <= x_cand <= cand[-1][0])
