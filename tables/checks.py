"""Recompute the papers' arithmetic and grade every difference.

A *check* pairs a printed number with the formula that should produce it: a
column or row rule from a spec (``Avg = mean(...)``), a one-cell rule, or a
textual claim from ``claims.yaml``.  The tolerance is half a unit in the last
printed place of the printed number plus the rounding of the printed inputs
carried through the formula.  A difference within the tolerance is
*consistent*; within one more printed unit it is *rounding*-level; beyond that
it is *material*.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from pathlib import Path

from .expressions import Expression, ExpressionError, Ref
from .numbers import Printed, parse_printed
from .reported import Paper
from .specs import TableSpec
from .validation import DataError, display_path, load_yaml, schema

STATUSES = ("material", "rounding", "consistent", "not_checkable")


class NotApplicable(Exception):
    """A rule does not apply to this cell (its group has no baseline row)."""


@dataclass
class Check:
    """A printed number (optional for derivations and comparisons) and the formula behind it."""

    paper: str
    where: str
    formula: Expression
    origin: str
    target: Ref | None = None
    printed: Printed | None = None
    alternatives: dict[str, Expression] = field(default_factory=dict)
    text: str = ""
    note: str = ""
    severity_if_false: str = "material"
    input_rounding: float = 0.0


@dataclass
class Finding:
    """The verdict on one check, with its evidence."""

    check: Check
    status: str
    value: float | bool | None = None
    difference: float | None = None
    tolerance: float | None = None
    inputs: dict[Ref, Printed] = field(default_factory=dict)
    missing: list[Ref] = field(default_factory=list)
    alternatives: dict[str, float] = field(default_factory=dict)
    chained: tuple[float, str] | None = None


@dataclass(frozen=True)
class HandFinding:
    """An inconsistency recorded by hand because it is not arithmetic (labels, notation, prose)."""

    paper: str
    id: str
    where: str
    text: str
    finding: str
    severity: str
    source: str
    note: str = ""


def _resolver(specs: dict[str, TableSpec], table: str, row: str, column: str, scope: str):
    """Map a reference node to a cell: scope 'column' (names are columns of ``row``),
    'row' (names are rows of ``column``) or 'cell' (only ``cell(...)``)."""
    spec = specs.get(table)

    def exists(ref: Ref) -> Ref:
        target = specs.get(ref[0])
        if target is None or ref[1] not in target.row_by_id or ref[2] not in target.column_by_id:
            raise ExpressionError(f"no cell {ref} in this paper's specs")
        return ref

    def resolve(node: ast.AST) -> Ref:
        if isinstance(node, ast.Call):
            args = [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
            if len(args) != len(node.args) or len(args) not in (2, 3) or (len(args) == 2 and spec is None):
                raise ExpressionError("cell() takes quoted ids: cell('row', 'column') or "
                                      "cell('table', 'row', 'column')")
            return exists((table, *args) if len(args) == 2 else tuple(args))
        if isinstance(node, ast.Attribute) and scope == "column" and getattr(node.value, "id", "") == "baseline":
            baseline = spec.baseline_of(row)
            if baseline is None:
                raise NotApplicable
            return exists((table, baseline.id, node.attr))
        if isinstance(node, ast.Name) and scope == "column":
            return exists((table, row, node.id))
        if isinstance(node, ast.Name) and scope == "row":
            return exists((table, node.id, column))
        raise ExpressionError(f"'{ast.unparse(node)}' is not a cell here; use cell('table', 'row', 'column')")

    return resolve


def _expression(text: str, resolve, path: Path, field_name: str) -> Expression:
    try:
        return Expression(text, resolve)
    except ExpressionError as error:
        raise DataError(path, None, field_name, str(error)) from None


def cell_label(specs: dict[str, TableSpec], ref: Ref, with_table: bool = True) -> str:
    """Human name of a cell: 'Table 1 · ConceptLM (Pythia 160M) · Avg PPL'."""
    spec = specs[ref[0]]
    row = spec.row_by_id[ref[1]]
    group = f" ({row.group})" if row.group else ""
    table = f"{spec.where.split(',')[0]} · " if with_table else ""
    return f"{table}{row.label}{group} · {spec.column_by_id[ref[2]].label}"


def table_checks(specs: dict[str, TableSpec], paper: Paper | None) -> list[Check]:
    """Every formula of every spec of one paper, expanded to one check per target cell."""
    checks = []
    for spec in specs.values():
        rules = [(column.formula, column.alternatives, "column", row.id, column.id, f"columns.{column.id}.formula")
                 for column in spec.columns if column.formula for row in spec.rows]
        rules += [(row.formula, row.alternatives, "row", row.id, column.id, f"rows.{row.id}.formula")
                  for row in spec.rows if row.formula for column in spec.columns]
        rules += [(check.formula, check.alternatives, "cell", check.row, check.column,
                   f"checks.{check.row}.{check.column}")
                  for check in spec.checks]
        for text, alternatives, scope, row, column, field_name in rules:
            if spec.cell_type(row, column) == "text":
                continue
            resolve = _resolver(specs, spec.table, row, column, scope)
            try:
                formula = _expression(text, resolve, spec.path, field_name)
                others = {name: _expression(other, resolve, spec.path, f"{field_name}.alternatives")
                          for name, other in alternatives.items()}
            except NotApplicable:
                continue
            target = (spec.table, row, column)
            reported = paper.cells.get(target) if paper else None
            checks.append(Check(spec.paper, cell_label(specs, target), formula,
                                f"{display_path(spec.path)}: {field_name}",
                                target, reported.printed if reported else None, others))
    return checks


def load_claims(specs: dict[str, TableSpec], paper: Paper) -> tuple[list[Check], list[HandFinding]]:
    """The paper's ``claims.yaml``: arithmetic claims as checks, the rest as hand findings."""
    path = paper.folder / "claims.yaml"
    if not path.exists():
        return [], []
    checks, hand = [], []
    for position, claim in enumerate(load_yaml(path, schema("claims.schema.json")) or []):
        if claim["source"] not in paper.sources:
            raise DataError(path, None, f"{position}.source", f"unknown source '{claim['source']}'")
        if "finding" in claim:
            hand.append(HandFinding(paper.paper, claim["id"], claim["where"], claim["text"], claim["finding"],
                                    claim["severity"], claim["source"], claim.get("note", "")))
            continue
        resolve = _resolver(specs, "", "", "", "cell")
        try:
            printed = parse_printed(claim["printed"]) if "printed" in claim else None
        except ValueError as error:
            raise DataError(path, None, f"{position}.printed", str(error)) from None
        checks.append(Check(
            paper.paper, claim["where"], _expression(claim["formula"], resolve, path, f"{position}.formula"),
            f"{display_path(path)}: {claim['id']}", None, printed,
            {name: _expression(text, resolve, path, f"{position}.alternatives")
             for name, text in claim.get("alternatives", {}).items()},
            claim["text"], claim.get("note", ""), claim.get("severity", "material"), claim.get("input_rounding", 0.0)))
    return checks, hand


def classify(difference: float, tolerance: float, half_unit: float) -> str:
    """consistent within tolerance; rounding within one more printed unit; material beyond."""
    if abs(difference) <= tolerance:
        return "consistent"
    return "rounding" if abs(difference) <= tolerance + 2 * half_unit else "material"


def _compare(check: Check, formula: Expression, numbers: dict[Ref, Printed], values: dict[Ref, float]):
    """(value, difference, tolerance, status) of ``formula`` against the check's printed number."""
    printed, value = check.printed, float(formula.evaluate(values))
    halves = {ref: numbers[ref].half_unit for ref in formula.refs}
    tolerance = (printed.half_unit + formula.propagated_error(values, halves) + check.input_rounding
                 + 1e-9 * max(1.0, abs(value)))
    difference = printed.value - value
    return value, difference, tolerance, classify(difference, tolerance, printed.half_unit)


def evaluate(check: Check, numbers: dict[Ref, Printed]) -> Finding:
    """Recompute one check from the printed numbers."""
    missing = [ref for ref in check.formula.refs if ref not in numbers]
    inputs = {ref: numbers[ref] for ref in check.formula.refs if ref in numbers}
    if missing:
        return Finding(check, "not_checkable", inputs=inputs, missing=missing)
    values = {ref: printed.value for ref, printed in inputs.items()}
    if check.printed is not None and not math.isfinite(float(check.formula.evaluate(values))):
        return Finding(check, "not_checkable", inputs=inputs)  # the formula is undefined on these cells (x / 0)
    if check.printed is None:
        value = check.formula.evaluate(values)
        if not isinstance(value, bool):
            raise DataError(check.origin, None, "printed", "a claim without a printed number must be a comparison")
        return Finding(check, "consistent" if value else check.severity_if_false, value, inputs=inputs)
    value, difference, tolerance, status = _compare(check, check.formula, numbers, values)
    finding = Finding(check, status, value, difference, tolerance, inputs)
    for name, formula in check.alternatives.items():
        if all(ref in numbers for ref in formula.refs):
            alternative = _compare(check, formula, numbers, {ref: numbers[ref].value for ref in formula.refs})
            finding.alternatives[name] = alternative[0]
            if STATUSES.index(alternative[3]) > STATUSES.index(finding.status):  # keep the best reading
                finding.status = alternative[3]
    return finding


def chain(findings: list[Finding], numbers: dict[Ref, Printed]) -> None:
    """Re-evaluate checks whose inputs are themselves flagged, using the recomputed inputs.

    This tells a printed total that followed a wrong printed average apart from
    one that followed the correct value (e.g. a delta computed before a typo).
    """
    flagged = {finding.check.target: finding.value for finding in findings
               if finding.check.target and finding.status in ("rounding", "material")}
    for finding in findings:
        if finding.check.printed is None or finding.missing or not flagged.keys() & set(finding.inputs):
            continue
        values = {ref: flagged.get(ref, printed.value) for ref, printed in finding.inputs.items()}
        value, _, _, status = _compare(finding.check, finding.check.formula, numbers, values)
        finding.chained = (value, status)
