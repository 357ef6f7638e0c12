"""``python -m tables build --results results/runs --out results/tables``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common.errors import ReproError, entry_point

from .build import build
from .coverage import load_coverage
from .levels import load_levels
from .publish import write_tables
from .reported import REPORTED
from .specs import SPECS


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tables", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="check the papers' tables and merge reproduced results")
    command.add_argument("--results", type=Path, default=Path("results/runs"),
                         help="results/runs folder (may be missing)")
    command.add_argument("--out", type=Path, default=Path("results/tables"))
    command.add_argument("--specs", type=Path, default=SPECS, help="table specs (default: tables/specs)")
    command.add_argument("--reported", type=Path, default=REPORTED, help="reported numbers (default: tables/reported)")
    command.add_argument("--coverage", type=Path, help="profiles.json of `python -m workflows.coverage`: which "
                         "profile fills what this one does not reproduce")
    command.add_argument("--expected", type=Path, help="each run's config hash as the profile resolves it now (the DAG "
                         "writes it): results of another config are refused")
    command.add_argument("--allow-stale", action="store_true", help="show results of another config, marked stale")
    command.add_argument("--levels", type=Path, help="the synthetic world's levels.json (the data stage's): the "
                         "bench's entropy by level, written beside the tables")
    command.add_argument("--withdraw", type=Path, action="append", default=[], help="a file made from these tables "
                         "(the report): removed when the results are refused, so no stale number stays on show")
    args = parser.parse_args(argv)
    for flag, folder in (("--specs", args.specs), ("--reported", args.reported)):
        if not folder.is_dir():
            raise ReproError(f"{flag} {folder}: no such folder; give the {flag[2:]} folder or leave the default")
    expected = None
    if args.expected is not None:
        try:
            expected = json.loads(args.expected.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise ReproError(f"--expected {args.expected}: unreadable ({error}); "
                             "re-run snakemake to rewrite it") from None
    levels = load_levels(args.levels) if args.levels is not None else None
    try:
        built = build(args.results, args.specs, args.reported, expected, args.allow_stale)
    except ReproError:
        for path in args.withdraw:
            path.unlink(missing_ok=True)
        raise
    index = write_tables(built, args.out, load_coverage(args.coverage, args.results), levels)
    flagged = {paper: f"{counts['material']} material, {counts['rounding']} rounding"
               for paper, counts in index["flagged"].items()}
    print(f"wrote {len(index['tables'])} tables to {args.out}; audit: {flagged}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
