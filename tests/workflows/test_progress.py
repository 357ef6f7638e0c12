"""The DAG-level progress line (workflows/progress.py): runs trained, steps done since the start, the ETA."""
from __future__ import annotations

import json
import os
import time

from workflows.progress import Progress, planned_runs


def write_rows(path, steps, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    # a torn row
    path.write_text("".join(json.dumps({"step": s, "train/loss": 1.0}) + "\n" for s in steps) + '{"step": 9')
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_the_line_counts_steps_since_the_start_and_estimates_the_rest(tmp_path):
    a, b, c = (str(tmp_path / name) for name in "abc")
    progress = Progress({a: 100, b: 100, c: 200}, started=time.time() - 60)
    write_rows(tmp_path / "a" / "train" / "metrics.jsonl", [10, 20, 50])             # half way
    (tmp_path / "b" / "final").mkdir(parents=True)
    (tmp_path / "b" / "final" / "manifest.json").write_text("{}")                      # done
    write_rows(tmp_path / "c" / "train" / "metrics.jsonl", [150], mtime=time.time() - 3600)   # an earlier run's log
    line = progress.line(now=progress.started + 60)
    assert "| runs 1/3 trained | steps 150/400 (37.5 %) | training ETA 0:01:40 at 150 steps/min" in line
    assert line.startswith("progress 0:01:00 ")


def test_no_steps_yet_is_an_unknown_eta_and_a_dag_it_cannot_read_is_none(tmp_path):
    progress = Progress({str(tmp_path / "a"): 10})
    assert progress.line().endswith("training ETA unknown")
    assert planned_runs(object(), lambda e, s: (e, s)) is None


def test_a_resumed_run_counts_its_checkpoints_steps_as_done_but_not_towards_the_rate(tmp_path):
    run = tmp_path / "r"
    (run / "ckpt" / "step-000050").mkdir(parents=True)
    (run / "ckpt" / "step-000050" / "COMPLETE").write_text("")
    (run / "ckpt" / "step-000060").mkdir()                     # debris of a killed write: no marker
    progress = Progress({str(run): 100}, started=time.time() - 60)
    write_rows(run / "train" / "metrics.jsonl", [10, 50, 60])    # the log rewritten on resume, then one row on
    assert "| steps 60/100 (60.0 %) | training ETA 0:04:00 at 10 steps/min" in progress.line(now=progress.started + 60)
    write_rows(run / "train" / "metrics.jsonl", [10])            # its checkpoint set aside: trains afresh
    assert "| steps 10/100 (10.0 %) |" in progress.line(now=progress.started + 60)


def test_a_bad_interval_is_one_line():
    import pytest

    from common.errors import ReproError
    from workflows.progress import start

    with pytest.raises(ReproError, match="REPRO_PROGRESS_INTERVAL=soon: give seconds"):
        start(object(), lambda e, s: (e, s), environ={"REPRO_PROGRESS_INTERVAL": "soon"})
