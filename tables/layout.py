"""A paper table as the report shows it: the paper's layout with the printed and the reproduced
value side by side in one cell, only the rows and columns this profile reproduces, the rest collapsed
into lines that say which profile fills them.

A cell reads ``26.38 → 4.1183 ± 0.05``: printed → ours, the spread only where more than one seed ran (the
seeds column gives n). A column whose reproduced value is the same in every row (no printed values) is
one line, not a repeated cell. The full grid, every cell with its Δ and check, stays in ``<table>.md``.
"""
from __future__ import annotations

from dataclasses import dataclass

from .build import CellView, TableView
from .coverage import Coverage
from .numbers import format_float
from .render import MISSING, printed_text, row_label
from .specs import Axis, ResultRef

ARROW = " → "
LEGEND = "printed → ours; ours is the mean over the seeds column's n seeds, ± the standard deviation where n > 1"


@dataclass(frozen=True)
class Layout:
    header: list[str]
    rows: list[list[str]]
    collapsed: list[str]   # one line each: rows, columns and constants left out of the grid, and why
    status: str            # "reproduced", "partial" (some mapped rows not reproduced) or "not run"
    fill: str              # for "not run": the profiles that fill the table
    arms: list[dict]       # the shown rows: id, label, group and the experiments their values came from

    def json(self) -> dict:
        return {"header": self.header, "rows": self.rows, "collapsed": self.collapsed, "status": self.status,
                "fill": self.fill, "legend": LEGEND, "arms": self.arms}


def ours_text(view: CellView) -> str:
    """"4.1183 ± 0.05" over several seeds, "4.1183" for one; empty when not reproduced."""
    ours = view.reproduced
    if ours is None:
        return ""
    if ours.std is None:
        return format_float(ours.mean)
    std = ours.std if ours.std > 1e-9 * abs(ours.mean) else 0.0  # float noise of identical seeds
    return f"{format_float(ours.mean)} ± {std:.2g}"


def _cell_text(view: CellView, printed: bool) -> str:
    ours = ours_text(view)
    if not printed:
        return ours or MISSING
    paper = printed_text(view)
    return f"{paper}{ARROW}{ours}" if ours else paper


def _refs(table: TableView, rows: list[Axis], columns: list[Axis]) -> list[ResultRef]:
    refs = [table.spec.result_ref(row.id, column.id) for row in rows for column in columns]
    return [ref for ref in refs if ref is not None]


def _seeds(table: TableView, row: Axis, columns: list[Axis]) -> str:
    counts = sorted({cell.reproduced.n for column in columns
                     if (cell := table.cells[row.id, column.id]).reproduced is not None})
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"


def _constant(table: TableView, rows: list[Axis], column: Axis) -> str | None:
    """The one value of a column without printed values that every shown row reproduces identically."""
    cells = [table.cells[row.id, column.id] for row in rows]
    if len(cells) < 3 or any(cell.reported is not None or cell.reproduced is None for cell in cells):
        return None
    means = {format_float(cell.reproduced.mean) for cell in cells}
    spread = any(cell.reproduced.std and cell.reproduced.std > 1e-9 * abs(cell.reproduced.mean) for cell in cells)
    return means.pop() if len(means) == 1 and not spread else None


def _missing_rows(table: TableView, rows: list[Axis], coverage: Coverage) -> list[str]:
    """Rows with nothing reproduced, per row group and filling profiles: "GPT-2 1.5B · Base, PM: config/x.yaml"."""
    by_place: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        where = coverage.where(_refs(table, [row], table.spec.columns))
        by_place.setdefault((row.group, where), []).append(row.label)
    return [f"{group + ' · ' if group else ''}{', '.join(labels)}: {where}"
            for (group, where), labels in by_place.items()]


def layout(table: TableView, coverage: Coverage) -> Layout:
    spec = table.spec
    printed = any(cell.reported is not None for cell in table.cells.values())
    reproduced = lambda row, column: table.cells[row.id, column.id].reproduced is not None  # noqa: E731
    rows = [row for row in spec.rows if any(reproduced(row, column) for column in spec.columns)]
    if not rows:
        refs = _refs(table, spec.rows, spec.columns)
        return Layout([], [], [], "not run", coverage.where(refs), [])
    columns = [column for column in spec.columns if any(reproduced(row, column) for row in rows)]
    constants = {column.id: value for column in columns if (value := _constant(table, rows, column)) is not None}
    shown = [column for column in columns if column.id not in constants]
    header = [""] + [column.label for column in shown] + ["seeds"]
    grid = [[row_label(table, row.id)] + [_cell_text(table.cells[row.id, column.id], printed) for column in shown]
            + [_seeds(table, row, columns)] for row in rows]
    collapsed = [f"{column.label}: {constants[column.id]} in every row" for column in columns if column.id in constants]
    mapped_rows = [row for row in spec.rows if row not in rows and _refs(table, [row], spec.columns)]
    if mapped_rows:
        collapsed.append("Rows not reproduced at this profile (and the profiles that run them): "
                         + "; ".join(_missing_rows(table, mapped_rows, coverage)))
    analogue = dict.fromkeys(reason for row in rows for column in shown
                             for reason in table.cells[row.id, column.id].analogue.split("; ") if reason)
    if analogue:
        collapsed.append("Ours is an analogue of the paper's numbers, not a reproduction of them: "
                         + "; ".join(analogue))
    left_out = [column for column in spec.columns if column not in columns and not column.synthetic_only
                and _refs(table, rows, [column])]
    if left_out:
        collapsed.append("Columns not reproduced at this profile: " + "; ".join(
            f"{column.label} ({coverage.where(_refs(table, rows, [column]))})" for column in left_out))
    return Layout(header, grid, collapsed, "partial" if mapped_rows else "reproduced", "", _arms(table, rows))


def _arms(table: TableView, rows: list[Axis]) -> list[dict]:
    """Which experiments each shown row's values came from (the report draws their training curves)."""
    arms = []
    for row in rows:
        sources = dict.fromkeys(name for column in table.spec.columns
                                if (ours := table.cells[row.id, column.id].reproduced) is not None
                                for name in ours.experiments)
        arms.append({"row": row.id, "label": row.label, "group": row.group, "experiments": list(sources)})
    return arms
