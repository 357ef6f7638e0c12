"""The record every evaluation writes to ``results/runs/{experiment}/seed{seed}/eval/{eval}.json``
(contract: ``config/schemas/result.schema.json``; read by tables/ and reports/)."""
from __future__ import annotations

import time
from pathlib import Path

from common.io import config_hash
from common.provenance import provenance


def result_record(manifest: dict, out_path: Path, metrics: dict, details: dict, started: float) -> dict:
    """The result of evaluating the checkpoint described by ``manifest``; ``eval`` is the file stem,
    the wall time runs from ``started`` (a ``time.perf_counter()`` reading)."""
    run_cfg = manifest["config"]
    return {"schema_version": 1, "experiment": run_cfg["id"], "seed": run_cfg["seed"], "eval": Path(out_path).stem,
            "metrics": metrics, "details": details, "config": run_cfg,
            "provenance": provenance(config_hash=config_hash(run_cfg), checkpoint_sha256=manifest["model_sha256"],
                                     seed=run_cfg["seed"], wall_time_s=time.perf_counter() - started)}


def settings_record(result_id: str, settings: dict, out_path: Path, metrics: dict, details: dict,
                    started: float) -> dict:
    """The result of a profile entry that is no training run (a fitted scaling law, a kernel benchmark):
    seed 0, no checkpoint, its settings as the config (``{"id": result_id, **settings}``)."""
    config = {"id": result_id, **settings}
    return {"schema_version": 1, "experiment": result_id, "seed": 0, "eval": Path(out_path).stem,
            "metrics": metrics, "details": details, "config": config,
            "provenance": provenance(config_hash=config_hash(config), checkpoint_sha256=None, seed=0,
                                     wall_time_s=time.perf_counter() - started)}
