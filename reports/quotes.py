"""Numbers the hand-written docs quote from the embedded run, checked against the table cells they come from.

The findings page is generated (``reports/findings.py``); the docs' prose is not, so each number it quotes
from a run is registered in ``docs/quotes.yaml`` with the cell it rounds::

    docs/dlcm.md:
      - {quote: "at R 2 8.91", cell: [embedded/dlcm.md, "DLCM · DLCM, R 2", test PPL]}

The quote must occur in the doc verbatim; its value is its last number, or its last ``mean ± sd`` pair
(thousands separators allowed), with ``scale`` multiplying the cell first (100 for a share quoted in %).
The cell is read from the table's "Reproduced" grid (or its only grid) in a tables folder
(``results/tables``, after ``make reproduce``), or from the same grid as ``docs/findings.md`` shows it;
each quoted number must equal the cell's rounded to the quote's own decimals.  A quote whose column
the findings page leaves out is counted as not on that page.

``python -m reports quotes [--tables results/tables | --findings docs/findings.md] [--quotes docs/quotes.yaml]``
prints one line per stale or missing quote (exit 1), or how many it checked (exit 0).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

REGISTRY = Path("docs/quotes.yaml")
_NUMBER = r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?"
_PAIR = re.compile(rf"({_NUMBER})\s*±\s*({_NUMBER})")
_SINGLE = re.compile(_NUMBER)
_CAPTION = re.compile(r"\(([\w/.-]+\.md);")


@dataclass(frozen=True)
class Quote:
    doc: str
    quote: str
    table: str
    row: str
    column: str
    scale: float = 1.0


def load_quotes(path: Path) -> list[Quote]:
    """The registry: doc -> list of {quote, cell: [table, row, column], scale?}."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    quotes = []
    for doc, entries in data.items():
        for entry in entries:
            table, row, column = entry["cell"]
            quotes.append(Quote(doc, entry["quote"], table, row, column, float(entry.get("scale", 1))))
    return quotes


def quoted_numbers(text: str) -> tuple[str, ...]:
    """The number a quote states: its last ``a ± b`` pair, else its last number, as printed."""
    pairs = _PAIR.findall(text)
    if pairs:
        return pairs[-1]
    numbers = _SINGLE.findall(text)
    if not numbers:
        raise ValueError(f"quote {text!r} holds no number")
    return (numbers[-1],)


def _parse_grid(lines: list[str]) -> dict[tuple[str, str], str]:
    """(row label, column title) -> cell text of the first Markdown grid in ``lines``."""
    rows = []
    for line in lines:
        if line.startswith("|"):
            rows.append([cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif rows:
            break
    if len(rows) < 2:
        return {}
    header, body = rows[0], rows[2:]
    return {(row[0], title): cell for row in body for title, cell in zip(header[1:], row[1:])}


def grids_from_tables(tables: Path, names: set[str]) -> dict[str, dict]:
    """Each named table's "Reproduced" grid (a table without one: its first grid), from a tables folder."""
    grids = {}
    for name in names:
        path = tables / name
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("## Reproduced")), None)
        grids[name] = _parse_grid(lines[start + 1:] if start is not None else lines)
    return grids


def grids_from_findings(page: Path) -> dict[str, dict]:
    """The tables the findings page shows, by the file its caption names."""
    lines = page.read_text(encoding="utf-8").splitlines()
    grids = {}
    for i, line in enumerate(lines):
        caption = _CAPTION.search(line) if not line.startswith("|") and line.rstrip().endswith(":") else None
        if caption:
            grids[caption.group(1)] = _parse_grid(lines[i + 1:])
    return grids


def _rounds_to(printed: str, value: float) -> bool:
    digits = len(printed.split(".")[1]) if "." in printed else 0
    return f"{value:.{digits}f}" == f"{float(printed.replace(',', '')):.{digits}f}"


def check(quotes: list[Quote], grids: dict[str, dict], root: Path) -> tuple[list[str], int, list[Quote]]:
    """(problems, how many quotes were checked, quotes whose cell this source does not show)."""
    problems, checked, absent, texts = [], 0, [], {}
    for q in quotes:
        if q.doc not in texts:
            path = root / q.doc
            texts[q.doc] = path.read_text(encoding="utf-8") if path.is_file() else None
        if texts[q.doc] is None:
            problems.append(f"{q.doc}: no such doc; remove its entry from {REGISTRY}")
            continue
        if q.quote not in texts[q.doc]:
            problems.append(f"{q.doc}: the quote {q.quote!r} is no longer in the doc; update {REGISTRY}")
            continue
        cell = grids.get(q.table, {}).get((q.row, q.column))
        if cell is None:
            absent.append(q)
            continue
        values = [float(n) * q.scale for n in _SINGLE.findall(cell.replace(",", ""))[:2]]
        printed = quoted_numbers(q.quote)
        if len(values) < len(printed) or not all(_rounds_to(p, v) for p, v in zip(printed, values)):
            problems.append(f"{q.doc}: {q.quote!r} quotes {q.table} [{q.row} | {q.column}], which is now {cell!r}"
                            + (f" (x {q.scale:g})" if q.scale != 1 else "") + ": update the doc and the registry")
        checked += 1
    return problems, checked, absent
