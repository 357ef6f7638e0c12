"""The report's first screen: each paper's written claims with our verdict (``tables/claims.py``).

One row per claim that this profile runs: the claim, the paper's effect, ours with its 95 % interval,
the verdict and why (the smallest difference the design could see, the arm whose mechanism was not
exercised); the claims no run of this profile fills are one line naming the profiles that run them.
A forest plot puts each judged part of an ordering claim on one line, in units of the paper's own
effect (the paper at ±1), so that the sign and the interval of ours read at a glance whatever the
claim's unit.  Everything is read from ``<paper>/claims.json``; nothing is typed by hand.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from tables.claims import HEADER, NOT_RUN, claim_rows
from tables.numbers import format_float

from .document import Block, Paragraph, Table
from .plotting import png, pyplot


def load_claims(tables: Path, paper: str) -> list[dict]:
    path = tables / paper / "claims.json"
    return json.loads(path.read_text())["claims"] if path.exists() else []


def tally(records: list[dict]) -> str:
    """"12 claims: 1 reproduced, 2 inconclusive, 1 mechanism not exercised, 8 not run here"."""
    counts = Counter(record["shown"] for record in records)
    return f"{len(records)} claims: " + ", ".join(f"{count} {verdict}" for verdict, count in counts.items()) + "."


def claim_blocks(records: list[dict]) -> list[Block]:
    """The paper's claims: the tally, the judged ones as a table, the rest in one line."""
    if not records:
        return [Paragraph("No claim of this paper cites a table cell.")]
    blocks: list[Block] = [Paragraph(tally(records))]
    rows = claim_rows(records)
    if rows:
        blocks.append(Table(HEADER, rows))
    idle = [record for record in records if record["verdict"] == NOT_RUN]
    if idle:
        by_where: dict[str, list[str]] = {}
        for record in idle:
            by_where.setdefault(record["not_run"] or "no profile runs it yet", []).append(record["id"])
        blocks.append(Paragraph("Not run here: " + "; ".join(
            f"{', '.join(ids)} ({'run by: ' if where.endswith('.yaml') else ''}{where})"
            for where, ids in by_where.items()) + "."))
    return blocks


def forest(paper: str, records: list[dict]) -> tuple[bytes | None, str]:
    """Each tested part of an ordering claim: ours (d and its 95 % interval) divided by |the paper's effect|,
    beside the paper's own effect at ±1; None when no part was tested."""
    rows = [(record, part) for record in records if record["kind"] == "ordering"
            for part in record["parts"] if part["test"] and part["paper_effect"] and part["claimed"] != "equal"]
    ties = [f"{record['id']}: {part['left']} − {part['right']} = {format_float(part['d'])} "
            f"[{format_float(part['ci_low'])}, {format_float(part['ci_high'])}], {part['outcome']}"
            for record in records if record["kind"] == "ordering"
            for part in record["parts"] if part["test"] and part["claimed"] == "equal"]
    tied = (f" Ties (the paper's effect is 0, so they have no place on its scale): {'; '.join(ties)}." if ties else "")
    if not rows:
        return None, f"{paper}: no ordering part was tested on our runs, so there is nothing to plot.{tied}"
    plt = pyplot()
    figure, axes = plt.subplots(figsize=(8.0, 1.4 + 0.4 * len(rows)))
    for y, (_record, part) in enumerate(reversed(rows)):
        unit = abs(part["paper_effect"])
        colour = {"reproduced": "C2", "contradicted": "C3"}.get(part["outcome"], "C7")
        axes.plot([part["ci_low"] / unit, part["ci_high"] / unit], [y, y], color=colour, linewidth=2)
        axes.plot(part["d"] / unit, y, "o", color=colour)
        axes.plot(part["paper_effect"] / unit, y, "D", color="black", markersize=5)
    counts = Counter(record["id"] for record, _ in rows)
    seen: Counter = Counter()
    labels = []
    for record, _ in rows:
        seen[record["id"]] += 1
        labels.append(record["id"] + (f" ({seen[record['id']]}/{counts[record['id']]})"
                                      if counts[record["id"]] > 1 else ""))
    labels.reverse()
    axes.set_yticks(range(len(rows)), labels, fontsize=9)
    axes.axvline(0, color="grey", linewidth=0.8)
    axes.set_xlabel("difference in units of the paper's |effect| (paper: black diamond at ±1; ours: dot, 95 % CI)",
                    fontsize=9)
    axes.set_title(f"{paper}: each tested claim part", fontsize=10)
    axes.tick_params(axis="x", labelsize=9)
    parts = "; ".join(f"{label}: {part['left']} vs {part['right']}" for label, (_, part) in zip(reversed(labels), rows))
    return png(figure), (f"{paper}: each tested part of a claim, ours with its 95 % interval (green: reproduced, "
                         "red: contradicted, grey: inconclusive), scaled by the paper's own effect: read the sign and "
                         "whether the interval excludes 0; at reduced scale or through a proxy the size is not the "
                         f"paper's quantity. Parts: {parts}.{tied}")
