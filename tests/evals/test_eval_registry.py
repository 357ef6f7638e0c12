"""Evaluation names are declared once (evals/registry.py): the profile check, the Snakefile's rules and
targets, the evaluators' name parsing and the table specs read that table, and no other file lists them."""
from __future__ import annotations

import ast
import copy
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

import evals.registry as registry
from evals.registry import EVALUATIONS, Evaluation, find
from workflows.experiments import ConfigError, validate

ROOT = Path(__file__).resolve().parents[2]
NAMES = {e.name for e in EVALUATIONS}


def default_profile() -> dict:
    return yaml.safe_load((ROOT / "config" / "default.yaml").read_text())


def test_names_and_families_resolve_to_one_evaluation():
    assert [find(n).name for n in ("ppl", "lm_ppl", "genppl_s8", "genppl_data", "cond_mbr4_cfg1.5", "law")] == [
        "ppl", "lm_ppl", "genppl", "genppl", "cond", "law"]
    assert find("genppl_x") is None and find("cond_s3") is None and find("xppl") is None
    assert find("cond_mbr4_cfg1.5").match("cond_mbr4_cfg1.5") == {"mbr": "4", "guidance": "1.5"}
    from evals.conditional import parse_eval as cond_variant
    from evals.registry import parse_eval as genppl_variant

    assert genppl_variant("genppl_k3") == {"scales": 3} and cond_variant("cond_k2_mbr4") == {"scales": 2, "mbr": 4}


def test_the_profile_check_reads_the_registry(monkeypatch):
    profile = default_profile()
    profile["experiments"][0]["evals"] = ["ppl", "fake"]
    with pytest.raises(ConfigError, match=r"evals\[1\]: 'fake' is not valid .*"
                                          r"\(an evaluation of evals/registry.py: ppl, embedded"):
        validate(copy.deepcopy(profile), "default.yaml")
    fake = Evaluation("fake", "evaluate_tokens", "fake", "a registered name the schema file never heard of")
    monkeypatch.setattr(registry, "EVALUATIONS", (*EVALUATIONS, fake))
    validate(profile, "default.yaml")  # accepted: the schema's names are the registry's


def test_table_specs_name_registered_evaluations(tmp_path):
    from tables.specs import load_spec, load_specs
    from tables.validation import DataError

    named = {axis.result["eval"] for paper in load_specs().values() for spec in paper.values()
             for axis in spec.rows + spec.columns if "eval" in axis.result}
    assert named and all(find(name) is not None for name in named)
    spec = yaml.safe_load((ROOT / "tables" / "specs" / "embedded" / "foundation.yaml").read_text())
    (tmp_path / "embedded").mkdir()
    spec["columns"][0]["result"] = {"eval": "perplexity", "key": "test/ppl"}
    (tmp_path / "embedded" / "foundation.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(DataError, match=r"result.eval.*'perplexity' is not an evaluation of evals/registry.py"):
        load_spec(tmp_path / "embedded" / "foundation.yaml")


@pytest.mark.slow
def test_the_dag_writes_each_evaluation_with_its_registered_rule(tmp_path):
    """A dry run of the default profile (+ the real-task suites): every result an experiment lists is a
    job of the rule the registry names, and every evaluation with a rule is planned at least once; the
    harness jobs get the experiment's eval.batch_size."""
    profile = default_profile()
    profile["experiments"].append({"id": "real_tasks_s", "base": "base_gpt2_s",
                                   "evals": ["zeroshot", "lm_ppl", "dlcm_zeroshot", "fewshot_8b"],
                                   "overrides": {"eval.batch_size": 7}})
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(profile))
    run = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
                          "--configfile", str(tmp_path / "profile.yaml"), "-n", "-p"], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    planned, rule = {}, None
    for line in run.stdout.splitlines():
        if line.startswith("rule "):
            rule = line.split()[1].rstrip(":")
        for name in re.findall(r"/eval/([^/\s,]+)\.json(?=,|\s|$)", line if line.startswith("    output:") else ""):
            planned.setdefault(find(name).name, set()).add(rule)
    assert planned == {e.name: {e.rule} for e in EVALUATIONS if e.rule is not None}
    harness = [line for line in run.stdout.splitlines()
               if re.search(r"-m workflows\.cli eval-\S+ .*--batch-size", line)]
    assert harness
    assert {"real_tasks_s" in line for line in harness if "--batch-size 7 " in line} == {True}
    assert all("--batch-size 16 " in line for line in harness if "real_tasks_s" not in line)


def _strings(path: Path) -> list[str]:
    return [t.string for t in tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
            if t.type == tokenize.STRING]


def _collections(path: Path):
    """The string elements of every tuple, list or set literal and the keys of every dict literal."""
    for node in ast.walk(ast.parse(path.read_text())):
        items = (node.keys if isinstance(node, ast.Dict)
                 else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [])
        yield {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}


def test_no_other_file_lists_the_names():
    """No list of several evaluation names, no regex of a family (``genppl(...)``, ``ppl|codebook``) outside
    the registry: in the Snakefile's rules, the profile check, the evaluators and the tables."""
    families = [e.name for e in EVALUATIONS if e.variants]
    code = [p for folder in ("workflows", "evals", "tables") for p in (ROOT / folder).rglob("*.py")
            if p.name != "registry.py"]
    for path in code + sorted((ROOT / "workflows").glob("*.smk")) + [ROOT / "Snakefile"]:
        for text in _strings(path):
            body = text.strip("rfbRFB").strip("'\"")
            assert not any(f"{name}(" in body or f"{name}_(" in body for name in families), (path, text)
            assert not ("|" in body and NAMES & set(re.split(r"[|()^$?:]+", body))), (path, text)
    for path in [p for folder in ("workflows", "tables") for p in (ROOT / folder).rglob("*.py")]:
        for elements in _collections(path):  # (the evaluators' metric dicts may share a word with a name)
            assert len(elements & NAMES) < 2, (path, sorted(elements & NAMES))
