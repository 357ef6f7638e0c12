"""What a profile declares that writes results is one kind of thing (workflows/resolve.py::Entry): the index
the tables read, the coverage of other profiles and the Snakefile's result targets come from the same
entries."""
from __future__ import annotations

from pathlib import Path

from workflows.coverage import profile_runs
from workflows.experiments import entries, load_profile, resolve, result_index

ROOT = Path(__file__).resolve().parents[2]


def test_experiments_laws_and_kernels_are_entries_with_their_seeds_and_results():
    path = ROOT / "config" / "default.yaml"
    config = load_profile(path, files=False)
    found = entries(config, str(path))
    experiments = resolve(config, str(path))
    assert [e.id for e in found.values() if e.kind == "experiment"] == list(experiments)
    law, kernel = found["dlcm_law"], found["attention_bench"]
    assert (law.kind, law.seeds, law.results, law.paper) == ("law", (0,), ("law",), "dlcm")
    assert (kernel.kind, kernel.seeds, kernel.results) == ("kernel", (0,), ("kernel",))
    assert found["dlcm_s"].seeds == (0, 1, 2) and found["dlcm_s"].settings == experiments["dlcm_s"]
    assert law.result_files("R") == ["R/dlcm_law/seed0/eval/law.json"]
    index = result_index(found)
    assert index["dlcm_s/seed2"] == list(experiments["dlcm_s"]["evals"])
    assert index["attention_bench/seed0"] == ["kernel"]
    assert len(index) == sum(len(e.seeds) for e in found.values())
    assert profile_runs(path) == {e.id: list(e.results) for e in found.values()}  # the coverage of other profiles
