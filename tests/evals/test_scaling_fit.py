"""The scaling-law evaluation (evals/scaling_fit.py): run folders -> points -> law.json. The points are
the validation losses from fit_from of training on with N, P, R of the run's boundaries result; held-out
experiments are scored, not fitted; a run without validation rows is a one-line error naming the fix."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import jsonschema
import pytest

from evals.scaling_fit import LawDataError, evaluate_law
from tests.evals.test_scaling_law import TRUE, law

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "config" / "schemas" / "result.schema.json").read_text())
SETTINGS = {"paper": "dlcm", "law": "dlcm", "holdout": ["e_N4000000_R4_P0.5"], "fit_from": 0.2, "n_boot": 4}


def write_run(folder: Path, N: float, R: float, P: float, steps: int = 10, tokens_per_step: int = 10_000_000) -> None:
    (folder / "eval").mkdir(parents=True)
    (folder / "train").mkdir()
    metrics = {"params/non_embedding": N, "params/concept_share": P, "model/target_ratio": R,
               "test/tokens_per_concept": R * 0.9}
    (folder / "eval" / "boundaries.json").write_text(json.dumps(
        {"metrics": metrics, "provenance": {"checkpoint_sha256": "ab" * 32}}))
    rows = []
    for step in range(1, steps + 1):
        rows.append({"step": step, "tokens": step * tokens_per_step, "loss": 3.0})
        D = step * tokens_per_step
        rows.append({"split": "valid", "step": step, "tokens": D, "valid/loss": law(N, D, R, P)})
    (folder / "train" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for N, R, P in itertools.product((2e6, 4e6, 8e6), (2, 4, 8), (0.3, 0.5, 0.7)):
        name = f"e_N{N:.0f}_R{R}_P{P}/seed0"
        write_run(root / name, N, R, P)
        out[name] = root / name
    return out


def test_the_grid_becomes_points_and_the_fit_recovers_the_law(runs, tmp_path):
    out = tmp_path / "law" / "seed0" / "eval" / "law.json"
    result = evaluate_law("law", {**SETTINGS, "experiments": sorted({n.split("/")[0] for n in runs})}, runs, out)
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    m, d = result["metrics"], result["details"]
    # steps 2..10 of 10 lie at or after 20 % of the tokens: 9 points per run, one run held out
    assert m["law/points"] == 26 * 9 and m["law/heldout_points"] == 9 and m["law/runs"] == 26
    assert d["heldout_runs"] == ["e_N4000000_R4_P0.5/seed0"]
    assert m["law/r2_fit"] > 0.999 and m["law/r2_heldout"] > 0.99 and m["law/r2_final"] > 0.99
    assert m["law/final_mae"] < 0.01 and m["law/heldout_final_mae"] < 0.02
    assert m["law/e0"] == pytest.approx(TRUE["E0"], rel=0.05)
    # noise-free losses of a 27-run grid: the known-answer check gives every constant back
    assert m["law/constants_identifiable"] == 1.0 and m["law/constants_recovered"] == 11
    assert d["identifiability"]["identifiable"] is True and d["identifiability"]["draws"] == 3
    assert "caveats" not in d
    assert m["law/boot_ok"] > 0 and "bootstrap over runs x4" in d["method"]  # intervals of identified constants
    assert all(p["predicted"] == pytest.approx(p["loss"], rel=1e-2) for p in d["points"])
    assert d["runs"]["e_N2000000_R2_P0.3/seed0"] == {"N": 2e6, "P": 0.3, "R": 2, "realised_R": 1.8, "points": 9,
                                                    "checkpoint_sha256": "ab" * 32}


def test_constants_that_do_not_come_back_are_not_reported(runs, tmp_path):
    """A tolerance no refit meets: the constants leave the metrics, the scores stay, the caveat is stated."""
    out = tmp_path / "law.json"
    settings = {**SETTINGS, "experiments": sorted({n.split("/")[0] for n in runs}), "identify_rel_tol": 1e-15,
                "identify_draws": 1}
    result = evaluate_law("law", settings, runs, out)
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    m, d = result["metrics"], result["details"]
    assert m["law/constants_identifiable"] == 0.0 and "law/e0" not in m and "law/gamma_lo" not in m
    assert m["law/r2_heldout"] > 0.99 and m["law/rmse_heldout"] is not None
    assert d["caveats"] == ["constants not identifiable from this grid"]
    assert set(d["fitted_constants"]) == set(TRUE)
    # no bootstrap for intervals no table shows (the fit itself is the bootstrapped one's: test_scaling_law);
    # a constant the known-answer check does not give back is ill-determined, so not all are determined
    assert m["law/boot_ok"] == 0.0 and d["method"].endswith("no bootstrap")
    lost = set(d["identifiability"]["not_recovered"])
    assert lost and lost <= set(d["ill_determined"])
    assert m["law/identifiable"] == 0.0


def test_a_run_without_validation_losses_or_a_grid_too_small_is_named(runs, tmp_path):
    silent = tmp_path / "silent" / "seed0"
    write_run(silent, 2e6, 4, 0.5)
    (silent / "train" / "metrics.jsonl").write_text(json.dumps({"step": 1, "tokens": 10, "loss": 3.0}) + "\n")
    with pytest.raises(LawDataError, match="no validation loss; lower train.eval_interval of silent/seed0"):
        evaluate_law("law", {**SETTINGS, "holdout": []}, {**runs, "silent/seed0": silent}, tmp_path / "l.json")
    one_ratio = {n: f for n, f in runs.items() if "_R4_" in n}
    with pytest.raises(LawDataError, match=r"scaling_laws.law: the fitted points have 1 value of R"):
        evaluate_law("law", {**SETTINGS, "holdout": []}, one_ratio, tmp_path / "l.json")


def test_final_scores_judge_the_law_across_runs_at_their_last_points():
    from evals.scaling_fit import final_scores
    from evals.scaling_law import LawPoint

    pts = [LawPoint(run, 1e6, D, 4, 0.5, loss) for run, last in (("a", 3.0), ("b", 3.2), ("c", 3.4))
           for D, loss in ((1e5, 5.0), (2e5, last))]
    exact = final_scores(pts, [p.loss for p in pts], held=["c"])
    assert exact == {"law/r2_final": 1.0, "law/final_mae": 0.0, "law/heldout_final_mae": 0.0}
    swapped = {("a", 2e5): 3.2, ("b", 2e5): 3.0}  # right along each trajectory, wrong between runs
    scores = final_scores(pts, [swapped.get((p.run, p.D), p.loss) for p in pts], held=["c"])
    assert scores["law/r2_final"] == pytest.approx(1 - 0.08 / 0.02) and scores["law/final_mae"] == pytest.approx(0.2)


def test_the_report_caption_says_when_the_constants_are_not_identifiable():
    from reports.scaling_law import constants_sentence

    lost = constants_sentence({"law/constants_identifiable": 0.0},
                              {"identifiability": {"not_recovered": ["A_token", "t_token"]}}, ["t_data"])
    assert lost == ("Constants not identifiable from this grid (synthetic losses from the fitted constants give back "
                    "wrong A_token, t_token): only the prediction errors are reported.")
    assert constants_sentence({"law/constants_identifiable": 1.0}, {}, ["t_data"]) == \
        "Not determined by this grid: t_data."
    assert constants_sentence({}, {}, []) == "Every constant is determined."
