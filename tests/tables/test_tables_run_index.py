"""Only the profile's runs are read: a run dropped from the profile (still on disk) never reaches a table."""
import json

import pytest

from tables.results import load_results, run_folders
from tables.validation import DataError

PROVENANCE = {"git_commit": "t", "config_hash": "t", "checkpoint_sha256": None, "versions": {}, "seed": 0,
              "wall_time_s": 0}


def write_result(runs, experiment, seed, value):
    path = runs / experiment / f"seed{seed}" / "eval" / "ppl.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema_version": 1, "experiment": experiment, "seed": seed, "eval": "ppl",
                                "metrics": {"test/ppl": value}, "provenance": {**PROVENANCE, "seed": seed}}))


def test_runs_outside_the_index_are_not_read(tmp_path):
    write_result(tmp_path, "kept", 0, 10.0)
    write_result(tmp_path, "dropped", 0, 99.0)
    assert {key[0] for key in load_results(tmp_path)} == {"kept", "dropped"}  # no index: every folder
    (tmp_path / "index.json").write_text(json.dumps({"runs": {"kept/seed0": ["ppl"], "kept/seed1": ["ppl"]}}))
    assert [p.name for p in run_folders(tmp_path)] == ["seed0"]  # listed but not run yet: skipped
    assert {key[0] for key in load_results(tmp_path)} == {"kept"}


def test_unreadable_index_is_a_clear_error(tmp_path):
    write_result(tmp_path, "kept", 0, 10.0)
    (tmp_path / "index.json").write_text("{")
    with pytest.raises(DataError, match="unreadable run index"):
        load_results(tmp_path)


def test_evaluations_outside_the_index_are_not_read(tmp_path):
    """An evaluation dropped from an experiment's evals keeps its old file; the tables do not read it."""
    write_result(tmp_path, "kept", 0, 10.0)
    stale = tmp_path / "kept" / "seed0" / "eval" / "embedded.json"
    stale.write_text((tmp_path / "kept" / "seed0" / "eval" / "ppl.json").read_text().replace('"ppl"', '"embedded"'))
    assert {key[1] for key in load_results(tmp_path)} == {"ppl", "embedded"}
    (tmp_path / "index.json").write_text(json.dumps({"runs": {"kept/seed0": ["ppl"]}}))
    assert {key[1] for key in load_results(tmp_path)} == {"ppl"}
