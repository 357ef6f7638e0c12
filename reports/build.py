"""One report per run: Markdown and a self-contained HTML page (issue 3, deliverable 4).

The report reads what ``python -m tables build`` wrote (``index.json``, the
per-table JSON, ``audit.json``) and the result files: the findings generated
from the tables first (``findings.py``), then the embedded foundation table,
then training curves, then one section per paper with every table
(printed | reproduced | verdict), its scatter figure, the figure analogues and
the paper's audit.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from tables.io import write_atomic
from tables.reported import ReportedCell, load_reported
from tables.results import Metric, Reproduced, load_results
from tables.specs import load_specs

from .codebook import codebook_usage
from .curves import Curve, plot_curves, read_curves
from .document import Block, Bullets, Figure, Heading, Paragraph, Table, to_html, to_markdown
from .figures import analogue, eval_sweep, load_figure_specs, metric_curve, scatter
from .findings import PROXY_NOTE, collect
from .iso_ppl import iso_ppl
from .scaling_law import law_fit

TITLE = "Reproduction report: ConceptLM, NCM, DLCM"
READING = [
    "Reported: the number printed in the paper (— when not recovered; tables/MISSING.md says where to find it).",
    "Recomputed and Check: the paper's own aggregate recomputed from its printed cells; material and rounding "
    "mismatches are listed in the audit with their evidence.",
    "Reproduced: mean ± std over the seeds found (n); Δ = reproduced − reported.",
    "Verdict: our runs are at embedded scale, so absolute values are not expected to match. The verdict is about "
    "order, pair by pair of rows: agrees, differs or inconclusive against the standard error of our difference "
    "(seeds of both rows; one seed is never enough). Kendall τ per column is a summary. A column marked proxy is "
    "judged through a different column of ours and counts as neither agreement nor disagreement.",
]


class _Figures:
    """Collects figures: writes each PNG under ``out/figures`` and returns the block that shows it."""

    def __init__(self, out: Path):
        self.out = out

    def block(self, name: str, png: bytes | None, caption: str) -> Block:
        if png is None:
            return Paragraph(caption)
        write_atomic(self.out / "figures" / f"{name}.png", png)
        return Figure(f"figures/{name}.png", png, caption)


def _table_blocks(table: dict, figures: _Figures, level: int) -> list[Block]:
    blocks: list[Block] = [Heading(level, table["title"]),
                           Paragraph(table["where"] + (f". {table['caption']}" if table["caption"] else "")),
                           Paragraph(f"{table['printed']['title']}:"),
                           Table(table["printed"]["header"], table["printed"]["rows"])]
    records = table["records"]
    mapped = any(record["verdict"] for record in records)
    if table["cells"]["rows"] and (mapped or any(record["check"] in ("material", "rounding") for record in records)):
        blocks += [Paragraph("Reported, recomputed and reproduced:"), Table(table["cells"]["header"], table["cells"]["rows"])]
    if table["ordering"]:
        blocks += [Bullets(table["ordering"]), Paragraph("Pairs of rows (reproduced difference against the paper's):"),
                   Table(table["pairs"]["header"], table["pairs"]["rows"])]
    if mapped and any(record["decimals"] != "" for record in records):
        blocks.append(figures.block(f"scatter_{table['paper']}_{table['table']}", *scatter(table)))
    return blocks


def _audit_blocks(audit: dict, paper: str) -> list[Block]:
    flagged = [r for r in audit["findings"] if r["paper"] == paper and r["status"] in ("material", "rounding")]
    hand = [r for r in audit["hand"] if r["paper"] == paper]
    if not flagged and not hand:
        return []
    counts = audit["summary"][paper]
    blocks: list[Block] = [Heading(3, "Audit of the paper's arithmetic"), Paragraph(
        f"{counts['material']} material and {counts['rounding']} rounding-level mismatches, {counts['consistent']} "
        f"consistent checks, {counts['not_checkable']} aggregates not checkable for missing cells; "
        f"{len(hand)} inconsistencies recorded by hand. Full evidence: audit.md.")]
    if flagged:
        blocks.append(Table(["Severity", "Where", "Printed", "Recomputed", "Δ", "Evidence"],
                            [[r["status"], r["where"] + (f": {r['claim']}" if r["claim"] else ""), r["printed"],
                              r["recomputed"], r["difference"], r["evidence"]] for r in flagged]))
    if hand:
        blocks.append(Table(["Severity", "Where", "Finding"], [[r["status"], r["where"], r["finding"]] for r in hand]))
    return blocks


def _analogue_blocks(spec: dict, runs: Path, results: dict[Metric, Reproduced], curves: dict[str, list[Curve]],
                     reported: dict[tuple[str, str, str], ReportedCell], figures: _Figures) -> list[Block]:
    """One entry of figures.yaml, drawn by its kind."""
    if spec["kind"] == "iso_ppl":
        image, caption, table = iso_ppl(spec, results, curves, reported)
        return [figures.block(spec["id"], image, caption)] + ([Paragraph("Iso-PPL readings:"), table] if table else [])
    if spec["kind"] == "codebook_usage":
        return [figures.block(spec["id"], *codebook_usage(spec, runs))]
    if spec["kind"] == "scaling_law":
        return [figures.block(spec["id"], *law_fit(spec, runs))]
    if spec["kind"] == "eval_sweep":
        return [figures.block(spec["id"], *eval_sweep(spec, results))]
    if spec["kind"] == "metric_curve":
        return [figures.block(spec["id"], *metric_curve(spec, results))]
    return [figures.block(spec["id"], *analogue(spec, results))]


def _curve_blocks(runs: Path, curves: dict[str, list[Curve]], figures: _Figures) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Training curves")]
    if not curves:
        return blocks + [Paragraph(f"No training logs found under {runs}/*/seed*/train/metrics.jsonl.")]
    for experiment, seeds in curves.items():
        if not any(curve.train or curve.valid for curve in seeds):
            blocks.append(Paragraph(f"{experiment}: the training log has no readable rows."))
            continue
        blocks.append(figures.block(f"curves_{experiment}", *plot_curves(experiment, seeds)))
    return blocks


def _findings_blocks(tables: Path) -> list[Block]:
    """The findings, generated from the tables: first in the report, before any table."""
    findings = collect(tables)
    if findings is None:
        return []
    blocks: list[Block] = [Heading(2, "Findings"), Paragraph(findings.lead)]
    if findings.judged:
        blocks.append(Bullets([finding.text for finding in findings.judged]))
    else:
        blocks.append(Paragraph("No pair of rows has both printed and reproduced values in two or more rows of a "
                                "group yet."))
    if findings.proxies:
        blocks += [Paragraph(PROXY_NOTE), Bullets([finding.text for finding in findings.proxies])]
    return blocks


def build_report(runs: Path, tables: Path, out: Path) -> list[Block]:
    """Write report.md, report.html and figures/*.png; return the blocks."""
    figures = _Figures(out)
    blocks: list[Block] = [Heading(1, TITLE), Paragraph(
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from {runs} and {tables}."),
        *_findings_blocks(tables), Bullets(READING)]
    index_path = tables / "index.json"
    if not index_path.exists():
        blocks.append(Paragraph(f"The tables were not built: {index_path} is missing. Run "
                                f"`python -m tables build --results {runs} --out {tables}` first."))
        index = {"papers": [], "tables": [], "paper_info": {}}
    else:
        index = json.loads(index_path.read_text())
    audit = json.loads((tables / "audit.json").read_text()) if (tables / "audit.json").exists() else None
    results, curves = load_results(runs), read_curves(runs)
    analogues = load_figure_specs()
    reported = {paper.paper: paper.cells for paper in load_reported(load_specs()).values()}
    for position, paper in enumerate(index["papers"]):
        info = index["paper_info"].get(paper)
        heading = f"{info['title']} (arXiv {info['arxiv']})" if info else "Embedded profile (our own tables)"
        blocks.append(Heading(2, heading))
        for entry in (entry for entry in index["tables"] if entry["paper"] == paper):
            table = json.loads((tables / paper / f"{entry['table']}.json").read_text())
            blocks += _table_blocks(table, figures, 3)
        for spec in (spec for spec in analogues if spec["paper"] == paper):
            blocks += [Heading(3, spec["title"]),
                       *_analogue_blocks(spec, runs, results, curves, reported.get(paper, {}), figures)]
        if audit:
            blocks += _audit_blocks(audit, paper)
        if position == 0:
            blocks += _curve_blocks(runs, curves, figures)
    write_atomic(out / "report.md", to_markdown(blocks))
    write_atomic(out / "report.html", to_html(blocks, TITLE))
    return blocks
