"""A Markdown grid: the one table writer of the tables, the audit, the claims and the mechanism checks, and its reader
(the docs' quoted numbers are checked against the cells it wrote)."""
from __future__ import annotations

import re


def markdown_grid(header: list[str], rows: list[list[str]]) -> str:
    escape = lambda text: str(text).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(escape(cell) for cell in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def read_markdown_grid(lines: list[str]) -> dict[tuple[str, str], str]:
    """(row label, column title) -> cell text of the first grid in ``lines``, as ``markdown_grid`` wrote it
    (its escaped "|" restored); {} when no grid follows."""
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
