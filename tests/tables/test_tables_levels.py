"""The bench's entropy by level as a table (tables/levels.py), written by the tables build and removed when a
profile has no synthetic world."""
from __future__ import annotations

import json

import pytest

from common.errors import ReproError
from tables.__main__ import main
from tables.grid import markdown_grid, read_markdown_grid
from tables.levels import levels_caption, levels_rows, load_levels

LEVELS = {"documents": 300, "documents_longer_than_window": 0.16, "split": "valid", "window": 256,
          "nats_per_token": {"plan": 0.373, "surface": 0.768, "topic_information": 0.0, "total": 1.141},
          "units": {"exact_nats_per_unit": 1.197, "per_token": 0.312,
                    "ngram_nats_per_unit": {"0": 3.82, "1": 2.078, "2": 1.72, "10": 1.9}}}


def test_rows_and_caption_state_the_split_and_the_plans_reach():
    rows = levels_rows(LEVELS)
    assert rows[:3] == [["exact NLL (the oracle)", "1.141", "nats / token"],
                        ["plan: which unit comes next", "0.373", "nats / token"],
                        ["surface: its words", "0.768", "nats / token"]]
    ngram = [row[0] for row in rows if "n-gram" in row[0]]
    assert ngram == [f"H(next unit | last {k} units), n-gram" for k in (0, 1, 2, 10)]  # numeric order
    assert rows[-1][1] == "16 %"
    # 1.72 - 1.197 = 0.523 nats per unit, x 0.312 units per token
    assert "leave 0.52 nats per unit (0.163 nats per token)" in levels_caption(LEVELS)


def test_the_tables_build_writes_it_and_a_build_without_it_removes_it(tmp_path):
    levels = tmp_path / "levels.json"
    levels.write_text(json.dumps(LEVELS))
    out = tmp_path / "tables"
    main(["build", "--results", str(tmp_path / "runs"), "--out", str(out), "--levels", str(levels)])
    assert json.loads((out / "levels.json").read_text()) == LEVELS
    written = (out / "levels.md").read_text()
    assert "| plan: which unit comes next | 0.373 | nats / token |" in written
    assert "| H(next unit \\| last 0 units), n-gram | 3.82 | nats / unit |" in written  # a cell's "|" escaped
    main(["build", "--results", str(tmp_path / "runs"), "--out", str(out)])
    assert not (out / "levels.json").exists() and not (out / "levels.md").exists()


def test_an_unreadable_levels_file_is_one_line_with_the_fix(tmp_path):
    bad = tmp_path / "levels.json"
    bad.write_text('{"units": {}}')
    with pytest.raises(ReproError, match=r"--levels .*levels.json: unreadable .*re-run snakemake"):
        load_levels(bad)


def test_the_grid_reader_inverts_the_grid_writer_escaped_bars_included():
    text = markdown_grid(["", "value", "unit"], [["H(next unit | whole past)", "1.20", "nats / unit"],
                                                 ["plan", "0.378", "nats / token"]])
    assert read_markdown_grid(["# heading", "", *text.splitlines(), "", "| a later | grid |"]) == {
        ("H(next unit | whole past)", "value"): "1.20", ("H(next unit | whole past)", "unit"): "nats / unit",
        ("plan", "value"): "0.378", ("plan", "unit"): "nats / token"}
    assert read_markdown_grid(["no grid here"]) == {}
