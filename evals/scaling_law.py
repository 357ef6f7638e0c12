"""DLCM's compression-aware scaling law (arXiv 2512.24617v2, Sec. 6.2, Eq. 22), fitted to training trajectories.

    L(N, D, R, P) = E0 + A_token / (N (1 - P) + t_token)^delta1
                       + A_concept R^gamma / (N P + t_concept)^delta2
                       + A_data / (D + t_data)^alpha

N: the model's (non-embedding) parameters, P: the concept backbone's share of them, R: the compression
ratio (target tokens per concept), D: training tokens seen, L: validation loss in nats per token. The
paper fits the law on whole trajectories (every logged validation loss of every run of its N x R x P grid
is a point; docs/sources.md, "DLCM: what the paper specifies"), reports R^2 > 0.98 and publishes no
constants (``tables/MISSING.md``): the constants fitted here are the first ones, at our scale.

**Fit.** ``scipy.optimize.least_squares`` (trust-region reflective) on the log residuals
log L^ - log L under a Huber loss of scale ``huber_delta`` (1e-3 by default, as the Chinchilla fits;
``None`` for plain least squares), with an analytic Jacobian. The positive constants (E0, the A's, the
t's and the three exponents delta1, delta2, alpha) are fitted as logarithms; gamma is free in sign. N and D
are divided by their geometric means during the fit (the constants are reported in raw parameters and
tokens). The problem is not convex: the fit starts from a small deterministic grid of 16 points (E0 a
fraction of the smallest loss, the three exponents equal, gamma, the t's; each A set so that its term
carries a third of the median excess loss), the Chinchilla recipe at a size two CPU cores afford, and keeps
the lowest cost.

**Held-out runs** (``holdout_runs``) are whole trajectories left out of the fit and of the bootstrap, then
scored: R^2 and RMSE (nats) of the law's predictions of their losses. R^2 on the fitted points is that of
the training trajectories, dominated by the data term's early fall: the held-out R^2 is the one to trust.

**Intervals and identifiability.** The points of one trajectory are not independent, so the 95%
intervals come from a bootstrap over runs: runs are drawn with replacement (seeded), the law is refitted
from the best solution, and the 2.5/97.5 percentiles of each constant are taken. Refits that start from
the best solution cannot leave a direction in which the loss surface is flat, so the bootstrap alone
would fake precision there; each constant is therefore also checked against the local Gauss-Newton
curvature (``J^T J`` of the log residuals, in the fitted log / normalised coordinates, singular
directions counting as infinitely uncertain). A constant is *ill-determined* when either its bootstrap
interval or its local 95% interval spans more than a factor of 10 (gamma: more than 1 in absolute
terms); ``n_boot=0`` skips the bootstrap and judges by the local interval alone (``evals.scaling_fit`` does
so for a grid that does not identify the constants, and counts those it cannot give back as ill-determined).
Eleven constants from a few runs are often not all determined -- the t offsets above all,
when they are small against N (1 - P), N P and D -- and ``LawFit.ill_determined`` names them: the fit
still returns, and its predictions can be good while those constants are arbitrary.

**Data the law cannot be fitted on** raises a one-line ``ValueError`` naming what is missing: fewer than
2 values of R (gamma), of N or of P (with one N, N (1 - P) and N P move together; with one P they are
proportional, and the token and concept terms cannot be told apart), fewer than 3 values of N (1 - P),
of N P or of D (each term has 3 constants), or no more fitted points than constants.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

NAMES = ("E0", "A_token", "t_token", "delta1", "A_concept", "t_concept", "delta2", "gamma",
         "A_data", "t_data", "alpha")
FREE = {"gamma"}  # the one constant not fitted as a logarithm
EXPONENT_RANGE = (1e-3, 5.0)  # bounds of delta1, delta2, alpha; gamma lies in +-5
MAX_FACTOR = 10.0  # a positive constant whose 95% interval spans more than this factor is ill-determined
MAX_GAMMA_WIDTH = 1.0  # ... and gamma, when its interval is wider than this
Z95 = 1.959964


@dataclass(frozen=True)
class LawPoint:
    """One logged validation loss of one run."""

    run: str
    N: float  # non-embedding parameters
    D: float  # training tokens seen
    R: float  # compression ratio, tokens per concept
    P: float  # concept backbone's share of N, in (0, 1)
    loss: float  # nats per token


@dataclass(frozen=True)
class LawFit:
    """The fitted constants (raw parameters and tokens), their 95% bootstrap intervals (NaN without the
    bootstrap, ``n_boot`` 0) and the fit's scores."""

    constants: dict[str, float]
    lo: dict[str, float]
    hi: dict[str, float]
    ill_determined: tuple[str, ...]
    r2_fit: float | None
    r2_heldout: float | None
    rmse_heldout: float | None
    points: int
    runs: int
    heldout_points: int
    heldout_runs: tuple[str, ...]
    n_boot: int
    boot_ok: int  # bootstrap refits that converged
    method: str

    @property
    def identifiable(self) -> bool:
        return not self.ill_determined


# -- the law --------------------------------------------------------------------------------------------

def _power(a: float, x: np.ndarray, t: float, e: float) -> np.ndarray:
    """``a / (x + t)^e``."""
    return a / (x + t) ** e


def _law(c: Sequence[float], N, D, R, P) -> np.ndarray:
    """Eq. 22 with the constants ``c`` in ``NAMES`` order (array inputs broadcast)."""
    E0, At, tt, d1, Ac, tc, d2, g, Ad, td, al = c
    N, D, R, P = (np.asarray(v, dtype=float) for v in (N, D, R, P))
    return (E0 + _power(At, N * (1 - P), tt, d1) + _power(Ac * R ** g, N * P, tc, d2)
            + _power(Ad, D, td, al))


def predict(fit: LawFit, N, D, R, P) -> np.ndarray | float:
    """The law's loss (nats/token) at (N, D, R, P) with the fitted constants; arrays broadcast."""
    out = _law([fit.constants[k] for k in NAMES], N, D, R, P)
    return float(out) if out.ndim == 0 else out


def _columns(points: Sequence[LawPoint], fields: Sequence[str]) -> list[np.ndarray]:
    return [np.array([getattr(p, k) for p in points], dtype=float) for k in fields]


# -- the fit in normalised log coordinates ---------------------------------------------------------------

@dataclass(frozen=True)
class _Data:
    """Fitted points as arrays, N and D divided by ``n_ref`` / ``d_ref``."""

    x_token: np.ndarray  # N (1 - P) / n_ref
    x_concept: np.ndarray  # N P / n_ref
    d: np.ndarray  # D / d_ref
    log_r: np.ndarray
    log_loss: np.ndarray
    n_ref: float
    d_ref: float

    @classmethod
    def of(cls, points: Sequence[LawPoint], n_ref: float, d_ref: float) -> _Data:
        N, D, R, P, L = _columns(points, ("N", "D", "R", "P", "loss"))
        return cls(N * (1 - P) / n_ref, N * P / n_ref, D / d_ref, np.log(R), np.log(L), n_ref, d_ref)


def _to_constants(theta: np.ndarray) -> np.ndarray:
    """Normalised constants from the fitted coordinates (logarithms, gamma as is)."""
    return np.array([v if k in FREE else math.exp(v) for k, v in zip(NAMES, theta)])


def _residuals_and_jacobian(theta: np.ndarray, data: _Data) -> tuple[np.ndarray, np.ndarray]:
    """log L^ - log L and its derivatives in the fitted coordinates."""
    E0, At, tt, d1, Ac, tc, d2, g, Ad, td, al = _to_constants(theta)
    terms, columns = [], []
    for a, x, t, e in ((At, data.x_token, tt, d1), (Ac * np.exp(g * data.log_r), data.x_concept, tc, d2),
                       (Ad, data.d, td, al)):
        term = _power(a, x, t, e)  # d/dlog a, d/dlog t, d/dlog e:
        terms.append(term)
        columns.append([term, -e * term * t / (x + t), -e * term * np.log(x + t)])
    pred = E0 + sum(terms)
    (dAt, dtt, dd1), (dAc, dtc, dd2), (dAd, dtd, dal) = columns
    jac = np.stack([np.full_like(pred, E0), dAt, dtt, dd1, dAc, dtc, dd2, dAc * data.log_r, dAd, dtd, dal],
                   axis=1)
    return np.log(pred) - data.log_loss, jac / pred[:, None]


def _bounds() -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.full(len(NAMES), -60.0), np.full(len(NAMES), 60.0)
    for k in ("delta1", "delta2", "alpha"):
        i = NAMES.index(k)
        lo[i], hi[i] = (math.log(v) for v in EXPONENT_RANGE)
    i = NAMES.index("gamma")
    lo[i], hi[i] = -5.0, 5.0
    return lo, hi


def _solve(theta0: np.ndarray, data: _Data, huber_delta: float | None):
    from scipy.optimize import least_squares  # here, not at import: the Snakefile's validation reads this module

    lo, hi = _bounds()
    return least_squares(lambda th: _residuals_and_jacobian(th, data)[0], np.clip(theta0, lo + 1e-9, hi - 1e-9),
                         jac=lambda th: _residuals_and_jacobian(th, data)[1], bounds=(lo, hi),
                         loss="linear" if huber_delta is None else "huber", f_scale=huber_delta or 1.0,
                         max_nfev=2000)


def _starts(data: _Data) -> list[np.ndarray]:
    """The deterministic grid: E0 fraction x exponent x gamma x offset, A's sharing the median excess."""
    loss = np.exp(data.log_loss)
    r_mid = float(np.exp(np.median(data.log_r)))
    x_t, x_c, d_mid = (float(np.median(v)) for v in (data.x_token, data.x_concept, data.d))
    starts = []
    for frac, e, g, t in itertools.product((0.3, 0.7), (0.25, 0.6), (0.0, 0.5), (0.01, 0.3)):
        e0 = frac * float(loss.min())
        share = max(float(np.median(loss)) - e0, 1e-3) / 3
        c = [e0, share * (x_t + t) ** e, t, e, share * (x_c + t) ** e / r_mid ** g, t, e, g,
             share * (d_mid + t) ** e, t, e]
        starts.append(np.array([v if k in FREE else math.log(v) for k, v in zip(NAMES, c)]))
    return starts


def _raw(theta: np.ndarray, n_ref: float, d_ref: float) -> np.ndarray:
    """Constants in raw parameters and tokens: A x ref^exponent, t x ref."""
    c = dict(zip(NAMES, _to_constants(theta)))
    for a, t, e, ref in (("A_token", "t_token", "delta1", n_ref), ("A_concept", "t_concept", "delta2", n_ref),
                         ("A_data", "t_data", "alpha", d_ref)):
        c[a] *= ref ** c[e]
        c[t] *= ref
    return np.array([c[k] for k in NAMES])


def _local_halfwidths(theta: np.ndarray, data: _Data) -> np.ndarray:
    """1.96 x the Gauss-Newton standard error of each fitted coordinate (inf along singular directions)."""
    r, jac = _residuals_and_jacobian(theta, data)
    sigma2 = float(r @ r) / max(len(r) - len(theta), 1)
    _, s, vt = np.linalg.svd(jac, full_matrices=False)
    singular = s <= s.max() * 1e-10
    inv_s2 = np.where(singular, 0.0, 1.0 / np.where(singular, 1.0, s) ** 2)
    var = (vt.T ** 2) @ inv_s2 * sigma2
    var[(np.abs(vt[singular]) > 1e-8).any(axis=0)] = np.inf
    return Z95 * np.sqrt(var)


def _ill_determined(halfwidth: np.ndarray, lo: np.ndarray, hi: np.ndarray, bootstrapped: bool = True
                    ) -> tuple[str, ...]:
    """Constants whose local or (``bootstrapped``) bootstrap 95% interval is too wide (module docstring)."""
    out = []
    for i, k in enumerate(NAMES):
        if k in FREE:
            wide = 2 * halfwidth[i] > MAX_GAMMA_WIDTH or bootstrapped and not hi[i] - lo[i] <= MAX_GAMMA_WIDTH
        else:
            wide = 2 * halfwidth[i] > math.log(MAX_FACTOR) or bootstrapped and not (
                lo[i] > 0 and hi[i] / lo[i] <= MAX_FACTOR)
        if wide:
            out.append(k)
    return tuple(out)


# -- checks, scores, the public fit ------------------------------------------------------------------------

GRID_NEEDS = (("R", lambda N, P, R: R, 2, "the law's R^gamma term"),
              ("N", lambda N, P, R: N, 2, "the token and concept terms are told apart only when N(1-P) and NP vary "
                                          "independently, which"),
              ("P", lambda N, P, R: P, 2, "the token and concept terms are told apart only when N(1-P) and NP vary "
                                          "independently, which"),
              ("N(1-P)", lambda N, P, R: N * (1 - P), 3, "the token term (A_token, t_token, delta1)"),
              ("NP", lambda N, P, R: N * P, 3, "the concept term (A_concept, t_concept, delta2)"))


def grid_problem(shapes: Iterable[tuple[float, float, float]]) -> str | None:
    """What the grid of runs ``(N, P, R)`` lacks for the law (a sentence), or None: the checks of the
    module docstring that do not involve D, so a profile's grid is checked before anything trains."""
    shapes = list(shapes)
    for name, value, least, what in GRID_NEEDS:
        n = len({float(f"{value(*shape):.9g}") for shape in shapes})  # 9 significant digits: N(1 - P) of N, P
        if n < least:
            return f"the fitted points have {n} value{'s' * (n != 1)} of {name}; {what} needs at least {least}"
    return None


def _check(points: Sequence[LawPoint]) -> None:
    """Raise a one-line ValueError when the fitted points cannot support the law."""
    for p in points:
        if not (p.N > 0 and p.D > 0 and p.R > 0 and 0 < p.P < 1 and p.loss > 0):
            raise ValueError(f"point of run {p.run!r} out of range: needs N, D, R, loss > 0 and 0 < P < 1 ({p})")
    problem = grid_problem((p.N, p.P, p.R) for p in points)
    if problem:
        raise ValueError(problem)
    n = len({round(p.D, 9) for p in points})
    if n < 3:
        raise ValueError(f"the fitted points have {n} value{'s' * (n != 1)} of D; the data term (A_data, t_data, "
                         "alpha) needs at least 3")
    if len(points) <= len(NAMES):
        raise ValueError(f"{len(points)} fitted points for {len(NAMES)} constants; the fit needs more points")


def r2_rmse(observed, predicted) -> tuple[float | None, float | None]:
    """R^2 and RMSE of ``predicted`` against ``observed`` (sequences of equal length); None where undefined."""
    observed, predicted = np.asarray(observed, dtype=float), np.asarray(predicted, dtype=float)
    if not len(observed):
        return None, None
    sse, sst = float(((observed - predicted) ** 2).sum()), float(((observed - observed.mean()) ** 2).sum())
    return (1 - sse / sst if sst > 0 else None), math.sqrt(sse / len(observed))


def _scores(fit_constants: np.ndarray, points: Sequence[LawPoint]) -> tuple[float | None, float | None]:
    """R^2 and RMSE (nats) of the law's losses on ``points``; None where undefined."""
    if not points:
        return None, None
    N, D, R, P, loss = _columns(points, ("N", "D", "R", "P", "loss"))
    return r2_rmse(loss, _law(fit_constants, N, D, R, P))


def _by_run(points: Iterable[LawPoint]) -> dict[str, list[LawPoint]]:
    """Points grouped by run, runs by name and each run by D: the fit does not depend on the input order."""
    runs: dict[str, list[LawPoint]] = {}
    for p in points:
        runs.setdefault(p.run, []).append(p)
    return {r: sorted(ps, key=lambda p: (p.D, p.loss, p.N, p.R, p.P)) for r, ps in sorted(runs.items())}


def _geomean(v: Iterable[float]) -> float:
    return float(np.exp(np.mean(np.log(list(v)))))


def _best(data: _Data, huber_delta: float | None):
    """The lowest-cost solution of the multi-start fit (``_starts``) and the starts."""
    starts = _starts(data)
    return min((_solve(s, data, huber_delta) for s in starts), key=lambda r: (r.cost, tuple(r.x))), starts


def fit_constants(points: Sequence[LawPoint], huber_delta: float | None = 1e-3) -> dict[str, float]:
    """The raw constants of the multi-start fit of ``points`` (what ``fit`` reports, without the bootstrap)."""
    n_ref, d_ref = _geomean(p.N for p in points), _geomean(p.D for p in points)
    best, _ = _best(_Data.of(points, n_ref, d_ref), huber_delta)
    return dict(zip(NAMES, map(float, _raw(best.x, n_ref, d_ref))))


def fit(points: Sequence[LawPoint], holdout_runs: Iterable[str] = (), *, n_boot: int = 200, seed: int = 0,
        huber_delta: float | None = 1e-3) -> LawFit:
    """Fit Eq. 22 on the points of every run not in ``holdout_runs``; score those runs; bootstrap over runs.

    Deterministic: the same points (in any order), hold-out, ``n_boot`` and ``seed`` give the same fit.
    ``n_boot=0`` skips the bootstrap: no intervals (NaN), and a constant is ill-determined by its local
    interval alone. Raises ValueError when a held-out run is unknown, ``n_boot`` is 1 or negative, or the
    fitted points cannot support the law (module docstring).
    """
    runs = _by_run(points)
    held = tuple(sorted(set(holdout_runs)))
    if unknown := [r for r in held if r not in runs]:
        raise ValueError(f"held-out runs not among the points: {', '.join(unknown)}")
    if n_boot < 2 and n_boot != 0:
        raise ValueError(f"n_boot = {n_boot}; the bootstrap intervals need at least 2 resamples (0: none)")
    fitted = {r: ps for r, ps in runs.items() if r not in held}
    train = [p for ps in fitted.values() for p in ps]
    _check(train)
    n_ref, d_ref = _geomean(p.N for p in train), _geomean(p.D for p in train)
    data = _Data.of(train, n_ref, d_ref)
    best, starts = _best(data, huber_delta)
    boot, ok = _bootstrap(best.x, fitted, n_boot, seed, n_ref, d_ref, huber_delta)
    lo, hi = (np.percentile(boot, q, axis=0) if ok else np.full(len(NAMES), np.nan) for q in (2.5, 97.5))
    const = _raw(best.x, n_ref, d_ref)
    r2_held, rmse_held = _scores(const, [p for r in held for p in runs[r]])
    loss_name = "linear" if huber_delta is None else f"huber(delta={huber_delta:g})"
    return LawFit(
        constants=dict(zip(NAMES, map(float, const))), lo=dict(zip(NAMES, map(float, lo))),
        hi=dict(zip(NAMES, map(float, hi))),
        ill_determined=_ill_determined(_local_halfwidths(best.x, data), lo, hi, bootstrapped=n_boot > 0),
        r2_fit=_scores(const, train)[0], r2_heldout=r2_held, rmse_heldout=rmse_held,
        points=len(train), runs=len(fitted), heldout_points=sum(len(runs[r]) for r in held), heldout_runs=held,
        n_boot=n_boot, boot_ok=ok,
        method=f"least_squares(trf, {loss_name} on log L, {len(starts)} starts); "
               + (f"bootstrap over runs x{n_boot} (seed {seed}), percentile 95%" if n_boot else "no bootstrap"))


def _bootstrap(theta: np.ndarray, runs: dict[str, list[LawPoint]], n_boot: int, seed: int, n_ref: float,
               d_ref: float, huber_delta: float | None) -> tuple[np.ndarray, int]:
    """Raw constants of ``n_boot`` refits (from ``theta``) on runs drawn with replacement; rows that converged."""
    rng, names, rows = np.random.default_rng(seed), list(runs), []
    for _ in range(n_boot):
        sample = [p for i in rng.integers(len(names), size=len(names)) for p in runs[names[i]]]
        res = _solve(theta, _Data.of(sample, n_ref, d_ref), huber_delta)
        if res.success and np.all(np.isfinite(res.x)):
            rows.append(_raw(res.x, n_ref, d_ref))
    return np.array(rows).reshape(-1, len(NAMES)), len(rows)


def fit_to_result(fit: LawFit, constants: bool = True) -> dict[str, float | None]:
    """Flat metrics: ``law/<constant>`` (lower-cased: ``law/e0``, ``law/a_token``), ``_lo``, ``_hi``,
    ``_determined`` (1/0), and the fit's scores; ``constants=False`` (a grid that fails ``identifiability``)
    leaves the constants out: the scores alone are reported."""
    def num(v: float | None) -> float | None:
        return float(v) if v is not None and math.isfinite(v) else None

    out: dict[str, float | None] = {}
    for k in NAMES if constants else ():
        key = f"law/{k.lower()}"
        out.update({key: num(fit.constants[k]), f"{key}_lo": num(fit.lo[k]), f"{key}_hi": num(fit.hi[k]),
                    f"{key}_determined": float(k not in fit.ill_determined)})
    out.update({"law/r2_fit": num(fit.r2_fit), "law/r2_heldout": num(fit.r2_heldout),
                "law/rmse_heldout": num(fit.rmse_heldout), "law/points": float(fit.points),
                "law/runs": float(fit.runs), "law/heldout_points": float(fit.heldout_points),
                "law/heldout_runs": float(len(fit.heldout_runs)), "law/identifiable": float(fit.identifiable),
                "law/boot_ok": float(fit.boot_ok)})
    return out


# -- identifiability: can this grid give back constants it was generated from? ----------------------------

ID_REL_TOL = 0.25   # a constant is recovered when the refit is within 25 % of the truth (gamma: of max(|gamma|, 1))
ID_DRAWS = 3        # synthetic data sets per check (independent noise draws)


@dataclass(frozen=True)
class Identifiability:
    """The known-answer check of ``identifiability``: the truth, each draw's refit, and the verdict."""

    truth: dict[str, float]
    refits: tuple[dict[str, float], ...]
    rel_error: dict[str, float]  # the largest over the draws
    recovered: tuple[str, ...]
    noise: float
    rel_tol: float
    r2_synthetic: float | None  # R^2 of the worst draw's refit on its own synthetic points

    @property
    def identifiable(self) -> bool:
        return len(self.recovered) == len(NAMES)

    def to_record(self) -> dict:
        return {"identifiable": self.identifiable, "truth": self.truth, "refits": list(self.refits),
                "rel_error": self.rel_error, "recovered": list(self.recovered),
                "not_recovered": [k for k in NAMES if k not in self.recovered], "noise_log_sd": self.noise,
                "rel_tol": self.rel_tol, "draws": len(self.refits), "r2_synthetic": self.r2_synthetic}


def _rel_error(k: str, got: float, want: float) -> float:
    scale = max(abs(want), 1.0) if k in FREE else abs(want)
    return abs(got - want) / scale if scale > 0 else math.inf


def identifiability(points: Sequence[LawPoint], truth: dict[str, float], *, noise: float = 0.0,
                    draws: int = ID_DRAWS, rel_tol: float = ID_REL_TOL, seed: int = 0,
                    huber_delta: float | None = 1e-3) -> Identifiability:
    """Known-answer check of the law on a grid: the losses at exactly ``points``' (N, D, R, P) are replaced by
    Eq. 22 with the constants ``truth``, times exp(noise x standard normal) (``noise``: the log-residual
    standard deviation of the real fit, so the synthetic data are as noisy as the real ones), and fitted by
    the same multi-start fit as the real data (``fit_constants``: it does not start from the truth). The grid
    identifies the constants when every one of them comes back within ``rel_tol`` of the truth (gamma: of
    max(|gamma|, 1)) in each of ``draws`` noise draws (seeded ``seed``). A good R^2 on the synthetic points
    with constants that do not come back is the signature of a grid that cannot tell them apart."""
    points = list(points)
    _check(points)
    rng = np.random.default_rng(seed)
    N, D, R, P = _columns(points, ("N", "D", "R", "P"))
    clean = _law([truth[k] for k in NAMES], N, D, R, P)
    refits, worst, r2 = [], {k: 0.0 for k in NAMES}, None
    for _ in range(draws):
        loss = clean * np.exp(noise * rng.standard_normal(len(clean)))
        synthetic = [LawPoint(p.run, p.N, p.D, p.R, p.P, float(y)) for p, y in zip(points, loss)]
        got = fit_constants(synthetic, huber_delta)
        refits.append(got)
        for k in NAMES:
            worst[k] = max(worst[k], _rel_error(k, got[k], truth[k]))
        score = r2_rmse(loss, _law([got[k] for k in NAMES], N, D, R, P))[0]
        r2 = score if r2 is None or (score is not None and score < r2) else r2
    recovered = tuple(k for k in NAMES if worst[k] <= rel_tol)
    return Identifiability(dict(truth), tuple(refits), worst, recovered, noise, rel_tol, r2)


def log_residual_sd(fit_result: LawFit, points: Sequence[LawPoint]) -> float:
    """Standard deviation of log L - log L^ over ``points`` (the fitted ones): the check's noise level."""
    N, D, R, P, L = _columns(points, ("N", "D", "R", "P", "loss"))
    pred = _law([fit_result.constants[k] for k in NAMES], N, D, R, P)
    return float(np.std(np.log(L) - np.log(pred)))
