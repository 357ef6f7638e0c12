"""A DAG-level progress line while Snakemake runs: the runs trained, the training steps done and an ETA.

Snakemake counts jobs; a training job is minutes to days and the evaluations seconds, so its "k of n steps"
says little about time. From the jobs start (``onstart``) until they end (``onsuccess`` / ``onerror``), a
daemon thread prints, every ``REPRO_PROGRESS_INTERVAL`` seconds (default 60) and on stderr, one line
over the training jobs this invocation runs:

    progress 0:12:31 | runs 4/12 trained | steps 2,430/7,200 (33.8 %) | training ETA 0:24:30 at 194 steps/min

A run's steps are the last row of its ``train/metrics.jsonl`` written since the start (the file of an
earlier run does not count), and all of them once its ``final/manifest.json`` is written. A run that resumes
from a checkpoint had that checkpoint's steps done before the start: they count as done but not towards the
rate, which is the steps done since the start over the time since the start (a run whose checkpoint is set
aside and trains afresh counts from 0). The evaluations are not in the estimate.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import ReproError


@dataclass
class Progress:
    runs: dict[str, int]                    # run folder -> its training steps
    started: float = field(default_factory=time.time)
    before: dict[str, int] = field(default_factory=dict)   # run folder -> the step its checkpoint resumes at

    def __post_init__(self):
        self.before = {run: self.before.get(run, _checkpoint_step(Path(run))) for run in self.runs}

    def steps(self, run: str) -> int:
        """Steps the run in folder ``run`` has done (those of the checkpoint it resumed from included)."""
        folder = Path(run)
        if _since(folder / "final" / "manifest.json", self.started):
            return self.runs[run]
        last = _last_step(folder / "train" / "metrics.jsonl", self.started)
        if last and last < self.before[run]:    # its checkpoint was set aside: it trains afresh
            self.before[run] = 0
        return min(max(last, self.before[run]), self.runs[run])

    def line(self, now: float | None = None) -> str:
        now = time.time() if now is None else now
        done = {run: self.steps(run) for run in self.runs}
        steps, total = sum(done.values()), sum(self.runs.values())
        trained = sum(done[run] >= self.runs[run] for run in self.runs)
        elapsed = max(now - self.started, 1e-9)
        rate = (steps - sum(self.before.values())) / elapsed
        eta = _clock((total - steps) / rate) if rate > 0 else "unknown"
        return (f"progress {_clock(elapsed)} | runs {trained}/{len(self.runs)} trained | steps {steps:,}/{total:,} "
                f"({100 * steps / max(total, 1):.1f} %) | training ETA {eta}"
                + (f" at {60 * rate:,.0f} steps/min" if rate > 0 else ""))


def _checkpoint_step(folder: Path) -> int:
    """The step of the newest complete checkpoint in ``folder/ckpt``, the one the run resumes from; 0 if none."""
    from trainer.checkpoint import valid_checkpoints   # once per run at the start (it imports torch)

    complete = valid_checkpoints(folder / "ckpt")
    return int(complete[-1].name.split("-")[1]) if complete else 0


def _since(path: Path, started: float) -> bool:
    try:
        return path.stat().st_mtime >= started
    except OSError:
        return False


def _last_step(path: Path, started: float) -> int:
    """The ``step`` of the last whole row of a metrics log written since ``started`` (0 if none)."""
    if not _since(path, started):
        return 0
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = f.read().splitlines()
    except OSError:
        return 0
    for raw in reversed(lines):
        try:
            return int(json.loads(raw)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Reporter:
    """Prints ``progress.line()`` every ``interval`` seconds from a daemon thread until ``stop()``."""

    def __init__(self, progress: Progress, interval: float, out=sys.stderr):
        self.progress, self.interval, self.out = progress, interval, out
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dag-progress", daemon=True)

    def start(self) -> "Reporter":
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            print(self.progress.line(), file=self.out, flush=True)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join()
            print(self.progress.line(), file=self.out, flush=True)


def planned_runs(dag, run_dir) -> dict[str, int] | None:
    """The training jobs of Snakemake's DAG (``pretrain`` jobs to run): run folder -> steps, through
    ``run_dir(experiment, seed) -> (folder, steps)``; None where this Snakemake's DAG cannot be read."""
    try:
        jobs = [j for j in dag.needrun_jobs(exclude_finished=False) if j.rule.name == "pretrain"]
        return dict(run_dir(j.wildcards.experiment, int(j.wildcards.seed)) for j in jobs)
    except (AttributeError, TypeError, ValueError):
        return None


def start(dag, run_dir, environ=os.environ) -> Reporter | None:
    """A running reporter over the DAG's training jobs, or None when there are none (or the interval is 0)."""
    text = environ.get("REPRO_PROGRESS_INTERVAL", "60")
    try:
        interval = float(text)
    except ValueError:
        raise ReproError(f"REPRO_PROGRESS_INTERVAL={text}: give seconds between progress lines "
                         "(0 turns them off)") from None
    runs = planned_runs(dag, run_dir)
    if not runs or interval <= 0:
        return None
    return Reporter(Progress(runs), interval).start()
