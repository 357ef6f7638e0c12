"""The audit page: every inconsistency found in the papers, with severity and evidence.

Severity: *material* differences cannot come from rounding the printed numbers;
*rounding*-level ones are off by at most one more unit in the last printed
place; *consistent* ones are within the tolerance.  Inconsistencies that are not
arithmetic (labels, notation, prose) are recorded by hand in ``claims.yaml``.
"""
from __future__ import annotations

from collections import Counter

from .build import Build
from .checks import Finding, HandFinding, cell_label
from .numbers import format_float
from .grid import markdown_grid

FLAGGED = ("material", "rounding")
PREAMBLE = (
    "Every printed aggregate is recomputed from the printed cells it covers, and every arithmetic claim of the text "
    "is evaluated from its formula. Tolerance = half a unit in the last printed place of the printed number + the "
    "printed rounding of the inputs carried through the formula. **material**: the difference cannot come from "
    "rounding; **rounding**: off by at most one more unit in the last printed place; a comparison claim that fails "
    "is graded by its claim. Reproduced numbers play no part here: the audit is about the papers' own arithmetic.")


def finding_record(finding: Finding, build: Build) -> dict:
    """Strings describing a finding: where, printed, recomputed, difference, tolerance, cells used, evidence."""
    check, specs = finding.check, build.specs[finding.check.paper]
    value = finding.value
    evidence = [f"formula: `{check.formula.text}`"]
    evidence += [f"{name}: {format_float(number)}" for name, number in finding.alternatives.items()]
    if finding.chained:
        evidence.append(f"with recomputed inputs: {format_float(finding.chained[0])} ({finding.chained[1]})")
    if finding.missing:
        evidence.append("missing: " + "; ".join(cell_label(specs, ref) for ref in finding.missing))
    target = build.papers[check.paper].cells.get(check.target) if check.target and check.paper in build.papers else None
    evidence += [note for note in (check.note, target.note if target else "") if note]
    return {
        "paper": check.paper, "where": check.where, "claim": check.text, "status": finding.status,
        "printed": check.printed.text if check.printed else "",
        "recomputed": str(value).lower() if isinstance(value, bool) else format_float(value),
        "difference": format_float(finding.difference), "tolerance": format_float(finding.tolerance),
        "cells": "; ".join(f"{cell_label(specs, ref, not check.target or ref[0] != check.target[0])} = {printed.text}"
                           for ref, printed in finding.inputs.items()),
        "evidence": "; ".join(evidence), "missing": len(finding.missing), "origin": check.origin}


def hand_record(finding: HandFinding) -> dict:
    return {"paper": finding.paper, "where": finding.where, "claim": finding.text, "status": finding.severity,
            "finding": finding.finding, "source": finding.source, "note": finding.note}


def summary(build: Build) -> dict[str, dict[str, int]]:
    """Counts per paper: statuses of checks and claims, and hand-recorded findings by severity."""
    counts: dict[str, dict[str, int]] = {}
    for paper in build.paper_order():
        statuses = Counter(finding.status for finding in build.findings if finding.check.paper == paper)
        hand = Counter(finding.severity for finding in build.hand if finding.paper == paper)
        counts[paper] = {"material": statuses["material"], "rounding": statuses["rounding"],
                         "consistent": statuses["consistent"], "not_checkable": statuses["not_checkable"],
                         "hand_material": hand["material"], "hand_rounding": hand["rounding"],
                         "hand_note": hand["note"]}
    return counts


def audit_json(build: Build) -> dict:
    return {"preamble": PREAMBLE, "summary": summary(build),
            "findings": [finding_record(finding, build) for finding in build.findings],
            "hand": [hand_record(finding) for finding in build.hand]}


def audit_markdown(build: Build) -> str:
    data = audit_json(build)
    parts = ["# Audit of the papers' arithmetic", "", PREAMBLE, "", "## Summary", ""]
    header = ["Paper", "material", "rounding", "consistent", "not checkable", "by hand: material", "by hand: rounding",
              "by hand: note"]
    parts += [markdown_grid(header, [[paper, *map(str, counts.values())]
                                     for paper, counts in data["summary"].items()]), ""]
    for paper in build.paper_order():
        records = [record for record in data["findings"] if record["paper"] == paper]
        hand = [record for record in data["hand"] if record["paper"] == paper]
        if not records and not hand:
            continue
        arxiv = build.papers[paper].arxiv if paper in build.papers else ""
        parts += [f"## {paper} {f'(arXiv {arxiv})' if arxiv else ''}".rstrip(), ""]
        for status in FLAGGED:
            flagged = [record for record in records if record["status"] == status]
            if flagged:
                rows = [[r["where"] + (f": {r['claim']}" if r["claim"] else ""), r["printed"], r["recomputed"],
                         r["difference"], r["tolerance"], r["cells"], r["evidence"]] for r in flagged]
                parts += [f"### {status.capitalize()} ({len(flagged)})", "",
                          markdown_grid(["Where", "Printed", "Recomputed", "Δ", "Tolerance", "Cells used", "Evidence"],
                                        rows), ""]
        if hand:
            rows = [[r["where"], r["claim"], r["finding"], r["status"], r["source"]] for r in hand]
            parts += [f"### Recorded by hand, not arithmetic ({len(hand)})", "",
                      markdown_grid(["Where", "Text", "Finding", "Severity", "Source"], rows), ""]
        consistent = [r for r in records if r["status"] == "consistent"]
        if consistent:
            parts += [f"### Consistent ({len(consistent)})", ""]
            parts += [f"- {r['where']}{': ' + r['claim'] if r['claim'] else ''} — "
                      + (f"printed {r['printed']}, recomputed {r['recomputed']}" if r["printed"] else "holds")
                      for r in consistent] + [""]
        unchecked = Counter(r["where"].split(" · ")[0] for r in records if r["status"] == "not_checkable")
        if unchecked:
            parts += [f"### Not checkable: inputs not recovered ({sum(unchecked.values())})", "",
                      "Printed aggregates whose inputs are not among the recovered cells (audit.json lists them):", ""]
            parts += [f"- {where}: {count}" for where, count in unchecked.items()] + [""]
    return "\n".join(parts)
