"""``python -m workflows.coverage --out profiles.json PROFILE...``: which experiments and evaluations each
profile runs (tables/coverage.py reads it, so a table can say which profile fills what this one leaves out)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common.errors import entry_point
from common.io import atomic_write_json

from .experiments import ConfigError, entries, load_profile


def profile_runs(path: Path) -> dict[str, list[str]]:
    """experiment -> the evaluations it runs in the profile ``path`` (a scaling law runs "law", a kernel
    benchmark "kernel")."""
    config = load_profile(path, files=False)  # which runs it holds: its data may live elsewhere
    return {entry.id: list(entry.results) for entry in entries(config, str(path)).values()}


def coverage(paths: list[Path]) -> dict:
    """``{"profiles": {file: runs}, "skipped": {file: error}}``: a profile that does not load (a draft
    beside the others) is skipped with its one-line error, never a reason to fail the tables."""
    profiles, skipped = {}, {}
    for path in paths:
        try:
            profiles[str(path)] = profile_runs(path)
        except ConfigError as error:
            skipped[str(path)] = str(error)
    return {"profiles": profiles, "skipped": skipped}


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workflows.coverage", description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("profiles", type=Path, nargs="+")
    args = parser.parse_args(argv)
    data = coverage(sorted(set(args.profiles)))
    for path, error in data["skipped"].items():
        print(f"warning: {path} skipped: {error}", file=sys.stderr)
    atomic_write_json(args.out, data)
    print(f"wrote {args.out}: {len(data['profiles'])} profiles, {len(data['skipped'])} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
