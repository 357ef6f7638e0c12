"""Task suites (``evals/tasks/suites.yaml``) resolved into the tasks of one evaluation run.

Pure data handling, no lm-eval import: the CLI resolves names and rejects bad ones before loading
anything heavy. A name is a suite or a task; several may be given (``conceptlm_zeroshot,conceptlm_ppl``).
The same task at the same n-shot is evaluated once even if two suites list it; the same task at two
n-shots in one run is refused (their metric keys would collide: write two result files).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from evals.harness.errors import HarnessError

SUITES_FILE = Path(__file__).resolve().parents[1] / "tasks" / "suites.yaml"
BASES = ("paper", "harness", "ours")


@dataclass(frozen=True)
class TableMetric:
    """The metric one paper table reads for a task, and why (``basis``: paper | harness | ours)."""
    key: str
    task: str
    metric: str
    basis: str | None = None
    note: str | None = None
    suite: str | None = None


@dataclass
class TaskPlan:
    tasks: dict[str, int] = field(default_factory=dict)          # task -> n-shot, in order
    table_metrics: list[TableMetric] = field(default_factory=list)
    suites: list[str] = field(default_factory=list)
    external: list[dict] = field(default_factory=list)
    offline: bool = True                                            # every suite marked offline
    unavailable: list[str] = field(default_factory=list)            # tasks left out: no local copy

    def only(self, available) -> "TaskPlan":
        """The plan restricted to the tasks in ``available`` (those with a local copy), the others listed in
        ``unavailable``; offline, since every task left reads local files."""
        keep = {task: n for task, n in self.tasks.items() if task in available}
        if not keep:
            import difflib

            close = sorted({m for task in self.tasks for m in difflib.get_close_matches(task, list(available), n=2)})
            raise HarnessError(f"none of the tasks {sorted(self.tasks)} has a local copy in the local-data manifest "
                               f"(it has {', '.join(sorted(available))})" + (f"; did you mean {close}?" if close else
                                                                             "; add one, or run without --local-only"))
        return TaskPlan(keep, [m for m in self.table_metrics if m.task in keep], self.suites, self.external, True,
                        [task for task in self.tasks if task not in keep])

    def by_fewshot(self) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = {}
        for task, n in self.tasks.items():
            groups.setdefault(n, []).append(task)
        return groups


def load_suites(path: Path = SUITES_FILE) -> dict[str, dict]:
    try:
        data = yaml.safe_load(Path(path).read_text())
        suites = data["suites"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as e:
        raise HarnessError(f"{path}: unreadable suites file ({e.__class__.__name__}: {e})") from e
    for name, suite in suites.items():
        for i, entry in enumerate(suite.get("tasks", [])):
            unknown = set(entry) - {"task", "num_fewshot", "metric", "key", "basis", "note"}
            if "task" not in entry or unknown:
                raise HarnessError(f"{path}: suites.{name}.tasks[{i}] needs 'task'; unknown keys {sorted(unknown)}")
            if entry.get("basis") not in (None, *BASES):
                raise HarnessError(f"{path}: suites.{name}.tasks[{i}].basis must be one of {BASES}")
    return suites


def split_names(spec: str | list[str]) -> list[str]:
    names = spec.split(",") if isinstance(spec, str) else [n for s in spec for n in s.split(",")]
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise HarnessError("no tasks given; pass --tasks SUITE_OR_TASK[,...]")
    return names


def _listed(task: str, suites: dict[str, dict]) -> dict:
    """A task given by name: the entry of the first suite that lists it with a table metric (so its result
    has the tables' keys), else the bare task."""
    for suite in suites.values():
        for entry in suite.get("tasks", []):
            if entry["task"] == task and entry.get("metric"):
                return {k: v for k, v in entry.items() if k != "num_fewshot"}
    return {"task": task}


def resolve(names: list[str], suites: dict[str, dict] | None = None, num_fewshot: int | None = None) -> TaskPlan:
    """The plan for ``names`` (suites expanded). ``num_fewshot`` overrides every task's n-shot."""
    suites = load_suites() if suites is None else suites
    plan = TaskPlan()
    for name in names:
        if name in suites:
            suite = suites[name]
            plan.suites.append(name)
            plan.external += suite.get("external", [])
            plan.offline &= bool(suite.get("offline", False))
            entries = suite["tasks"]
        else:
            plan.offline = False  # a bare task name may need the hub (the plan says when it does not)
            entries = [_listed(name, suites)]
        for entry in entries:
            task = entry["task"]
            shots = int(entry.get("num_fewshot", 0) if num_fewshot is None else num_fewshot)
            if plan.tasks.get(task, shots) != shots:
                raise HarnessError(f"task {task} is asked at {plan.tasks[task]}-shot and {shots}-shot in one run; "
                                   "evaluate the suites into separate result files")
            plan.tasks.setdefault(task, shots)
            if entry.get("metric"):
                key = entry.get("key") or f"{task}/{entry['metric']}"
                if all(m.key != key for m in plan.table_metrics):
                    plan.table_metrics.append(TableMetric(key, task, entry["metric"], entry.get("basis"),
                                                          entry.get("note"), name if name in suites else None))
    return plan
