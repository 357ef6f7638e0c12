"""One report per run: Markdown and a self-contained HTML page from the same blocks.

The report reads what ``python -m tables build`` wrote (``index.json``, each table's JSON, ``audit.json``)
and the runs' logs. Its first screen answers "what did we reproduce?": per paper, every comparison with
its verdict and a link to its evidence (``summary.py``). Then, per paper: each table in the paper's
layout with printed and reproduced values side by side (what this profile leaves out collapsed into
lines naming the profile that fills it), the pairs of rows that decide a verdict, the audit of the
paper's arithmetic, and the figures, grouped per table: the compared arms' training curves on shared
axes, and the paper's figure analogues; the claims' forest plot per paper on the first screen.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from common.provenance import host_summary
from tables.io import write_atomic
from tables.reported import ReportedCell, load_reported
from tables.results import RUNS_INDEX, Metric, Reproduced, load_results, profile_facts, profile_runs, result_files
from tables.specs import load_specs

from .codebook import codebook_usage
from .curves import Curve, plot_arms, read_curves
from .claims import claim_blocks, forest, load_claims
from .document import Block, Bullets, Figure, Heading, Paragraph, Table, to_html, to_markdown, with_contents
from .figures import analogue, eval_sweep, load_figure_specs, metric_curve
from .iso_ppl import iso_ppl
from .scaling_law import law_fit
from .summary import anchor, load_tables, paper_summary

TITLE = "Reproduction report: ConceptLM, NCM, DLCM"
READING = [
    "Where ours is an analogue of the paper's quantity (another corpus, reduced scale, a local copy that is not the "
    "canonical set: each paper's summary and table says which), absolute values are not expected to match the "
    "paper's, so a verdict is about order, pair by pair of rows within a row group: agrees, differs or inconclusive by "
    "a t-test of our difference at 95 % (paired on matched seeds and data order, Welch otherwise; "
    "Holm within a column; "
    "one seed is never enough), or not exercised when a row's concept mechanism failed its check. A proxy orders the "
    "paper's column against a different column of ours and counts as neither agreement nor disagreement.",
    "Tables read printed → ours (mean over the seeds column's n, ± std where n > 1); ⚠ marks a printed value the "
    "audit finds inconsistent with the paper's own cells (recomputed value in brackets). Every cell, with Δ and "
    "checks, is in the tables folder (<paper>/<table>.md, .csv, .tex).",
]


CLAIMS_RULE = ("Claims: each written claim of a paper whose cells we run is judged on our runs: reproduced (every part "
               "significant at 95 % with the paper's sign, Holm across the claim's parts), contradicted (a part "
               "significant with the opposite sign; a claimed tie, a == b, by any significant difference), "
               "inconclusive (with the smallest difference the design could see), "
               "mechanism not exercised (an arm's concept mechanism failed its check), or not run here; a value at "
               "reduced scale is shown, not judged.")


class _Figures:
    """Collects figures: writes each PNG under ``out/figures`` and returns the block that shows it."""

    def __init__(self, out: Path):
        self.out = out
        (out / "figures").mkdir(parents=True, exist_ok=True)  # a declared output, figures or none

    def block(self, name: str, png: bytes | None, caption: str) -> Block:
        if png is None:
            return Paragraph(caption)
        write_atomic(self.out / "figures" / f"{name}.png", png)
        return Figure(f"figures/{name}.png", png, caption)


def _table_blocks(table: dict, level: int) -> list[Block]:
    """A table as the paper lays it out, printed → ours, what is left out in one line each; the pairs
    that decide a verdict (the inconclusive ones are counted, and listed in the table's Markdown)."""
    shown = table["layout"]
    where = table["where"] + (f". {table['caption']}" if table["caption"] else "")
    blocks: list[Block] = [Heading(level, table["title"], anchor(table["paper"], table["table"])), Paragraph(where)]
    if shown["status"] == "not run":
        return blocks + [Paragraph(f"Nothing reproduced at this profile ({shown['fill']}); printed values: "
                                   f"{table['paper']}/{table['table']}.md in the tables folder.")]
    blocks.append(Table(shown["header"], shown["rows"]))
    if shown["collapsed"]:
        blocks.append(Bullets(shown["collapsed"]))
    if table["ordering"]:
        blocks.append(Bullets(table["ordering"]))
    decisive = [row for row, record in zip(table["pairs"]["rows"], table["order_pairs"])
                if record["outcome"] in ("agrees", "differs")]
    if decisive:
        blocks += [Paragraph("Pairs that decide a verdict (reproduced difference against the paper's):"),
                   Table(table["pairs"]["header"], decisive)]
    return blocks


def _in_words(evidence: str) -> str:
    """An audit finding's evidence without its formula (folded into audit.md, which keeps it)."""
    words = re.sub(r"^formula: `[^`]*`(; )?", "", evidence).strip()
    return ((words[0].upper() + words[1:] if words else "Recomputed with the paper's own formula")
            + " (formula: audit.md).")


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
                              r["recomputed"], r["difference"], _in_words(r["evidence"])] for r in flagged]))
    if hand:
        blocks.append(Table(["Severity", "Where", "Finding"], [[r["status"], r["where"], r["finding"]] for r in hand]))
    return blocks


def _analogue_blocks(spec: dict, runs: Path, results: dict[Metric, Reproduced], curves: dict[str, list[Curve]],
                     reported: dict[tuple[str, str, str], ReportedCell], figures: _Figures,
                     current: dict | None) -> list[Block]:
    """One entry of figures.yaml, drawn by its kind; ``current``: what this profile runs (other profiles' rows
    are "not run in this profile"), None without a runs index."""
    if spec["kind"] == "iso_ppl":
        image, caption, table = iso_ppl(spec, results, curves, reported, current)
        return [figures.block(spec["id"], image, caption)] + ([Paragraph("Iso-PPL readings:"), table] if table else [])
    if spec["kind"] == "codebook_usage":
        return [figures.block(spec["id"], *codebook_usage(spec, runs))]
    if spec["kind"] == "scaling_law":
        return [figures.block(spec["id"], *law_fit(spec, runs))]
    if spec["kind"] == "eval_sweep":
        return [figures.block(spec["id"], *eval_sweep(spec, results, current))]
    if spec["kind"] == "metric_curve":
        return [figures.block(spec["id"], *metric_curve(spec, results, current))]
    return [figures.block(spec["id"], *analogue(spec, results, current))]


def _curves_of(arms: list[dict], curves: dict[str, list[Curve]]) -> dict[str, str]:
    """experiment -> arm label, for the arms whose values came from a run with a training log."""
    found = {}
    for arm in arms:
        experiment = next((name for name in arm["experiments"] if name in curves), None)
        if experiment is not None:
            found.setdefault(experiment, f"{arm['label']} ({experiment})")
    return found


def _figure_blocks(table: dict, curves: dict[str, list[Curve]], drawn: dict[tuple, str],
                   figures: _Figures) -> list[Block]:
    """A table's figures: one curve figure per row group (the arms it compares; an arm set drawn for an
    earlier table is referred to, not drawn again). Reproduced against printed values are compared by the
    claims' forest plot on the first screen, in the paper's own units of effect, not by absolute scatters."""
    blocks: list[Block] = []
    groups: dict[str, list[dict]] = {}
    for arm in table["layout"]["arms"]:
        groups.setdefault(arm["group"], []).append(arm)
    for group, arms in groups.items():
        found = _curves_of(arms, curves)
        if not found:
            continue
        key = tuple(found)
        title = " · ".join(filter(None, [table["title"].split(":")[0], group]))
        if key in drawn:
            blocks.append(Paragraph(f"{title}: the same runs as {drawn[key]}, training curves drawn there."))
            continue
        drawn[key] = title
        name = f"curves_{table['paper']}_{table['table']}_{len(drawn)}"
        blocks.append(figures.block(name, *plot_arms(title, [(label, curves[run]) for run, label in found.items()])))
    return blocks


@dataclass
class _Inputs:
    """What every paper section reads besides its own tables."""

    runs: Path
    audit: dict | None
    results: dict[Metric, Reproduced]
    curves: dict[str, list[Curve]]
    analogues: list[dict]
    reported: dict[str, dict[tuple[str, str, str], ReportedCell]]
    drawn: dict[tuple, str] = field(default_factory=dict)  # experiments of a curve figure -> where it is drawn
    current: dict | None = None  # experiment -> evaluations this profile runs (its runs index; None: no index)


def _paper_blocks(paper: str, heading: str, tables: list[dict], context: _Inputs, figures: _Figures) -> list[Block]:
    blocks: list[Block] = [Heading(2, heading, paper)]
    for table in tables:
        blocks += _table_blocks(table, 3)
    if context.audit:
        blocks += _audit_blocks(context.audit, paper)
    figure_blocks: list[Block] = []
    for table in tables:
        figure_blocks += _figure_blocks(table, context.curves, context.drawn, figures)
    for spec in (spec for spec in context.analogues if spec["paper"] == paper):
        figure_blocks += [Heading(4, spec["title"]), *_analogue_blocks(
            spec, context.runs, context.results, context.curves, context.reported.get(paper, {}), figures,
            context.current)]
    return blocks + ([Heading(3, "Figures"), *figure_blocks] if figure_blocks else [])


UNLISTED_PER_FIGURE = 6


def _unlisted_blocks(context: _Inputs, figures: _Figures) -> list[Block]:
    """Training curves of the runs no table compares (a profile's own experiments), a few per figure."""
    listed = {name for runs in context.drawn for name in runs}
    rest = [name for name in context.curves if name not in listed]
    blocks: list[Block] = []
    for start in range(0, len(rest), UNLISTED_PER_FIGURE):
        chunk = rest[start:start + UNLISTED_PER_FIGURE]
        blocks.append(figures.block(f"curves_unlisted_{start // UNLISTED_PER_FIGURE + 1}", *plot_arms(
            f"Runs in no table ({start + 1}–{start + len(chunk)} of {len(rest)})",
            [(name, context.curves[name]) for name in chunk])))
    return [Heading(2, "Training curves of runs in no table"), *blocks] if blocks else []


def _heading(index: dict, paper: str) -> str:
    info = index["paper_info"].get(paper)
    return f"{info['title']} (arXiv {info['arxiv']})" if info else "Our runs (our own tables, no reported numbers)"


def _mechanism_blocks(tables: Path) -> list[Block]:
    """Every concept-model experiment's mechanism checks (``tables/mechanisms.py``): exercised or not, and why."""
    from tables.mechanisms import HEADER, RULE, mechanism_rows

    path = tables / "mechanisms.json"
    data = json.loads(path.read_text())["experiments"] if path.exists() else {}
    if not data:
        return []
    checked = [entry for entry in data.values() if entry.get("checked", True)]
    unchecked = sorted(e for e, entry in data.items() if not entry.get("checked", True))
    text = (f"{len(data)} concept-model experiments: {len(checked)} ran the mechanism checks, "
            f"{sum(entry['exercised'] for entry in checked)} exercised their mechanism"
            + (f"; not checked (verdicts on them shown as not exercised): {', '.join(unchecked)}" if unchecked else "")
            + f". {RULE}")
    return [Heading(3, "Mechanism checks"), Paragraph(text), Table(HEADER, mechanism_rows(data))]


def _levels_blocks(tables: Path) -> list[Block]:
    """The bench (``tables/levels.py``): what a concept model could find in the synthetic world."""
    from tables.levels import HEADER, levels_caption, levels_rows

    path = tables / "levels.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return [Heading(3, "The bench: the world's entropy by level"), Paragraph(levels_caption(data)),
            Table(HEADER, levels_rows(data))]


def _summary_blocks(index: dict, built: dict[str, list[dict]], tables: Path, figures: _Figures) -> list[Block]:
    """The first screen: the reading rule, then per paper its claims judged on our runs (``claims.py``),
    the forest plot of their tested parts, then the row orderings of its tables (``summary.py``)."""
    papers = [paper for paper in index["papers"] if paper in index["paper_info"]]
    if not papers:
        return []
    blocks: list[Block] = [Heading(2, "What this profile reproduces")]
    for paper in papers:
        records = load_claims(tables, paper)
        image, caption = forest(paper, records)
        blocks += [Heading(3, _heading(index, paper)), *claim_blocks(records)]
        if image is not None:
            blocks.append(figures.block(f"forest_{paper}", image, caption))
        blocks += [Paragraph("Row orderings of the paper's tables (detail: the papers do not claim each pair):"),
                   *paper_summary(built[paper])]
    blocks += [Heading(3, "How to read the verdicts"), Bullets([CLAIMS_RULE] + READING)]
    blocks += _mechanism_blocks(tables) + _levels_blocks(tables)
    if len(papers) < len(index["papers"]):
        blocks.append(Paragraph("Our own tables of the embedded runs (no reported numbers) come next, then one "
                                "section per paper."))
    return blocks


def origin(runs: Path) -> str:
    """Which profile, commit(s) and host(s) produced the numbers: read from the results' provenance."""
    facts = profile_facts(runs)
    commits, hosts, dirty = Counter(), Counter(), 0
    for path in result_files(runs):
        try:
            provenance = json.loads(path.read_text()).get("provenance") or {}
        except (json.JSONDecodeError, AttributeError):
            continue
        commits[str(provenance.get("git_commit", "unknown"))[:10]] += 1
        fingerprint = provenance.get("host_fingerprint")
        host = str(provenance.get("host") or "unknown host")
        hosts[f"{host}: {host_summary(fingerprint)}" if isinstance(fingerprint, dict) else host] += 1
        dirty += bool(provenance.get("git_dirty"))
    if not commits:
        return f"Profile {facts.get('name', 'unknown')} ({facts['scale']} scale): no results yet."
    said = lambda counter: ", ".join(f"{key} ({count})" for key, count in counter.most_common())  # noqa: E731
    return (f"Profile {facts.get('name', 'unknown')} ({facts['scale']} scale); {sum(commits.values())} results from "
            f"commit {said(commits)}" + (f", {dirty} with uncommitted changes" if dirty else "")
            + f"; host {said(hosts)}.")


def build_report(runs: Path, tables: Path, out: Path) -> list[Block]:
    """Write report.md, report.html and figures/*.png; return the blocks."""
    figures = _Figures(out)
    blocks: list[Block] = [Heading(1, TITLE), Paragraph(
        f"Generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC from {runs} and {tables}."),
        Paragraph(origin(runs))]
    index_path = tables / "index.json"
    if not index_path.exists():
        blocks.append(Paragraph(f"The tables were not built: {index_path} is missing. Run "
                                f"`python -m tables build --results {runs} --out {tables}` first."))
        index = {"papers": [], "tables": [], "paper_info": {}}
    else:
        index = json.loads(index_path.read_text())
    built = {paper: load_tables(tables, index, paper) for paper in index["papers"]}
    blocks += _summary_blocks(index, built, tables, figures)
    audit = tables / "audit.json"
    context = _Inputs(runs, json.loads(audit.read_text()) if audit.exists() else None, load_results(runs),
                      read_curves(runs), load_figure_specs(),
                      {paper.paper: paper.cells for paper in load_reported(load_specs()).values()},
                      current=profile_runs(runs) if (runs / RUNS_INDEX).is_file() else None)
    for paper in index["papers"]:
        blocks += _paper_blocks(paper, _heading(index, paper), built[paper], context, figures)
    blocks += _unlisted_blocks(context, figures)
    blocks = with_contents(blocks, 3, depth=2)
    write_atomic(out / "report.md", to_markdown(blocks))
    write_atomic(out / "report.html", to_html(blocks, TITLE))
    return blocks
