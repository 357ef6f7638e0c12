"""Figure kinds eval_sweep (NCM Fig. 5: Gen PPL against NFE and wall-clock, entropy beside each point)
and metric_curve (NCM Table 1: reconstruction from the first k scales) drawn from fabricated results:
the points come from the named results, missing ones are named and never fail, and the report shows both."""
from __future__ import annotations

import json

import jsonschema
import pytest
import yaml

import reports.figures as figures_module
from reports.__main__ import main as reports_main
from reports.figures import FIGURES, eval_sweep, load_figure_specs, metric_curve
from tables.results import Reproduced, load_results

SPECS = {spec["id"]: spec for spec in load_figure_specs()}
PROVENANCE = {"git_commit": "t", "config_hash": "t", "checkpoint_sha256": None, "versions": {}, "seed": 0,
              "wall_time_s": 0}
MDLM_EVALS = ["genppl_s16", "genppl_s32", "genppl_s64", "genppl_s128"]


def write_result(runs, experiment, eval_name, metrics, seed=0):
    path = runs / experiment / f"seed{seed}" / "eval" / f"{eval_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": 1, "experiment": experiment, "seed": seed, "eval": eval_name,
                                "metrics": metrics, "provenance": {**PROVENANCE, "seed": seed}}))


def genppl(nfe, time_s, ppl, entropy):
    return {"samples/nfe": nfe, "samples/time_s": time_s, "genppl/ppl": ppl, "samples/entropy": entropy}


@pytest.fixture
def runs(tmp_path):
    """NCM, AR and MDLM at three of its four step counts; NCM block-causal has no result, MDLM's 128 steps
    neither; the recon result of ncm_s has K = 4 per-k accuracies."""
    runs = tmp_path / "runs"
    write_result(runs, "ncm_s", "genppl", genppl(12, 2.0, 40.0, 4.1))
    write_result(runs, "ar_gpt2_ncm_s", "genppl", genppl(128, 9.0, 30.0, 4.3))
    for steps, ppl in zip([64, 16, 32], [70.0, 120.0, 90.0]):  # written out of order: the line follows x
        write_result(runs, "mdlm_s", f"genppl_s{steps}", genppl(steps, steps / 8, ppl, 4.0 + steps / 1000))
    write_result(runs, "ncm_s", "recon", {"test/token_acc": 0.9, "test/token_acc_k1": 0.1, "test/token_acc_k2": 0.3,
                                          "test/token_acc_k3": 0.6, "test/token_acc_k4": 0.9, "test/seq_exact": 0.2})
    return runs


@pytest.fixture
def drawn(monkeypatch):
    """Replace the PNG encoder: keep each figure's axes (lines, annotations, labels) and return fake bytes."""
    axes = []

    def keep(figure):
        axes.append(figure.axes[0])
        return b"\x89PNG fake"

    monkeypatch.setattr(figures_module, "png", keep)
    return axes


def lines(ax) -> dict[str, tuple[list, list]]:
    """Legend label -> (x, y) of the data line of each series."""
    handles, labels = ax.get_legend_handles_labels()
    return {label: (list(handle.lines[0].get_xdata()), list(handle.lines[0].get_ydata()))
            for handle, label in zip(handles, labels)}


def test_entries_are_in_figures_yaml_as_specified():
    nfe, time_, curve = SPECS["ncm_fig5_nfe"], SPECS["ncm_fig5_time"], SPECS["ncm_table1_curve"]
    assert nfe["kind"] == time_["kind"] == "eval_sweep" and curve["kind"] == "metric_curve"
    assert nfe["paper"] == time_["paper"] == curve["paper"] == "ncm"
    assert (nfe["x"]["key"], time_["x"]["key"], nfe["y"]["key"]) == ("samples/nfe", "samples/time_s", "genppl/ppl")
    assert nfe["annotate"]["key"] == "samples/entropy" and nfe["series"] == time_["series"]
    assert [(s["label"], s["experiment"], s["evals"]) for s in nfe["series"]] == [
        ("NCM", "ncm_s", ["genppl"]), ("NCM block-causal", "ncm_blockcausal_s", ["genppl"]),
        ("AR", "ar_gpt2_ncm_s", ["genppl"]), ("MDLM", "mdlm_s", MDLM_EVALS)]
    assert curve["series"] == [{"label": "NCM tokenizer", "experiment": "ncm_s", "eval": "recon"}]
    assert curve["y"] == {"prefix": "test/token_acc_k", "label": "token accuracy"}
    assert curve["x"] == {"label": "scales used k"}
    assert curve["title"] == "NCM Table 1 analogue: exact token reconstruction from the first k scales"


def test_schema_refuses_malformed_entries():
    schema = json.loads(FIGURES.with_name("figures.schema.json").read_text())
    good = yaml.safe_load(FIGURES.read_text())
    jsonschema.validate(good, schema)
    sweep = next(spec for spec in good if spec["id"] == "ncm_fig5_nfe")
    curve = next(spec for spec in good if spec["id"] == "ncm_table1_curve")
    for bad in ({**sweep, "series": [{"label": "NCM", "experiments": ["ncm_s"]}]},  # analogue-style series
                {**sweep, "x": {"eval": "genppl", "key": "samples/nfe", "label": "NFE"}},  # eval belongs to series
                {**sweep, "series": [{"label": "M", "experiment": "mdlm_s", "evals": []}]},
                {**curve, "y": {"key": "test/token_acc_k1", "label": "acc"}},
                {**curve, "series": [{"label": "T", "experiment": "ncm_s"}]}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate([bad], schema)


@pytest.mark.parametrize("spec_id, x_key", [("ncm_fig5_nfe", "samples/nfe"), ("ncm_fig5_time", "samples/time_s")])
def test_eval_sweep_draws_each_eval_of_each_experiment_and_names_the_missing(runs, drawn, spec_id, x_key):
    image, caption = eval_sweep(SPECS[spec_id], load_results(runs))
    assert image.startswith(b"\x89PNG") and "(5 point(s))" in caption
    assert "Missing results: ncm_blockcausal_s (genppl), mdlm_s (genppl_s128)." in caption
    assert "Beside each point: H (samples/entropy)." in caption and "No samples/entropy" not in caption
    ax = drawn[0]
    scale = {"samples/nfe": 1.0, "samples/time_s": 1 / 8}[x_key]
    ncm_x, ar_x = {"samples/nfe": (12, 128), "samples/time_s": (2.0, 9.0)}[x_key]
    assert lines(ax) == {"NCM": ([ncm_x], [40.0]), "AR": ([ar_x], [30.0]),
                         "MDLM": ([16 * scale, 32 * scale, 64 * scale], [120.0, 90.0, 70.0])}
    notes = {(text.xy, text.get_text()) for text in ax.texts}
    assert ((16 * scale, 120.0), "H 4.02") in notes and ((ncm_x, 40.0), "H 4.1") in notes
    assert len(notes) == 5 and ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == SPECS[spec_id]["x"]["label"] and ax.get_ylabel() == "Gen PPL"


def test_a_row_another_profile_runs_is_not_run_here_not_missing(runs, tmp_path):
    """With the profile's runs index, an experiment the profile does not run is named apart from a result that
    is missing (re-run Snakemake); the report reads the index of its results."""
    current = {"ncm_s": None, "ar_gpt2_ncm_s": None, "mdlm_s": None}   # no ncm_blockcausal_s in this profile
    _, caption = eval_sweep(SPECS["ncm_fig5_nfe"], load_results(runs), current)
    assert caption.endswith(" Missing results: mdlm_s (genppl_s128). "
                            "Not run in this profile: ncm_blockcausal_s (genppl).")
    index = {"runs": {f"{exp}/seed0": None for exp in current}}
    (runs / "index.json").write_text(json.dumps(index))
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "index.json").write_text(json.dumps({"papers": ["ncm"], "tables": [], "paper_info": {}}))
    assert reports_main(["build", "--results", str(runs), "--tables", str(tables), "--out", str(tmp_path / "r")]) == 0
    assert "Not run in this profile: ncm_blockcausal_s (genppl)." in (tmp_path / "r" / "report.md").read_text()
    # listed in the index but its folder gone: missing (re-run Snakemake), not another profile's
    index["runs"]["ncm_blockcausal_s/seed0"] = None
    (runs / "index.json").write_text(json.dumps(index))
    assert reports_main(["build", "--results", str(runs), "--tables", str(tables), "--out", str(tmp_path / "r2")]) == 0
    assert ("Missing results: ncm_blockcausal_s (genppl), mdlm_s (genppl_s128)."
            in (tmp_path / "r2" / "report.md").read_text())


def test_eval_sweep_averages_seeds_and_names_points_without_annotation(runs, drawn):
    write_result(runs, "ncm_s", "genppl", genppl(12, 4.0, 50.0, 4.1), seed=1)
    write_result(runs, "ar_gpt2_ncm_s", "genppl", {"samples/nfe": 128, "samples/time_s": 9.0, "genppl/ppl": 30.0})
    image, caption = eval_sweep(SPECS["ncm_fig5_time"], load_results(runs))
    assert image and "No samples/entropy for: ar_gpt2_ncm_s (genppl)." in caption
    assert lines(drawn[0])["NCM"] == ([3.0], [45.0])  # mean over seeds 0 and 1
    assert len(drawn[0].texts) == 4


def test_eval_sweep_without_results_returns_none_and_names_every_eval(tmp_path):
    image, caption = eval_sweep(SPECS["ncm_fig5_nfe"], {})
    assert image is None and caption.startswith(SPECS["ncm_fig5_nfe"]["title"] + ": no results yet.")
    assert caption.endswith("Missing results: ncm_s (genppl), ncm_blockcausal_s (genppl), ar_gpt2_ncm_s (genppl), "
                            + ", ".join(f"mdlm_s ({name})" for name in MDLM_EVALS) + ".")
    only_x = {("ncm_s", "genppl", "samples/nfe"): Reproduced({0: 12.0})}  # y missing: not a point
    assert eval_sweep(SPECS["ncm_fig5_nfe"], only_x)[0] is None


def test_metric_curve_draws_the_numbered_metrics_against_their_number(runs, drawn):
    results = load_results(runs)
    image, caption = metric_curve(SPECS["ncm_table1_curve"], results)
    assert image.startswith(b"\x89PNG") and "Missing" not in caption
    assert "NCM tokenizer: i = 1..4; y = test/token_acc_ki" in caption
    ax = drawn[0]
    assert lines(ax) == {"NCM tokenizer": ([1, 2, 3, 4], [0.1, 0.3, 0.6, 0.9])}  # not test/token_acc itself
    assert ax.get_xlabel() == "scales used k" and ax.get_ylabel() == "token accuracy"
    spec = {**SPECS["ncm_table1_curve"], "series": [*SPECS["ncm_table1_curve"]["series"],
                                                    {"label": "other", "experiment": "ncm_big", "eval": "recon"}]}
    image, caption = metric_curve(spec, results)
    assert image and caption.endswith("Missing results: ncm_big (recon).")


def test_metric_curve_names_missing_results_and_results_without_the_metrics(tmp_path):
    image, caption = metric_curve(SPECS["ncm_table1_curve"], {})
    assert image is None and caption == f"{SPECS['ncm_table1_curve']['title']}: no results yet. " \
                                        "Missing results: ncm_s (recon)."
    other = {("ncm_s", "recon", "test/token_acc"): Reproduced({0: 0.5}),
             ("ncm_s", "genppl", "test/token_acc_k1"): Reproduced({0: 0.5})}
    image, caption = metric_curve(SPECS["ncm_table1_curve"], other)
    assert image is None and "Missing results: ncm_s (recon: no test/token_acc_k<i> metric)." in caption


def test_report_shows_both_kinds_and_never_fails_on_gaps(runs, tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "index.json").write_text(json.dumps({"papers": ["ncm"], "tables": [], "paper_info": {}}))
    out = tmp_path / "report"
    assert reports_main(["build", "--results", str(runs), "--tables", str(tables), "--out", str(out)]) == 0
    made = {path.name for path in (out / "figures").glob("*.png")}
    assert {"ncm_fig5_nfe.png", "ncm_fig5_time.png", "ncm_table1_curve.png"} <= made
    text = (out / "report.md").read_text()
    assert "Missing results: ncm_blockcausal_s (genppl), mdlm_s (genppl_s128)." in text
    empty = tmp_path / "empty"
    empty.mkdir()
    assert reports_main(["build", "--results", str(empty), "--tables", str(tables), "--out", str(tmp_path / "r2")]) == 0
    text = (tmp_path / "r2" / "report.md").read_text()
    assert "no results yet. Missing results: ncm_s (recon)." in text
