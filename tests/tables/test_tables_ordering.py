"""Kendall tau and flipped pairs between reported and reproduced columns."""
import pytest

from tables.ordering import compare_order, kendall_tau_b


def test_agreeing_order():
    order = compare_order("ppl", {"base": (100.0, 30.0), "pm": (99.0, 29.0), "concept": (85.0, 27.0)})
    assert order.tau == pytest.approx(1.0)
    assert (order.verdict, order.flips) == ("agrees", [])


def test_flipped_pairs_are_named():
    order = compare_order("acc", {"base": (38.0, 35.0), "pm": (38.4, 34.0), "concept": (38.9, 37.0)})
    assert order.flips == [("base", "pm")]
    assert order.verdict == "differs"
    assert order.tau == pytest.approx(1 / 3)


def test_ties_in_the_paper_do_not_flip_and_one_row_is_insufficient():
    assert compare_order("acc", {"a": (38.2, 1.0), "b": (38.2, 2.0)}).flips == []
    assert compare_order("acc", {"a": (1.0, 2.0)}).verdict == "insufficient"


def test_tau_b_with_ties_matches_the_textbook_value():
    # x = (1, 2, 2, 3), y = (1, 3, 2, 4): 5 concordant, 0 discordant, one tie in x -> 5 / sqrt(5 * 6)
    assert kendall_tau_b([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(5 / 30 ** 0.5)
    assert kendall_tau_b([1, 1], [1, 2]) is None


def test_flips_within_the_seed_spread_are_told_apart():
    pairs = {"base": (100.0, 30.0), "pm": (99.0, 30.4), "concept": (85.0, 31.0)}
    order = compare_order("ppl", pairs, noise=0.25)
    assert order.flips == [("base", "pm"), ("base", "concept"), ("pm", "concept")]
    assert order.noise_flips == [("base", "pm")] and order.verdict == "differs"
    assert compare_order("ppl", pairs, noise=0.6).verdict == "differs only within seed noise"
    assert compare_order("ppl", pairs).noise_flips == []


def test_a_proxy_column_is_named():
    order = compare_order("avg_ppl", {"a": (60.0, 15.0), "b": (70.0, 14.0)}, proxy="train_ppl")
    assert order.proxy == "train_ppl" and order.verdict == "differs"


def test_rows_are_compared_within_their_group_only():
    pairs = {"base_s": (30.0, 20.0), "concept_s": (28.0, 19.0), "base_m": (25.0, 21.0), "concept_m": (24.0, 22.0)}
    groups = {"base_s": "s", "concept_s": "s", "base_m": "m", "concept_m": "m"}
    order = compare_order("ppl", pairs, groups=groups)
    assert order.flips == [("base_m", "concept_m")] and order.tau == 0.0
    assert len(compare_order("ppl", pairs).flips) == 5  # across groups, size differences would count


def test_rows_without_a_partner_in_their_group_are_not_compared():
    order = compare_order("ppl", {"a": (1.0, 2.0), "b": (2.0, 1.0)}, groups={"a": "s", "b": "m"})
    assert order.rows == [] and order.flips == [] and order.verdict == "insufficient"


def test_an_unknown_order_proxy_is_a_spec_error(tmp_path):
    from tables.specs import load_spec
    from tables.validation import DataError

    (tmp_path / "toy").mkdir()
    spec = tmp_path / "toy" / "t.yaml"
    spec.write_text("paper: toy\ntable: t\ntitle: T\nwhere: here\nrows: [{id: a, label: A}]\n"
                    "columns: [{id: ppl, label: PPL, order_proxy: nope}]\n")
    with pytest.raises(DataError, match="'nope' is not a column of this table"):
        load_spec(spec)


def test_a_groups_seed_spread_is_not_applied_to_another_group():
    pairs = {"base_s": (30.0, 20.0), "pm_s": (29.0, 20.1), "base_m": (25.0, 15.0), "pm_m": (24.0, 15.1)}
    groups = {"base_s": "s", "pm_s": "s", "base_m": "m", "pm_m": "m"}
    order = compare_order("ppl", pairs, {"base_s": 0.2, "pm_s": 0.2}, groups=groups)
    assert order.flips == [("base_s", "pm_s"), ("base_m", "pm_m")] and order.noise_flips == [("base_s", "pm_s")]
