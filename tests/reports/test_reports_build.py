"""``python -m reports build`` on fixture results: report.md, report.html and figures, never failing on gaps."""
import json
import shutil
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
    assert reports_main(["build", "--results", str(RUNS), "--tables", str(root / "tables"), "--out",
                         str(root / "report")]) == 0
    return root / "report"


def test_first_screen_is_the_verdict_summary(report):
    """Before any paper table: per paper, every judged comparison with its verdict and a link to its table."""
    text = (report / "report.md").read_text()
    first_table = text.index("### ConceptLM Table 1")
    summary = text[text.index("## What this profile reproduces"):first_table]
    start = text.index("## What this profile reproduces")
    assert text.index("**Contents**") < start < text.index("Our runs:", start) < first_table
    assert "- [What this profile reproduces](#what-this-profile-reproduces)" in text
    assert text.splitlines()[4].startswith("Profile ")  # which profile, commit and host produced the numbers
    assert ("Every comparison below is an analogue, not the paper's quantity on the paper's data (trained on an "
            "unrecorded corpus, the paper on openwebtext; reduced scale)") in summary
    assert "| Table 2 · Avg Acc · GPT-2 124M | mixed | 2 agree, 1 differs | [table](#conceptlm-table02) |" in summary
    assert "| Table 1 · Avg PPL · GPT-2 124M | agrees | 3 agree | [table](#conceptlm-table01) |" in summary
    assert "3 comparisons: 1 agrees, 1 mixed, 1 inconclusive." in summary
    assert "Not reproduced at this profile: Table 3" in summary  # a table with nothing reproduced: one line
    assert '<a id="conceptlm-table02"></a>' in text  # the link's target
    page = (report / "report.html").read_text()
    assert '<a href="#conceptlm-table02">table</a>' in page and 'id="conceptlm-table02"' in page


def test_tables_side_by_side_with_the_rest_collapsed(report):
    text = (report / "report.md").read_text()
    table1 = text[text.index("### ConceptLM Table 1"):text.index("### ConceptLM Table 2")]
    assert "| GPT-2 124M · PM | — → 30.2 ± 0.3 |" in table1  # printed → ours, spread for n > 1
    assert "| 3 |" in table1  # the seeds column, no "(n=3)" in every cell
    assert "(n=" not in table1 and "not reproduced |" not in table1
    assert "GPT-2 1.5B · Base, PM, ContextLM, ConceptLM:" in table1  # the rows this profile leaves out, one line
    assert "Pairs that decide a verdict" in table1 and "| Avg PPL | GPT-2 124M | Base − PM |" in table1
    assert "Audit of the paper's arithmetic" in text
    assert text.index("### ConceptLM Table 2") < text.index("### NCM Table 1") < text.index("### DLCM Table 2")


def test_figures_grouped_per_table_and_embedded(report):
    text = (report / "report.md").read_text()
    figures = {path.name for path in (report / "figures").glob("*.png")}
    assert {"curves_embedded_foundation_1.png"} <= figures and not any(name.startswith("scatter_") for name in figures)
    assert not any(name.startswith("curves_base_") for name in figures)  # no figure per experiment
    assert "same runs as" in text  # an arm set drawn once, referred to after
    page = (report / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(figures) and 'src="figures/' not in page
    assert all((report / "figures" / name).read_bytes()[25] == 3 for name in figures)  # indexed-colour PNGs


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
    log.write_text('{"step": 0, "tokens": 0, "loss": 5.0}\n{"step": 1, "tok\n\n'
                   '{"split": "valid", "tokens": 8, "valid/loss": 4.0}\n')
    curve = read_curve(log, 0)
    assert (len(curve.train), len(curve.valid), curve.skipped) == (1, 1, 1)


def test_analogue_with_fixed_x_values():
    spec = next(spec for spec in load_figure_specs() if spec["id"] == "conceptlm_fig5")
    png, caption = analogue(spec, load_results(RUNS))
    assert png is None and "conceptlm_pythia_s_n8" in caption


def test_a_real_corpus_report_has_no_oracle(tmp_path):
    """Runs on a real corpus (the index says so; their results carry no oracle): no oracle column, no oracle text."""
    runs = tmp_path / "runs"
    shutil.copytree(RUNS, runs)
    for path in runs.glob("*/seed*/eval/*.json"):
        result = json.loads(path.read_text())
        result["metrics"] = {key: value for key, value in result["metrics"].items() if "oracle" not in key}
        result["config"] = {**result.get("config", {}),
                            "corpus": {"source": "local", "local": {"train": "stories.txt"}}}
        path.write_text(json.dumps(result))
    listed = sorted(str(path.relative_to(runs)) for path in runs.glob("*/seed*"))
    (runs / "index.json").write_text(json.dumps({"runs": listed, "profile": {"scale": "reduced", "corpus": "stories"}}))
    assert tables_main(["build", "--results", str(runs), "--out", str(tmp_path / "tables")]) == 0
    assert reports_main(["build", "--results", str(runs), "--tables", str(tmp_path / "tables"),
                         "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "oracle" not in text.lower()
    assert "trained on stories, the paper on openwebtext" in text


def test_tables_filled_in_part_are_not_called_reproduced():
    """The first screen lists unjudged tables by how much of them ran here: whole, or in part."""
    from reports.summary import paper_summary

    def table(number, status):
        return {"title": f"NCM Table {number}: t", "paper": "ncm", "table": f"table0{number}",
                "layout": {"status": status, "fill": "small.yaml"}}

    text = " ".join(block.text for block in paper_summary([table(3, "reproduced"), table(9, "partial"),
                                                           table(5, "not run")]) if hasattr(block, "text"))
    assert "Reproduced, with no pair of rows to order against the paper: Table 3." in text
    assert "Reproduced in part (rows of other profiles collapsed in the table), with no pair of rows" in text
    assert "Table 9." in text and "Not reproduced at this profile: Table 5 (small.yaml)." in text
