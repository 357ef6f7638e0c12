"""Was a concept mechanism exercised?  The verdict on each experiment's mechanism checks.

The ``mechanisms`` evaluation (``evals/mechanisms.py``, ``evals/mechanisms_ncm.py``) writes, per run, the
effect of interventions on a concept model (``mech/<check>``) and the list of its checks
(``details.checks``: name, key, kind, gate, what).  Here they are judged over the experiment's seeds:

- a ``spread`` check passes when the mean effect is at least ``SPREAD_FACTOR`` times the seed standard
  deviation of the same runs' main metric (``mech/intact_nll``): an intervention whose effect is below
  the seed-to-seed noise shows nothing at work.  With one seed there is no spread: the effect is read
  against the profile's declared ``noise_floor`` (nats per token, default ``NOISE_FLOOR``);
- a ``floor`` check passes when the mean value exceeds its stated floor (an R² above 0, a reconstruction
  above the most-frequent-token share).

An experiment's mechanism is *exercised* when every gate check passes.  A verdict on an arm whose
mechanism is not exercised is shown as "not exercised" and counted apart (``tables/ordering.py``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from .results import Metric, Reproduced, first_seed_result

EVAL = "mechanisms"
INTACT = "mech/intact_nll"
SPREAD_FACTOR = 3.0
NOISE_FLOOR = 0.01


@dataclass(frozen=True)
class CheckVerdict:
    """One check of one experiment over its seeds."""

    name: str
    key: str
    kind: str             # spread | floor
    gate: bool
    what: str
    value: float | None   # mean over seeds of ``key``
    threshold: float      # what the value must reach: 3 x seed sd (or the noise floor), or the floor
    basis: str            # "3 × seed sd of mech/intact_nll (n=3)", "noise floor (n=1)", "floor"
    n: int

    @property
    def passed(self) -> bool | None:
        if self.value is None:
            return None
        if self.kind == "spread":
            return abs(self.value) >= self.threshold
        return self.value > self.threshold

    @property
    def text(self) -> str:
        """"swap 0.0001 < 0.012 (3 × seed sd, n=3)"."""
        if self.value is None:
            return f"{self.name}: no value"
        shown = abs(self.value) if self.kind == "spread" else self.value
        relation = (">=" if self.kind == "spread" else ">") if self.passed else "<" if self.kind == "spread" else "<="
        return f"{self.name} {shown:.3g} {relation} {self.threshold:.3g} ({self.basis})"


@dataclass(frozen=True)
class Mechanism:
    """Every check of one experiment; ``exercised`` when every gate check passed."""

    experiment: str
    checks: tuple[CheckVerdict, ...]
    spread: float | None  # seed sd of the main metric (None: one seed)
    n: int

    @property
    def gates(self) -> list[CheckVerdict]:
        return [check for check in self.checks if check.gate]

    @property
    def exercised(self) -> bool:
        return all(check.passed for check in self.gates)

    @property
    def failed(self) -> list[CheckVerdict]:
        return [check for check in self.gates if not check.passed]

    @property
    def reason(self) -> str:
        """Why the mechanism is not exercised ("" when it is)."""
        return "mechanism not exercised: " + "; ".join(check.text for check in self.failed) if self.failed else ""


def _declared_checks(root: Path, experiment: str) -> list[dict]:
    path = first_seed_result(root, experiment, EVAL)
    if path is None:
        return []
    details = json.loads(path.read_text()).get("details") or {}
    return [check for check in details.get("checks") or [] if isinstance(check, dict)]


def judge(experiment: str, declared: list[dict], results: dict[Metric, Reproduced],
          noise_floor: float = NOISE_FLOOR) -> Mechanism:
    """The checks ``declared`` (a result's ``details.checks``) judged on the experiment's seeds."""
    intact = results.get((experiment, EVAL, INTACT))
    spread = intact.std if intact is not None and intact.n > 1 else None
    n = intact.n if intact is not None else 0
    verdicts = []
    for check in declared:
        found = results.get((experiment, EVAL, check["key"]))
        value = fmean(found.per_seed.values()) if found else None
        if check.get("kind") == "floor":
            threshold, basis = float(check["floor"]), "floor"
        elif spread is not None:
            threshold, basis = SPREAD_FACTOR * spread, f"{SPREAD_FACTOR:g} × seed sd of {INTACT}, n={n}"
        else:
            threshold, basis = noise_floor, f"the profile's noise floor, n={n}"
        verdicts.append(CheckVerdict(check["name"], check["key"], check.get("kind", "spread"), bool(check.get("gate")),
                                     check.get("what", ""), value, threshold, basis, found.n if found else 0))
    return Mechanism(experiment, tuple(verdicts), spread, n)


def load_mechanisms(root: Path, results: dict[Metric, Reproduced], noise_floor: float | None = None) -> dict[str, Mechanism]:
    """experiment -> its judged mechanism checks, for every experiment with a ``mechanisms`` result."""
    floor = NOISE_FLOOR if noise_floor is None else noise_floor
    experiments = sorted({experiment for experiment, eval_name, _ in results if eval_name == EVAL})
    return {experiment: judge(experiment, _declared_checks(root, experiment), results, floor)
            for experiment in experiments}


def unexercised(mechanisms: dict[str, Mechanism], experiments: tuple[str, ...]) -> str:
    """Why any of ``experiments`` did not exercise its mechanism ("" when all did, or none was checked)."""
    reasons = [f"{experiment}: {mechanisms[experiment].reason}" for experiment in dict.fromkeys(experiments)
               if experiment in mechanisms and not mechanisms[experiment].exercised]
    return "; ".join(reasons)



HEADER = ["Experiment", "Check", "Gate", "Value (mean)", "Must reach", "Basis", "Passed", "What it does"]


def mechanism_rows(experiments: dict[str, dict]) -> list[list[str]]:
    """One row per check of every experiment of ``mechanisms_json(...)["experiments"]``: the table
    ``mechanisms.md`` and the report show."""
    return [[experiment, check["name"], "gate" if check["gate"] else "",
             "—" if check["value"] is None else f"{check['value']:.4g}",
             ("|effect| ≥ " if check["kind"] == "spread" else "> ") + f"{check['threshold']:.3g}", check["basis"],
             {True: "yes", False: "no", None: "—"}[check["passed"]], check["what"]]
            for experiment, entry in experiments.items() for check in entry["checks"]]


def mechanisms_json(mechanisms: dict[str, Mechanism]) -> dict:
    return {"rule": RULE, "experiments": {
        experiment: {"exercised": mechanism.exercised, "reason": mechanism.reason, "n": mechanism.n,
                     "spread": mechanism.spread,
                     "checks": [{"name": c.name, "key": c.key, "kind": c.kind, "gate": c.gate, "value": c.value,
                                 "threshold": c.threshold, "basis": c.basis, "passed": c.passed, "what": c.what}
                                for c in mechanism.checks]}
        for experiment, mechanism in mechanisms.items()}}


def mechanisms_markdown(mechanisms: dict[str, Mechanism]) -> str:
    from .render import markdown_grid

    exercised = sum(mechanism.exercised for mechanism in mechanisms.values())
    lines = ["# Mechanism checks: was each concept mechanism exercised?", "", RULE, "",
             f"{exercised} of {len(mechanisms)} experiments exercised their mechanism.", ""]
    if mechanisms:
        lines += [markdown_grid(HEADER, mechanism_rows(mechanisms_json(mechanisms)["experiments"])), ""]
    return "\n".join(lines)


RULE = (f"A spread check passes when its mean effect over seeds is at least {SPREAD_FACTOR:g} × the seed standard "
        f"deviation of the run's intact loss ({INTACT}; with one seed, the profile's noise floor); a floor check when "
        "its value exceeds the floor. An experiment is exercised when every gate check passes; verdicts on an arm "
        "that is not are shown as 'not exercised' (docs/verdicts.md).")
