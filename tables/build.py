"""Assemble every table: reported | recomputed | reproduced | delta | verdict.

The builder loads specs and reported data, runs every check and claim against
the printed numbers, merges reproduced results (mean +- std over seeds, n)
beside them, derives reproduced aggregates with the paper's own formulas, and
compares orderings column by column.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .checks import Check, Finding, HandFinding, _resolver, chain, evaluate, load_claims, table_checks
from .claims import ClaimJudge, ClaimVerdict, claim_id
from .expressions import Ref
from .mechanisms import Mechanism, load_mechanisms, unexercised
from .ordering import OUTCOMES, PROXY, ColumnOrder, compare_order
from .reported import REPORTED, Paper, ReportedCell, load_reported
from .results import (SYNTHETIC, Metric, Reproduced, check_fresh, common_orders, load_results, nonfinite_metrics,
                      profile_facts, profile_runs)
from .specs import NO_CORPUS, SPECS, ResultRef, TableSpec, load_specs


# why a mapped cell has no value (Build.absent)
NOT_RUN = "not run in this profile"
NOT_MEASURED = "not measured by this profile's runs"
RESULTS_MISSING = "not reproduced: results missing (re-run snakemake)"


@dataclass
class CellView:
    """Everything known about one cell."""

    reported: ReportedCell | None
    findings: list[Finding]
    reproduced: Reproduced | None
    mapped: bool
    verdict: str = ""
    analogue: str = ""   # why ours is not the paper's quantity on the paper's data (empty: it is)
    flag: str = ""       # why ours lies outside the column's meaningful range (empty: it does not)
    absent: str = "not reproduced"  # a mapped cell without a value: why (``_absent``)

    @property
    def delta(self) -> float | None:
        if self.reproduced is None or self.reported is None or self.reported.printed is None:
            return None
        return self.reproduced.mean - self.reported.printed.value


@dataclass
class TableView:
    """One table, ready to render."""

    spec: TableSpec
    cells: dict[tuple[str, str], CellView]
    orders: dict[str, ColumnOrder]
    caption: str = ""    # the spec's, with its synthetic-world text where the profile's corpus is that world


@dataclass
class Build:
    """The outcome of one build: tables in report order, audit findings, hand findings."""

    specs: dict[str, dict[str, TableSpec]]
    papers: dict[str, Paper]
    tables: list[TableView]
    findings: list[Finding]
    hand: list[HandFinding] = field(default_factory=list)
    # the profile's scale and main corpus (tables/results.py::profile_facts)
    profile: dict = field(default_factory=dict)
    mechanisms: dict[str, Mechanism] = field(default_factory=dict)  # experiment -> its judged mechanism checks
    claims: list[ClaimVerdict] = field(default_factory=list)  # the papers' claims judged on our runs

    def paper_order(self) -> list[str]:
        """Our own tables (no reported numbers) first, then the papers in their declared order."""
        return [paper for paper in self.specs if paper not in self.papers] + list(self.papers)


class _Reproducer:
    """Reproduced value of any cell: a result metric, or the paper's formula applied per seed."""

    def __init__(self, specs: dict[str, TableSpec], results: dict[Metric, Reproduced], checks: list[Check],
                 current: dict[str, list[str] | None] | None = None, nonfinite: dict[Metric, list[int]] | None = None,
                 corpus: str | None = None):
        self.specs, self.results, self.current = specs, results, current or {}
        self.corpus = corpus  # the profile's main corpus (its runs' corpus unless they name other data)
        self.measured = {(experiment, eval_name) for experiment, eval_name, _ in results}
        self.nonfinite = nonfinite or {}  # seeds whose metric diverged (NaN, inf)
        self.formulas: dict[Ref, list[Check]] = {}
        for check in checks:
            self.formulas.setdefault(check.target, []).append(check)
        self.memo: dict[Ref, tuple[bool, Reproduced | None]] = {}

    def get(self, ref: Ref) -> tuple[bool, Reproduced | None]:
        """(mapped, reproduced): mapped when some result or formula could produce the cell."""
        if ref not in self.memo:
            self.memo[ref] = (False, None)  # guards against formula cycles
            self.memo[ref] = self._compute(ref)
        return self.memo[ref]

    def flag(self, spec: TableSpec, row: str, column: str, ours: Reproduced | None) -> str:
        """Why a cell's value means nothing: seeds that diverged, a value outside the column's range."""
        return "; ".join(filter(None, [diverged(spec, row, column, self.nonfinite),
                                       out_of_range(spec, row, column, ours, self.results)]))

    def absent(self, ref: Ref) -> str:
        """Why a mapped cell has no value: this profile does not run it, runs it without measuring it (a metric
        that does not apply to the row), or ran it and its results are missing."""
        spec = self.specs[ref[0]]
        ran = [(experiment, result.eval) for result in self.result_refs(ref) for experiment in result.experiments
               if (self.corpus is None or spec.admits(ref[1], ref[2], (self.corpus,), experiment))
               and experiment in self.current]
        if not ran:
            return NOT_RUN
        # the experiment runs here: without that evaluation (the metric does not apply), or it ran and is missing
        run = [(e, name) for e, name in ran if self.current[e] is None or name in self.current[e]]
        if not run or any(pair in self.measured for pair in run):
            return NOT_MEASURED
        return RESULTS_MISSING

    def result_refs(self, ref: Ref, depth: int = 3) -> list[ResultRef]:
        """The result references that fill a cell: its own, or those of the inputs of its formulas."""
        direct = self.specs[ref[0]].result_ref(ref[1], ref[2])
        if direct or depth == 0:
            return [direct] if direct else []
        return [found for check in self.formulas.get(ref, []) for input_ref in check.formula.refs
                for found in self.result_refs(input_ref, depth - 1)]

    def _compute(self, ref: Ref) -> tuple[bool, Reproduced | None]:
        spec = self.specs[ref[0]]
        result_ref = spec.result_ref(ref[1], ref[2])
        if result_ref:
            found = next((self.results[metric] for metric in result_ref.metrics if metric in self.results
                          and spec.admits(ref[1], ref[2], self.results[metric].corpora, metric[0])), None)
            scaled = found and {seed: value * result_ref.scale for seed, value in found.per_seed.items()}
            return True, (Reproduced(scaled, found.experiments, found.corpora, found.caveats, found.orders)
                          if scaled else None)
        mapped = False
        for check in self.formulas.get(ref, []):
            inputs = [self.get(input_ref) for input_ref in check.formula.refs]
            if not inputs or not all(input_mapped for input_mapped, _ in inputs):
                continue
            mapped = True
            if all(reproduced for _, reproduced in inputs):
                seeds = set.intersection(*(set(reproduced.per_seed) for _, reproduced in inputs))
                per_seed = {seed: float(check.formula.evaluate(
                    {input_ref: reproduced.per_seed[seed]
                     for input_ref, (_, reproduced) in zip(check.formula.refs, inputs)}))
                    for seed in sorted(seeds)}
                if per_seed:
                    union = lambda field: tuple(dict.fromkeys(  # noqa: E731 (called in this iteration)
                        item for _, reproduced in inputs for item in getattr(reproduced, field)))  # noqa: B023
                    return True, Reproduced(per_seed, union("experiments"), union("corpora"), union("caveats"),
                                            common_orders(per_seed, [reproduced for _, reproduced in inputs]))
        return mapped, None


def _distances(spec: TableSpec, pairs: dict, target: float | str) -> dict:
    """A "closer to" column (the paper's own direction: entropy closer to the data's, a realised ratio closer
    to R) as distances |value - target|, paper and ours alike; the target row itself leaves the pairs.
    The target is a number, or the row of that label in the row's group (its per-seed values: ours per seed)."""
    out = {}
    for row_id, (printed, ours) in pairs.items():
        row = spec.row_by_id[row_id]
        if isinstance(target, str):
            if row.label == target:
                continue
            match = next((r.id for r in spec.rows if r.group == row.group and r.label == target and r.id in pairs),
                         None)
            if match is None:
                continue
            paper_target, ours_target = pairs[match][0], pairs[match][1]
            per_seed = {seed: abs(value - ours_target.per_seed.get(seed, ours_target.mean))
                        for seed, value in ours.per_seed.items()}
        else:
            paper_target = float(target)
            per_seed = {seed: abs(value - paper_target) for seed, value in ours.per_seed.items()}
        out[row_id] = (abs(printed - paper_target), dataclasses.replace(ours, per_seed=per_seed))
    return out


def diverged(spec: TableSpec, row: str, column: str, nonfinite: dict) -> str:
    """The seeds whose value of this cell's metric is NaN or infinite ("" when none)."""
    ref = spec.result_ref(row, column)
    seeds = sorted({seed for metric in (ref.metrics if ref else ()) for seed in nonfinite.get(metric, ())})
    return f"diverged: non-finite at seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}" if seeds else ""


def out_of_range(spec: TableSpec, row: str, column: str, ours: Reproduced | None, results: dict) -> str:
    """Why ``ours`` means nothing in this column (a Gen. PPL above a uniform draw's, an accuracy at chance);
    empty when it lies in the column's range or the column declares none."""
    bounds = spec.column_by_id[column].range
    if not bounds or ours is None:
        return ""
    label, value = spec.column_by_id[column].label, ours.mean
    if "min" in bounds and value <= bounds["min"]:
        return f"{label} {value:.4g} at or below {bounds['min']:g}: {bounds['why']}"
    top = bounds.get("max")
    if isinstance(top, str):  # a metric of the cell's own evaluation (the judge's vocabulary)
        ref = spec.result_ref(row, column)
        found = [results[key] for e in (ref.experiments if ref else ()) if (key := (e, ref.eval, top)) in results]
        top = max(found[0].per_seed.values()) if found else None
    if top is not None and value > top:
        return f"{label} {value:.4g} above {top:.4g}: {bounds['why']}"
    return ""


def analogue_reason(paper_corpus: str | None, ours: Reproduced, scale: str) -> str:
    """Why a reproduced value is an analogue of the paper's (empty when it is the paper's quantity on the
    paper's data at the paper's scale): another training corpus, reduced scale, evaluation data that is not
    the canonical set."""
    if paper_corpus == NO_CORPUS:
        return "; ".join(ours.caveats)
    trained = ", ".join(ours.corpora) or "an unrecorded corpus"
    reasons = []
    if paper_corpus is None:
        reasons.append(f"trained on {trained}; the table's spec names no corpus of the paper")
    elif set(ours.corpora) != {paper_corpus}:
        reasons.append(f"trained on {trained}, the paper on {paper_corpus}")
    if scale != "paper":
        reasons.append("reduced scale")
    return "; ".join(reasons + list(ours.caveats))


def order_text(order: ColumnOrder, row: str, spec: TableSpec) -> str:
    """A row's pair verdicts in one column: "order agrees vs PM; differs vs Base; inconclusive vs ContextLM (n=1)"."""
    pairs = [pair for pair in order.pairs if row in (pair.a, pair.b)]
    parts = []
    for outcome in OUTCOMES:
        others = [spec.row_by_id[pair.b if pair.a == row else pair.a].label
                  + (f" ({pair.reason})" if pair.reason else "")
                  for pair in pairs if pair.outcome == outcome]
        if others:
            parts.append(f"{outcome} vs {', '.join(others)}")
    text = "order " + ("; ".join(parts) if parts else "not judged (tied in the paper)")
    return PROXY + text if order.proxy else text


def _cell_verdict(view: CellView, order: ColumnOrder | None, row: str, column: str, spec: TableSpec) -> str:
    judged = order is not None and order.verdict != "insufficient" and row in order.rows
    if view.reproduced is None:
        missing = view.absent if view.mapped else ""
        if judged and order.proxy:  # the paper's column judged through another column of ours
            return "; ".join(filter(None, [missing, order_text(order, row, spec)]))
        return missing
    if spec.column_by_id[column].fixed:
        return "fixed by the design (shown, not judged)"
    flag = [f"flagged: {view.flag}"] if view.flag else []
    if not view.analogue:
        return "; ".join(flag + [order_text(order, row, spec) if judged else "reproduced"])
    return "; ".join(["analogue", *flag] + ([order_text(order, row, spec)] if judged else []))  # why: ``analogue``


def _column_order(spec: TableSpec, cells: dict, reported_column: str, reproduced_column: str,
                  mechanisms: dict[str, Mechanism]) -> ColumnOrder:
    """Ordering of the rows' printed values in one column against their reproduced values in another
    (the same column, or the column's ``order_proxy``), pair by pair within each row group (a size of
    Table 1; the whole table when rows have no group)."""
    pairs, idle = {}, {}
    for row in spec.rows:
        printed, ours = cells[row.id, reported_column].reported, cells[row.id, reproduced_column].reproduced
        if ours is not None and printed is not None and printed.printed is not None:
            pairs[row.id] = (printed.printed.value, ours)
            if why := cells[row.id, reproduced_column].flag or unexercised(mechanisms, ours.experiments):
                idle[row.id] = why
    target = spec.column_by_id[reported_column].closer_to
    if target is not None:
        pairs = _distances(spec, pairs, target)
    proxy = None if reproduced_column == reported_column else reproduced_column
    groups = {row.id: row.group for row in spec.rows} if any(row.group for row in spec.rows) else None
    return compare_order(reported_column, pairs, proxy, groups, idle)


def _table_view(spec: TableSpec, paper: Paper | None, findings: dict[Ref, list[Finding]], reproducer: _Reproducer,
                scale: str, synthetic: bool, mechanisms: dict[str, Mechanism]) -> TableView:
    cells: dict[tuple[str, str], CellView] = {}
    for row in spec.rows:
        for column in spec.columns:
            ref = (spec.table, row.id, column.id)
            mapped, reproduced = reproducer.get(ref) if spec.cell_type(row.id, column.id) == "number" else (False, None)
            analogue = (analogue_reason(spec.paper_corpus(row.id, column.id), reproduced, scale)
                        if reproduced and paper else "")  # our own tables have no paper quantity to stand in for
            cells[row.id, column.id] = CellView(paper.cells.get(ref) if paper else None, findings.get(ref, []),
                                                reproduced, mapped, analogue=analogue,
                                                flag=reproducer.flag(spec, row.id, column.id, reproduced),
                                                absent=(diverged(spec, row.id, column.id, reproducer.nonfinite)
                                                        or reproducer.absent(ref)) if mapped and not reproduced else "")
    orders = {column.id: _column_order(spec, cells, column.id, column.id, mechanisms) for column in spec.columns
              if not column.fixed}
    for column in spec.columns:  # the paper's column against one of ours, where ours has no value of its own
        if column.order_proxy and column.id in orders and orders[column.id].verdict == "insufficient":
            orders[column.id] = _column_order(spec, cells, column.id, column.order_proxy, mechanisms)
    for (row, column), view in cells.items():
        view.verdict = _cell_verdict(view, orders.get(column), row, column, spec)
    caption = " ".join(filter(None, [spec.caption_synthetic if synthetic else "", spec.caption]))
    return TableView(spec, cells, orders, caption)


def _for_corpus(spec: TableSpec, synthetic: bool) -> TableSpec:
    """The spec without its synthetic-world columns (the oracle, the world's tasks) where the corpus is real."""
    if synthetic or not any(column.synthetic_only for column in spec.columns):
        return spec
    return dataclasses.replace(spec, columns=[column for column in spec.columns if not column.synthetic_only])


def build(results_root: Path, specs_root: Path = SPECS, reported_root: Path = REPORTED,
          expected: dict[str, dict] | None = None, allow_stale: bool = False) -> Build:
    """Load everything, check everything, merge reproduced results. ``expected``: each run's config hash as
    the profile resolves it now; results of another config are refused (``allow_stale``: marked stale)."""
    stale = check_fresh(results_root, expected, allow_stale)
    specs = load_specs(specs_root)
    papers = load_reported(specs, reported_root)
    results = load_results(results_root)
    if stale:  # shown, each cell of those runs saying so
        results = {metric: dataclasses.replace(value, caveats=value.caveats + tuple(
                       f"stale: {text}" for run, text in stale.items() if run.split("/")[0] == metric[0]))
                   for metric, value in results.items()}
    facts = profile_facts(results_root)
    mechanisms = load_mechanisms(results_root, results, facts.get("noise_floor"))
    nonfinite = nonfinite_metrics(results_root)
    current = profile_runs(results_root)
    outcome = Build(specs, papers, [], [], profile=facts, mechanisms=mechanisms)
    for paper_id in outcome.paper_order():
        paper_specs, paper = specs[paper_id], papers.get(paper_id)
        structural = table_checks(paper_specs, paper)
        claims, hand = load_claims(paper_specs, paper) if paper else ([], [])
        numbers = paper.numbers() if paper else {}
        dashes = {ref for ref, cell in paper.cells.items() if cell.printed is None} if paper else set()
        findings = [evaluate(check, numbers) for check in structural + claims
                    if check.printed is not None or check.target is None]
        findings = [finding for finding in findings  # a rule over cells printed as '-' does not apply
                    if not (finding.missing and set(finding.missing) <= dashes)]
        chain(findings, numbers)
        by_target: dict[Ref, list[Finding]] = {}
        for finding in findings:
            by_target.setdefault(finding.check.target, []).append(finding)
        reproducer = _Reproducer(paper_specs, results, structural, current, nonfinite, facts.get("corpus"))
        synthetic = facts["corpus"] in (None, SYNTHETIC)  # a hand-made folder without an index: as the default
        outcome.tables += [_table_view(_for_corpus(spec, synthetic), paper, by_target, reproducer, facts["scale"],
                                       synthetic, mechanisms) for spec in paper_specs.values()]
        outcome.findings += findings
        outcome.hand += hand
        if paper:
            judge = ClaimJudge(paper_specs, paper, reproducer.get, reproducer.result_refs,
                               _resolver(paper_specs, "", "", "", "cell"), mechanisms, facts["scale"],
                               lambda ref, ours: reproducer.flag(paper_specs[ref[0]], ref[1], ref[2], ours))  # noqa: B023
            outcome.claims += [verdict for check in claims if (verdict := judge.judge(check, claim_id(check)))]
    return outcome
