"""The real reported data: every hand-found inconsistency is found, a planted error is found, results merge."""
import json
import shutil

import pytest

from tables.build import build
from tables.reported import REPORTED
from tables.specs import SPECS
from tables.validation import DataError

FOUND_BY_HAND = {  # (paper, where) -> status: docs/sources.md, "Inconsistencies found by hand"
    ("conceptlm", "Table 1 · ConceptLM (Pythia 160M) · Avg PPL"): "material",
    ("conceptlm", "Table 1 · ConceptLM (Pythia 160M) · Δ Avg PPL vs Base"): "material",
    ("conceptlm", "Table 5 · +2 token layers · Avg PPL"): "material",
    ("conceptlm", "Table 5, +6 concept layers"): "material",
    ("conceptlm", "Table 5, +10 concept layers"): "material",
    ("conceptlm", "Table 15, L0"): "material",
    ("conceptlm", "Table 15, L9"): "consistent",
    ("conceptlm", "App. E.4, p. 22"): "material",
    ("conceptlm", "App. C · ConceptLM-8B (32 token + 2 concept layers) · Saving vs PM (%)"): "consistent",
    ("conceptlm", "Table 3 · PM-8B (+2 token layers) · Avg"): "consistent",
    ("dlcm", "Table 2 · Average · DLCM"): "material",
    ("dlcm", "Table 2 · Average · Baseline"): "consistent",
    ("dlcm", "Table 2 · Average · Diff"): "material",
    ("dlcm", "Abstract, Sec. 1, Sec. 7.1"): "material",
    ("dlcm", "Table 4 · Global parser · Avg. improvement (%)"): "material",
    ("dlcm", "Table 6 · hidden 2048 (seq 2048) · Speedup"): "consistent",
    ("dlcm", "Table 1 · Total · Tokens (B)"): "consistent",
    ("dlcm", "Table 3 · Total layers · DLCM 2.3B"): "consistent",
    ("ncm", "Table 2 · NCM + MBR (16) (XSum) · NFE"): "consistent",
    ("ncm", "Sec. 4.6 · LM1B, against DUO · Fewer NFE (x)"): "consistent",
    ("ncm", "App. C.2"): "consistent",
}


@pytest.fixture(scope="module")
def real(request):
    from pathlib import Path
    return build(Path(__file__).resolve().parent / "fixtures" / "runs")


def test_reported_cells_are_loaded_for_every_paper(real):
    counts = {paper: len(data.cells) for paper, data in real.papers.items()}
    assert set(counts) == {"conceptlm", "ncm", "dlcm"} and min(counts.values()) > 100
    assert real.paper_order()[0] == "embedded" and real.tables[0].spec.table == "foundation"


def test_every_inconsistency_found_by_hand_is_found(real):
    statuses = {}
    for finding in real.findings:
        statuses.setdefault((finding.check.paper, finding.check.where), set()).add(finding.status)
    for key, status in FOUND_BY_HAND.items():
        assert status in statuses[key], key
    claims = {(f.check.paper, f.check.text): f.status for f in real.findings if f.check.target is None}
    assert claims["conceptlm", "ConceptLM has the best average accuracy at every GPT-2 scale"] == "material"
    assert claims["conceptlm", "adding VQ alone degrades performance (average accuracy)"] == "material"
    assert claims["dlcm", "the global parser is better on 5 of 6 tasks"] == "consistent"
    assert claims["dlcm", "at 2K the average speed-up is ~1.44x"] == "rounding"
    assert claims["dlcm", "the advantage scales with sequence length"] == "material"
    assert claims["ncm", "NCM sees about 4.9x fewer token positions than the LM1B baselines"] == "consistent"
    assert {h.id for h in real.hand} >= {"sec2_3_concept_index", "table4_target_ratio", "sudoku_length"}


def test_green_delta_fits_the_recomputed_average(real):
    finding = next(f for f in real.findings if f.check.where.endswith("Δ Avg PPL vs Base"))
    assert finding.value == pytest.approx(33.64) and finding.chained == (pytest.approx(33.5525), "consistent")


def test_a_planted_error_is_found_without_code_changes(tmp_path):
    reported = tmp_path / "reported"
    shutil.copytree(REPORTED, reported)
    path = reported / "dlcm" / "table01.csv"
    path.write_text(path.read_text().replace("table01,megamath,tokens,100,", "table01,megamath,tokens,110,"))
    findings = build(tmp_path / "none", SPECS, reported).findings
    planted = [f for f in findings if f.check.where == "Table 1 · Total · Tokens (B)"]
    assert [(f.status, f.value) for f in planted] == [("material", 1010.0)]


def test_no_results_means_nothing_is_reproduced(real, tmp_path):
    empty = build(tmp_path / "missing")
    cells = [cell for view in empty.tables for cell in view.cells.values()]
    assert not any(cell.reproduced for cell in cells)
    assert {cell.verdict for cell in cells if cell.mapped} == {"not run in this profile"}


def test_reproduced_cells_are_merged_and_ordered(real):
    views = {(view.spec.paper, view.spec.table): view for view in real.tables}
    foundation = views["embedded", "foundation"].cells
    assert foundation["base_gpt2_xs", "test_ppl"].reproduced.mean == pytest.approx(31.0)
    assert foundation["base_gpt2_xs", "test_ppl"].reproduced.std == pytest.approx(0.3)
    assert foundation["base_gpt2_xs", "test_ppl"].reproduced.n == 3
    assert foundation["pm_gpt2_s", "ppl_over_oracle"].reproduced.mean == pytest.approx(25.9 / 20)
    table2 = views["conceptlm", "table02"]
    assert table2.cells["gpt2_124m_base", "avg_acc"].reproduced.mean == pytest.approx(35.0)  # fractions scaled to %
    assert table2.orders["avg_acc"].flips == [("gpt2_124m_base", "gpt2_124m_pm")]
    # 3 seeds each, se 0.16
    assert table2.orders["avg_acc"].verdict == "agrees 2 / differs 1 / inconclusive 0 / not exercised 0"
    # the fixtures record no corpus and no profile: analogues of the paper's cells, the order still judged
    assert table2.cells["gpt2_124m_pm", "avg_acc"].verdict == "analogue; order agrees vs ConceptLM; differs vs Base"
    assert table2.cells["gpt2_124m_pm", "avg_acc"].analogue == ("trained on an unrecorded corpus, the paper on "
                                                                "openwebtext; reduced scale")
    assert table2.cells["gpt2_124m_conceptlm", "avg_acc"].verdict == "analogue; order agrees vs Base, PM"
    assert foundation["base_gpt2_xs", "test_ppl"].analogue == ""  # our own tables stand in for nothing
    table1 = views["conceptlm", "table01"]
    # all four PPLs: no proxy
    assert table1.orders["avg_ppl"].verdict == "agrees 3 / differs 0 / inconclusive 0 / not exercised 0"
    assert table1.orders["avg_ppl"].proxy is None


def test_a_malformed_result_file_is_an_error(tmp_path):
    path = tmp_path / "runs" / "base_s" / "seed0" / "eval" / "ppl.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 1, "experiment": "base_s", "seed": 0, "eval": "ppl", "metrics": {}}))
    with pytest.raises(DataError, match=r"ppl\.json: field '\(top level\)': 'provenance' is a required property"):
        build(tmp_path / "runs")
    path.write_text("{not json")
    with pytest.raises(DataError, match=r"ppl\.json:1: field '\(json\)'"):
        build(tmp_path / "runs")


def _runs_on(tmp_path, corpus: dict, scale: str, local_data: dict | None = None):
    """The fixture runs, their results recording ``corpus`` (and a local copy's source for every task),
    under an index of a profile at ``scale``."""
    from pathlib import Path

    root = tmp_path / "runs"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "runs", root)
    for path in root.glob("*/seed*/eval/*.json"):
        result = json.loads(path.read_text())
        result["config"] = {**result.get("config", {}), "corpus": corpus}
        if local_data:
            tasks = {key.split("/")[0] for key in result["metrics"]}
            result["details"] = {**result.get("details", {}),
                                 "tasks": {task: {"local_data": local_data} for task in tasks}}
        path.write_text(json.dumps(result))
    runs = sorted(str(path.relative_to(root)) for path in root.glob("*/seed*"))
    label = corpus.get("local", {}).get("name") or corpus.get("hf", {}).get("name")
    (root / "index.json").write_text(json.dumps({"runs": runs, "profile": {"scale": scale, "corpus": label}}))
    return {(view.spec.paper, view.spec.table): view for view in build(root).tables}


def test_a_cell_is_reproduced_only_on_the_papers_corpus_at_paper_scale(tmp_path):
    owt = {"source": "hf", "hf": {"name": "openwebtext", "max_docs": {}}}
    cell = _runs_on(tmp_path / "a", owt, "paper")["conceptlm", "table02"].cells["gpt2_124m_pm", "avg_acc"]
    assert cell.analogue == "" and cell.verdict == "order agrees vs ConceptLM; differs vs Base"
    cell = _runs_on(tmp_path / "b", owt, "reduced")["conceptlm", "table02"].cells["gpt2_124m_pm", "avg_acc"]
    assert cell.analogue == "reduced scale"
    stories = {"source": "local", "local": {"train": "/data/TinyStories-train.txt", "name": "tinystories"}}
    views = _runs_on(tmp_path / "c", stories, "paper")
    assert views["conceptlm", "table01"].cells["gpt2_124m_base", "train_ppl"].analogue == \
        "trained on tinystories, the paper on openwebtext"
    unnamed = {"source": "local", "local": {"train": "/data/TinyStories-train.txt"}}
    views = _runs_on(tmp_path / "d", unnamed, "paper")
    cell = views["conceptlm", "table01"].cells["gpt2_124m_base", "train_ppl"]
    assert cell.verdict == "analogue" and cell.analogue == "trained on TinyStories-train, the paper on openwebtext"


def test_the_uncopyrighted_pile_is_not_the_pile(tmp_path):
    """corpora/sources.py streams monology/pile-uncopyrighted for `pile`: a Pythia cell on it is an analogue."""
    from tables.results import corpus_label

    pile = {"source": "hf", "hf": {"name": "pile", "max_docs": {}}}
    assert corpus_label(pile) == "pile-uncopyrighted"
    cell = _runs_on(tmp_path, pile, "paper")["conceptlm", "table01"].cells["gpt2_124m_base", "train_ppl"]
    assert cell.analogue == "trained on pile-uncopyrighted, the paper on openwebtext"


def test_a_local_copy_that_is_not_the_canonical_set_makes_an_analogue(tmp_path):
    owt = {"source": "hf", "hf": {"name": "openwebtext", "max_docs": {}}}
    copy = {"exact": False, "comparable": True, "why": "format llamacpp is approximate"}
    cell = _runs_on(tmp_path, owt, "paper", copy)["conceptlm", "table02"].cells["gpt2_124m_pm", "hellaswag_acc"]
    assert cell.analogue == "hellaswag: local copy, format llamacpp is approximate"


def test_every_reproducible_cell_of_a_paper_names_the_papers_corpus():
    """A cell a run can fill says what the paper trained on (row, column or table), so it can be called an analogue."""
    from tables.specs import load_specs

    unnamed = [(spec.table, row.id, column.id) for paper, specs in load_specs().items() if paper != "embedded"
               for spec in specs.values() for row in spec.rows for column in spec.columns
               if spec.result_ref(row.id, column.id) and spec.paper_corpus(row.id, column.id) is None]
    assert unnamed == []


def test_a_real_corpus_drops_the_synthetic_worlds_columns_from_every_table(tmp_path):
    stories = {"source": "local", "local": {"train": "stories.txt", "name": "tinystories"}}
    views = _runs_on(tmp_path, stories, "reduced")
    labels = [column.label for column in views["embedded", "foundation"].spec.columns]
    assert "test PPL" in labels and not [label for label in labels if "oracle" in label or "cloze" in label]
    assert "The oracle PPL" not in views["embedded", "foundation"].caption
    assert "embedded_cloze_acc" not in views["conceptlm", "table02"].spec.column_by_id
