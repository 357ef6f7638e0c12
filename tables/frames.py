"""The built tables as pandas DataFrames: one call for a researcher who wants the numbers, not the pages.

    import tables
    cells = tables.load("results")             # every cell of every paper table
    pairs = tables.load("results", "pairs")    # every compared pair of rows: d, its 95 % interval, the test,
                                               # the verdict
    claims = tables.load("results", "claims")  # every written claim and each of its parts, with the verdict
    runs = tables.load("results", "results")   # every metric of every run and seed the tables read
    paper = tables.load(kind="reported")       # every cell printed in the three papers

The frames are read from what the DAG's ``tables`` job wrote (``results/tables/<paper>/<table>.json`` and
``claims.json``): the same numbers the Markdown, CSV and LaTeX pages print, typed. ``cells`` has one row per
cell: ``paper, table, row, column`` and their labels, ``reported`` (the paper's printed value as a number;
``reported_text`` as printed, with its ``~``, ``<`` or ``>``),
``recomputed`` (our arithmetic on the paper's other cells), ``reproduced_mean``, ``reproduced_std``, ``n``
(seeds), ``delta``, ``verdict`` and ``analogue`` (why a cell stands in for the paper's quantity; empty when
it is the same quantity). Numbers are floats (NaN where the page shows nothing); the rest as the JSON holds
them (strings; a claim's seed counts ``n`` as a list). ``results`` is what the cells are made from, read from
the run folders (``results/runs``) as the tables job reads them (``tables.results.results_frame``): one row
per run x seed x metric, ``experiment, seed, eval, metric, value, corpus, caveats, order``; the seeds are
aggregated by ``groupby(["experiment", "eval", "metric"])``. ``reported`` needs no run: the papers' printed
cells (``tables/reported/``; ``tables.reported.reported_frame``).
"""
from __future__ import annotations

import json
from pathlib import Path

from common.errors import ReproError

BUILT = ("cells", "pairs", "claims")  # read from what the tables job wrote
KINDS = (*BUILT, "results", "reported")
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


def runs_dir(results: str | Path) -> Path:
    """``results/runs`` (or ``results`` itself when it is a runs folder), refused in one line when it holds no
    run (``<experiment>/seed<k>/``)."""
    root = Path(results)
    folder = root / "runs" if (root / "runs").is_dir() else root
    if not any(path.is_dir() for path in folder.glob("*/seed*")):
        raise ReproError(f"{root}: no run folders (<experiment>/seed<k>/ in it or in its runs/); run the DAG "
                         "first: make reproduce")
    return folder


def records(results: str | Path, kind: str = "cells") -> list[dict]:
    """The rows of ``load`` as dicts (no pandas needed) for the built kinds."""
    if kind not in BUILT:
        raise ReproError(f"tables.frames.records: kind {kind!r}: use one of {', '.join(BUILT)} "
                         "(tables.load for the others)")
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

    if kind not in KINDS:
        raise ReproError(f"tables.load: kind {kind!r}: use one of {', '.join(KINDS)}")
    if kind == "results":
        from .results import results_frame

        return results_frame(runs_dir(results))
    if kind == "reported":
        from .reported import load_reported, reported_frame
        from .specs import load_specs

        return reported_frame(load_reported(load_specs()))
    frame = pd.DataFrame.from_records(records(results, kind))
    if kind == "cells" and "reported" in frame:
        frame["reported_text"] = frame["reported"]
        frame["reported"] = frame["reported"].astype(str).str.lstrip(QUALIFIERS)
    for column in NUMERIC[kind]:
        if column in frame:
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
    return frame
