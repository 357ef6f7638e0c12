"""What every benchmark shares (benchmarks/common.py): the machine's load judged before a target is called
met, and the host fingerprint in every result."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch

from benchmarks import common, train_throughput


def test_a_load_above_the_cores_at_either_end_refuses_the_target(monkeypatch):
    cores = os.cpu_count()
    loads = iter([cores - 0.5, cores + 0.5])
    monkeypatch.setattr(os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    load = common.MachineLoad().finish()
    assert load["loaded"] and load["after"] == cores + 0.5 and "machine loaded" in load["why"]
    target = common.judge_target(True, load)
    assert target == {"met": False, "measured_met": True, "refused": load["why"]}
    assert common.target_words(target).startswith("not judged (machine loaded")


def test_a_quiet_machine_reports_the_ratio_as_measured(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.0, 0.0))
    load = common.MachineLoad().finish()
    assert not load["loaded"] and load["why"] is None
    assert common.target_words(common.judge_target(True, load)) == "met"
    assert common.target_words(common.judge_target(False, load)) == "NOT met"


def test_the_environment_names_the_host():
    env = common.environment(1, torch.device("cpu"))
    host = env["host"]
    assert {"cpu", "vendor", "cpu_id", "cpu_isa", "isa", "cores", "threads", "torch", "onednn", "blas",
            "pins"} <= set(host)
    assert env["cpu"] == host["cpu"] and host["cpu"] in env["host_line"]
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists() and "cpu family" in cpuinfo.read_text():  # a virtual "Intel(R) Xeon(R) Processor" told apart
        assert re.fullmatch(r"family \S+ model \S+ stepping \S+", host["cpu_id"]) and host["cpu_id"] in env["host_line"]


@pytest.mark.slow
def test_train_throughput_on_a_loaded_machine_meets_no_target(tmp_path, monkeypatch, capsys):
    """End to end at a toy shape (child processes included): a loaded machine's ratio is kept, never called met."""
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 2.0, 0.0, 0.0))
    monkeypatch.setattr(train_throughput, "TARGET", 1e-9)   # any ratio meets it
    out = tmp_path / "tt.json"
    train_throughput.main(["--d-model", "16", "--layers", "1", "--heads", "2", "--seq", "16", "--vocab", "64",
                           "--batch", "2", "--steps", "2", "--warmup", "1", "--threads", "1", "--out", str(out)])
    r = json.loads(out.read_text())
    target = r["shapes"]["custom"]["target"]
    assert r["shapes"]["custom"]["ratio_ours_over_hf"] > 0 and target["measured_met"] and not target["met"]
    assert r["load_avg_1min"]["loaded"] and r["environment"]["host"]["cores"] == os.cpu_count()
    assert "not judged (machine loaded" in capsys.readouterr().out


def test_waiting_for_a_quiet_machine_stops_when_the_load_falls(monkeypatch):
    loads = iter([os.cpu_count() + 4.0, os.cpu_count() + 1.0, 0.5])
    monkeypatch.setattr(os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    monkeypatch.setattr(common.time, "sleep", lambda s: None)
    assert common.wait_for_quiet(max_s=60) >= 0
    with pytest.raises(StopIteration):  # it polled exactly until the load fell below the cores
        next(loads)
