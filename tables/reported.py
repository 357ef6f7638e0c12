"""The papers' numbers as data: ``tables/reported/<paper>/``.

Each folder holds ``paper.yaml`` (title, arXiv version, source keys) and one CSV
per paper table in long format, one printed cell per line; adding a cell read
from the PDF is adding one line.  Cells that were not recovered are absent
(``tables/MISSING.md``); nothing here is ever filled in by code.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from .numbers import Printed, parse_printed
from .specs import TableSpec
from .validation import DataError, load_yaml, schema, validate

REPORTED = Path(__file__).resolve().parent / "reported"
FIELDS = ["table", "row", "column", "value", "decimals", "metric", "unit", "direction", "source", "note"]
DASH = "-"  # a dash printed in the paper: the cell exists and is empty by design


@dataclass(frozen=True)
class ReportedCell:
    """One printed cell with its provenance (``origin`` is ``file:line``)."""

    paper: str
    arxiv: str
    table: str
    row: str
    column: str
    value: str
    printed: Printed | None
    metric: str
    unit: str
    direction: str
    source: str
    note: str
    origin: str

    @property
    def display(self) -> str:
        return "n/a" if self.value == DASH else self.value


@dataclass
class Paper:
    """Metadata and reported cells of one paper."""

    paper: str
    title: str
    arxiv: str
    url: str
    order: int
    sources: dict[str, str]
    folder: Path
    cells: dict[tuple[str, str, str], ReportedCell]

    def numbers(self) -> dict[tuple[str, str, str], Printed]:
        """Every numeric printed cell, by (table, row, column)."""
        return {ref: cell.printed for ref, cell in self.cells.items() if cell.printed is not None}


def _parse_line(line: dict, spec: TableSpec, meta: dict, path: Path, number: int) -> ReportedCell:
    """Check one CSV line against the schema and the spec, and build its cell."""
    if None in line or None in line.values():
        raise DataError(path, number, "(line)", f"expected {len(FIELDS)} fields: {','.join(FIELDS)}")
    validate(line, schema("reported.schema.json"), path, lambda _location: number)
    fail = lambda field, message: DataError(path, number, field, message)  # noqa: E731
    if line["table"] != spec.table:
        raise fail("table", f"'{line['table']}' differs from the file name '{path.stem}'")
    if line["row"] not in spec.row_by_id:
        raise fail("row", f"unknown row '{line['row']}' (not in {spec.path.name})")
    if line["column"] not in spec.column_by_id:
        raise fail("column", f"unknown column '{line['column']}' (not in {spec.path.name})")
    if line["source"] not in meta["sources"]:
        raise fail("source", f"unknown source '{line['source']}' (paper.yaml lists {', '.join(meta['sources'])})")
    printed = None
    if line["value"] == DASH or spec.cell_type(line["row"], line["column"]) == "text":
        if line["decimals"]:
            raise fail("decimals", f"must be empty for text or '-' value '{line['value']}'")
    else:
        try:
            printed = parse_printed(line["value"])
        except ValueError:
            raise fail("value", f"non-numeric value '{line['value']}' in a number cell") from None
        if line["decimals"] != str(printed.decimals):
            raise fail("decimals", f"value '{line['value']}' is printed to {printed.decimals} decimal(s) "
                                   f"but decimals is '{line['decimals']}'")
    return ReportedCell(meta["paper"], meta["arxiv"], line["table"], line["row"], line["column"], line["value"],
                        printed, line["metric"], line["unit"], line["direction"], line["source"], line["note"],
                        f"{path}:{number}")


def load_paper(folder: Path, specs: dict[str, TableSpec]) -> Paper:
    """Load one paper's folder; every CSV must match a spec of that paper."""
    if not (folder / "paper.yaml").exists():
        raise DataError(folder / "paper.yaml", None, "(file)", "missing: every reported folder needs paper.yaml")
    meta = load_yaml(folder / "paper.yaml", schema("paper.schema.json"))
    if meta["paper"] != folder.name:
        raise DataError(folder / "paper.yaml", None, "paper", f"'{meta['paper']}' differs from folder '{folder.name}'")
    cells: dict[tuple[str, str, str], ReportedCell] = {}
    for path in sorted(folder.glob("*.csv")):
        if path.stem not in specs:
            raise DataError(path, None, "table",
                            f"unknown table '{path.stem}': no spec tables/specs/{folder.name}/{path.stem}.yaml")
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames != FIELDS:
                raise DataError(path, 1, "(header)", f"expected {','.join(FIELDS)}")
            for line in reader:
                cell = _parse_line(line, specs[path.stem], meta, path, reader.line_num)
                ref = (cell.table, cell.row, cell.column)
                if ref in cells:
                    raise DataError(path, reader.line_num, "row,column",
                                    f"duplicate cell ({cell.row}, {cell.column}); first at {cells[ref].origin}")
                cells[ref] = cell
    return Paper(meta["paper"], meta["title"], meta["arxiv"], meta["url"], meta.get("order", 100),
                 meta["sources"], folder, cells)


REPORTED_COLUMNS = ["paper", "arxiv", "table", "row", "column", "value", "number", "decimals", "metric", "unit",
                    "direction", "source", "note", "origin"]


def reported_frame(papers: dict[str, Paper]):
    """Every printed cell of ``papers`` as a ``pandas.DataFrame``, one row per cell in file order: the CSV's
    fields, ``value`` as printed (with its ``~``, ``<`` or ``>``; ``-`` for a dash), ``number`` its value and
    ``decimals`` its printed places (NaN / <NA> for text and dashes) and ``origin`` (``file:line``)."""
    import pandas as pd

    rows = [(c.paper, c.arxiv, c.table, c.row, c.column, c.value, c.printed.value if c.printed else float("nan"),
             c.printed.decimals if c.printed else None, c.metric, c.unit, c.direction, c.source, c.note, c.origin)
            for paper in papers.values() for c in paper.cells.values()]
    frame = pd.DataFrame(rows, columns=REPORTED_COLUMNS)
    return frame.astype({"decimals": "Int64"})


def load_reported(specs: dict[str, dict[str, TableSpec]], root: Path = REPORTED) -> dict[str, Paper]:
    """Every paper under ``root``, in report order."""
    papers = []
    for folder in sorted(path for path in root.iterdir() if path.is_dir()):
        if folder.name not in specs:
            raise DataError(folder, None, "paper", f"no specs folder tables/specs/{folder.name}/")
        papers.append(load_paper(folder, specs[folder.name]))
    return {paper.paper: paper for paper in sorted(papers, key=lambda p: (p.order, p.paper))}
