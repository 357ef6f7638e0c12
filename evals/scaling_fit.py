"""DLCM's scaling law (``evals.scaling_law``, Eq. 22) fitted to a profile's grid of runs: the result
``results/runs/<law id>/seed0/eval/law.json`` that the tables and the report read like any evaluation.

Each run of the grid gives its validation losses (``valid/loss`` rows of ``train/metrics.jsonl``, the
model's primary loss: next-token cross-entropy in nats per token) from ``fit_from`` of its training
tokens on, as points (N, D, R, P, L): N the non-embedding parameters and P the concept blocks' share of
them (``params/non_embedding``, ``params/concept_share`` of its boundaries evaluation), R its *target*
ratio (the grid's R, as the paper's R in {2, 4, 8}; the realised ratio is recorded beside it), D the
training tokens at the row. Every seed of an experiment is a run of its own; runs of ``holdout``
experiments are left out of the fit and of the bootstrap and scored after it.

**Identifiability.** The fitted constants are then taken as the truth: synthetic losses from them at
exactly the fitted points (N, D, R, P), with the fit's own log-residual noise, are refitted
(``evals.scaling_law.identifiability``). ``law/constants_identifiable`` is 1 when every constant comes back
within ``identify_rel_tol``; when it is 0 the constants are left out of the metrics (kept in
``details.fitted_constants``, with the check in ``details.identifiability``), ``details.caveats`` says
"constants not identifiable from this grid", and only the prediction errors are reported. The bootstrap
(``n_boot`` refits, whose intervals are the constants') runs only for a grid that identifies them: it was
most of the embedded law's job (96 s with it, 41 s without as DAG jobs on one host; 31 s of it the
evaluation itself), spent on intervals no table showed. Without it, a constant the known-answer check does
not give back counts as ill-determined.

The result carries the constants (``law/<name>``, ``_lo``, ``_hi``, ``_determined``), R^2 on the fitted
and on the held-out points, the same across runs at their last point (``final_scores``), and in ``details`` every point
with the law's prediction (the figure), the
runs and their checkpoints' sha256.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from common.errors import ConfigError, ReproError
from common.io import atomic_write_json
from evals.result import settings_record
from evals.scaling_law import (NAMES, LawPoint, fit, fit_to_result, identifiability, log_residual_sd, predict,
                                r2_rmse)
from trainer.metrics import read_rows, validation_tokens


class LawDataError(ReproError, ValueError):
    """A grid run without what the law needs (a boundaries result, validation losses)."""


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise LawDataError(f"{path}: unreadable ({e}); re-run snakemake to rewrite it") from e


def run_points(run_dir: Path, name: str, fit_from: float) -> tuple[list[LawPoint], dict]:
    """The law points of one run folder and a description of the run (sha256, N, P, R, realised R)."""
    result = _read_json(run_dir / "eval" / "boundaries.json")
    m = result["metrics"]
    N, P, R = m["params/non_embedding"], m["params/concept_share"], m["model/target_ratio"]
    metrics = run_dir / "train" / "metrics.jsonl"
    try:
        rows = read_rows(metrics)
    except (OSError, json.JSONDecodeError) as e:
        raise LawDataError(f"{metrics}: unreadable ({e}); delete {run_dir / 'final'} and re-run snakemake") from e
    valid = [r for r in rows if r.get("valid/loss") is not None]
    if not valid:
        raise LawDataError(f"{metrics}: no validation loss; lower train.eval_interval of {name} so that it logs some")
    total = max(r["tokens"] for r in valid)
    points = [LawPoint(name, N, float(r["tokens"]), R, P, float(r["valid/loss"]))
              for r in valid if r["tokens"] >= fit_from * total]
    info = {"N": N, "P": P, "R": R, "realised_R": m.get("test/tokens_per_concept"), "points": len(points),
            "checkpoint_sha256": result["provenance"]["checkpoint_sha256"]}
    return points, info


def final_scores(points: list[LawPoint], predicted, held: list[str]) -> dict[str, float | None]:
    """The law across runs rather than along them: its predictions of each run's last validation loss.
    ``law/r2_final`` over the fitted runs' last points (how much of the spread between runs at the end of
    training the law explains: R^2 over whole trajectories is dominated by the fall of the loss with D),
    ``law/final_mae`` over them and ``law/heldout_final_mae`` over the held-out runs' (nats)."""
    last: dict[str, tuple[float, float]] = {}
    for p, y in sorted(zip(points, map(float, predicted)), key=lambda item: item[0].D):
        last[p.run] = (p.loss, y)  # the largest D wins
    fitted = [v for run, v in last.items() if run not in held]
    out = [v for run, v in last.items() if run in held]
    return {"law/r2_final": r2_rmse(*zip(*fitted))[0],
            "law/final_mae": sum(abs(loss - y) for loss, y in fitted) / len(fitted),
            "law/heldout_final_mae": sum(abs(loss - y) for loss, y in out) / len(out) if out else None}


NOT_IDENTIFIABLE = "constants not identifiable from this grid"
# what a law's settings file holds (the DAG writes it: resolve_laws below and its run folders)
LAW_KEYS = ("id", "runs", "law", "experiments", "fit_from", "holdout", "n_boot")


def identify(result, fitted: list[LawPoint], settings: dict):
    """``evals.scaling_law.identifiability`` on the fitted points, the truth being the fitted constants and
    the noise the fit's own log-residual spread (``identify_rel_tol``, ``identify_draws`` of the settings)."""
    return identifiability(fitted, result.constants, noise=log_residual_sd(result, fitted),
                           draws=settings.get("identify_draws", 3), rel_tol=settings.get("identify_rel_tol", 0.25))


def evaluate_law(law_id: str, settings: dict, runs: dict[str, Path], out_path: Path) -> dict:
    """Fit ``settings`` (a resolved ``scaling_laws`` entry: ``experiments``, ``holdout``, ``fit_from``,
    ``n_boot``) to ``runs`` (``{"<experiment>/seed<k>": folder}``); write and return the result."""
    t0 = time.perf_counter()
    points, described = [], {}
    for name, folder in sorted(runs.items()):
        pts, described[name] = run_points(Path(folder), name, settings["fit_from"])
        points += pts
    held = [name for name in runs if name.split("/")[0] in settings["holdout"]]
    try:  # the bootstrap's intervals are of constants: only a grid that identifies them pays for it
        result = fit(points, held, n_boot=0)
    except ValueError as e:
        raise LawDataError(f"scaling_laws.{law_id}: {e}; widen the grid (scaling_laws.{law_id}.experiments)") from None
    check = identify(result, [p for p in points if p.run not in held], settings)
    if check.identifiable:
        result = fit(points, held, n_boot=settings["n_boot"])
    else:  # no bootstrap: a constant the known-answer check does not give back is ill-determined too
        result = dataclasses.replace(result, ill_determined=tuple(
            k for k in NAMES if k in result.ill_determined or k not in check.recovered))
    predicted = predict(result, *([getattr(p, k) for p in points] for k in ("N", "D", "R", "P")))
    metrics = {**fit_to_result(result, constants=check.identifiable), **final_scores(points, predicted, held),
               "law/constants_identifiable": float(check.identifiable),
               "law/constants_recovered": float(len(check.recovered))}
    details = {"law": settings["law"], "method": result.method, "ill_determined": list(result.ill_determined),
               "identifiability": check.to_record(), "fitted_constants": result.constants,
               "runs": described, "heldout_runs": list(result.heldout_runs),
               "points": [{"run": p.run, "N": p.N, "D": p.D, "R": p.R, "P": p.P, "loss": p.loss,
                           "predicted": float(y), "heldout": p.run in held} for p, y in zip(points, predicted)],
               "note": "constants fitted at embedded scale: the paper publishes none (tables/MISSING.md)"}
    if not check.identifiable:
        details["caveats"] = [NOT_IDENTIFIABLE]
    record = settings_record(law_id, settings, out_path, metrics, details, t0)
    atomic_write_json(out_path, record)
    return record


def profile_grid(experiments: dict, settings: dict, vocab: int) -> tuple[list[LawPoint], list[LawPoint]]:
    """The (N, D, R, P) points a law would fit and hold out, before anything trains: ``experiments`` a
    profile's resolved experiments, ``settings`` its law's (``resolve_laws``). Each
    grid experiment's model is built (vocabulary ``vocab``) for N and P as its boundaries evaluation counts
    them (``evals.boundaries.parameter_share``), R its target, D the tokens of the validation rows from
    ``fit_from`` on, one run per seed. Losses are placeholders (1.0): the grid for
    ``evals.scaling_law.identifiability``. Returns (fitted, held out)."""
    from evals.boundaries import parameter_share
    from models.registry import build_model

    fitted, held = [], []
    for exp_id in settings["experiments"]:
        exp = experiments[exp_id]
        model = build_model({k: v for k, v in exp["model"].items() if k != "seq_len"}, vocab_size=vocab,
                            seq_len=exp["model"]["seq_len"])
        share = parameter_share(model)
        for seed in exp["seeds"]:
            for d in sorted(validation_tokens(exp, settings["fit_from"])):
                point = LawPoint(f"{exp_id}/seed{seed}", share["params/non_embedding"], float(d),
                                 float(model.cfg.target_ratio), share["params/concept_share"], 1.0)
                (held if exp_id in settings["holdout"] else fitted).append(point)
    return fitted, held


LAW_DEFAULTS = {"holdout": [], "fit_from": 0.2, "n_boot": 200, "identify_rel_tol": 0.25, "identify_draws": 3}


def resolve_laws(section: dict, experiments: dict, source: str = "scaling_laws") -> dict[str, dict]:
    """A profile's ``scaling_laws`` (``section``) by id with defaults filled in and their grids resolved to
    experiment ids (patterns expanded in profile order): ``{"paper", "law", "experiments", "holdout",
    "fit_from", "n_boot"}``. Each grid experiment needs the ``boundaries`` evaluation (N, P, R of its runs).
    The entry kind's resolver (``evals/registry.py``)."""
    from fnmatch import fnmatchcase

    from evals.scaling_law import grid_problem

    laws = {}
    for law_id, entry in section.items():
        where = f"{source}.{law_id}"
        grid = [e for e in experiments if any(fnmatchcase(e, pattern) for pattern in entry["experiments"])]
        unmatched = [p for p in entry["experiments"] if not any(fnmatchcase(e, p) for e in experiments)]
        if unmatched:
            raise ConfigError(f"{where}.experiments: {unmatched[0]!r} names no experiment of the profile")
        lacking = [e for e in grid if "boundaries" not in experiments[e]["evals"]]
        if lacking:
            raise ConfigError(f"{where}.experiments: {lacking[0]} has no boundaries evaluation, which gives the law "
                              "its N, P and R; add boundaries to its evals")
        stray = [e for e in entry.get("holdout", []) if e not in grid]
        if stray:
            raise ConfigError(f"{where}.holdout: {stray[0]} is not in the law's grid")
        fitted = [e for e in grid if e not in entry.get("holdout", [])]
        problem = grid_problem(_law_shape(experiments[e]["model"]) for e in fitted)
        if problem:
            raise ConfigError(f"{where}.experiments: {problem} (the runs left after the hold-out, counted from "
                              "their weight matrices); add experiments or hold fewer out")
        fit_from = entry.get("fit_from", LAW_DEFAULTS["fit_from"])
        tokens = {e: validation_tokens(experiments[e], fit_from) for e in fitted}
        n_d, n_points = (len(set().union(*tokens.values())),
                         sum(len(t) * len(experiments[e]["seeds"]) for e, t in tokens.items()))
        if n_d < 3 or n_points <= 11:
            raise ConfigError(f"{where}: the fitted runs log {n_points} validation losses at {n_d} token count(s) from "
                              f"fit_from={fit_from:g} of training on; the law needs 3 token counts and 12 points: "
                              "lower train.eval_interval of the grid's runs or fit_from")
        laws[law_id] = {**LAW_DEFAULTS, **entry, "experiments": grid}
    return laws


def _law_shape(model: dict) -> tuple[float, float, float]:
    """(N, P, R) of a DLCM experiment from its weight matrices (``models.configs.matrix_params``; biases and
    norms left out): enough to tell whether a law's grid varies what the law needs."""
    from models.configs import matrix_params
    from models.registry import model_config

    _, cfg = model_config({k: v for k, v in model.items() if k != "seq_len"}, vocab_size=257, seq_len=model["seq_len"])
    m = matrix_params(cfg)
    n = m["token_side"] + m["concept"]
    return float(n), m["concept"] / n, float(cfg.target_ratio)
