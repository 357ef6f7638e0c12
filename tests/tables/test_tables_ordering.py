"""Pair verdicts (agrees / differs / inconclusive by a Welch or paired t-test with Holm within a column; not exercised
when a mechanism check failed), Kendall tau as a summary."""
import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from tables.ordering import Estimate, compare_order, estimate, from_seeds, kendall_tau_b


def pair(order, a, b):
    return next(p for p in order.pairs if (p.a, p.b) == (a, b))


def test_a_clear_agreement_with_three_seeds_each():
    order = compare_order("ppl", {"base": (30.0, [20.0, 20.2, 19.8]), "concept": (28.0, [18.0, 18.1, 17.9])})
    verdict = pair(order, "base", "concept")
    assert verdict.d == pytest.approx(2.0) and verdict.paper_difference == pytest.approx(2.0)
    assert verdict.se == pytest.approx(math.sqrt(0.2 ** 2 / 3 + 0.1 ** 2 / 3))
    assert (verdict.outcome, verdict.reason, verdict.verdict) == ("agrees", "", "agrees")
    assert (order.verdict == "agrees 1 / differs 0 / inconclusive 0 / not exercised 0"
            and order.tau == pytest.approx(1.0))
    welch = stats.ttest_ind([20.0, 20.2, 19.8], [18.0, 18.1, 17.9], equal_var=False)
    assert verdict.test.kind == "Welch" and verdict.test.p == pytest.approx(welch.pvalue)
    assert verdict.test.df == pytest.approx(welch.df) and verdict.p_adjusted == pytest.approx(welch.pvalue)


def test_a_clear_difference_with_three_seeds_each():
    order = compare_order("acc", {"base": (38.0, [36.0, 36.2, 35.8]), "pm": (38.4, [34.0, 34.1, 33.9])})
    verdict = pair(order, "base", "pm")
    assert (verdict.outcome, verdict.verdict) == ("differs", "differs")
    assert (order.verdict == "agrees 0 / differs 1 / inconclusive 0 / not exercised 0"
            and order.flips == [("base", "pm")])


def test_a_small_gap_is_inconclusive_with_the_smallest_difference_the_design_could_see():
    order = compare_order("ppl", {"base": (30.0, [20.0, 20.4, 19.6]), "pm": (29.0, [20.1, 20.5, 19.7])})
    verdict = pair(order, "base", "pm")
    assert verdict.p_adjusted >= 0.05 and verdict.outcome == "inconclusive"
    df, critical = verdict.test.df, stats.t.ppf(0.975, verdict.test.df)
    delta = verdict.mde / verdict.se  # at the MDE the test rejects with probability 0.8 (noncentral t)
    assert stats.nct.sf(critical, df, delta) + stats.nct.cdf(-critical, df, delta) == pytest.approx(0.8, abs=1e-6)
    assert verdict.reason == f"p={verdict.p_adjusted:.2g}; could see |d| ≥ {verdict.mde:.3g}"
    assert order.flips == [("base", "pm")]  # ordered against the paper, but within the noise: not a disagreement
    assert order.counts() == {"agrees": 0, "differs": 0, "inconclusive": 1, "not exercised": 0}


def test_the_old_two_standard_error_call_is_not_significant_at_three_seeds():
    """|d| = 2.3 se at n = 3 per row (Welch df ~ 4): a ~88 % call under the old rule, not a 95 % one."""
    scaled = [0.0, 0.35 * math.sqrt(3 / 2), -0.35 * math.sqrt(3 / 2)]
    verdict = pair(compare_order("ppl", {"a": (1.0, scaled), "b": (2.0, [0.81 + x for x in scaled])}), "a", "b")
    assert abs(verdict.d) / verdict.se == pytest.approx(0.81 / 0.35, rel=1e-6)
    assert verdict.outcome == "inconclusive"


def test_a_row_with_one_seed_is_never_judged():
    order = compare_order("ppl", {"base": (30.0, [20.0]), "pm": (29.0, [25.0, 25.1, 24.9]), "concept": (28.0, 10.0)})
    for a, b, single in [("base", "pm", ["base"]), ("base", "concept", ["base", "concept"]),
                         ("pm", "concept", ["concept"])]:
        verdict = pair(order, a, b)
        assert (verdict.se, verdict.outcome, verdict.reason, verdict.single) == (None, "inconclusive", "n=1", single)
    assert order.verdict == "agrees 0 / differs 0 / inconclusive 3 / not exercised 0"


def test_the_standard_error_uses_both_rows_with_their_own_n():
    order = compare_order("ppl", {"a": (2.0, Estimate(10.0, 2.0, 4)), "b": (1.0, Estimate(7.0, 3.0, 9))})
    assert pair(order, "a", "b").se == pytest.approx(math.sqrt(4 / 4 + 9 / 9))


def test_a_deterministic_difference_is_significant_and_a_deterministic_tie_is_not():
    """Zero spread on both rows: a difference is either there (p = 0) or not (p = 1)."""
    apart = compare_order("params", {"a": (1.0, Estimate(2.0, 0.0, 3)), "b": (0.0, Estimate(0.0, 0.0, 3))})
    assert pair(apart, "a", "b").outcome == "agrees"
    same = compare_order("params", {"a": (1.0, Estimate(2.0, 0.0, 3)), "b": (0.0, Estimate(2.0, 0.0, 3))})
    assert pair(same, "a", "b").outcome == "inconclusive"


def test_rows_of_the_same_seeds_and_data_order_are_tested_paired():
    """Common random numbers: a shared per-seed offset cancels in the paired test, not in Welch's."""
    shared = {0: 0.0, 1: 1.0, 2: -1.0}
    a = {seed: 10.0 + x for seed, x in shared.items()}
    b = {seed: 9.9 + x + 0.01 * seed for seed, x in shared.items()}
    orders = {seed: f"order{seed}" for seed in shared}
    paired = pair(compare_order("ppl", {"a": (2.0, from_seeds(a, orders)), "b": (1.0, from_seeds(b, orders))}),
                  "a", "b")
    theirs = stats.ttest_rel([a[s] for s in sorted(a)], [b[s] for s in sorted(b)])
    assert paired.test.paired and paired.test.p == pytest.approx(theirs.pvalue)
    assert paired.test.correlation == pytest.approx(np.corrcoef(list(a.values()), list(b.values()))[0, 1])
    assert paired.outcome == "agrees"
    other = {seed: f"other{seed}" for seed in shared}  # another data order: the noise is not shared
    unpaired = pair(compare_order("ppl", {"a": (2.0, from_seeds(a, orders)), "b": (1.0, from_seeds(b, other))}),
                    "a", "b")
    assert not unpaired.test.paired and unpaired.outcome == "inconclusive"
    fewer = {0: b[0], 1: b[1]}  # other seeds: Welch
    assert not pair(compare_order("ppl", {"a": (2.0, from_seeds(a, orders)),
                                          "b": (1.0, from_seeds(fewer, {0: "order0", 1: "order1"}))}),
                    "a", "b").test.paired


def test_holm_adjusts_within_the_column():
    rows = {f"r{k}": (float(k), [float(k) + x for x in (0.0, 0.3, -0.3)]) for k in range(4)}
    order = compare_order("ppl", rows)
    tested = [p for p in order.pairs if p.test is not None]
    assert len(tested) == 6 and all(p.family == 6 for p in tested)
    raw = sorted(p.test.p for p in tested)
    smallest = min(tested, key=lambda p: p.test.p)
    assert smallest.p_adjusted == pytest.approx(min(1.0, 6 * raw[0]))


def test_a_row_whose_mechanism_was_not_exercised_is_counted_apart():
    rows = {"base": (30.0, [20.0, 20.2, 19.8]), "concept": (28.0, [18.0, 18.1, 17.9]), "pm": (29.0, [19.0, 19.1, 18.9])}
    order = compare_order("ppl", rows, unexercised={"concept": "swap effect 0.0001 < 3 × seed sd 0.01"})
    assert pair(order, "base", "concept").outcome == "not exercised"
    assert pair(order, "base", "concept").reason == "concept: swap effect 0.0001 < 3 × seed sd 0.01"
    assert pair(order, "base", "concept").test is None
    assert pair(order, "base", "pm").family == 1  # the unexercised pairs are not in the Holm family
    assert order.counts() == {"agrees": 1, "differs": 0, "inconclusive": 0, "not exercised": 2}


def test_pairs_tied_in_the_paper_are_not_judged_and_one_row_is_insufficient():
    order = compare_order("acc", {"a": (38.2, [1.0, 1.1]), "b": (38.2, [2.0, 2.1])})
    assert (order.flips == [] and order.judged == []
            and pair(order, "a", "b").verdict == "not judged (tied in the paper)")
    assert order.verdict == "agrees 0 / differs 0 / inconclusive 0 / not exercised 0"
    assert compare_order("acc", {"a": (1.0, 2.0)}).verdict == "insufficient"


def test_tau_b_with_ties_matches_the_textbook_value():
    # x = (1, 2, 2, 3), y = (1, 3, 2, 4): 5 concordant, 0 discordant, one tie in x -> 5 / sqrt(5 * 6)
    assert kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(5 / 30 ** 0.5)
    assert kendall_tau_b([1, 1], [1, 2]) is None


def random_columns(rng, n, ties):
    """Two columns of n values: small integers (many ties) or continuous normals (none)."""
    if ties:
        return rng.integers(0, 3, n).astype(float).tolist(), rng.integers(0, 3, n).astype(float).tolist()
    return rng.normal(size=n).tolist(), rng.normal(size=n).tolist()


@pytest.mark.parametrize("ties", [False, True])
def test_tau_b_equals_scipy_on_random_columns(ties):
    rng = np.random.default_rng(15 + ties)
    for _ in range(300):
        xs, ys = random_columns(rng, int(rng.integers(2, 12)), ties)
        theirs = stats.kendalltau(xs, ys, variant="b").statistic
        ours = kendall_tau_b(xs, ys)
        assert (ours is None) if math.isnan(theirs) else ours == pytest.approx(theirs, abs=1e-12), (xs, ys)


def sign_correlation_tau_b(xs, ys, groups):
    """Tau-b over the ordered pairs (i, j), i != j, of one group, as Daniels' correlation of the sign matrices
    a_ij = sgn(x_i - x_j), b_ij = sgn(y_i - y_j): sum a b / sqrt(sum a^2 * sum b^2); None when a side is constant."""
    x, y, g = np.asarray(xs), np.asarray(ys), np.asarray(groups)
    same = (g[:, None] == g[None, :]) & ~np.eye(len(g), dtype=bool)
    a, b = np.sign(x[:, None] - x[None, :]) * same, np.sign(y[:, None] - y[None, :]) * same
    denominator = math.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denominator) if denominator else None


@pytest.mark.parametrize("ties", [False, True])
def test_tau_b_within_groups_equals_its_brute_force_definition(ties):
    rng = np.random.default_rng(150 + ties)
    for _ in range(300):
        n = int(rng.integers(2, 12))
        xs, ys = random_columns(rng, n, ties)
        groups = rng.integers(0, 3, n).tolist()
        rows = [f"r{k}" for k in range(n)]
        order = compare_order("c", dict(zip(rows, zip(xs, ys))), groups=dict(zip(rows, groups)))
        expected = sign_correlation_tau_b(xs, ys, groups)
        assert (order.tau is None) if expected is None else order.tau == pytest.approx(expected, abs=1e-12), \
            (xs, ys, groups)


def test_one_group_of_comparable_pairs_is_scipy_on_that_group():
    rng = np.random.default_rng(1515)
    xs, ys = random_columns(rng, 9, ties=True)
    members = [0, 2, 3, 5, 8]
    comparable = list(combinations(members, 2))
    expected = stats.kendalltau([xs[k] for k in members], [ys[k] for k in members], variant="b").statistic
    assert kendall_tau_b(xs, ys, comparable) == pytest.approx(expected, abs=1e-12)


def test_a_proxy_column_is_labelled_and_not_agreement():
    seeds = {"a": (60.0, [15.0, 15.1, 14.9]), "b": (70.0, [14.0, 14.1, 13.9]), "c": (80.0, [16.0, 16.1, 15.9])}
    order = compare_order("avg_ppl", seeds, proxy="train_ppl")
    assert order.proxy == "train_ppl"
    # a−b flips; a−c, b−c do not
    assert order.verdict == "proxy: agrees 2 / differs 1 / inconclusive 0 / not exercised 0"
    assert {p.verdict for p in order.pairs} == {"proxy: agrees", "proxy: differs"}
    assert all(p.verdict.startswith("proxy: ") for p in order.pairs)


def test_rows_are_compared_within_their_group_only():
    pairs = {"base_s": (30.0, 20.0), "concept_s": (28.0, 19.0), "base_m": (25.0, 21.0), "concept_m": (24.0, 22.0)}
    groups = {"base_s": "s", "concept_s": "s", "base_m": "m", "concept_m": "m"}
    order = compare_order("ppl", pairs, groups=groups)
    assert [(p.a, p.b, p.group) for p in order.pairs] == [("base_s", "concept_s", "s"), ("base_m", "concept_m", "m")]
    assert order.flips == [("base_m", "concept_m")] and order.tau == 0.0
    assert (order.groups == ["s", "m"]
            and order.summary("m") == "agrees 0 / differs 0 / inconclusive 1 / not exercised 0")
    assert len(compare_order("ppl", pairs).flips) == 5  # across groups, size differences would count


def test_rows_without_a_partner_in_their_group_are_not_compared():
    order = compare_order("ppl", {"a": (1.0, 2.0), "b": (2.0, 1.0)}, groups={"a": "s", "b": "m"})
    assert order.rows == [] and order.pairs == [] and order.verdict == "insufficient"


def test_a_spread_is_never_borrowed_from_another_row():
    """A one-seed row next to a three-seed row stays one seed: the old 'largest σ of the group' is gone."""
    order = compare_order("ppl", {"base": (30.0, [20.0, 20.1, 19.9]), "pm": (29.0, [25.0])})
    assert pair(order, "base", "pm").reason == "n=1"


def test_estimates_from_numbers_lists_and_results():
    from tables.results import Reproduced

    assert estimate(3.0) == Estimate(3.0, None, 1)
    assert estimate([1.0, 3.0]) == Estimate(2.0, pytest.approx(math.sqrt(2)), 2)
    assert estimate(Reproduced({0: 1.0, 1: 3.0})) == Estimate(2.0, pytest.approx(math.sqrt(2)), 2)


def test_an_unknown_order_proxy_is_a_spec_error(tmp_path):
    from tables.specs import load_spec
    from tables.validation import DataError

    (tmp_path / "toy").mkdir()
    spec = tmp_path / "toy" / "t.yaml"
    spec.write_text("paper: toy\ntable: t\ntitle: T\nwhere: here\nrows: [{id: a, label: A}]\n"
                    "columns: [{id: ppl, label: PPL, order_proxy: nope}]\n")
    with pytest.raises(DataError, match="'nope' is not a column of this table"):
        load_spec(spec)
