"""Numbers the hand-written docs quote from the embedded run, checked against the table cells they come from.

The findings page is generated (``reports/findings.py``); the docs' prose is not, so each number it quotes
from a run is registered in ``docs/quotes.yaml`` with the cell it rounds::

    docs/dlcm.md:
      - {quote: "at R 2 8.91", cell: [embedded/dlcm.md, "DLCM · DLCM, R 2", test PPL]}

The quote must occur in the doc verbatim, its number not the start of a longer one; its value is its last
number, or its last ``mean ± sd`` pair (thousands separators and exponents allowed), with ``scale``
multiplying the cell first (100 for a share quoted in %), rounded half-up as printed. The registry is read
strictly (a doc named twice, an entry without a number or with an unknown key: one-line errors).
The cell is read from the table's "Reproduced" grid (a table without one, levels.md: its first grid) in a tables folder
(``results/tables``, after ``make reproduce``), or from the same grid as ``docs/findings.md`` shows it;
each quoted number must equal the cell's rounded to the quote's own decimals.  A tables folder must hold
every registered cell (a missing table, row or column is the registry's error); the findings page shows
some tables and columns only, so a quote whose table or column it leaves out is counted as not shown there.

``python -m reports quotes [--tables results/tables | --findings docs/findings.md] [--quotes docs/quotes.yaml]``
prints one line per stale or missing quote (exit 1), or how many it checked (exit 0).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import yaml

from common.strict_yaml import UniqueKeyLoader, yaml_problem
from tables.grid import read_markdown_grid
from tables.numbers import parse_printed

REGISTRY = Path("docs/quotes.yaml")
_NUMBER = r"(?:(?<![\w.])-)?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?:e[-+]?\d+)?"
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
    """The registry: doc -> list of {quote, cell: [table, row, column], scale?}, read strictly (a doc named
    twice is an error) and checked entry by entry; a ValueError names the first bad entry."""
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"not valid YAML ({yaml_problem(error)})") from None
    if not isinstance(data, dict):
        raise ValueError("give a mapping of doc paths to lists of entries")
    quotes = []
    for doc, entries in data.items():
        for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
            where = f"{doc}, entry {i + 1}"
            if not isinstance(entry, dict) or set(entry) - {"quote", "cell", "scale"} or "quote" not in entry:
                raise ValueError(f"{where}: {entry!r} is not {{quote, cell, scale?}}")
            cell = entry.get("cell")
            if not (isinstance(entry["quote"], str) and isinstance(cell, list) and len(cell) == 3
                    and all(isinstance(part, str) for part in cell)):
                raise ValueError(f"{where}: quote must be text and cell [table, row, column] (three texts)")
            quoted_numbers(entry["quote"])  # a quote without a number says nothing to check
            quotes.append(Quote(str(doc), entry["quote"], *cell, float(entry.get("scale", 1))))
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


def grids_from_tables(tables: Path, names: set[str]) -> dict[str, dict]:
    """Each named table's "Reproduced" grid (a table without one: its first grid), from a tables folder."""
    grids = {}
    for name in names:
        path = tables / name
        if not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("## Reproduced")), None)
        grids[name] = read_markdown_grid(lines[start + 1:] if start is not None else lines)
    return grids


def grids_from_findings(page: Path) -> dict[str, dict]:
    """The tables the findings page shows, by the file its caption names."""
    lines = page.read_text(encoding="utf-8").splitlines()
    grids = {}
    for i, line in enumerate(lines):
        caption = _CAPTION.search(line) if not line.startswith("|") and line.rstrip().endswith(":") else None
        if caption:
            grids[caption.group(1)] = read_markdown_grid(lines[i + 1:])
    return grids


def _rounds_to(printed: str, cell: str, scale: float) -> bool:
    """Whether ``cell`` (a number as the table prints it), times ``scale``, rounds half-up to ``printed`` at its
    printed precision (``tables.numbers``: 8.91 to 2 decimals, 1e-4 to 4)."""
    decimals = parse_printed(printed.replace(",", "")).decimals
    value = Decimal(cell.replace(",", "")) * Decimal(str(scale))
    return value.quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP) == Decimal(printed.replace(",", ""))


def cell_numbers(cell: str) -> tuple[str, ...]:
    """A cell's value, and its sd when it prints one: "9.0583 ± 0.0929 (n=3)" -> both, "8.91 (n=1)" -> 8.91."""
    pair = _PAIR.search(cell)
    if pair:
        return pair.groups()
    first = _SINGLE.search(cell)
    return (first.group(0),) if first else ()


def _occurs(quote: str, text: str) -> bool:
    """The quote stands in the text and its number is not the start of a longer one (8.91 is not 8.912)."""
    return re.search(re.escape(quote) + r"(?![\d])(?!\.\d)", text) is not None


def _missing(q: Quote, grids: dict[str, dict], complete: bool) -> str | None:
    """Why a quote's cell is not in ``grids`` when that is an error, else None (a page that leaves the table or
    the column out: not shown there). A complete source (a tables folder) holds every cell of the registry."""
    grid = grids.get(q.table)
    if grid is None or not grid:
        return f"no table {q.table}" if complete else None
    if q.column not in {column for _, column in grid}:
        return f"no column {q.column!r} in {q.table}" if complete else None
    if q.row not in {row for row, _ in grid}:
        return f"no row {q.row!r} in {q.table}"
    return None


def check(quotes: list[Quote], grids: dict[str, dict], root: Path, complete: bool = True,
          registry: Path = REGISTRY) -> tuple[list[str], int, list[Quote]]:
    """(problems, how many quotes were checked, quotes whose cell this source does not show). ``complete``: the
    grids are a tables folder's, so a missing table, row or column is the registry's error; else (the findings
    page) only a missing row of a table and column the page shows is."""
    problems, checked, absent, texts = [], 0, [], {}
    for q in quotes:
        if q.doc not in texts:
            path = root / q.doc
            texts[q.doc] = path.read_text(encoding="utf-8") if path.is_file() else None
        if texts[q.doc] is None:
            problems.append(f"{q.doc}: no such doc; remove its entry from {registry}")
            continue
        if not _occurs(q.quote, texts[q.doc]):
            problems.append(f"{q.doc}: the quote {q.quote!r} is no longer in the doc; update {registry}")
            continue
        cell = grids.get(q.table, {}).get((q.row, q.column))
        if cell is None:
            why = _missing(q, grids, complete)
            if why:
                problems.append(f"{q.doc}: {q.quote!r}: {why}; correct its cell in {registry}, or rebuild "
                                "the tables if they are another run's (make reproduce)")
            else:
                absent.append(q)
            continue
        values, printed = cell_numbers(cell), quoted_numbers(q.quote)
        if len(values) < len(printed) or not all(_rounds_to(p, v, q.scale) for p, v in zip(printed, values)):
            problems.append(f"{q.doc}: {q.quote!r} quotes {q.table} [{q.row} | {q.column}], which is now {cell!r}"
                            + (f" (x {q.scale:g})" if q.scale != 1 else "") + ": update the doc and the registry")
        checked += 1
    return problems, checked, absent
