"""A Markdown grid: the one table writer of the tables, the audit, the claims and the mechanism checks."""
from __future__ import annotations


def markdown_grid(header: list[str], rows: list[list[str]]) -> str:
    escape = lambda text: str(text).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(escape(cell) for cell in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
