"""DLCM's Eq. 22 fit (evals/scaling_law.py) on trajectories drawn from known constants."""
import itertools
import math

import numpy as np
import pytest

from evals.scaling_law import ID_REL_TOL, NAMES, LawFit, LawPoint, fit, fit_to_result, identifiability, predict

TRUE = {"E0": 1.6, "A_token": 100.0, "t_token": 2e5, "delta1": 0.35, "A_concept": 30.0, "t_concept": 1e5,
        "delta2": 0.3, "gamma": 0.2, "A_data": 500.0, "t_data": 2e6, "alpha": 0.4}
NS, RS, PS = (2e6, 4e6, 8e6), (2, 4, 8), (0.3, 0.5, 0.7)
DS = tuple(np.geomspace(5e6, 1e8, 8))
HELD = ("N4000000_R4_P0.5", "N8000000_R8_P0.3", "N2000000_R2_P0.7")
N_BOOT = 24


def law(N, D, R, P, c=TRUE):
    """Eq. 22 written out independently of the module."""
    return (c["E0"] + c["A_token"] / (N * (1 - P) + c["t_token"]) ** c["delta1"]
            + c["A_concept"] * R ** c["gamma"] / (N * P + c["t_concept"]) ** c["delta2"]
            + c["A_data"] / (D + c["t_data"]) ** c["alpha"])


def grid(ns=NS, rs=RS, ps=PS, ds=DS, noise=0.005, seed=0):
    rng = np.random.default_rng(seed)
    return [LawPoint(f"N{N:.0f}_R{R}_P{P}", N, D, R, P, law(N, D, R, P) + noise * rng.standard_normal())
            for N, R, P in itertools.product(ns, rs, ps) for D in ds]


@pytest.fixture(scope="module")
def points():
    return grid()


@pytest.fixture(scope="module")
def law_fit(points):
    return fit(points, HELD, n_boot=N_BOOT)


def test_recovers_predictions_and_covers_the_determined_constants(law_fit):
    assert law_fit.runs == 24 and law_fit.points == 24 * 8 and law_fit.heldout_points == 3 * 8
    assert law_fit.r2_fit > 0.99 and law_fit.r2_heldout > 0.99 and law_fit.rmse_heldout < 0.01
    for N, R, P in itertools.product(NS, RS, PS):  # the end of every trajectory, held-out or not
        assert predict(law_fit, N, DS[-1], R, P) == pytest.approx(law(N, DS[-1], R, P), abs=0.01)
    determined = [k for k in NAMES if k not in law_fit.ill_determined]
    assert {"E0", "delta1", "delta2", "gamma", "alpha"} <= set(determined)
    for k in determined:
        assert law_fit.lo[k] <= TRUE[k] <= law_fit.hi[k], k


def test_predict_is_eq22():
    c = dict(TRUE)
    f = LawFit(c, c, c, (), 1.0, None, None, 0, 0, 0, (), 2, 2, "")
    N, D, R, P = np.array([3e6, 7e6]), np.array([1e7, 5e7]), np.array([2.0, 8.0]), np.array([0.3, 0.6])
    np.testing.assert_allclose(predict(f, N, D, R, P), law(N, D, R, P), rtol=1e-12)
    assert isinstance(predict(f, 3e6, 1e7, 4, 0.5), float)


@pytest.mark.parametrize("kw, message", [
    ({"rs": (4,)}, "1 value of R; the law's R^gamma term needs at least 2"),
    ({"ns": (4e6,)}, "1 value of N;"),
    ({"ps": (0.5,)}, "1 value of P;"),
    ({"ds": DS[:2]}, "2 values of D;"),
])
def test_unsupported_grid_raises_one_line(kw, message):
    with pytest.raises(ValueError, match=message.replace("^", r"\^")) as err:
        fit(grid(**kw), n_boot=2)
    assert "\n" not in str(err.value)


def test_bad_arguments_raise(points):
    with pytest.raises(ValueError, match="not among the points: nope"):
        fit(points, ["nope"], n_boot=2)
    with pytest.raises(ValueError, match="n_boot"):
        fit(points, n_boot=1)


def test_without_the_bootstrap_the_fit_is_the_same_and_judges_by_its_local_intervals(points, law_fit):
    bare = fit(points, HELD, n_boot=0)
    assert bare.constants == law_fit.constants and bare.r2_heldout == law_fit.r2_heldout and bare.boot_ok == 0
    assert all(math.isnan(bare.lo[k]) and math.isnan(bare.hi[k]) for k in NAMES)
    assert set(bare.ill_determined) <= set(law_fit.ill_determined)  # the bootstrap can only add


def test_heldout_runs_are_not_fitted(points, law_fit):
    corrupted = [LawPoint(p.run, p.N, p.D, p.R, p.P, p.loss + 0.3) if p.run == HELD[0] else p for p in points]
    again = fit(corrupted, HELD, n_boot=N_BOOT)
    assert again.constants == law_fit.constants and again.lo == law_fit.lo and again.hi == law_fit.hi
    assert again.r2_heldout < law_fit.r2_heldout - 0.05 and again.rmse_heldout > 0.05
    # the same corruption in a fitted run moves the constants
    moved = fit([LawPoint(p.run, p.N, p.D, p.R, p.P, p.loss + 0.3) if p.run == HELD[0] else p for p in points],
                HELD[1:], n_boot=2)
    assert moved.constants["E0"] != pytest.approx(law_fit.constants["E0"], rel=1e-3)


def test_deterministic_and_order_free(points, law_fit):
    assert fit(points[::-1], reversed(HELD), n_boot=N_BOOT) == law_fit


def test_fit_to_result_is_flat_numbers(law_fit):
    out = fit_to_result(law_fit)
    assert out["law/e0"] == law_fit.constants["E0"] and out["law/runs"] == 24.0 and out["law/points"] == 192.0
    assert {"law/e0_lo", "law/e0_hi", "law/a_token", "law/gamma_determined", "law/r2_fit", "law/r2_heldout",
            "law/rmse_heldout", "law/identifiable"} <= set(out)
    assert all(v is None or (isinstance(v, float) and math.isfinite(v)) for v in out.values())
    no_holdout = fit_to_result(fit(grid(), n_boot=2))
    assert no_holdout["law/r2_heldout"] is None and no_holdout["law/heldout_runs"] == 0.0


# -- identifiability (evals.scaling_law.identifiability) ------------------------------------------------------

def test_an_identifiable_grid_gives_back_its_constants():
    """9 values of N(1-P) and of NP, 3 of R, 8 of D, noise-free: every constant comes back exactly."""
    check = identifiability(grid(noise=0.0), TRUE, noise=0.0, draws=1)
    assert check.identifiable and check.recovered == NAMES
    assert all(err < 1e-3 for err in check.rel_error.values())
    record = check.to_record()
    assert record["identifiable"] is True and record["not_recovered"] == [] and record["draws"] == 1


def test_the_same_grid_loses_the_token_term_under_noise():
    """0.2 % noise in log L is enough to lose A_token (its refit is off by more than 25 %): the check is not
    a formality even on a 27-run grid."""
    check = identifiability(grid(noise=0.0), TRUE, noise=0.002, draws=1)
    assert not check.identifiable
    assert "A_token" not in check.recovered and check.rel_error["A_token"] > ID_REL_TOL


EMBEDDED_TRUTH = {"E0": 1.5, "A_token": 400.0, "t_token": 1000.0, "delta1": 0.45, "A_concept": 300.0,
                  "t_concept": 1000.0, "delta2": 0.4, "gamma": 0.2, "A_data": 2000.0, "t_data": 20000.0, "alpha": 0.5}


def test_the_embedded_grid_cannot_identify_the_constants():
    """config/default.yaml's dlcm_law grid (3 values of N(1-P); the 600-step rows beside the 120-step grid,
    19 data sizes along their trajectories): even noise-free synthetic losses lose the token term's t_token."""
    from evals.scaling_fit import profile_grid
    from workflows.experiments import entry_kinds, load_profile, resolve

    config = load_profile("config/default.yaml")
    experiments = resolve(config)
    law = entry_kinds(config, experiments)["law"]["dlcm_law"]
    fitted, held = profile_grid(experiments, law, config["tokenizer"]["vocab_size"])
    assert len({round(p.N * (1 - p.P)) for p in fitted}) == 3 and len({p.D for p in fitted}) == 19
    assert {p.run.split("/")[0] for p in held} == {"dlcm_r8_s", "dlcm_law_xs_p3_r4"}
    check = identifiability(fitted, EMBEDDED_TRUTH, noise=0.0, draws=1)
    assert not check.identifiable
    assert [k for k in NAMES if k not in check.recovered] == ["t_token"]


def test_fit_to_result_leaves_out_constants_that_are_not_identifiable(law_fit):
    out = fit_to_result(law_fit, constants=False)
    assert not any(k.startswith(("law/e0", "law/a_token", "law/gamma")) for k in out)
    assert out["law/r2_heldout"] == law_fit.r2_heldout
