"""``tables.load``: the built tables as DataFrames, with the known-answer case's numbers and verdicts."""
from __future__ import annotations

import json
import math

import pytest

import tables
from common.errors import ReproError
from tests.reports.test_reports_findings import built  # noqa: F401 (the built known-answer tables)
from tests.tables.test_tables_verdicts import CASE


def test_cells_carry_the_papers_and_our_numbers_typed(built):  # noqa: F811
    cells = tables.load(built, "cells")
    ppl = cells[(cells.table == "t1") & (cells.column == "ppl")].set_index("row")
    assert ppl.loc["base_s", "reported"] == 30.0 and ppl.loc["base_s", "n"] == 3
    assert ppl.loc["pm_s", "reproduced_mean"] == pytest.approx(22.0)
    assert ppl.loc["base_m", "n"] == 1 and math.isnan(ppl.loc["base_m", "reproduced_std"])   # one seed: no spread
    assert set(ppl.index) == set(CASE) and cells["reported"].dtype.kind == "f" and cells["decimals"].dtype.kind == "f"
    assert ppl.loc["base_s", "reported_text"] == "30.0"
    assert tables.load(built / "tables").equals(cells)      # the results folder or its tables folder


def test_pairs_hold_each_comparison_with_its_interval_and_outcome(built):  # noqa: F811
    pairs = tables.load(built, "pairs")
    s = pairs[(pairs.column == "ppl") & (pairs.group == "S")].set_index(["a", "b"])
    assert (s.loc[("base_s", "pm_s"), "outcome"] == "differs"
            and s.loc[("base_s", "pm_s"), "d_value"] == pytest.approx(-2))
    assert s.loc[("base_s", "concept_s"), "ci_low"] == pytest.approx(1.5845, abs=1e-4)
    assert sorted(s["outcome"]) == ["agrees", "agrees", "differs"]


def test_claims_are_one_row_per_part_and_bad_calls_are_one_line(built, tmp_path):  # noqa: F811
    assert tables.load(built, "claims").empty          # the hand-made paper states no claim
    folder = tmp_path / "results" / "tables"
    (folder / "p").mkdir(parents=True)
    (folder / "index.json").write_text("{}")
    part = {"outcome": "agrees", "d": "2.5", "ci_low": 1.0, "ci_high": 4.0, "p_adjusted": 0.01, "mde": 0.9}
    (folder / "p" / "claims.json").write_text(json.dumps({"claims": [
        {"id": "two", "verdict": "reproduced", "paper": "p", "parts": [part, {**part, "d": "3"}]},
        {"id": "none", "verdict": "not run here", "paper": "p", "parts": []}]}))
    claims = tables.load(tmp_path / "results", "claims")
    assert list(claims["id"]) == ["two", "two", "none"] and list(claims["d"].iloc[:2]) == [2.5, 3.0]
    assert claims["part"].isna().tolist() == [False, False, True]   # a claim with no part: one row, no part
    with pytest.raises(ReproError, match="no built tables .*build them first: make reproduce"):
        tables.load(tmp_path)
    with pytest.raises(ReproError, match="kind 'cell': use one of cells, pairs, claims"):
        tables.load(built, "cell")


def test_results_are_one_row_per_run_seed_and_metric_and_group_into_the_cells(built, tmp_path):  # noqa: F811
    results = tables.load(built, "results")
    assert len(results) == sum(len(seeds) for _, _, seeds in CASE.values())     # one metric per run
    assert set(results.columns) >= {"experiment", "seed", "eval", "metric", "value", "corpus", "order"}
    means = results.groupby(["experiment", "eval", "metric"])["value"].mean()
    cells = tables.load(built, "cells")
    ppl = cells[(cells.table == "t1") & (cells.column == "ppl")].set_index("row")
    for experiment in CASE:
        assert means[experiment, "ppl", "test/ppl"] == pytest.approx(ppl.loc[experiment, "reproduced_mean"])
    assert tables.load(built / "runs", "results").equals(results)    # the results folder or its runs folder
    with pytest.raises(ReproError, match="no run folders .*run the DAG first"):
        tables.load(tmp_path, "results")


def test_reported_cells_need_no_run_and_carry_their_number_and_origin():
    reported = tables.load(kind="reported")
    share = reported[(reported.paper == "dlcm") & (reported.table == "table01") & (reported.row == "nemotron_cc")
                     & (reported.column == "share")].iloc[0]
    assert share["value"] == "50" and share["number"] == 50.0 and share["decimals"] == 0
    assert share["origin"].endswith("tables/reported/dlcm/table01.csv:2")
    assert not reported.duplicated(["paper", "table", "row", "column"]).any()
    text = reported[reported.number.isna()]
    assert len(text) and text["decimals"].isna().all()      # text cells and dashes: no number
