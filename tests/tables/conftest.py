"""Fixtures for the tables tests: hand-made papers in temporary folders, and the static fixture results."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADER = "table,row,column,value,decimals,metric,unit,direction,source,note"
PAPER_YAML = """paper: hand
title: Hand-made paper
arxiv: 2601.00002v1
url: https://arxiv.org/abs/2601.00002v1
sources: {pdf: the PDF}
"""


@pytest.fixture
def hand_paper(tmp_path):
    """Write a one-table paper 'hand' and return (specs root, reported root).

    ``spec`` is the YAML body after paper/table/title/where; ``lines`` are CSV
    lines after the header; ``claims`` is the claims.yaml text.
    """

    def make(spec: str, lines: list[str], claims: str | None = None, table: str = "t1") -> tuple[Path, Path]:
        specs, reported = tmp_path / "specs" / "hand", tmp_path / "reported" / "hand"
        specs.mkdir(parents=True, exist_ok=True)
        reported.mkdir(parents=True, exist_ok=True)
        (specs / f"{table}.yaml").write_text(f"paper: hand\ntable: {table}\ntitle: T\nwhere: Table 1\n{spec}")
        (reported / "paper.yaml").write_text(PAPER_YAML)
        (reported / f"{table}.csv").write_text("\n".join([HEADER, *lines]) + "\n")
        if claims is not None:
            (reported / "claims.yaml").write_text(claims)
        return specs.parent, reported.parent

    return make


@pytest.fixture
def fixture_runs() -> Path:
    """Static result files: embedded foundation runs, the GPT-2 124M block of ConceptLM, the toy paper."""
    return FIXTURES / "runs"


@pytest.fixture
def toy_copy(tmp_path) -> tuple[Path, Path]:
    """A writable copy of the toy paper's specs and reported data."""
    specs, reported = tmp_path / "specs", tmp_path / "reported"
    shutil.copytree(FIXTURES / "specs", specs)
    shutil.copytree(FIXTURES / "reported", reported)
    return specs, reported
