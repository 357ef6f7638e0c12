"""Jobs that need no model start without importing torch (about a second and a half per process on 2 cores):
the data jobs and the law's fit, run as the DAG runs them; and the Snakefile's validation reads the law's
settings without importing scipy's optimiser, which only the fit itself needs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DATA_JOBS = """
import json, sys
from pathlib import Path
from workflows.cli import main
work = Path(sys.argv[1])
settings = work / "settings.json"
settings.write_text(json.dumps({
    "corpus": {"id": "world", "seed": 0, "source": "synthetic",
               "synthetic": {"train_docs": 40, "valid_docs": 4, "test_docs": 4}},
    "tokenizer": {"kind": "bpe", "min_frequency": 2, "vocab_size": 300}}))
for argv in (["corpus", "--settings", settings, "--out", work / "corpus"],
             ["tokenizer", "--settings", settings, "--corpus", work / "corpus", "--out", work / "tokenizer.json"],
             ["tokenize", "--settings", settings, "--corpus", work / "corpus", "--tokenizer", work / "tokenizer.json",
              "--out", work / "tokens"]):
    assert main([str(a) for a in argv]) in (None, 0), argv
print(json.dumps(sorted(m for m in ("torch", "scipy", "transformers") if m in sys.modules)))
"""

VALIDATION_IMPORTS = """
import json, sys
import evals.scaling_fit, workflows.experiments, workflows.cli
print(json.dumps(sorted(m for m in ("torch", "scipy.optimize") if m in sys.modules)))
"""


def run(code: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_data_jobs_run_without_torch(tmp_path):
    assert run(DATA_JOBS, str(tmp_path)) == []
    assert json.loads((tmp_path / "tokens" / "manifest.json").read_text())  # the jobs did their work


def test_the_command_line_and_the_law_settings_import_neither_torch_nor_the_optimiser():
    assert run(VALIDATION_IMPORTS) == []
