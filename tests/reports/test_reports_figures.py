"""Fig. 1 (iso-PPL) and Fig. 5 (codebook usage) analogues on a tiny results tree written here."""
import json
import math

import pytest

from reports.__main__ import main as reports_main
from reports.codebook import codebook_usage, segment_usage
from reports.curves import read_curves
from reports.figures import load_figure_specs
from reports.iso_ppl import iso_ppl
from tables.results import load_results

SPECS = {spec["id"]: spec for spec in load_figure_specs()}
PROVENANCE = {"git_commit": "t", "config_hash": "t", "checkpoint_sha256": None, "versions": {}, "seed": 0,
              "wall_time_s": 0}


def write_result(runs, experiment, eval_name, metrics, details=None):
    path = runs / experiment / "seed0" / "eval" / f"{eval_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "experiment": experiment, "seed": 0, "eval": eval_name,
                                "metrics": metrics, "provenance": PROVENANCE,
                                **({"details": details} if details else {})}))


def write_curve(runs, experiment, scale):
    path = runs / experiment / "seed0" / "train" / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"split": "valid", "tokens": t,
                                        "valid/loss": math.log(scale * max(t, 1) ** -0.1)})
                            + "\n" for t in (0, 1000, 2000, 4000)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Power laws with known iso-PPL ratios: params 0.9^5, tokens 0.9^10, FLOPs 0.9^10 x 1.1."""
    runs = tmp_path_factory.mktemp("runs")
    for size, params in zip(["xs", "s", "m"], [1e6, 2e6, 4e6]):
        write_result(runs, f"base_gpt2_{size}", "ppl", {"model/params": params, "test/ppl": 30 * (params / 1e6) ** -0.2,
                                                        "model/flops_per_token": 2e6})
        write_result(runs, f"conceptlm_gpt2_{size}", "ppl", {"model/params": 1.1 * params,
                                                             "model/flops_per_token": 2.2e6,
                                                             "test/ppl": 27 * (1.1 * params / 1e6) ** -0.2})
    write_curve(runs, "base_gpt2_m", 50)
    write_curve(runs, "conceptlm_gpt2_m", 45)
    write_result(runs, "conceptlm_pythia_s", "codebook", {"test/utilisation_pct": 87.5, "test/usage_ppl_mean": 3.2},
                 {"counts": [[5, 0, 3, 2], [1, 1, 1, 1]], "codebook_size": 4, "n_segments": 2})
    return runs


def test_iso_ppl_ratios_and_table(runs):
    image, caption, table = iso_ppl(SPECS["conceptlm_fig1"], load_results(runs), read_curves(runs), {})
    assert image.startswith(b"\x89PNG") and "Missing" not in caption
    ratios = [float(row[4].split()[0]) for row in table.rows]  # "0.35 (extrapolated)" below the fitted half
    assert ratios == pytest.approx([0.9 ** 5, 0.9 ** 10, 0.9 ** 10 * 1.1], abs=0.006)
    assert [row[-1] for row in table.rows] == ["less"] * 3  # no reported values passed


def test_iso_ppl_with_missing_results(runs):
    results = {ref: value for ref, value in load_results(runs).items() if ref[0].startswith("base_")}
    image, caption, table = iso_ppl(SPECS["conceptlm_fig1"], results, {}, {})
    assert image and "Missing results: conceptlm_gpt2_xs" in caption and "base_gpt2_m (validation curve)" in caption
    assert table.rows[0][4] == "— (ConceptLM: fewer than 2 points to fit)" and table.rows[0][-1] == "not read"
    assert iso_ppl(SPECS["conceptlm_fig1"], {}, {}, {})[::2] == (None, None)


def test_codebook_usage(tmp_path, runs):
    assert segment_usage([1, 1, 1, 1]) == (100.0, 4.0) and segment_usage([5, 0, 0, 0]) == (25.0, 1.0)
    image, caption = codebook_usage(SPECS["conceptlm_fig5_counts"], runs)
    assert image.startswith(b"\x89PNG") and "2 segment(s) × 4 codes" in caption
    write_result(tmp_path, "conceptlm_pythia_s", "codebook", {},
                 {"counts": [[1, 2]], "codebook_size": 4, "n_segments": 1})
    image, caption = codebook_usage(SPECS["conceptlm_fig5_counts"], tmp_path)
    assert image is None and "malformed (segment 0 does not have codebook_size = 4 counts)" in caption
    assert "Missing results: conceptlm_pythia_s" in codebook_usage(SPECS["conceptlm_fig5_counts"], tmp_path / "none")[1]


def test_report_shows_fig1_fig5_and_iso_ppl_table(tmp_path, runs):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "index.json").write_text(json.dumps({"papers": ["conceptlm"], "tables": [], "paper_info": {}}))
    assert reports_main(["build", "--results", str(runs), "--tables", str(tables), "--out",
                         str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "| parameters (non-embedding) |" in text and "| 0.63 | agrees |" in text and "Iso-PPL readings:" in text
    assert "agrees for parameters (non-embedding), training tokens, training FLOPs" in text
    assert {"conceptlm_fig1.png", "conceptlm_fig5_counts.png", "conceptlm_fig5.png"} <= \
        {path.name for path in (tmp_path / "report" / "figures").glob("*.png")}
    assert "<th>Ratio (paper)</th>" in (tmp_path / "report" / "report.html").read_text()


def test_curve_panels_fit_the_second_half_only(runs):
    from reports.iso_ppl import _curve_points

    panel = next(p for p in SPECS["conceptlm_fig1"]["panels"] if p["source"] == "curve" and "key" not in p["x"])
    points = _curve_points({"experiments": ["base_gpt2_m"]}, panel, load_results(runs), read_curves(runs), [])
    assert panel["fit_from"] == 0.5 and [x for x, _ in points] == [2000, 4000]
