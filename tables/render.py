"""Render a built table as Markdown, CSV, LaTeX and JSON.

Two views of each table: the *printed* view in the paper's own layout (what a
reader compares with the PDF) and the *cells* view, one line per cell with
reported | recomputed | check | reproduced | delta | verdict.
"""
from __future__ import annotations

from .build import CellView, TableView
from .checks import STATUSES
from .grid import markdown_grid
from .numbers import format_at, format_float
from .ordering import RULE, ColumnOrder, PairVerdict

MISSING = "—"
MARKS = {"material": "⚠", "rounding": "‡"}
LEGEND = ("— not recovered from the paper (tables/MISSING.md says where to find it); n/a: printed as a dash; "
          "⚠ material and ‡ rounding-level mismatch, with the recomputed value in brackets "
          "(audit.md has the evidence).")
ORDER_RULE = "Pairs of rows: " + RULE
CELL_HEADER = ["Row", "Column", "Reported", "Recomputed", "Check", "Reproduced", "Δ", "Verdict"]
RECORD_FIELDS = ["paper", "table", "row", "row_label", "column", "column_label", "reported", "decimals", "unit",
                 "recomputed", "check", "reproduced_mean", "reproduced_std", "n", "delta", "verdict", "analogue",
                 "source"]


def worst(view: CellView):
    """The finding that matters most for a cell (material before rounding before consistent)."""
    return min(view.findings, key=lambda finding: STATUSES.index(finding.status), default=None)


def row_label(view: TableView, row: str) -> str:
    axis = view.spec.row_by_id[row]
    return f"{axis.group} · {axis.label}" if axis.group else axis.label


def printed_text(view: CellView) -> str:
    """The printed value, flagged with the recomputed value when they disagree."""
    if view.reported is None:
        return MISSING
    finding = worst(view)
    if finding and finding.status in MARKS:
        return f"{view.reported.display} {MARKS[finding.status]} [{format_float(finding.value)}]"
    return view.reported.display


def reproduced_text(view: CellView) -> str:
    if view.reproduced is None:
        return ""
    spread = f" ± {format_float(view.reproduced.std)}" if view.reproduced.std is not None else ""
    return f"{format_float(view.reproduced.mean)}{spread} (n={view.reproduced.n})"


def has_reported(view: TableView) -> bool:
    """False for our own tables (no paper behind them): their layout then shows reproduced values."""
    return any(cell.reported is not None for cell in view.cells.values())


def wide_title(view: TableView) -> str:
    return "As printed" if has_reported(view) else "Reproduced (mean ± std over seeds, n)"


def wide_grid(view: TableView) -> tuple[list[str], list[list[str]]]:
    """The paper's layout with printed values, or with reproduced values for a table without a paper."""
    text = printed_text if has_reported(view) else lambda cell: reproduced_text(cell) or cell.verdict or MISSING
    header = [""] + [column.label for column in view.spec.columns]
    rows = [[row_label(view, row.id)] + [text(view.cells[row.id, column.id]) for column in view.spec.columns]
            for row in view.spec.rows]
    return header, rows


def _shown(view: CellView) -> bool:
    return view.reported is not None or view.mapped or bool(view.findings)


def cell_grid(view: TableView) -> tuple[list[str], list[list[str]]]:
    """One line per cell that has a printed value, a check or a reproduction mapping (none for our own tables)."""
    rows = []
    if not has_reported(view):
        return CELL_HEADER, rows
    for (row, column), cell in view.cells.items():
        if not _shown(cell):
            continue
        finding = worst(cell)
        recomputed = format_float(finding.value) if finding and isinstance(finding.value, float) else ""
        rows.append([row_label(view, row), view.spec.column_by_id[column].label,
                     cell.reported.display if cell.reported else MISSING, recomputed,
                     finding.status.replace("_", " ") if finding else "", reproduced_text(cell),
                     format_float(cell.delta), cell.verdict])
    return CELL_HEADER, rows


def cell_records(view: TableView) -> list[dict]:
    """Raw numbers of the cells view, for CSV and for plots."""
    records = []
    for (row, column), cell in view.cells.items():
        if not _shown(cell):
            continue
        finding, reported, reproduced = worst(cell), cell.reported, cell.reproduced
        records.append({
            "paper": view.spec.paper, "table": view.spec.table, "row": row, "row_label": row_label(view, row),
            "column": column, "column_label": view.spec.column_by_id[column].label,
            "reported": reported.value if reported else "",
            "decimals": reported.printed.decimals if reported and reported.printed else "",
            "unit": reported.unit if reported else "",
            "recomputed": finding.value if finding and isinstance(finding.value, float) else "",
            "check": finding.status if finding else "",
            "reproduced_mean": reproduced.mean if reproduced else "",
            "reproduced_std": reproduced.std if reproduced and reproduced.std is not None else "",
            "n": reproduced.n if reproduced else 0, "delta": "" if cell.delta is None else cell.delta,
            "verdict": cell.verdict, "analogue": cell.analogue, "source": reported.source if reported else ""})
    return records


def analogue_of(view: TableView, column: str | None, rows) -> str:
    """The analogue reasons of the cells of ``rows`` in ``column`` (None: every cell of the table), each once
    ("" when every one is the paper's quantity)."""
    cells = view.cells.values() if column is None else [view.cells[row, column] for row in rows]
    return "; ".join(dict.fromkeys(reason for cell in cells for reason in cell.analogue.split("; ") if reason))


def column_title(view: TableView, order: ColumnOrder) -> str:
    """The column's label; for a proxy, which of our columns stands in for it; for a "closer to" column, the
    distance its pairs compare (|Realised ratio − 4|)."""
    column = view.spec.column_by_id[order.column]
    label = column.label if column.closer_to is None else f"|{column.label} − {column.closer_to}|"
    if order.proxy:
        label = f"{label} (paper) against {view.spec.column_by_id[order.proxy].label} (ours, a proxy)"
    return label


def _judged_orders(view: TableView) -> list[ColumnOrder]:
    return [order for order in view.orders.values() if order.verdict != "insufficient"]


def order_lines(view: TableView) -> list[str]:
    """One sentence per column whose ordering could be compared: pair verdicts, per row group, and Kendall τ."""
    lines = []
    for order in _judged_orders(view):
        tau = "undefined" if order.tau is None else f"{order.tau:.2f}"
        groups = [group for group in order.groups if group is not None]
        by_group = "; ".join(f"{group}: {order.summary(group)}" for group in groups)
        tied = len(order.pairs) - len(order.judged)
        notes = [f"by group: {by_group}" if by_group else "",
                 f"{tied} pair{'s' * (tied != 1)} tied in the paper, not judged" if tied else "",
                 "a proxy: neither agreement nor disagreement" if order.proxy else "",
                 f"ours is an analogue ({analogue})" if (analogue := analogue_of(view, order.proxy or order.column,
                                                                                  order.rows)) else ""]
        lines.append(f"{column_title(view, order)}: {order.verdict} (pairs); Kendall τ = {tau} "
                     f"over {len(order.rows)} rows"
                     + "".join(f"; {note}" for note in notes if note))
    return lines


PAIR_HEADER = ["Column", "Group", "Pair (a − b)", "Paper a vs b", "Paper a − b", "Ours a vs b", "Ours d [95 % CI]",
               "Test (Holm p)", "n (a, b)", "Verdict"]


def _test_fields(pair: PairVerdict) -> dict:
    """The pair's test as data: kind, p (raw and Holm-adjusted), 95 % interval, MDE, the pairing's correlation."""
    test = pair.test
    if test is None:
        return {"test": "", "ci": "", "p": None, "p_adjusted": None, "ci_low": None, "ci_high": None, "mde": None,
                "df": None, "correlation": None, "family": pair.family}
    low, high = test.interval()
    return {"test": test.kind, "ci": f"[{format_float(low)}, {format_float(high)}]", "p": test.p,
            "p_adjusted": pair.p_adjusted, "ci_low": low, "ci_high": high,
            "mde": pair.mde, "df": test.df, "correlation": test.correlation, "family": pair.family}


def _paper_difference(view: TableView, order: ColumnOrder, pair: PairVerdict) -> str:
    """The paper's a − b at the finer of the two printed precisions."""
    printed = [view.cells[row, order.column].reported.printed for row in (pair.a, pair.b)]
    return format_at(pair.paper_difference, max(number.decimals for number in printed))


def _paper_values(view: TableView, order: ColumnOrder, pair: PairVerdict) -> dict:
    """The paper's two values as the pair compares them: printed, or their distances for a "closer to" column."""
    if view.spec.column_by_id[order.column].closer_to is None:
        return {"paper_a": view.cells[pair.a, order.column].reported.display,
                "paper_b": view.cells[pair.b, order.column].reported.display}
    return {"paper_a": format_float(pair.reported[0]), "paper_b": format_float(pair.reported[1])}


def pair_records(view: TableView) -> list[dict]:
    """Every compared pair of rows, with the strings the tables show (the findings quote these)."""
    records = []
    for order in _judged_orders(view):
        for pair in order.pairs:
            a, b = (view.spec.row_by_id[row] for row in (pair.a, pair.b))
            se = pair.se
            records.append({
                "column": order.column, "column_label": view.spec.column_by_id[order.column].label,
                "column_title": column_title(view, order), "proxy": order.proxy or "",
                "group": pair.group or "", "a": pair.a, "b": pair.b, "a_label": a.label, "b_label": b.label,
                **_paper_values(view, order, pair),
                "paper_difference": _paper_difference(view, order, pair),
                "ours_a": format_float(pair.ours[0].mean), "ours_b": format_float(pair.ours[1].mean),
                "d": format_float(pair.d), "se": format_float(se), "n_a": pair.ours[0].n, "n_b": pair.ours[1].n,
                "single": [view.spec.row_by_id[row].label for row in pair.single],
                "outcome": pair.outcome, "reason": pair.reason, "verdict": pair.verdict,
                "analogue": analogue_of(view, order.proxy or order.column, (pair.a, pair.b)),
                "d_value": pair.d, "se_value": se, **_test_fields(pair)})
    return records


def pair_grid(view: TableView) -> tuple[list[str], list[list[str]]]:
    rows = [[r["column_title"], r["group"], f"{r['a_label']} − {r['b_label']}", f"{r['paper_a']} vs {r['paper_b']}",
             r["paper_difference"], f"{r['ours_a']} vs {r['ours_b']}",
             r["d"] + (f" {r['ci']}" if r["ci"] else ""),
             f"{r['test']} ({r['p_adjusted']:.2g})" if r["test"] and r["p_adjusted"] is not None else r["test"] or "—",
             f"{r['n_a']}, {r['n_b']}",
             r["verdict"] + (" (analogue)" if r["analogue"] else "")]
            for r in pair_records(view)]
    return PAIR_HEADER, rows


def order_columns(view: TableView) -> list[dict]:
    """The column verdicts as data: counts of pair outcomes, overall and per row group."""
    return [{"column": order.column, "title": column_title(view, order), "proxy": order.proxy or "",
             "analogue": analogue_of(view, order.proxy or order.column, order.rows),
             "verdict": order.verdict, "tau": order.tau, "rows": len(order.rows),
             "counts": order.counts(), "tied": len(order.pairs) - len(order.judged),
             "groups": [{"group": group or "", "summary": order.summary(group), "counts": order.counts(group)}
                        for group in order.groups]}
            for order in _judged_orders(view)]


def table_markdown(view: TableView) -> str:
    spec = view.spec
    parts = [f"# {spec.title}", "", f"*{spec.where}*" + (f" — {view.caption}" if view.caption else ""), "",
             f"## {wide_title(view)}", "", markdown_grid(*wide_grid(view)), ""]
    if has_reported(view):
        parts += [LEGEND, ""]
    analogue = analogue_of(view, None, None)
    if analogue:
        parts += [f"Cells marked analogue stand in for the paper's quantity: {analogue}.", ""]
    notes = [f"- {row_label(view, row.id)}: {row.note}" for row in spec.rows if row.note]
    if notes:
        parts += ["Row notes:", ""] + notes + [""]
    header, rows = cell_grid(view)
    if rows:
        parts += ["## Reported, recomputed and reproduced", "", markdown_grid(header, rows), ""]
    lines = order_lines(view)
    if lines:
        parts += (["## Ordering (reproduced against reported)", "", ORDER_RULE, ""]
                  + [f"- {line}" for line in lines] + [""])
        parts += [markdown_grid(*pair_grid(view)), ""]
    return "\n".join(parts)


def table_csv(view: TableView) -> str:
    """The cells view with raw numbers (10 significant digits), through pandas' CSV writer."""
    import pandas as pd

    records = [{key: f"{value:.10g}" if isinstance(value, float) else value for key, value in record.items()}
               for record in cell_records(view)]
    return pd.DataFrame.from_records(records, columns=RECORD_FIELDS).to_csv(index=False, lineterminator="\n")


def latex_escape(text: str) -> str:
    replacements = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                    "±": r"$\pm$", "—": "--", "Δ": r"$\Delta$", "↔": r"$\leftrightarrow$", "·": r"$\cdot$",
                    "≈": r"$\approx$", "÷": r"$\div$", "τ": r"$\tau$",
                    "≤": r"$\le$", "≥": r"$\ge$", "|": r"\textbar{}", "−": "--"}
    return "".join(replacements.get(char, char) for char in str(text))


def table_latex(view: TableView) -> str:
    """The cells view (the printed layout for a table without a paper) as a LaTeX float: the tabular through
    pandas' writer, our escaping (the papers' symbols: ±, Δ, τ, ...) applied to every cell first."""
    import pandas as pd

    header, rows = cell_grid(view)
    if not rows:
        header, rows = wide_grid(view)
    frame = pd.DataFrame([[latex_escape(cell) for cell in row] for row in rows],
                         columns=[latex_escape(cell) for cell in header])
    tabular = frame.to_latex(index=False, escape=False, column_format="l" * len(header))
    lines = [r"\begin{table}[t]", r"\centering", r"\small", tabular.rstrip("\n"),
             r"\caption{" + latex_escape(f"{view.spec.title} ({view.spec.where})") + "}",
             r"\label{tab:" + f"{view.spec.paper}-{view.spec.table}" + "}", r"\end{table}", ""]
    return "\n".join(lines)


def table_json(view: TableView) -> dict:
    spec = view.spec
    wide_header, wide_rows = wide_grid(view)
    cell_header, cell_rows = cell_grid(view)
    return {"paper": spec.paper, "table": spec.table, "title": spec.title, "where": spec.where,
            "caption": view.caption, "kind": spec.kind, "legend": LEGEND,
            "printed": {"title": wide_title(view), "header": wide_header, "rows": wide_rows},
            "cells": {"header": cell_header, "rows": cell_rows},
            "ordering": order_lines(view), "order_rule": ORDER_RULE, "pairs": {"header": pair_grid(view)[0],
            "rows": pair_grid(view)[1]}, "order_columns": order_columns(view), "order_pairs": pair_records(view),
            "records": cell_records(view)}
