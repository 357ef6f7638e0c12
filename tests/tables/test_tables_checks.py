"""Recomputing printed aggregates and claims on hand-made tables, with tolerances from printed precision."""
import pytest

from tables.build import build

SPEC = """rows:
  - {id: base, label: Base, baseline: true}
  - {id: new, label: New}
  - {id: total, label: Total, formula: "base + new"}
columns:
  - {id: a, label: A}
  - {id: b, label: B}
  - {id: c, label: C}
  - {id: d, label: D}
  - {id: avg, label: Avg, formula: "mean(a, b, c, d)"}
  - {id: diff, label: "a - b", formula: "a - b"}
  - {id: ratio, label: "a / b", formula: "a / b"}
  - {id: rel, label: "rel. change of a vs Base (%)", formula: "100 * (a - baseline.a) / baseline.a"}
"""


def run(hand_paper, tmp_path, lines, claims=None, spec=SPEC, every=False):
    specs, reported = hand_paper(spec, lines, claims)
    outcome = build(tmp_path / "no_results", specs, reported)
    if every:
        return outcome.findings
    return {finding.check.where: finding for finding in outcome.findings}


def line(row, column, value, decimals):
    return f"t1,{row},{column},{value},{decimals},m,u,lower,pdf,"


def cells(row, values, decimals=2):
    return [line(row, column, value, decimals) for column, value in zip("abcd", values)]


def test_every_kind_of_aggregate_is_recomputed(hand_paper, tmp_path):
    lines = cells("base", ["10.00", "20.00", "30.00", "40.00"]) + cells("new", ["12.00", "24.00", "30.00", "38.00"]) + [
        line("base", "avg", "25.00", 2), line("base", "diff", "-10.00", 2), line("base", "ratio", "0.50", 2),
        line("new", "rel", "20.0", 1), line("new", "avg", "26.00", 2)] + cells(
        "total", ["22.00", "44.00", "60.00", "78.00"]) + [
        line("total", "avg", "51.00", 2)]
    findings = run(hand_paper, tmp_path, lines)
    expected = {"Table 1 · Base · Avg": 25.0, "Table 1 · Base · a - b": -10.0, "Table 1 · Base · a / b": 0.5,
                "Table 1 · New · rel. change of a vs Base (%)": 20.0, "Table 1 · Total · A": 22.0}
    for where, value in expected.items():
        assert findings[where].value == pytest.approx(value)
        assert findings[where].status == "consistent"
    total_avg = [f for f in run(hand_paper, tmp_path, lines, every=True) if f.check.where == "Table 1 · Total · Avg"]
    assert [f.value for f in total_avg] == [pytest.approx(51.0)] * 2  # the column rule and the row rule


def test_an_average_printed_as_34_23_for_34_3175_is_flagged(hand_paper, tmp_path):
    lines = cells("new", ["10.93", "27.01", "20.01", "79.32"]) + [line("new", "avg", "34.23", 2)]
    finding = run(hand_paper, tmp_path, lines)["Table 1 · New · Avg"]
    assert finding.value == pytest.approx(34.3175)
    assert finding.difference == pytest.approx(-0.0875)
    assert finding.tolerance == pytest.approx(0.01, rel=1e-4)
    assert finding.status == "material"
    assert [ref[2] for ref in finding.inputs] == ["a", "b", "c", "d"]


def test_40_3_printed_for_40_34_is_not_flagged(hand_paper, tmp_path):
    lines = cells("new", ["40.34", "40.34", "40.34", "40.34"]) + [line("new", "avg", "40.3", 1)]
    assert run(hand_paper, tmp_path, lines)["Table 1 · New · Avg"].status == "consistent"


def test_one_more_unit_in_the_last_place_is_rounding_level(hand_paper, tmp_path):
    lines = cells("new", ["1.00", "1.00", "1.00", "1.03"]) + [line("new", "avg", "1.02", 2)]
    finding = run(hand_paper, tmp_path, lines)["Table 1 · New · Avg"]
    assert finding.value == pytest.approx(1.0075)
    assert finding.status == "rounding"


def test_missing_cells_make_an_aggregate_not_checkable(hand_paper, tmp_path):
    lines = cells("new", ["1.00", "2.00", "3.00"]) + [line("new", "avg", "9.99", 2)]
    finding = run(hand_paper, tmp_path, lines)["Table 1 · New · Avg"]
    assert finding.status == "not_checkable"
    assert [ref[2] for ref in finding.missing] == ["d"]


def test_claims_numbers_comparisons_and_hand_findings(hand_paper, tmp_path):
    claims = """
- {id: gain, where: S1, text: gain, printed: "2.0", formula: "cell('t1', 'new', 'a') - cell('t1', 'base', 'a')", \
source: pdf}
- {id: wrong, where: S2, text: count, printed: "72e22", formula: "64**12", source: pdf}
- {id: better, where: S3, text: new wins, formula: "cell('t1', 'new', 'a') < cell('t1', 'base', 'a')", source: pdf, \
severity: rounding}
- {id: noted, where: S4, text: label, finding: duplicate label, severity: material, source: pdf}
- {id: note_mean, where: S5, text: mean of unrecovered cells, printed: "55.04", formula: "55.0325", \
input_rounding: 0.005, source: pdf}
"""
    specs, reported = hand_paper(SPEC, cells("base", ["10.0", "1", "1", "1"], 1)[:1] + cells("new", ["12.0"], 1),
                                 claims)
    outcome = build(tmp_path / "none", specs, reported)
    statuses = {finding.check.where: finding.status for finding in outcome.findings}
    assert statuses == {"S1": "consistent", "S2": "material", "S3": "rounding", "S5": "consistent"}
    assert [(h.id, h.severity) for h in outcome.hand] == [("noted", "material")]


def test_alternatives_and_chained_inputs(hand_paper, tmp_path):
    spec = SPEC.replace('formula: "a - b"}', 'formula: "a - b", alternatives: {reversed: "b - a"}}')
    lines = cells("new", ["1.00", "3.00", "5.00", "7.00"]) + [
        line("new", "avg", "5.00", 2), line("new", "diff", "2.00", 2)]
    claims = ("- {id: c, where: S, text: t, printed: '-1.00', "
              "formula: \"cell('t1', 'new', 'a') - cell('t1', 'new', 'avg')\", source: pdf}\n")
    findings = run(hand_paper, tmp_path, lines, claims, spec)
    assert findings["Table 1 · New · a - b"].status == "consistent"  # accepted through the alternative
    assert findings["Table 1 · New · a - b"].alternatives == {"reversed": pytest.approx(2.0)}
    chained = findings["S"]
    assert chained.status == "material" and chained.chained == (pytest.approx(-3.0), "material")
