"""Assemble every table: reported | recomputed | reproduced | delta | verdict (issue 3, "builder").

The builder loads specs and reported data, runs every check and claim against
the printed numbers, merges reproduced results (mean +- std over seeds, n)
beside them, derives reproduced aggregates with the paper's own formulas, and
compares orderings column by column.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from .checks import Check, Finding, HandFinding, chain, evaluate, load_claims, table_checks
from .expressions import Ref
from .ordering import OUTCOMES, PROXY, ColumnOrder, compare_order
from .reported import REPORTED, Paper, ReportedCell, load_reported
from .results import SYNTHETIC, Metric, Reproduced, load_results, profile_facts
from .specs import NO_CORPUS, SPECS, TableSpec, load_specs


@dataclass
class CellView:
    """Everything known about one cell."""

    reported: ReportedCell | None
    findings: list[Finding]
    reproduced: Reproduced | None
    mapped: bool
    verdict: str = ""
    analogue: str = ""   # why ours is not the paper's quantity on the paper's data (empty: it is)

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
    profile: dict = field(default_factory=dict)   # the profile's scale and main corpus (tables/results.py::profile_facts)

    def paper_order(self) -> list[str]:
        """Our own tables (no reported numbers) first, then the papers in their declared order."""
        return [paper for paper in self.specs if paper not in self.papers] + list(self.papers)


class _Reproducer:
    """Reproduced value of any cell: a result metric, or the paper's formula applied per seed."""

    def __init__(self, specs: dict[str, TableSpec], results: dict[Metric, Reproduced], checks: list[Check]):
        self.specs, self.results = specs, results
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

    def _compute(self, ref: Ref) -> tuple[bool, Reproduced | None]:
        result_ref = self.specs[ref[0]].result_ref(ref[1], ref[2])
        if result_ref:
            found = next((self.results[metric] for metric in result_ref.metrics if metric in self.results), None)
            scaled = found and {seed: value * result_ref.scale for seed, value in found.per_seed.items()}
            return True, Reproduced(scaled, found.experiments, found.corpora, found.caveats, found.orders) if scaled else None
        mapped = False
        for check in self.formulas.get(ref, []):
            inputs = [self.get(input_ref) for input_ref in check.formula.refs]
            if not inputs or not all(input_mapped for input_mapped, _ in inputs):
                continue
            mapped = True
            if all(reproduced for _, reproduced in inputs):
                seeds = set.intersection(*(set(reproduced.per_seed) for _, reproduced in inputs))
                per_seed = {seed: float(check.formula.evaluate(
                    {input_ref: reproduced.per_seed[seed] for input_ref, (_, reproduced) in zip(check.formula.refs, inputs)}))
                    for seed in sorted(seeds)}
                if per_seed:
                    union = lambda field: tuple(dict.fromkeys(  # noqa: E731
                        item for _, reproduced in inputs for item in getattr(reproduced, field)))
                    return True, Reproduced(per_seed, union("experiments"), union("corpora"), union("caveats"),
                                            _common_orders(per_seed, [reproduced for _, reproduced in inputs]))
        return mapped, None


def _common_orders(per_seed: dict[int, float], inputs: list[Reproduced]) -> dict[int, str]:
    """seed -> data order of a value computed from several inputs, for the seeds where every input read the
    same data in the same order (a formula over one run's metrics; across runs, only if they share it)."""
    out = {}
    for seed in per_seed:
        signatures = {reproduced.orders.get(seed, "") for reproduced in inputs}
        if len(signatures) == 1 and "" not in signatures:
            out[seed] = signatures.pop()
    return out


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
        others = [spec.row_by_id[pair.b if pair.a == row else pair.a].label + (f" ({pair.reason})" if pair.reason else "")
                  for pair in pairs if pair.outcome == outcome]
        if others:
            parts.append(f"{outcome} vs {', '.join(others)}")
    text = "order " + ("; ".join(parts) if parts else "not judged (tied in the paper)")
    return PROXY + text if order.proxy else text


def _cell_verdict(view: CellView, order: ColumnOrder | None, row: str, spec: TableSpec) -> str:
    judged = order is not None and order.verdict != "insufficient" and row in order.rows
    if view.reproduced is None:
        missing = "not reproduced" if view.mapped else ""
        if judged and order.proxy:  # the paper's column judged through another column of ours
            return "; ".join(filter(None, [missing, order_text(order, row, spec)]))
        return missing
    if not view.analogue:
        return order_text(order, row, spec) if judged else "reproduced"
    return f"analogue; {order_text(order, row, spec)}" if judged else "analogue"  # why: the cell's ``analogue``


def _column_order(spec: TableSpec, cells: dict, reported_column: str, reproduced_column: str) -> ColumnOrder:
    """Ordering of the rows' printed values in one column against their reproduced values in another
    (the same column, or the column's ``order_proxy``), pair by pair within each row group (a size of
    Table 1; the whole table when rows have no group)."""
    pairs = {}
    for row in spec.rows:
        printed, ours = cells[row.id, reported_column].reported, cells[row.id, reproduced_column].reproduced
        if ours is not None and printed is not None and printed.printed is not None:
            pairs[row.id] = (printed.printed.value, ours)
    proxy = None if reproduced_column == reported_column else reproduced_column
    groups = {row.id: row.group for row in spec.rows} if any(row.group for row in spec.rows) else None
    return compare_order(reported_column, pairs, proxy, groups)


def _table_view(spec: TableSpec, paper: Paper | None, findings: dict[Ref, list[Finding]], reproducer: _Reproducer,
                scale: str, synthetic: bool) -> TableView:
    cells: dict[tuple[str, str], CellView] = {}
    for row in spec.rows:
        for column in spec.columns:
            ref = (spec.table, row.id, column.id)
            mapped, reproduced = reproducer.get(ref) if spec.cell_type(row.id, column.id) == "number" else (False, None)
            analogue = (analogue_reason(spec.paper_corpus(row.id, column.id), reproduced, scale)
                        if reproduced and paper else "")  # our own tables have no paper quantity to stand in for
            cells[row.id, column.id] = CellView(paper.cells.get(ref) if paper else None, findings.get(ref, []),
                                                reproduced, mapped, analogue=analogue)
    orders = {column.id: _column_order(spec, cells, column.id, column.id) for column in spec.columns}
    for column in spec.columns:  # the paper's column against one of ours, where ours has no value of its own
        if column.order_proxy and orders[column.id].verdict == "insufficient":
            orders[column.id] = _column_order(spec, cells, column.id, column.order_proxy)
    for (row, column), view in cells.items():
        view.verdict = _cell_verdict(view, orders.get(column), row, spec)
    caption = " ".join(filter(None, [spec.caption_synthetic if synthetic else "", spec.caption]))
    return TableView(spec, cells, orders, caption)


def _for_corpus(spec: TableSpec, synthetic: bool) -> TableSpec:
    """The spec without its synthetic-world columns (the oracle, the world's tasks) where the corpus is real."""
    if synthetic or not any(column.synthetic_only for column in spec.columns):
        return spec
    return dataclasses.replace(spec, columns=[column for column in spec.columns if not column.synthetic_only])


def build(results_root: Path, specs_root: Path = SPECS, reported_root: Path = REPORTED) -> Build:
    """Load everything, check everything, merge reproduced results."""
    specs = load_specs(specs_root)
    papers = load_reported(specs, reported_root)
    results = load_results(results_root)
    facts = profile_facts(results_root)
    outcome = Build(specs, papers, [], [], profile=facts)
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
        reproducer = _Reproducer(paper_specs, results, structural)
        synthetic = facts["corpus"] in (None, SYNTHETIC)  # a hand-made folder without an index: as the default
        outcome.tables += [_table_view(_for_corpus(spec, synthetic), paper, by_target, reproducer, facts["scale"],
                                       synthetic) for spec in paper_specs.values()]
        outcome.findings += findings
        outcome.hand += hand
    return outcome
