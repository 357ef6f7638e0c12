"""``python -m reports build`` on fixture results: report.md, report.html and figures, never failing on gaps."""
from pathlib import Path

import pytest

from reports.__main__ import main as reports_main
from reports.curves import read_curve
from reports.figures import analogue, load_figure_specs
from tables.__main__ import main as tables_main
from tables.results import load_results

RUNS = Path(__file__).resolve().parents[1] / "tables" / "fixtures" / "runs"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    assert tables_main(["build", "--results", str(RUNS), "--out", str(root / "tables")]) == 0
    assert reports_main(["build", "--results", str(RUNS), "--tables", str(root / "tables"), "--out", str(root / "report")]) == 0
    return root / "report"


def test_report_files_and_order(report):
    text = (report / "report.md").read_text()
    assert text.index("## Findings") < text.index("|")  # the findings come before any table
    assert text.index("## Findings") < text.index("Embedded default:") < text.index("### ConceptLM Table 1")
    assert text.index("### ConceptLM Table 1") < text.index("### NCM Table 1") < text.index("### DLCM Table 2")
    assert "Kendall τ" in text and "order agrees vs ConceptLM; differs vs Base" in text
    assert "Audit of the paper's arithmetic" in text
    assert "ConceptLM Table 2 · Avg Acc · GPT-2 124M: agrees 2 / differs 1 / inconclusive 0." in text
    figures = {path.name for path in (report / "figures").glob("*.png")}
    assert {"curves_base_gpt2_xs.png", "scatter_conceptlm_table02.png"} <= figures
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(figures) and 'src="figures/' not in page


def test_missing_results_are_stated(report):
    text = (report / "report.md").read_text()
    assert "training FLOPs — (no baseline point) vs 0.81" in text and "Missing results: base_gpt2_m" in text
    assert "NCM Fig. 5 analogue: generative perplexity against generator calls (NFE): no results yet." in text


def test_report_without_tables_or_results(tmp_path):
    assert reports_main(["build", "--results", str(tmp_path / "none"), "--tables", str(tmp_path / "none"),
                         "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "The tables were not built" in text
    assert (tmp_path / "report" / "report.html").exists()


def test_bad_log_lines_are_skipped_and_counted(tmp_path):
    log = tmp_path / "metrics.jsonl"
    log.write_text('{"step": 0, "tokens": 0, "loss": 5.0}\n{"step": 1, "tok\n\n{"split": "valid", "tokens": 8, "valid/loss": 4.0}\n')
    curve = read_curve(log, 0)
    assert (len(curve.train), len(curve.valid), curve.skipped) == (1, 1, 1)


def test_analogue_with_fixed_x_values():
    spec = next(spec for spec in load_figure_specs() if spec["id"] == "conceptlm_fig5")
    png, caption = analogue(spec, load_results(RUNS))
    assert png is None and "conceptlm_pythia_s_n8" in caption
