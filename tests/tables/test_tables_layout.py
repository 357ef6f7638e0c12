"""The report's view of a table (tables/layout.py): printed → ours side by side, only what was reproduced,
the rest collapsed into lines naming the profile that fills it (tables/coverage.py)."""
import json

from tables.build import build
from tables.coverage import Coverage, load_coverage
from tables.layout import layout
from workflows.coverage import main as coverage_main

from tests.tables.test_tables_verdicts import CASE, SPEC, write_results

OTHER = {"config/big.yaml": {"base_s": ["ppl", "lm_ppl"], "pm_s": ["ppl", "lm_ppl"], "concept_s": ["ppl"],
                             "base_l": ["ppl"]}}
WITH_L = SPEC.replace("columns:", "  - {id: base_l, label: Base, group: L, result: {experiment: base_l}}\n"
                      "  - {id: pm_l, label: PM, group: L, result: {experiment: pm_l}}\ncolumns:")


def built_case(hand_paper, tmp_path, spec=WITH_L, seeds=None):
    lines = [f"t1,{row},{column},{value},1,perplexity,PPL,lower,pdf,"
             for row, (ppl, avg, _) in CASE.items() for column, value in (("ppl", ppl), ("avg", avg))]
    specs, reported = hand_paper(spec, lines, table="t1")
    runs = tmp_path / "runs"
    for experiment, (_, _, values) in (CASE if seeds is None else seeds).items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value} for value in values])
    return build(runs, specs, reported).tables[0], runs


def test_cells_read_printed_then_ours_with_the_spread_only_over_seeds(hand_paper, tmp_path):
    view, _ = built_case(hand_paper, tmp_path)
    shown = layout(view, Coverage(OTHER))
    assert shown.header == ["", "Train PPL", "seeds"]  # Wiki PPL and Avg PPL: nothing reproduced, left out
    rows = {row[0]: row[1:] for row in shown.rows}
    assert rows["S · PM"] == ["29.0 → 22 ± 0.1", "3"]
    assert rows["M · Base"] == ["20.0 → 15", "1"]  # one seed: no spread
    assert not any("n=" in cell for row in shown.rows for cell in row)
    assert shown.arms[0] == {"row": "base_s", "label": "Base", "group": "S", "experiments": ["base_s"]}


def test_left_out_rows_and_columns_name_the_profile_that_fills_them(hand_paper, tmp_path):
    view, _ = built_case(hand_paper, tmp_path)
    shown = layout(view, Coverage(OTHER))
    assert shown.status == "partial"
    assert "Rows not reproduced at this profile (and the profiles that run them): L · Base: big.yaml; L · PM: " \
           "no profile runs it yet" in shown.collapsed
    assert "Columns not reproduced at this profile: Wiki PPL (big.yaml)" in shown.collapsed[-1]
    current = layout(view, Coverage(OTHER, current={"base_l": ["ppl"]}))
    assert "L · Base: this profile runs it but its results are missing: re-run snakemake" in current.collapsed[0]


def test_a_column_equal_in_every_row_is_one_line(hand_paper, tmp_path):
    spec = SPEC.replace("  - {id: avg,", "  - {id: oracle, label: Oracle PPL, result: {eval: ppl, key: test/oracle}}\n"
                        "  - {id: avg,")
    view, runs = built_case(hand_paper, tmp_path, spec)
    for experiment, (_, _, values) in CASE.items():
        write_results(runs, experiment, "ppl", [{"test/ppl": value, "test/oracle": 3.25} for value in values])
    view = build(runs, tmp_path / "specs", tmp_path / "reported").tables[0]
    shown = layout(view, Coverage())
    assert "Oracle PPL" not in shown.header and shown.collapsed[0] == "Oracle PPL: 3.25 in every row"


def test_a_table_with_nothing_reproduced_is_not_run(hand_paper, tmp_path):
    view, _ = built_case(hand_paper, tmp_path, seeds={})
    shown = layout(view, Coverage(OTHER))
    assert (shown.status, shown.fill, shown.rows) == ("not run", "big.yaml", [])
    assert layout(view, Coverage()).fill == "profiles not indexed"


def test_profiles_index_from_the_real_profiles(tmp_path, capsys):
    """``python -m workflows.coverage`` over two of config/'s profiles and a broken draft (skipped, said so)."""
    draft = tmp_path / "draft.yaml"
    draft.write_text("profile: draft\n")
    out = tmp_path / "profiles.json"
    assert coverage_main(["--out", str(out), "config/default.yaml", "config/paper-conceptlm-gpt2.yaml",
                          str(draft)]) == 0
    data = json.loads(out.read_text())
    assert "ppl" in data["profiles"]["config/default.yaml"]["base_gpt2_s"]
    assert "gpt2-1.5b-base" in data["profiles"]["config/paper-conceptlm-gpt2.yaml"]
    assert list(data["skipped"]) == [str(draft)] and "skipped" in capsys.readouterr().err
    assert load_coverage(out, tmp_path / "no-runs").profiles == data["profiles"]


def test_a_task_without_a_local_copy_is_said_so(tmp_path):
    """A result that left a task out for want of a local copy: its columns say that, not "results are missing"."""
    from tables.specs import ResultRef

    result = tmp_path / "runs" / "base_s" / "seed0" / "eval" / "lm_ppl.json"
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"details": {"unavailable_tasks": ["lambada_standard"]}}))
    coverage = load_coverage(None, tmp_path / "runs")
    assert coverage.where([ResultRef(("base_s",), "lm_ppl", "lambada_standard/ppl")]) == \
        "no local copy of lambada_standard in the profile's local_tasks"
    assert coverage.where([ResultRef(("base_s",), "lm_ppl", "wikitext/ppl")]).startswith(
        "this profile's runs do not measure it")
    assert coverage.where([ResultRef(("base_s",), "ppl", "test/ppl")]).startswith(
        "this profile runs it but its results are missing")
    # a profile index that lists this very profile: a row its evaluation does not cover names no profile
    # as measuring it (the index knows experiments and evaluations, not rows)
    index = tmp_path / "profiles.json"
    index.write_text(json.dumps({"profiles": {"config/default.yaml": {"base_s": ["lm_ppl"]}}}))
    indexed = load_coverage(index, tmp_path / "runs")
    assert "default.yaml" not in indexed.where([ResultRef(("base_s",), "lm_ppl", "wikitext/ppl")])
