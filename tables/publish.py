"""Write a build to disk: ``<out>/<paper>/<table>.{md,csv,tex,json}``, ``audit.{md,json}``, ``index.json``.

Every file is written atomically.  ``index.json`` lists what was written, the
counts of flagged items and the verdict summary; the report reads it.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from common.io import atomic_write_json, json_text

from .audit import audit_json, audit_markdown, summary
from .build import Build, TableView
from .claims import NOT_RUN, VERDICTS, claim_record, claims_markdown
from .coverage import Coverage
from .io import write_atomic
from .layout import layout
from .levels import levels_markdown
from .mechanisms import mechanisms_json, mechanisms_markdown
from .ordering import ALPHA, OUTCOMES, RULE
from .render import table_csv, table_json, table_latex, table_markdown, worst

NOTE = ("Reproduction runs at embedded scale: absolute values are not expected to match the papers. "
        "Verdicts are about direction and order, pair by pair of rows (agrees / differs / inconclusive by a t-test at "
        "95 % with Holm within a column; not exercised when a row's mechanism check failed); Kendall tau of each "
        "column is a summary. Proxy comparisons are counted apart.")


def _table_entry(view: TableView, files: list[str]) -> dict:
    cells = view.cells.values()
    checks = Counter(finding.status for cell in cells for finding in cell.findings)
    return {
        "paper": view.spec.paper, "table": view.spec.table, "title": view.spec.title, "where": view.spec.where,
        "kind": view.spec.kind, "files": files,
        "cells": {"reported": sum(cell.reported is not None for cell in cells),
                  "mapped": sum(cell.mapped for cell in cells),
                  "reproduced": sum(cell.reproduced is not None for cell in cells),
                  "not_reproduced": sum(cell.mapped and cell.reproduced is None for cell in cells)},
        "checks": dict(checks),
        "flagged": sum(1 for cell in cells if (finding := worst(cell)) and finding.status in ("material", "rounding")),
        "ordering": _pair_counts(view),
    }


def _pair_counts(view: TableView) -> dict[str, int]:
    """Pair outcomes of the table's compared columns; pairs judged through a proxy column are counted
    apart ("proxy"), never as agreement or disagreement; pairs tied in the paper as "tied"."""
    counts = Counter({outcome: 0 for outcome in (*OUTCOMES, "proxy", "tied")})
    for order in view.orders.values():
        if order.verdict == "insufficient":
            continue
        for pair in order.pairs:
            counts["tied" if pair.tied else "proxy" if order.proxy else pair.outcome] += 1
    return dict(counts)


def _claims(build: Build, coverage: Coverage) -> dict[str, list[dict]]:
    """paper -> its claims judged on our runs, as data; what is not run here names the profiles that run it."""
    out: dict[str, list[dict]] = {paper: [] for paper in build.papers}
    for claim in build.claims:
        where = coverage.where(list(claim.not_run_refs)) if claim.not_run_refs else "no experiment is mapped to it"
        out[claim.paper].append(claim_record(claim, where))
    return out


def _papers_of(build: Build) -> dict[str, set[str]]:
    """experiment -> the papers whose tables show one of its values (our own tables: "embedded")."""
    out: dict[str, set[str]] = {}
    for view in build.tables:
        for cell in view.cells.values():
            for experiment in cell.reproduced.experiments if cell.reproduced else ():
                out.setdefault(experiment, set()).add(view.spec.paper)
    return out


def _claim_counts(records: list[dict]) -> dict[str, int]:
    """Claims per verdict; those judged through a proxy column counted apart ("proxy")."""
    counts = Counter({verdict: 0 for verdict in (*VERDICTS, "proxy")})
    for record in records:
        counts["proxy" if record["proxies"] and record["verdict"] != NOT_RUN else record["verdict"]] += 1
    return dict(counts)


def write_tables(build: Build, out: Path, coverage: Coverage | None = None, levels: dict | None = None) -> dict:
    """Render and write everything; return the index. ``coverage`` names the profiles that fill what
    this one does not reproduce; ``levels`` is the synthetic world's entropy by level (``tables.levels``)."""
    coverage = Coverage() if coverage is None else coverage
    entries = []
    for view in build.tables:
        stem = out / view.spec.paper / view.spec.table
        shown = layout(view, coverage)
        writes = [(".md", table_markdown(view)), (".csv", table_csv(view)), (".tex", table_latex(view)),
                  (".json", json_text({**table_json(view), "layout": shown.json()}))]
        files = [write_atomic(stem.with_suffix(suffix), text) for suffix, text in writes]
        entries.append({**_table_entry(view, [str(path.relative_to(out)) for path in files]), "status": shown.status})
    claims = _claims(build, coverage)
    for paper, records in claims.items():
        atomic_write_json(out / paper / "claims.json", {"paper": paper, "rule": RULE, "claims": records})
        write_atomic(out / paper / "claims.md", claims_markdown(paper, records))
    atomic_write_json(out / "mechanisms.json", mechanisms_json(build.mechanisms))
    write_atomic(out / "mechanisms.md", mechanisms_markdown(build.mechanisms))
    if levels is not None:
        atomic_write_json(out / "levels.json", levels)
        write_atomic(out / "levels.md", levels_markdown(levels))
    else:  # a profile on a real corpus: nothing of an earlier synthetic build is shown
        for stale in (out / "levels.json", out / "levels.md"):
            stale.unlink(missing_ok=True)
    write_atomic(out / "audit.md", audit_markdown(build))
    atomic_write_json(out / "audit.json", audit_json(build))
    verdicts = Counter()
    for entry in entries:
        verdicts.update({f"cells_{key}": value for key, value in entry["cells"].items()})
        verdicts.update({f"pairs_{key}": value for key, value in entry["ordering"].items()})
    index = {
        "note": NOTE, "papers": build.paper_order(), "tables": entries, "audit": ["audit.md", "audit.json"],
        "paper_info": {paper.paper: {"title": paper.title, "arxiv": paper.arxiv, "url": paper.url}
                       for paper in build.papers.values()},
        "reported_cells": {paper.paper: len(paper.cells) for paper in build.papers.values()},
        "flagged": summary(build), "verdicts": dict(verdicts), "order_rule": RULE, "alpha": ALPHA,
        "claims": {paper: _claim_counts(records) for paper, records in claims.items()},
        "mechanisms": {experiment: {"exercised": mechanism.exercised, "checked": mechanism.checked,
                                    "reason": mechanism.reason,
                                    "papers": sorted(_papers_of(build).get(experiment, ()))}
                       for experiment, mechanism in build.mechanisms.items()}}
    atomic_write_json(out / "index.json", index)
    return index
