"""``python -m reports build --results results/runs --tables results/tables --out results/report``;
``python -m reports findings --tables results/tables [--readme docs/findings.md]``;
``python -m reports timings --results results`` (job seconds from the DAG's benchmark files);
``python -m reports compare RUN_A RUN_B`` (two results folders' runs/: which cells and verdicts changed);
``python -m reports quotes [--tables results/tables | --findings docs/findings.md]`` (the docs' quoted numbers
against their cells)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tables.validation import DataError

from .build import build_report
from .document import Figure
from .findings import collect, findings_markdown, rewrite_readme
from .timings import job_seconds, timings_table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="write report.md, report.html and figures/")
    command.add_argument("--results", type=Path, default=Path("results/runs"))
    command.add_argument("--tables", type=Path, default=Path("results/tables"))
    command.add_argument("--out", type=Path, default=Path("results/report"))
    command = commands.add_parser("findings", help="print the findings generated from the built tables")
    command.add_argument("--tables", type=Path, default=Path("results/tables"))
    command.add_argument("--readme", type=Path, default=None,
                         help="also rewrite the block between <!-- findings:start --> and <!-- findings:end --> here")
    command = commands.add_parser("timings", help="print the slowest jobs of a DAG run (logs/*.bench.tsv)")
    command.add_argument("--results", type=Path, default=Path("results"))
    command.add_argument("--top", type=int, default=25)
    command = commands.add_parser("compare", help="which cells and verdicts differ between two results folders")
    command.add_argument("first", type=Path, help="a results folder's runs/ (results/runs)")
    command.add_argument("second", type=Path)
    command.add_argument("--tolerance", type=float, default=0.0, help="relative difference below which cells are equal")
    command = commands.add_parser("quotes", help="check the numbers the docs quote against their table cells")
    source = command.add_mutually_exclusive_group()
    source.add_argument("--tables", type=Path, default=None, help="a built tables folder (results/tables)")
    source.add_argument("--findings", type=Path, default=None, help="the findings page (default docs/findings.md)")
    command.add_argument("--quotes", type=Path, default=None, help="the registry (default docs/quotes.yaml)")
    args = parser.parse_args(argv)
    if args.command == "quotes":
        return _quotes(args.tables, args.findings, args.quotes)
    if args.command == "compare":
        return _compare(args.first, args.second, args.tolerance)
    if args.command == "timings":
        print(timings_table(job_seconds(args.results), args.top), end="")
        return 0
    if args.command == "findings":
        return _findings(args.tables, args.readme)
    try:
        blocks = build_report(args.results, args.tables, args.out)
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'report.md'}, {args.out / 'report.html'} "
          f"and {sum(isinstance(block, Figure) for block in blocks)} figures")
    return 0


def _compare(first: Path, second: Path, tolerance: float) -> int:
    from .compare import compare_folders

    for folder in (first, second):
        if not folder.is_dir():
            print(f"error: {folder}: no such results folder; give two runs/ folders (results/runs)", file=sys.stderr)
            return 2
    try:
        print(compare_folders(first, second, tolerance), end="")
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


def _findings(tables: Path, readme: Path | None) -> int:
    try:
        findings = collect(tables)
    except (OSError, ValueError, KeyError) as error:  # a half-written or foreign tables folder
        print(f"error: {tables}: {error}", file=sys.stderr)
        return 2
    text = findings_markdown(findings, tables, compact=readme is not None)  # the findings page lists proxies by count
    print(text, end="")
    if readme is not None:
        if findings is None:
            print(f"error: {readme} left unchanged: the tables were not built", file=sys.stderr)
            return 2
        try:
            rewrite_readme(readme, text)
        except (OSError, ValueError) as error:
            print(f"error: {readme}: {error}", file=sys.stderr)
            return 2
    return 0


def _quotes(tables: Path | None, findings: Path | None, registry: Path | None) -> int:
    from .quotes import REGISTRY, check, grids_from_findings, grids_from_tables, load_quotes

    registry = registry or REGISTRY
    source = tables if tables is not None else (findings or Path("docs/findings.md"))
    for path, what in ((registry, "the quote registry"), (source, "the tables folder" if tables else "the page")):
        if not path.exists():
            print(f"error: {path}: no such file or folder ({what}); run from the repository root"
                  + (", after make reproduce" if path == tables else ""), file=sys.stderr)
            return 2
    try:
        quotes = load_quotes(registry)
    except (OSError, ValueError) as error:
        print(f"error: {registry}: {error}; each entry is {{quote: ..., cell: [table, row, column]}}", file=sys.stderr)
        return 2
    if quotes and not any(Path(q.doc).is_file() for q in quotes):
        print(f"error: none of the docs {registry} names is here; run from the repository root", file=sys.stderr)
        return 2
    grids = grids_from_tables(tables, {q.table for q in quotes}) if tables else grids_from_findings(source)
    if quotes and not any(grids.values()):
        print(f"error: {source}: no table the registry quotes is there; give a built tables folder (results/tables, "
              "after make reproduce) or the findings page (docs/findings.md)", file=sys.stderr)
        return 2
    problems, checked, absent = check(quotes, grids, Path("."), complete=tables is not None, registry=registry)
    for line in problems:
        print(line)
    print(f"quotes: {checked} of {len(quotes)} checked against {source}, {len(problems)} stale or missing"
          + (f", {len(absent)} not shown there" if absent else ""))
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
