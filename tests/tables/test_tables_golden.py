"""Rendering is stable: the toy paper renders exactly as the golden files (UPDATE_GOLDEN=1 rewrites them)."""
import os
from pathlib import Path

import pytest

from tables.build import build
from tables.publish import write_tables

GOLDEN = Path(__file__).resolve().parent / "golden"
FILES = ["toy/table01.md", "toy/table01.csv", "toy/table01.tex", "audit.md"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    fixtures = Path(__file__).resolve().parent / "fixtures"
    out = tmp_path_factory.mktemp("tables")
    write_tables(build(fixtures / "runs", fixtures / "specs", fixtures / "reported"), out)
    return out


@pytest.mark.parametrize("name", FILES)
def test_rendering_matches_golden(rendered, name):
    text = (rendered / name).read_text()
    golden = GOLDEN / name.replace("/", "_")
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_no_temporary_files_are_left(rendered):
    assert not [path for path in rendered.rglob("*") if path.name.endswith(".tmp")]
