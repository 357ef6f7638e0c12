"""The verdicts' test (tables/stats.py) against scipy and against its stated error rates by simulation."""
import math

import numpy as np
import pytest
from scipy import stats

from tables.ordering import compare_order, from_seeds
from tables.stats import compare, holm, paired, welch


def test_welch_p_and_df_are_scipys():
    rng = np.random.default_rng(28)
    for _ in range(50):
        a, b = rng.normal(0, 1, int(rng.integers(2, 7))), rng.normal(0.5, 2, int(rng.integers(2, 7)))
        ours = welch(a.mean(), a.std(ddof=1), len(a), b.mean(), b.std(ddof=1), len(b))
        theirs = stats.ttest_ind(a, b, equal_var=False)
        assert ours.p == pytest.approx(theirs.pvalue) and ours.df == pytest.approx(theirs.df)
        low, high = ours.interval()
        interval = theirs.confidence_interval(0.95)
        assert (low, high) == (pytest.approx(interval.low), pytest.approx(interval.high))


def test_paired_p_is_scipys_and_used_only_on_matched_seeds():
    a, b = [1.0, 2.0, 3.5], [0.8, 1.9, 3.0]
    assert paired(a, b).p == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert compare(dict(enumerate(a)), dict(enumerate(b)), same_order=True).paired
    assert not compare(dict(enumerate(a)), dict(enumerate(b)), same_order=False).paired
    assert not compare({0: 1.0, 1: 2.0, 2: 3.5}, {0: 0.8, 1: 1.9, 5: 3.0}, same_order=True).paired
    assert compare({0: 1.0}, {0: 1.0, 1: 2.0}, same_order=True) is None


def holm_by_definition(pvalues, alpha=0.05):
    """Step down: reject the k smallest while p_(j) <= alpha / (m - j) for every j < k."""
    m, rejected = len(pvalues), set()
    for rank, i in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        if pvalues[i] > alpha / (m - rank):
            break
        rejected.add(i)
    return rejected


def test_holm_rejects_exactly_the_step_down_set():
    rng = np.random.default_rng(2828)
    for _ in range(500):
        pvalues = (rng.uniform(0, 0.08, int(rng.integers(1, 9)))).tolist()
        adjusted = holm(pvalues)
        assert {i for i, p in enumerate(adjusted) if p <= 0.05} == holm_by_definition(pvalues)


def simulate(difference_sd, draws, rows, rng):
    """Fraction of columns (``rows`` rows of 3 seeds, row 0 shifted by ``difference_sd`` pooled sd) with any pair
    called agrees or differs, and with the planted pair called with the paper's sign."""
    any_call = planted = 0
    for _ in range(draws):
        columns = {f"r{k}": (float(rows - k),
                             from_seeds(dict(enumerate(rng.normal(difference_sd if k == 0 else 0.0, 1, 3)))))
                   for k in range(rows)}
        order = compare_order("x", columns)
        any_call += any(p.outcome in ("agrees", "differs") for p in order.pairs)
        planted += next(p for p in order.pairs if (p.a, p.b) == ("r0", "r1")).outcome == "agrees"
    return any_call / draws, planted / draws


def test_a_planted_difference_of_four_sd_at_three_seeds_is_called_with_the_papers_sign():
    _, power = simulate(4.0, 2000, 2, np.random.default_rng(4))
    assert power >= 0.80


@pytest.mark.slow
@pytest.mark.parametrize("rows", [2, 4])
def test_a_null_difference_is_called_at_most_five_percent_family_wise(rows):
    family_wise, _ = simulate(0.0, 2000, rows, np.random.default_rng(rows))
    # the binomial noise of 2,000 draws at 5 % is 0.5 %: allow two of it
    assert family_wise <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 2000)
