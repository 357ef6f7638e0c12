"""``python -m tables build``: the contract the Snakemake rule relies on."""
import json
import subprocess
import sys
from pathlib import Path

from tables.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_cli_writes_tables_audit_and_index(tmp_path, fixture_runs):
    out = tmp_path / "tables"
    assert main(["build", "--results", str(fixture_runs), "--out", str(out)]) == 0
    index = json.loads((out / "index.json").read_text())
    assert index["papers"][0] == "embedded" and index["tables"][0]["table"] == "foundation"
    for entry in index["tables"]:
        assert {Path(name).suffix for name in entry["files"]} == {".md", ".csv", ".tex", ".json"}
        assert all((out / name).exists() for name in entry["files"])
    assert (out / "audit.md").exists() and index["flagged"]["conceptlm"]["material"] > 0
    assert index["verdicts"]["cells_reproduced"] > 0 and index["reported_cells"]["dlcm"] > 0


def test_cli_works_without_results_and_reports_bad_data(tmp_path, toy_copy):
    specs, reported = toy_copy
    args = ["build", "--results", str(tmp_path / "absent"), "--out", str(tmp_path / "out"),
            "--specs", str(specs), "--reported", str(reported)]
    assert main(args) == 0
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert index["verdicts"].get("cells_reproduced", 0) == 0 and index["verdicts"]["cells_not_reproduced"] > 0
    path = reported / "toy" / "table01.csv"
    path.write_text(path.read_text() + "table01,base,a,ten,1,score,pts,lower,pdf,\n")
    result = subprocess.run([sys.executable, "-m", "tables", *args], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert "table01.csv:17: field 'value': non-numeric value 'ten'" in result.stderr
