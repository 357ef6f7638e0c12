"""``python -m reports build --results results/runs --tables results/tables --out results/report``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tables.validation import DataError

from .build import build_report
from .document import Figure


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="write report.md, report.html and figures/")
    command.add_argument("--results", type=Path, default=Path("results/runs"))
    command.add_argument("--tables", type=Path, default=Path("results/tables"))
    command.add_argument("--out", type=Path, default=Path("results/report"))
    args = parser.parse_args(argv)
    try:
        blocks = build_report(args.results, args.tables, args.out)
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'report.md'}, {args.out / 'report.html'} "
          f"and {sum(isinstance(block, Figure) for block in blocks)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
