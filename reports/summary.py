"""The first screen of the report: per paper, what this profile reproduces, contradicts or
cannot resolve, one line per comparison, each linking to the table that holds its evidence.

A comparison is a column of a paper table within one row group (a model size); its pairs of rows are
judged by the tables' rule (``tables/ordering.py``). The comparison reads ``agrees`` when every pair
that could be judged agrees and at least one could, ``differs`` when every such pair differs, ``mixed``
when both occur, ``inconclusive`` when none could be judged (why: one seed, or a test that could not tell),
``not exercised`` when every pair involves a row whose concept mechanism failed its check, and
``proxy: ...`` when the paper's column is ordered against a different column of ours (never counted as
agreement or disagreement). Tables with nothing reproduced are one line naming the profiles that fill
them. Everything is read from the built tables; nothing here is typed by hand.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .document import Block, Link, Paragraph, Table

VERDICTS = ("agrees", "differs", "mixed", "inconclusive", "not exercised")
PLURAL = {"agrees": "agree", "differs": "differ"}
PROXY_WORDS = {"agrees": "same order", "differs": "opposite order", "inconclusive": "inconclusive",
               "not exercised": "not exercised"}
HEADER = ["Comparison", "Verdict", "Pairs of rows", "Evidence"]


@dataclass(frozen=True)
class Comparison:
    table: str      # the table's anchor
    title: str      # "Table 1 · Avg PPL · GPT-2 355M"
    verdict: str    # one of VERDICTS, or "proxy: ..." of one of them
    pairs: str      # "2 agree, 1 inconclusive (n=1)"
    analogue: str = ""  # why ours stands in for the paper's quantity (another corpus, reduced scale); "" if it is it


def anchor(paper: str, table: str) -> str:
    return f"{paper}-{table}"


def short_title(title: str) -> str:
    """"ConceptLM Table 1: language-modelling perplexity" -> "Table 1"."""
    head = title.split(":")[0]
    return head.split(" ", 1)[1] if " " in head else head


def _verdict(counts: dict[str, int], proxy: bool) -> str:
    agree, differ = counts.get("agrees", 0), counts.get("differs", 0)
    idle = counts.get("not exercised", 0) and not counts.get("inconclusive", 0)
    word = ("mixed" if agree and differ else "agrees" if agree else "differs" if differ
            else "not exercised" if idle else "inconclusive")
    return f"proxy: {word}" if proxy else word


def _reason_kind(reason: str) -> str:
    """"n=1", or "within the noise" for a test that could not tell (its p and MDE are in the table)."""
    return reason if reason == "n=1" else "within the noise"


def _pairs_text(records: list[dict], proxy: bool) -> str:
    """"2 agree, 1 inconclusive (1 n=1)"; a proxy's pairs in the same or the opposite order, never "agree"."""
    judged = [record for record in records if record["outcome"] != "tied"]
    counts = Counter(record["outcome"] for record in judged)
    reasons = Counter(_reason_kind(record["reason"]) for record in judged if record["outcome"] == "inconclusive")
    words = PROXY_WORDS if proxy else {outcome: PLURAL.get(outcome, outcome) for outcome in counts}
    parts = [f"{counts[outcome]} {words.get(outcome, outcome) if counts[outcome] > 1 or proxy else outcome}"
             for outcome in ("agrees", "differs", "inconclusive", "not exercised") if counts[outcome]]
    why = ", ".join(f"{count} {reason}" for reason, count in reasons.items())
    text = ", ".join(parts) + (f" ({why})" if why else "")
    tied = len(records) - len(judged)
    return text + (f"; {tied} tied in the paper" if tied else "")


def comparisons(table: dict) -> list[Comparison]:
    """One comparison per judged (column, row group) of a built table's JSON."""
    out = []
    for column in table.get("order_columns", []):
        for group in column["groups"]:
            records = [record for record in table["order_pairs"]
                       if record["column"] == column["column"] and record["group"] == group["group"]]
            if all(record["outcome"] == "tied" for record in records):
                continue
            where = " · ".join(filter(None, [short_title(table["title"]), column["title"], group["group"]]))
            analogue = "; ".join(dict.fromkeys(reason for record in records
                                               for reason in record.get("analogue", "").split("; ") if reason))
            out.append(Comparison(anchor(table["paper"], table["table"]), where,
                                  _verdict(group["counts"], bool(column["proxy"])),
                                  _pairs_text(records, bool(column["proxy"])), analogue))
    return out


def atoms(reasons) -> list[str]:
    """The distinct parts ("trained on X, the paper on Y", "reduced scale", ...) of "; "-joined reasons, in order."""
    return list(dict.fromkeys(part for reason in reasons for part in reason.split("; ") if part))


def _analogue_blocks(found: list[Comparison]) -> tuple[list[Block], bool]:
    """A sentence saying which comparisons are analogues and why; True when each line must be marked."""
    parts = atoms(comparison.analogue for comparison in found)
    if not parts:
        return [], False
    if all(comparison.analogue for comparison in found):
        return [Paragraph("Every comparison below is an analogue, not the paper's quantity on the paper's data ("
                          + "; ".join(parts) + "): its verdict is about the order of the rows, which the analogue "
                          "may share.")], False
    return [Paragraph("Comparisons marked (analogue) stand in for the paper's quantity (" + "; ".join(parts)
                      + ").")], True


def _tally(found: list[Comparison], statuses: Counter) -> str:
    verdicts = Counter(comparison.verdict for comparison in found)
    judged = ", ".join(f"{verdicts[word]} {PLURAL.get(word, word) if verdicts[word] > 1 else word}"
                       for word in VERDICTS if verdicts[word])
    proxies = sum(count for word, count in verdicts.items() if word.startswith("proxy"))
    tables = ", ".join(f"{count} {status}" for status, count in statuses.items())
    return (f"{len(found)} comparisons: {judged or 'none judged'}"
            + (f", {proxies} proxies (neither agreement nor disagreement)" if proxies else "")
            + f". Tables: {tables}.")


def paper_summary(tables: list[dict]) -> list[Block]:
    """The summary blocks of one paper: the tally, the comparisons, and the tables not run here."""
    per_table = [(table, comparisons(table)) for table in tables]
    found = [comparison for _, judged in per_table for comparison in judged]
    statuses = Counter(table["layout"]["status"] for table in tables)
    blocks: list[Block] = [Paragraph(_tally(found, statuses))]
    analogue_blocks, mark = _analogue_blocks(found)
    blocks += analogue_blocks
    if found:
        blocks.append(Table(HEADER, [[c.title, c.verdict + (" (analogue)" if mark and c.analogue else ""), c.pairs,
                                      Link("table", f"#{c.table}")] for c in found]))
    idle = [table for table in tables if table["layout"]["status"] == "not run"]
    if idle:
        by_fill: dict[str, list[str]] = {}
        for table in idle:
            by_fill.setdefault(table["layout"]["fill"], []).append(short_title(table["title"]))
        blocks.append(Paragraph("Not reproduced at this profile: " + "; ".join(
            f"{', '.join(names)} ({fill})" for fill, names in by_fill.items()) + "."))
    for status, words in (("reproduced", "Reproduced"), ("partial", "Reproduced in part (rows of other profiles "
                                                                      "collapsed in the table)")):
        unjudged = [short_title(table["title"]) for table, judged in per_table
                    if table["layout"]["status"] == status and not judged]
        if unjudged:
            blocks.append(Paragraph(f"{words}, with no pair of rows to order against the paper: "
                                    + ", ".join(unjudged) + "."))
    return blocks


def load_tables(tables: Path, index: dict, paper: str) -> list[dict]:
    return [json.loads((tables / paper / f"{entry['table']}.json").read_text())
            for entry in index["tables"] if entry["paper"] == paper]
