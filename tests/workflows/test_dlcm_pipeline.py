"""DLCM through Snakemake, as a user runs it (`snakemake dlcm`, then the tables and the report): the
boundaries evaluation scores every snapshot of training, the scaling law is fitted to the grid's
trajectories with held-out runs, its result reaches the tables and the report; a changed law setting
re-runs the fit alone; a bad law or a bad DLCM setting is refused before any job runs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.workflows.test_workflow import ROOT, built, dry_run
from workflows.experiments import ConfigError, validate

L = 32
RESULT_SCHEMA = json.loads((ROOT / "config" / "schemas" / "result.schema.json").read_text())


def dlcm_profile() -> dict:
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config["profile"] = "micro"
    config["corpus"]["synthetic"] = {"train_docs": 300, "valid_docs": 20, "test_docs": 20}
    config["tokenizer"]["vocab_size"] = 400
    config.pop("datasets")
    config.pop("genppl")
    config.pop("conditional")
    config["defaults"]["model"].update(seq_len=L, d_model=32, n_layer=2, n_head=2)
    config["defaults"]["train"].update(steps=30, batch_size=8, micro_batch_size=8, warmup_steps=3, log_interval=5,
                                       eval_interval=3, checkpoint_interval=30, snapshot_interval=10)
    dlcm = {"paper": "dlcm", "evals": ["ppl", "boundaries", "mechanisms"], "seeds": [0]}
    config["experiments"] = [
        {"id": "base_s", "evals": ["ppl"]},  # a ConceptLM row: not in `snakemake dlcm`
        # DLCM Table 4's two rows (global and per-sequence parser): their verdict is gated by the mechanism checks
        {"id": "dlcm_s", **dlcm, "overrides": {"model.arch": "dlcm_gpt2", "model.concept_heads": 2,
                                               "model.d_concept": 64}},
        {"id": "dlcm_local_parser_s", "base": "dlcm_s", **dlcm, "overrides": {"model.parser": "sequence"}},
        {"id": "law_d{model.d_model}_c{model.concept_layers}_r{model.target_ratio}", **dlcm,
         "overrides": {"model.arch": "dlcm_gpt2", "model.concept_heads": 2},
         "sweep": {"model.d_model": [32, 32, 48, 64], "model.d_concept": [64, 64, 96, 128],
                   "model.concept_layers": [1, 2, 1, 2], "model.target_ratio": [4, 8, 2, 4]}},
    ]
    config["scaling_laws"] = {"dlcm_law": {"paper": "dlcm", "law": "dlcm", "experiments": ["law_*"],
                                      "holdout": ["law_d32_c2_r8"], "n_boot": 4}}
    # Table 6's smallest row, at 2 heads (the row id is seq x hidden) and unfused flex: seconds, not minutes
    config["kernel_benchmarks"]["attention_bench"].update(heads=2, flex="eager", rounds=2, warmup=0)
    return config


def run_dir(workdir: Path, exp: str) -> Path:
    return workdir / f"results/micro/runs/{exp}/seed0"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return built(tmp_path_factory, "dlcm", dlcm_profile(), "dlcm")


@pytest.mark.slow
def test_the_law_is_fitted_to_the_grid_and_reaches_the_tables(workdir):
    assert not run_dir(workdir, "base_s").exists()  # another paper's run: not part of `snakemake dlcm`
    law = json.loads((run_dir(workdir, "dlcm_law") / "eval" / "law.json").read_text())
    jsonschema.validate(law, RESULT_SCHEMA)
    m, d = law["metrics"], law["details"]
    assert m["law/runs"] == 3 and m["law/heldout_runs"] == 1 and d["heldout_runs"] == ["law_d32_c2_r8/seed0"]
    # 30 steps with validation every 3: 10 rows, those from 20 % of the tokens on (steps 6..30) are points
    assert m["law/points"] == 3 * 9 and m["law/heldout_points"] == 9
    assert m["law/r2_heldout"] is not None and d["fitted_constants"]["E0"] > 0
    # three fitted runs of 30 steps cannot give back their own constants: none is reported, the errors are
    assert m["law/constants_identifiable"] == 0.0 and "law/e0" not in m and "law/alpha_lo" not in m
    assert d["caveats"] == ["constants not identifiable from this grid"] and not d["identifiability"]["identifiable"]
    held = [p for p in d["points"] if p["heldout"]]
    assert len(held) == 9 and {p["run"] for p in held} == {"law_d32_c2_r8/seed0"}
    boundaries = json.loads((run_dir(workdir, "law_d32_c1_r4") / "eval" / "boundaries.json").read_text())
    assert d["runs"]["law_d32_c1_r4/seed0"]["P"] == boundaries["metrics"]["params/concept_share"]
    bm = boundaries["metrics"]
    assert [bm[f"over/tokens_{i}"] for i in (1, 2, 3)] == [10 * 8 * L, 20 * 8 * L, 30 * 8 * L]
    assert bm["over/f1_tol0_3"] == bm["test/f1_tol0"]
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(workdir),
                          "--configfile", str(workdir / "micro.yaml"), "--cores", "2"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    tables = workdir / "results/micro/tables"
    constants = {(r["row"], r["column"]): r["reproduced_mean"]
                 for r in json.loads((tables / "embedded/dlcm_law.json").read_text())["records"]}
    assert constants["alpha", "value"] == "" and constants["e0", "lo"] == ""  # not identifiable: not shown
    fit_cells = {(r["row"], r["column"]): r["reproduced_mean"]
                 for r in json.loads((tables / "embedded/dlcm_law_fit.json").read_text())["records"]}
    assert fit_cells["dlcm_law", "constants_identifiable"] == pytest.approx(0.0)
    assert fit_cells["dlcm_law", "rmse_heldout"] == pytest.approx(m["law/rmse_heldout"], rel=1e-3)
    # DLCM Table 6: the kernel benchmark's medians in their row, the speed-up recomputed, the CPU named
    kernel = json.loads((run_dir(workdir, "attention_bench") / "eval" / "kernel.json").read_text())
    jsonschema.validate(kernel, RESULT_SCHEMA)
    cells = {(r["row"], r["column"]): r for r in json.loads((tables / "dlcm/table06.json").read_text())["records"]}
    flex, flash = (cells["s2k_h1024", c]["reproduced_mean"] for c in ("flex_ms", "flash_ms"))
    assert flex == kernel["metrics"]["s2k_h1024/flex_ms"] > 0 and flash == kernel["metrics"]["s2k_h1024/flash_ms"] > 0
    assert cells["s2k_h1024", "speedup"]["reproduced_mean"] == pytest.approx(flex / flash)
    assert "measured on cpu" in cells["s2k_h1024", "flex_ms"]["analogue"]
    assert cells["s16k_h4096", "flex_ms"]["reproduced_mean"] == ""  # a row the profile does not time
    assert cells["s16k_h4096", "flex_ms"]["verdict"] == "not measured by this profile's runs"
    scalars = {r["row"]: r for r in json.loads((tables / "dlcm/scalars.json").read_text())["records"]}
    assert scalars["scaling_fit_r2"]["reproduced_mean"] == pytest.approx(m["law/r2_fit"], rel=1e-3)
    report = (workdir / "results/micro/report/report.md").read_text()
    assert "prediction against observed loss" in report and f"{int(m['law/points'])} fitted points" in report
    assert "Constants not identifiable from this grid" in report
    # the mechanism checks ran for every DLCM run, reached the tables and the report; one seed of 30 steps:
    # each is judged against the profile's noise floor, and a run that fails is named with its reason
    mechanisms = json.loads((tables / "mechanisms.json").read_text())["experiments"]
    assert set(mechanisms) == {"law_d32_c1_r4", "law_d32_c2_r8", "law_d48_c1_r2", "law_d64_c2_r4", "dlcm_s",
                               "dlcm_local_parser_s"}
    for experiment, entry in mechanisms.items():
        result = json.loads((run_dir(workdir, experiment) / "eval" / "mechanisms.json").read_text())
        swap = next(check for check in entry["checks"] if check["name"] == "swap")
        assert (swap["value"] == pytest.approx(result["metrics"]["mech/swap"])
                and swap["basis"].startswith("the profile's"))
        assert entry["exercised"] == all(check["passed"] for check in entry["checks"] if check["gate"])
        assert entry["exercised"] or entry["reason"].startswith("mechanism not exercised: ")
    assert "### Mechanism checks" in report and "ran the mechanism checks" in report
    index = json.loads((tables / "index.json").read_text())
    assert set(index["claims"]) == {"conceptlm", "ncm", "dlcm"} and index["mechanisms"].keys() == mechanisms.keys()
    # Table 4's pair and the paper's claim on the global parser: "not exercised" exactly when a row's checks failed
    idle = not (mechanisms["dlcm_s"]["exercised"] and mechanisms["dlcm_local_parser_s"]["exercised"])
    (pair,) = [r for r in json.loads((tables / "dlcm/table04.json").read_text())["order_pairs"]
               if r["column"] == "realized_ratio"]
    assert (pair["outcome"] == "not exercised") == idle and (pair["outcome"] == "inconclusive") == (not idle)
    claims = {c["id"]: c for c in json.loads((tables / "dlcm/claims.json").read_text())["claims"]}
    near = claims["realized_ratio_text"]  # "the global parser keeps the realised ratio near the target (~3.9)"
    assert (near["verdict"] == "mechanism not exercised") == (not mechanisms["dlcm_s"]["exercised"])


@pytest.mark.slow
def test_a_changed_law_setting_refits_without_retraining(workdir):
    changed = dlcm_profile()
    changed["scaling_laws"]["dlcm_law"]["n_boot"] = 6
    experiments, console = dry_run(workdir, changed, "dlcm")
    assert "fit_law" in console and "rule pretrain" not in console and not experiments


def test_a_bad_law_or_dlcm_setting_is_refused_before_any_job():
    def refused(profile: dict) -> str:
        with pytest.raises(ConfigError) as error:
            validate(profile, "micro.yaml")
        assert "\n" not in str(error.value)  # one line
        return str(error.value)

    bad = dlcm_profile()
    bad["scaling_laws"]["dlcm_law"]["holdout"] = ["base_s"]
    assert "holdout: base_s is not in the law's grid" in refused(bad)
    bad = dlcm_profile()
    bad["scaling_laws"]["dlcm_law"]["experiments"] = ["law_d32_*", "law_d48_*"]  # one concept depth at two widths
    assert "the fitted points have 1 value of P; the token and concept terms are told apart" in refused(bad)
    bad = dlcm_profile()
    bad["scaling_laws"]["dlcm_law"]["experiments"] = ["law_d32_*", "law_d64_*"]
    bad["scaling_laws"]["dlcm_law"]["holdout"] = []  # two token widths
    assert "2 values of N(1-P); the token term (A_token, t_token, delta1) needs at least 3" in refused(bad)
    bad = dlcm_profile()
    bad["defaults"]["train"]["eval_interval"] = 25  # validation at steps 25 and 30 only
    assert "the law needs 3 token counts and 12 points: lower train.eval_interval" in refused(bad)
    bad = dlcm_profile()
    bad["scaling_laws"]["base_s"] = bad["scaling_laws"].pop("dlcm_law")
    assert "scaling_laws.base_s: the id is an experiment's" in refused(bad)
    for key, value, named in (("model.target_ratio", 0.5, "target_ratio"), ("model.boundary_threshold", 1.5,
                              "boundary_threshold"), ("model.d_concept", 63, "d_concept"),
                              ("model.concept_share", 1.2, "concept_share"), ("model.aux_weight", -0.1, "aux_weight")):
        bad = dlcm_profile()
        bad["experiments"].append({"id": "bad", "paper": "dlcm", "overrides": {"model.arch": "dlcm_gpt2", key: value}})
        assert f"experiments[bad]: model.{named}" in refused(bad), key
    kernel = dlcm_profile()["kernel_benchmarks"]["attention_bench"]
    for change, named in (({"rows": [{"seq_len": 2048, "hidden": 1000}], "heads": 32},
                           "kernel_benchmarks.attention_bench.rows[0].hidden: 1000 is not divisible by heads 32"),
                          ({"rows": [{"seq_len": 2048, "hidden": 64}] * 2}, "rows: s2k_h64 is listed twice"),
                          ({"pass": "backward"}, "kernel_benchmarks.attention_bench.pass"),
                          ({"rows": []}, "kernel_benchmarks.attention_bench.rows")):
        bad = dlcm_profile()
        bad["kernel_benchmarks"]["attention_bench"] = {**kernel, **change}
        assert named in refused(bad), change
    bad = dlcm_profile()
    bad["kernel_benchmarks"]["dlcm_law"] = bad["kernel_benchmarks"].pop("attention_bench")
    assert "kernel_benchmarks.dlcm_law: the id is scaling_laws.dlcm_law's too" in refused(bad)
