"""The findings in prose, generated from the built tables.

Reads what ``python -m tables build`` wrote: ``index.json`` (table order, totals,
the verdict rule) and each table's JSON (``order_columns``, ``order_pairs``).
One bullet per judged comparison group, i.e. a column of a paper table within
one row group (a model size): what agrees, what differs, what is inconclusive
and why (n, se).  Comparisons through an ``order_proxy`` (the paper's column
against a different column of ours) are listed apart and never called
agreement or disagreement.  Every number in the prose is a string the table
already shows; nothing is typed by hand (``untraceable`` checks it).

``python -m reports findings --tables results/tables [--readme docs/findings.md]``
prints them, and with ``--readme`` rewrites the block between the markers below.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tables.io import write_atomic

from .summary import atoms

START, END = "<!-- findings:start -->", "<!-- findings:end -->"
OUTCOMES = ("agrees", "differs", "inconclusive", "not exercised")
PROXY_NOTE = ("Proxy comparisons: the paper's column is ordered against a different quantity of ours, so they are "
              "neither agreement nor disagreement and are not counted above:")
PROXY_LABELS = {"agrees": "Proxy, same order", "differs": "Proxy, opposite order",
                "inconclusive": "Proxy, inconclusive", "not exercised": "Proxy, mechanism not exercised"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Finding:
    """One comparison group in prose, with the table whose Markdown shows every number it quotes."""

    text: str
    paper: str
    table: str
    source: str  # the table's Markdown file, relative to the tables folder
    proxy: bool
    analogue: str = ""  # why ours stands in for the paper's quantity ("" when it is it)


@dataclass
class Findings:
    lead: str
    judged: list[Finding] = field(default_factory=list)
    proxies: list[Finding] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)  # per paper, its claims judged on our runs (first)


def _pair_text(record: dict) -> str:
    """"ConceptLM − Base (paper -1.16; ours -2.6 [-3.1, -2.1]; n 3, 3; p=0.2; could see |d| ≥ 1.5)", every part
    as the table shows it (the bracket is the 95 % interval of our difference)."""
    ours = record["d"] + (f" {record['ci']}" if record.get("ci") else "")
    why = record["reason"]
    if why == "n=1":
        why = f"n=1: {', '.join(record['single'])}"
    return (f"{record['a_label']} − {record['b_label']} (paper {record['paper_difference']}; ours {ours}; "
            f"n {record['n_a']}, {record['n_b']}" + (f"; {why}" if why else "") + ")")


def _analogue(records: list[dict]) -> str:
    return "; ".join(dict.fromkeys(reason for record in records for reason in record.get("analogue", "").split("; ")
                                   if reason))


def _group_text(title: str, column: dict, group: dict, records: list[dict]) -> str:
    where = f"{title} · {column['title']}" + (f" · {group['group']}" if group["group"] else "")
    parts = [f"{where}: {group['summary']}."]
    for outcome in OUTCOMES:
        chosen = [record for record in records if record["outcome"] == outcome]
        if chosen:
            label = PROXY_LABELS[outcome] if column["proxy"] else outcome.capitalize()
            parts.append(f"{label}: {'; '.join(_pair_text(record) for record in chosen)}.")
    tied = [record for record in records if record["outcome"] == "tied"]
    if tied:
        parts.append("Tied in the paper, not judged: "
                     + "; ".join(f"{record['a_label']} − {record['b_label']}" for record in tied) + ".")
    return " ".join(parts)


def _lead(index: dict) -> str:
    counts = index.get("verdicts", {})
    totals = " / ".join(f"{outcome} {counts.get(f'pairs_{outcome}', 0)}" for outcome in OUTCOMES)
    return (f"Pairs of rows, our difference against the paper's, per comparison group (a column of a paper table "
            f"within one row group): {totals}; {counts.get('pairs_proxy', 0)} proxy pairs are "
            f"listed apart and counted as neither; {counts.get('pairs_tied', 0)} pairs tied in the paper are not "
            f"judged. Rule: {index.get('order_rule', '')}")


def claims_text(tables: Path, index: dict) -> list[str]:
    """Per paper: its claims about runs by verdict, each judged one as a bullet (every number as
    ``<paper>/claims.md`` shows it), and how many of its concept-model experiments exercised their mechanism."""
    from tables.claims import VERDICTS, claim_rows

    lines = []
    for paper in index.get("claims", {}):
        path = tables / paper / "claims.json"
        records = json.loads(path.read_text())["claims"] if path.exists() else []
        if not records:
            continue
        tally = index["claims"][paper]
        counts = ", ".join(f"{tally[verdict]} {verdict}" for verdict in (*VERDICTS, "proxy") if tally.get(verdict))
        concept = {e: m for e, m in index.get("mechanisms", {}).items() if paper in m.get("papers", [])}
        checked = {e: m for e, m in concept.items() if m.get("checked", True)}
        idle = sorted(e for e, m in checked.items() if not m["exercised"])
        mechanisms = (f" Mechanism checks: {len(concept)} concept-model experiments, {len(checked)} checked, "
                      f"{len(checked) - len(idle)} exercised" + (f" (failed: {', '.join(idle)})" if idle else "") + "."
                      if checked else " No concept-model experiment of this paper ran its mechanism checks.")
        lines.append(f"**{paper}** ({paper}/claims.md): {len(records)} claims about runs: {counts or 'none'}."
                     + mechanisms)
        lines += [f"- {text} ({where}): {verdict}; paper {effect}; ours {ours}" + (f"; {why}" if why else "")
                  for text, where, effect, ours, verdict, why in claim_rows(records)]
        lines.append("")
    return lines


def collect(tables: Path) -> Findings | None:
    """The findings of a built tables folder; None when it was not built (no index.json)."""
    index_path = tables / "index.json"
    if not index_path.exists():
        return None
    index = json.loads(index_path.read_text())
    judged: list[Finding] = []
    proxies: list[Finding] = []
    for entry in index["tables"]:
        path = tables / entry["paper"] / f"{entry['table']}.json"
        table = json.loads(path.read_text())
        title = table["title"].split(":")[0]
        source = f"{entry['paper']}/{entry['table']}.md"
        for column in table.get("order_columns", []):
            for group in column["groups"]:
                records = [record for record in table["order_pairs"]
                           if record["column"] == column["column"] and record["group"] == group["group"]]
                if not any(record["outcome"] in OUTCOMES for record in records):
                    continue  # every pair tied in the paper: nothing judged
                finding = Finding(_group_text(title, column, group, records), entry["paper"], entry["table"], source,
                                  bool(column["proxy"]), _analogue(records))
                (proxies if finding.proxy else judged).append(finding)
    return Findings(_lead(index), judged, proxies, claims_text(tables, index))


# Our own tables of the embedded runs (tables/specs/embedded/) quoted under the findings: (table, columns)
HEADLINES = {"foundation": ("test PPL", "PPL ÷ oracle"),
             "ncm": ("Gen PPL", "entropy H", "NFE", "prefixes accepted"),
             "ncm_elbo": ("nats per window",),
             "ncm_conditional": ("BLEU", "ROUGE-L", "boards (%)", "NFE", "s / target"),
             "dlcm": ("test PPL", "concept share P", "target R", "tokens / concept", "world's tokens / concept", "F1",
                      "F1, shifted (chance)", "F1, word-start rule",
                      "F1 (±1 token)", "choice acc"),
             "dlcm_law": ("fitted", "95 % lo", "95 % hi", "determined"),
             "dlcm_law_fit": ("R^2 fitted", "R^2 held out", "RMSE held out (nats)", "R^2 across runs (last points)",
                              "MAE last points (nats)", "MAE held-out last points (nats)", "fitted points",
                              "all determined")}
INTRO = {"foundation": "Every embedded run", "ncm": "Every embedded NCM sampler and diagnostic",
         "ncm_elbo": "The NCM generator's code NLL per window against the AR baseline's NLL per window (no sampling)",
         "ncm_conditional": "Every embedded conditional generator and diagnostic",
         "dlcm": "Every embedded DLCM run beside the token baselines",
         "dlcm_law": ("The scaling law (Eq. 22) fitted to the DLCM grid: constants, with 95 % bootstrap intervals "
                      "where the grid identifies them"),
         "dlcm_law_fit": "How well the law fits and predicts"}


def headline(tables: Path, table: str = "foundation") -> str:
    """The columns ``HEADLINES[table]`` of an embedded table as it is printed (mean ± std, n), Markdown;
    empty when that table was not built."""
    path = tables / "embedded" / f"{table}.json"
    if not path.exists():
        return ""
    printed = json.loads(path.read_text())["printed"]
    keep = [i for i, label in enumerate(printed["header"]) if i == 0 or label in HEADLINES[table]]
    rows = [[row[i] for i in keep] for row in printed["rows"] if any(row[i] != "—" for i in keep[1:])]
    if not rows:
        return ""
    grid = ["| " + " | ".join(printed["header"][i] or "run" for i in keep) + " |", "|" + "---|" * len(keep)]
    return (f"{INTRO[table]} (embedded/{table}.md; mean ± std over seeds, n):\n\n"
            + "\n".join(grid + ["| " + " | ".join(row) + " |" for row in rows]) + "\n")


def findings_markdown(findings: Findings | None, tables: Path, compact: bool = False) -> str:
    """The findings as Markdown: the lead, one bullet per judged group, then the proxies apart (with
    ``compact``, their count only: docs/findings.md), then the embedded runs' test PPL and the NCM samplers'
    Gen. PPL (``HEADLINES``)."""
    if findings is None:
        return (f"The tables were not built ({tables / 'index.json'} is missing): run "
                f"`python -m tables build --out {tables}` first.\n")
    lines = (["The papers' claims judged on our runs (docs/verdicts.md):", ""] + findings.claims
             + ["Row orderings of the tables (detail: the papers do not claim each pair):", ""]
             if findings.claims else [])
    lines += [findings.lead, ""]
    everything = findings.judged + findings.proxies
    reasons = atoms(finding.analogue for finding in everything)
    mark = bool(reasons) and not all(finding.analogue for finding in everything)
    if reasons:
        lines += [("Groups marked (analogue) compare" if mark else "Every group below compares")
                  + " a stand-in for the paper's quantity, so a verdict is about the order of the rows only ("
                  + "; ".join(reasons) + ").", ""]
    bullet = lambda finding: f"- {'(analogue) ' if mark and finding.analogue else ''}{finding.text}"  # noqa: E731
    if findings.judged:
        lines += [bullet(finding) for finding in findings.judged] + [""]
    else:
        lines += ["No pair of rows has both printed and reproduced values in two or more rows of a group yet.", ""]
    if findings.proxies and compact:
        lines += [f"{len(findings.proxies)} comparison groups are proxies (the paper's Avg PPL against our test PPL): "
                  "neither agreement nor disagreement; the report lists them.", ""]
    elif findings.proxies:
        lines += [PROXY_NOTE, ""] + [bullet(finding) for finding in findings.proxies] + [""]
    quoted = [text for text in (headline(tables, table) for table in HEADLINES) if text]
    return "\n".join(lines) + "".join("\n" + text for text in quoted)


def untraceable(text: str, reference: str) -> list[str]:
    """Numbers of ``text`` that ``reference`` (a table as written) does not show as numbers."""
    shown = set(_NUMBER.findall(reference))
    return [number for number in _NUMBER.findall(text) if number not in shown]


def rewrite_block(document: str, block: str) -> str:
    """Replace what lies between the findings markers of ``document`` with ``block``."""
    start, end = document.find(START), document.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the markers {START} and {END} are missing or out of order")
    return document[:start + len(START)] + "\n" + block.rstrip("\n") + "\n" + document[end:]


def rewrite_readme(path: Path, block: str) -> None:
    write_atomic(path, rewrite_block(path.read_text(), block))
