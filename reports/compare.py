"""What changed between two results folders (two hosts, two commits, two profiles): cells and verdicts.

``python -m reports compare RUN_A RUN_B`` builds the tables of both folders in memory (the same builder
as the DAG) and prints, as Markdown: the claims whose verdict changed, the mechanism checks whose
outcome changed, the row-ordering pairs whose outcome changed, and the cells whose reproduced mean
differs beyond ``--tolerance`` (relative), with both values.  Identical folders print "no change".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tables.build import Build, build
from tables.numbers import format_float


@dataclass(frozen=True)
class Snapshot:
    """What one folder says: cell means, pair outcomes, claim verdicts, mechanism outcomes."""

    cells: dict[tuple[str, str, str, str], float]
    pairs: dict[tuple[str, str, str, str, str], str]
    claims: dict[tuple[str, str], str]
    mechanisms: dict[str, bool]


def snapshot(built: Build) -> Snapshot:
    cells, pairs = {}, {}
    for view in built.tables:
        where = (view.spec.paper, view.spec.table)
        for (row, column), cell in view.cells.items():
            if cell.reproduced is not None:
                cells[(*where, row, column)] = cell.reproduced.mean
        for column, order in view.orders.items():
            for pair in order.judged:
                pairs[(*where, column, pair.a, pair.b)] = pair.outcome
    claims = {(claim.paper, claim.id): claim.verdict for claim in built.claims}
    mechanisms = {experiment: mechanism.exercised for experiment, mechanism in built.mechanisms.items()}
    return Snapshot(cells, pairs, claims, mechanisms)


def _changed(a: dict, b: dict) -> list:
    return sorted(key for key in a.keys() | b.keys() if a.get(key) != b.get(key))


def _differs(x: float | None, y: float | None, tolerance: float) -> bool:
    if x is None or y is None:
        return x is not y
    return abs(x - y) > tolerance * max(abs(x), abs(y), 1e-12)


def compare(a: Snapshot, b: Snapshot, names: tuple[str, str], tolerance: float = 0.0) -> str:
    """The differences of ``b`` from ``a`` as Markdown."""
    first, second = names
    sections = []
    claims = _changed(a.claims, b.claims)
    if claims:
        sections.append(("Claims whose verdict changed", ["Paper", "Claim", first, second],
                         [[p, c, a.claims.get((p, c), "—"), b.claims.get((p, c), "—")] for p, c in claims]))
    mechanisms = _changed(a.mechanisms, b.mechanisms)
    if mechanisms:
        word = {True: "exercised", False: "not exercised", None: "—"}
        sections.append(("Mechanism checks whose outcome changed", ["Experiment", first, second],
                         [[e, word[a.mechanisms.get(e)], word[b.mechanisms.get(e)]] for e in mechanisms]))
    pairs = _changed(a.pairs, b.pairs)
    if pairs:
        sections.append(("Row orderings whose outcome changed", ["Table", "Column", "Pair", first, second],
                         [[f"{k[0]}/{k[1]}", k[2], f"{k[3]} − {k[4]}", a.pairs.get(k, "—"), b.pairs.get(k, "—")]
                          for k in pairs]))
    cells = sorted(k for k in a.cells.keys() | b.cells.keys() if _differs(a.cells.get(k), b.cells.get(k), tolerance))
    if cells:
        sections.append((f"Cells whose value differs (relative tolerance {tolerance:g})",
                         ["Table", "Row", "Column", first, second],
                         [[f"{k[0]}/{k[1]}", k[2], k[3], format_float(a.cells.get(k)) or "—",
                           format_float(b.cells.get(k)) or "—"] for k in cells]))
    identical = sum(1 for k in a.cells.keys() & b.cells.keys() if not _differs(a.cells[k], b.cells[k], tolerance))
    lines = [f"# {first} against {second}", "",
             f"{identical} cells equal in both, {len(cells)} differ; {len(claims)} claim verdicts, "
             f"{len(mechanisms)} mechanism outcomes and {len(pairs)} pair outcomes changed.", ""]
    if not sections:
        return "\n".join(lines + ["No change.", ""])
    for title, header, rows in sections:
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows] + [""]
    return "\n".join(lines)


def compare_folders(first: Path, second: Path, tolerance: float = 0.0) -> str:
    return compare(snapshot(build(first)), snapshot(build(second)), (str(first), str(second)), tolerance)
