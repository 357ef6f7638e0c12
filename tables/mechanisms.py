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

from .grid import markdown_grid
from .results import Metric, Reproduced, result_files
from .validation import DataError

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
            return abs(self.value) > self.threshold
        return self.value > self.threshold

    @property
    def text(self) -> str:
        """"swap 0.0001 < 0.012 (3 × seed sd, n=3)"."""
        if self.value is None:
            return f"{self.name}: no value"
        shown = f"|{self.value:.3g}|" if self.kind == "spread" else f"{self.value:.3g}"  # the sign kept
        relation = ">" if self.passed else "<="
        return f"{self.name} {shown} {relation} {self.threshold:.3g} ({self.basis})"


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
    def checked(self) -> bool:
        """Some gate check was run (a concept model without a ``mechanisms`` result is not checked)."""
        return bool(self.gates)

    @property
    def exercised(self) -> bool:
        return self.checked and all(check.passed for check in self.gates)

    @property
    def failed(self) -> list[CheckVerdict]:
        return [check for check in self.gates if not check.passed]

    @property
    def reason(self) -> str:
        """Why the mechanism is not shown to be exercised ("" when it is)."""
        if not self.checked:
            return "mechanism not checked: no mechanisms evaluation with a gate check in this profile"
        return "mechanism not exercised: " + "; ".join(check.text for check in self.failed) if self.failed else ""


def _declared_checks(root: Path, experiment: str) -> list[dict]:
    """The checks every seed's result declares (by name, in order); a check without a name or key is an error."""
    declared: dict[str, dict] = {}
    for path in sorted(root.glob(f"{experiment}/seed*/eval/{EVAL}.json")):
        details = json.loads(path.read_text()).get("details") or {}
        for position, check in enumerate(details.get("checks") or []):
            if not isinstance(check, dict) or not {"name", "key"} <= check.keys():
                raise DataError(path, None, f"details.checks.{position}", "a check needs a name and a key; re-run "
                                "its mechanisms evaluation")
            declared.setdefault(check["name"], check)
    return list(declared.values())


CONCEPT_FAMILIES = ("conceptlm", "contextlm", "dlcm", "ncm")


def concept_experiments(root: Path) -> set[str]:
    """Experiments of the runs to read whose model has a concept path (their recorded ``model.arch``)."""
    found = set()
    for path in result_files(root):
        if path.parts[-4] in found:
            continue
        try:
            arch = str(((json.loads(path.read_text()).get("config") or {}).get("model") or {}).get("arch", ""))
        except (json.JSONDecodeError, AttributeError):
            continue  # the tables' own reading names a malformed file
        if any(family in arch for family in CONCEPT_FAMILIES):
            found.add(path.parts[-4])
    return found


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
        elif spread is not None and SPREAD_FACTOR * spread > noise_floor:
            threshold, basis = SPREAD_FACTOR * spread, f"{SPREAD_FACTOR:g} × seed sd of {INTACT}, n={n}"
        else:  # one seed, or seeds that agree: the profile's noise floor
            threshold, basis = noise_floor, f"the profile's noise floor, n={n}"
        verdicts.append(CheckVerdict(check["name"], check["key"], check.get("kind", "spread"), bool(check.get("gate")),
                                     check.get("what", ""), value, threshold, basis, found.n if found else 0))
    return Mechanism(experiment, tuple(verdicts), spread, n)


def load_mechanisms(root: Path, results: dict[Metric, Reproduced],
                    noise_floor: float | None = None) -> dict[str, Mechanism]:
    """experiment -> its judged mechanism checks, for every experiment with a ``mechanisms`` result and every
    concept-model experiment without one (not checked: its verdicts are not shown as the mechanism's)."""
    floor = NOISE_FLOOR if noise_floor is None else noise_floor
    experiments = sorted({experiment for experiment, eval_name, _ in results if eval_name == EVAL}
                         | concept_experiments(root))
    return {experiment: judge(experiment, _declared_checks(root, experiment), results, floor)
            for experiment in experiments}


def unexercised(mechanisms: dict[str, Mechanism], experiments: tuple[str, ...]) -> str:
    """Why any of ``experiments`` is not shown to exercise its mechanism ("" when all are, or none is a
    concept model)."""
    reasons = [f"{experiment}: {mechanisms[experiment].reason}" for experiment in dict.fromkeys(experiments)
               if experiment in mechanisms and not mechanisms[experiment].exercised]
    return "; ".join(reasons)



def tally(mechanisms: dict[str, Mechanism]) -> str:
    """"53 concept-model experiments: 15 ran the checks, 3 exercised their mechanism"."""
    checked = [m for m in mechanisms.values() if m.checked]
    return (f"{len(mechanisms)} concept-model experiments: {len(checked)} ran the mechanism checks, "
            f"{sum(m.exercised for m in checked)} exercised their mechanism.")


HEADER = ["Experiment", "Check", "Gate", "Value (mean)", "Must reach", "Basis", "Passed", "What it does"]


def mechanism_rows(experiments: dict[str, dict]) -> list[list[str]]:
    """One row per check of every experiment of ``mechanisms_json(...)["experiments"]``: the table
    ``mechanisms.md`` and the report show."""
    return [[experiment, check["name"], "gate" if check["gate"] else "",
             "—" if check["value"] is None else f"{check['value']:.4g}",
             ("|effect| > " if check["kind"] == "spread" else "> ") + f"{check['threshold']:.3g}", check["basis"],
             {True: "yes", False: "no", None: "—"}[check["passed"]], check["what"]]
            for experiment, entry in experiments.items() for check in entry["checks"]]


def mechanisms_json(mechanisms: dict[str, Mechanism]) -> dict:
    return {"rule": RULE, "experiments": {
        experiment: {"exercised": mechanism.exercised, "checked": mechanism.checked, "reason": mechanism.reason,
                     "n": mechanism.n,
                     "spread": mechanism.spread,
                     "checks": [{"name": c.name, "key": c.key, "kind": c.kind, "gate": c.gate, "value": c.value,
                                 "threshold": c.threshold, "basis": c.basis, "passed": c.passed, "what": c.what}
                                for c in mechanism.checks]}
        for experiment, mechanism in mechanisms.items()}}


def mechanisms_markdown(mechanisms: dict[str, Mechanism]) -> str:
    lines = ["# Mechanism checks: was each concept mechanism exercised?", "", RULE, "", tally(mechanisms), ""]
    if mechanisms:
        lines += [markdown_grid(HEADER, mechanism_rows(mechanisms_json(mechanisms)["experiments"])), ""]
    return "\n".join(lines)


RULE = (f"A spread check passes when its mean effect over seeds is at least {SPREAD_FACTOR:g} × the seed standard "
        f"deviation of the run's intact loss ({INTACT}; with one seed, the profile's noise floor); a floor check when "
        "its value exceeds the floor. An experiment is exercised when every gate check passes; verdicts on an arm "
        "that is not are shown as 'not exercised' (docs/verdicts.md).")
