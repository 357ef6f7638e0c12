"""Profiles and experiments, the entry the Snakefile, the tools and the tests import: ``load_profile`` reads
(``workflows.load``), checks (``workflows.check``) and returns a profile, ``resolve`` turns it into runs
(``workflows.resolve``); ``python -m workflows.experiments PROFILE`` checks one before Snakemake reads it. A
new size or ablation is one entry in a profile, never new code; every error is one line naming the key and
the fix.
"""
from __future__ import annotations

from pathlib import Path

from common.errors import USER_ERROR, entry_point
from workflows.check import SCHEMA_PATH, check_tables, validate
from workflows.load import ConfigError, _read_yaml, profile_chain, read_profile, with_parents
from workflows.resolve import (DEFAULT_PAPER, PAPERS, SECTIONS, TRAINING, Entry, as_entries, datasets, entries,
                               entry_kinds, expand_sweeps, explicit_model, genppl_settings, local_tasks, resolve,
                               result_index, run_config)

__all__ = ["DEFAULT_PAPER", "PAPERS", "SCHEMA_PATH", "SECTIONS", "TRAINING", "ConfigError", "Entry", "as_entries",
           "check_tables", "datasets", "entries", "entry_kinds", "result_index",
           "expand_sweeps", "explicit_model", "genppl_settings", "load_profile", "local_tasks",
           "main", "profile_chain", "read_profile", "resolve", "run_config", "validate",
           "with_parents", "_read_yaml"]


def load_profile(path: str | Path, files: bool = True) -> dict:
    """The validated profile at ``path`` (``files=False``: without checking that its local corpus files exist,
    for reading which experiments it holds on a machine without them)."""
    path = Path(path)
    return validate(with_parents(_read_yaml(path), path.parent, str(path)), str(path), files)


@entry_point
def main(argv: list[str] | None = None) -> int:
    """``python -m workflows.experiments PROFILE``: check a profile before Snakemake reads it (file
    missing, YAML syntax with line and column, empty, schema and semantics), one line on error."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m workflows.experiments PROFILE.yaml", file=sys.stderr)
        return USER_ERROR
    profile = load_profile(argv[0])
    check_tables()
    n_runs = sum(len(exp["seeds"]) for exp in resolve(profile).values())
    print(f"{argv[0]}: profile {profile['profile']!r}, {len(profile['experiments'])} entries, {n_runs} runs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
