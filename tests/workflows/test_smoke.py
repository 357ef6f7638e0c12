"""Smoke mode (workflows/smoke.py): the shrink rule, the stand-ins, the table check, and one profile run end to
end through Snakemake as a user runs it (``make smoke`` runs them all)."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tables.build import RESULTS_MISSING as MISSING
from workflows import smoke
from workflows.experiments import _read_yaml, expand_sweeps, resolve, validate, with_parents

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted([*ROOT.glob("config/paper-*.yaml"), ROOT / "config" / "small.yaml",
                   *ROOT.glob("config/examples/*.yaml")])


def merged(name: str) -> dict:
    path = ROOT / "config" / name
    return with_parents(_read_yaml(path), path.parent, str(path))


def smoke_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workflows.smoke", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900, env={**smoke.os.environ, "HF_HUB_OFFLINE": "1"})


def test_widths_stay_distinct_and_ordered():
    config = {"defaults": {"model": {"d_model": 1024, "mlp_hidden": 4096}},
              "experiments": [{"id": "a", "overrides": {"model.d_model": 1280}},
                              {"id": "b{model.d_model}", "sweep": {"model.d_model": [1536, 1024, 256]}}]}
    assert smoke.ladder(config)["d_model"] == {256: 32, 1024: 48, 1280: 64, 1536: 80}
    assert smoke.ladder(config)["mlp_hidden"] == {4096: 32}


def test_shrink_keeps_paired_windows_and_renames_swept_holdouts(tmp_path):
    conditional = smoke.shrink(merged("paper-ncm-conditional.yaml"), tmp_path)
    by_id = {e["id"]: e for e in conditional["experiments"]}
    assert by_id["ncm_xsum_s"]["overrides"]["model.seq_len"] == 560  # a paired set's layout fixes the window
    assert by_id["ncm_xsum_s"]["overrides"]["model.prefix_len"] == 512
    dlcm = smoke.shrink(merged("paper-dlcm.yaml"), tmp_path)
    ids = {e["id"] for e in expand_sweeps(dlcm["experiments"])}
    assert len(ids) == len(expand_sweeps(dlcm["experiments"]))  # 27 law points, 27 names
    assert set(dlcm["scaling_laws"]["dlcm_law"]["holdout"]) <= ids
    assert dlcm["defaults"]["train"]["steps"] == smoke.STEPS and dlcm["profile"] == "paper-dlcm-smoke"


def test_local_files_get_stand_ins_of_their_own(tmp_path):
    config = smoke.shrink(merged("examples/offline-real-data.yaml"), tmp_path)
    assert config["corpus"]["local"]["train"].startswith(str(tmp_path))
    assert config["tokenizer"]["name"].startswith(str(tmp_path / "tokenizers"))
    assert config["local_tasks"]["manifest"] == str(tmp_path / "tasks" / "manifest.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.stem)
def test_every_full_profile_shrinks_to_a_valid_profile_with_its_stand_ins(profile, tmp_path):
    path, config = smoke.prepare(profile, tmp_path)
    experiments = resolve(validate(yaml.safe_load(path.read_text()), str(path)))
    original = resolve(validate(merged(str(profile.relative_to(ROOT / "config"))), str(profile), files=False))
    assert {e["model"]["arch"] for e in experiments.values()} == {e["model"]["arch"] for e in original.values()}
    for key in ("precision", "compile", "parallel"):  # the code paths stay the profile's
        assert {str(e["train"].get(key)) for e in experiments.values()} == \
            {str(e["train"].get(key)) for e in original.values()}
    for exp in experiments.values():
        assert exp["train"]["steps"] == smoke.STEPS and exp["model"].get("d_model", 32) <= 256
    for name in smoke._hub_tokenizers(config) | {e["train"]["init_from"] for e in experiments.values()
                                                  if e["train"].get("init_from")}:
        if not smoke._is_folder(name):
            assert (tmp_path / "hub" / ("models--" + name.replace("/", "--")) / "refs" / "main").is_file(), name


def _table(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"records": records}))


def test_table_check_names_missing_results_and_empty_tables(tmp_path):
    cell = {"verdict": "inconclusive", "reproduced_mean": 3.1}
    _table(tmp_path / "dlcm" / "table02.json", [cell, {"verdict": "", "reproduced_mean": ""}])
    _table(tmp_path / "ncm" / "table01.json", [{"verdict": MISSING, "reproduced_mean": ""},
                                               {"verdict": "x", "reproduced_mean": None}])
    _table(tmp_path / "ncm" / "table05.json", [{"verdict": "not run in this profile", "reproduced_mean": ""}])
    summary, problems = smoke.check_tables(tmp_path)
    assert summary["dlcm/table02"] == {"cells": 1, "filled": 1, "empty": {}}
    assert "ncm/table05" not in summary
    assert problems == [f"ncm/table01: 1 cell(s): {MISSING}",
                        "ncm/table01: none of its 2 cells of this profile's rows holds a value"]
    assert smoke.check_tables(tmp_path / "none")[1] == [f"{tmp_path / 'none'}: no paper table has a row this "
                                                        "profile runs"]


def test_a_profile_smoke_mode_cannot_shrink_is_one_line_before_any_job(tmp_path):
    profile = tmp_path / "long.yaml"
    profile.write_text(yaml.safe_dump({
        "extends": str(ROOT / "config" / "default.yaml"), "profile": "long",
        "experiments": [{"id": "dlcm_long", "paper": "dlcm", "overrides": {
            "model.arch": "dlcm_gpt2", "model.seq_len": 2048, "model.token_window": 512}, "evals": ["ppl"]}]}))
    run = smoke_cli(str(profile), "--run", "--out", str(tmp_path / "smoke"), "--workdir", str(tmp_path))
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "smoke mode cannot shrink" in lines[0] and "token_window" in lines[0], run.stderr
    assert not (tmp_path / "results").exists() and not (tmp_path / "smoke" / "hub").exists()


@pytest.mark.slow
def test_a_profile_runs_end_to_end_in_smoke_mode_through_snakemake(tmp_path):
    """The bring-your-own-data example: local corpus, a pretrained tokenizer from a folder, real lm-eval task
    names from a local manifest; every file a stand-in, so the run needs nothing beside the repository."""
    summary = tmp_path / "summary.json"
    run = smoke_cli("config/examples/offline-real-data.yaml", "--run", "--out", str(tmp_path / "smoke"),
                    "--workdir", str(tmp_path), "--summary", str(summary))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [result] = json.loads(summary.read_text())
    assert result["problems"] == [] and set(result["tables"]) == {"conceptlm/table01", "conceptlm/table02"}
    assert all(row["filled"] > 0 and not any("missing" in why for why in row["empty"])
               for row in result["tables"].values())
    manifest = json.loads((tmp_path / "results" / "offline-real-data-smoke" / "runs" / "conceptlm_gpt2_xs" /
                           "seed0" / "final" / "manifest.json").read_text())
    assert manifest["steps"] == smoke.STEPS and manifest["vocab_size"] != 50257  # the stand-in tokenizer


def test_gpu_check_refuses_without_cuda_in_one_line():
    run = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**smoke.os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "needs a CUDA GPU" in run.stderr


@pytest.mark.slow
def test_gpu_check_plans_every_family_and_evaluation_kind_of_small_on_the_gpu_profile(tmp_path):
    from benchmarks.gpu_check import one_per_family, targets
    from evals.registry import find

    path, config = smoke.prepare(ROOT / "config" / "small.yaml", tmp_path, device="cuda")
    assert config["profile"] == "small-smoke-gpu"  # never the CPU smoke run's results
    original = resolve(validate(merged("small.yaml"), "small", files=False))
    chosen = one_per_family(config)
    assert {e["model"]["arch"] for e in chosen.values()} == {e["model"]["arch"] for e in original.values()}
    wanted = targets(config)
    rules = {find(Path(t).stem).rule for t in wanted if "/eval/" in t and find(Path(t).stem)}
    assert rules == {find(e).rule for exp in original.values() for e in exp["evals"]} | {"kernel_bench"}
    cmd = smoke.command(path, config, 16, tmp_path, "cuda", wanted) + ["-n", "--quiet", "rules"]
    assert cmd[cmd.index("--profile") + 1].endswith("profiles/gpu")
    plan = subprocess.run(cmd, env=smoke.environment(tmp_path, "cuda"), capture_output=True, text=True, timeout=600)
    assert plan.returncode == 0, plan.stderr[-2000:]
    ids = {exp["id"] for exp in chosen.values()}
    assert int(re.search(r"^pretrain\s+(\d+)$", plan.stdout, re.M)[1]) >= len(ids), plan.stdout


@pytest.mark.slow
def test_the_stand_in_checkpoint_starts_every_run_that_names_it(tmp_path):
    """ConceptLM Table 3: Trained-8B, PM-8B (+2 layers) and ConceptLM-8B all start from one Llama."""
    path, config = smoke.prepare(ROOT / "config" / "paper-conceptlm-llama8b.yaml", tmp_path)
    script = """
import sys, yaml
from models.hf_llama import init_from_pretrained
from models.registry import build_model
from workflows.experiments import resolve, validate
for exp_id, exp in resolve(validate(yaml.safe_load(open(sys.argv[1])), "smoke")).items():
    source = exp["train"].get("init_from")
    if source:
        model = build_model({k: v for k, v in exp["model"].items() if k != "seq_len"}, vocab_size=sys.argv[2] and
                            int(sys.argv[2]), seq_len=exp["model"]["seq_len"])
        init_from_pretrained(model, source)
        print("loaded", exp_id)
"""
    vocab = json.loads(next((tmp_path / "hub").rglob("config.json")).read_text())["vocab_size"]
    run = subprocess.run([sys.executable, "-c", script, str(path), str(vocab)], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**smoke.os.environ, **smoke.environment(tmp_path)})
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.count("loaded") == 3, run.stdout


def test_every_section_of_an_entry_is_shrunk_and_references_follow_renamed_runs(tmp_path):
    config = merged("default.yaml")
    config["experiments"] += [
        {"id": "w{model.d_model}_s{train.steps}", "base": "base_gpt2_s",
         "sweep": {"model.d_model": [96, 160], "train.steps": [50000, 60000]}},
        {"id": "child", "base": "w160_s60000", "overrides": {"eval.limit": 100000, "eval.batch_size": 256,
                                                             "train.init_from": "data/models/Llama-3.1-8B"}}]
    config["genppl"]["judges"] = ["w96_s50000", "./judges/gpt2-large"]
    shrunk = smoke.shrink(config, tmp_path)
    swept = next(e for e in shrunk["experiments"] if "sweep" in e)
    assert swept["sweep"]["train.steps"] == [smoke.STEPS, smoke.STEPS]
    ids = [e["id"] for e in expand_sweeps(copy.deepcopy(shrunk["experiments"]))]
    child = next(e for e in shrunk["experiments"] if e["id"] == "child")
    assert child["base"] in ids and child["overrides"]["eval.limit"] == smoke.EVAL["limit"]
    assert child["overrides"]["eval.batch_size"] == smoke.EVAL["batch_size"]
    assert child["overrides"]["train.init_from"].startswith(str(tmp_path / "checkpoints"))  # a folder, as jobs read it
    assert shrunk["genppl"]["judges"][0] in ids and shrunk["genppl"]["judges"][1].startswith(str(tmp_path / "judges"))


def test_a_profile_the_workflow_refuses_is_refused_in_one_line_before_any_stand_in(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"extends": str(ROOT / "config" / "default.yaml"), "profile": "bad",
                                   "defaults": {"train": {"steps": 0}}}))
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    run = smoke_cli(str(bad), str(listed), str(tmp_path / "absent.yaml"), "--run", "--workdir", str(tmp_path))
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 3, run.stderr
    assert "steps" in lines[0] and "list.yaml" in lines[1] and "absent.yaml" in lines[2], run.stderr
    assert not (tmp_path / "results").exists()


def test_a_table_of_quantities_the_runs_do_not_measure_is_not_a_problem(tmp_path):
    _table(tmp_path / "dlcm" / "table05.json", [{"verdict": smoke.NOT_MEASURED, "reproduced_mean": ""}] * 3)
    summary, problems = smoke.check_tables(tmp_path)
    assert summary["dlcm/table05"] == {"cells": 3, "filled": 0, "empty": {smoke.NOT_MEASURED: 3}} and problems == []


def test_a_profile_whose_task_copies_are_elsewhere_shrinks_but_is_refused_to_run_as_is(tmp_path):
    """The local task copies are checked only when a profile runs as it is: ``files=False`` (smoke mode, or
    reading which experiments a profile holds) passes a manifest whose root holds no copy."""
    from workflows.experiments import ConfigError, validate

    config = merged("examples/offline-real-data.yaml")
    config["local_tasks"]["root"] = str(tmp_path)           # an empty folder: no copy of any task
    validate(copy.deepcopy(config), "p.yaml", files=False)
    with pytest.raises(ConfigError, match=r"p.yaml: local_tasks: .*file of task \w+ not found"):
        validate(copy.deepcopy(config), "p.yaml")
