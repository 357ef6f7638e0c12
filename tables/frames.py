"""The built tables as pandas DataFrames: one call for a researcher who wants the numbers, not the pages.

    import tables
    cells = tables.load("results")             # every cell of every paper table
    pairs = tables.load("results", "pairs")    # every compared pair of rows: d, its 95 % interval, the test,
                                               # the verdict
    claims = tables.load("results", "claims")  # every written claim and each of its parts, with the verdict

The frames are read from what the DAG's ``tables`` job wrote (``results/tables/<paper>/<table>.json`` and
``claims.json``): the same numbers the Markdown, CSV and LaTeX pages print, typed. ``cells`` has one row per
cell: ``paper, table, row, column`` and their labels, ``reported`` (the paper's printed value as a number;
``reported_text`` as printed, with its ``~``, ``<`` or ``>``),
``recomputed`` (our arithmetic on the paper's other cells), ``reproduced_mean``, ``reproduced_std``, ``n``
(seeds), ``delta``, ``verdict`` and ``analogue`` (why a cell stands in for the paper's quantity; empty when
it is the same quantity). Numbers are floats (NaN where the page shows nothing); the rest as the JSON holds
them (strings; a claim's seed counts ``n`` as a list).
"""
from __future__ import annotations

import json
from pathlib import Path

from common.errors import ReproError

KINDS = ("cells", "pairs", "claims")
QUALIFIERS = "~<>≈≤≥ "   # what a printed value may carry before its number ("~1.4", ">0.98")
NUMERIC = {"cells": ("reported", "recomputed", "reproduced_mean", "reproduced_std", "delta", "n", "decimals"),
           "pairs": ("d_value", "ci_low", "ci_high", "p", "p_adjusted", "mde", "df", "correlation", "n_a", "n_b"),
           "claims": ("d", "ci_low", "ci_high", "p_adjusted", "mde", "paper_effect")}


def tables_dir(results: str | Path) -> Path:
    """``results/tables`` (or ``results`` itself when it is a tables folder), refused in one line when no
    table was built there."""
    root = Path(results)
    folder = root / "tables" if (root / "tables" / "index.json").is_file() else root
    if not (folder / "index.json").is_file():
        raise ReproError(f"{root}: no built tables (no {root / 'tables' / 'index.json'}); build them first: "
                         "make reproduce, or snakemake <results>/tables/index.json")
    return folder


def records(results: str | Path, kind: str = "cells") -> list[dict]:
    """The rows of ``load`` as dicts (no pandas needed)."""
    if kind not in KINDS:
        raise ReproError(f"tables.load: kind {kind!r}: use one of {', '.join(KINDS)}")
    folder = tables_dir(results)
    rows: list[dict] = []
    for paper in sorted(p for p in folder.iterdir() if p.is_dir()):
        if kind == "claims":
            path = paper / "claims.json"
            if path.is_file():
                for claim in json.loads(path.read_text())["claims"]:
                    head = {k: v for k, v in claim.items() if k not in ("parts", "proxies")}
                    rows += [{**head, "part": i, **{f"part_{k}" if k in head else k: v for k, v in part.items()}}
                             for i, part in enumerate(claim["parts"])] or [{**head, "part": None}]
            continue
        for path in sorted(paper.glob("*.json")):
            table = json.loads(path.read_text())
            if "records" not in table:
                continue
            if kind == "cells":
                rows += table["records"]
            else:
                rows += [{"paper": table["paper"], "table": table["table"], **pair} for pair in table["order_pairs"]]
    return rows


def load(results: str | Path = "results", kind: str = "cells"):
    """The built tables under ``results`` as a ``pandas.DataFrame`` of ``kind`` (module docstring)."""
    import pandas as pd

    frame = pd.DataFrame.from_records(records(results, kind))
    if kind == "cells" and "reported" in frame:
        frame["reported_text"] = frame["reported"]
        frame["reported"] = frame["reported"].astype(str).str.lstrip(QUALIFIERS)
    for column in NUMERIC[kind]:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame
