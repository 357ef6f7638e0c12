"""The whole DAG on a micro profile in a temporary directory: runs, learns, is idempotent, lints."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile")]


def micro_profile() -> dict:
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config["profile"] = "micro"  # outputs go to results/micro/
    config.pop("scaling_laws")  # its grid is not in this profile
    config.pop("kernel_benchmarks")  # DLCM Table 6's timing: tests/workflows/test_dlcm_pipeline.py
    config["corpus"]["synthetic"] = {"train_docs": 300, "valid_docs": 20, "test_docs": 20}
    config["tokenizer"]["vocab_size"] = 400
    config["defaults"]["model"].update(seq_len=64, d_model=32, n_layer=1, n_head=2)
    config["defaults"]["train"].update(steps=80, batch_size=8, micro_batch_size=8, warmup_steps=4,
                                       log_interval=10, eval_interval=40, checkpoint_interval=40)
    config["experiments"] = [{"id": "base_s", "seeds": [0], "evals": ["ppl", "embedded"]},
                             {"id": "pm_s", "base": "base_s", "overrides": {"model.n_layer": 3}},
                             {"id": "concept_k{model.chunk_size}", "base": "base_s", "sweep": {"model.chunk_size": [4]},
                              "overrides": {"model.arch": "conceptlm_gpt2"}, "evals": ["ppl", "codebook"]}]
    return config


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "micro.yaml"), *args],
                          capture_output=True, text=True, env=env, timeout=600)


def built(tmp_path_factory, name: str, profile: dict, *targets: str) -> Path:
    """A temporary work directory where ``snakemake --cores 2 <targets>`` ran ``profile`` (as micro.yaml)."""
    workdir = tmp_path_factory.mktemp(name)
    (workdir / "micro.yaml").write_text(yaml.safe_dump(profile))
    run = snakemake(workdir, "--cores", "2", *targets)
    assert run.returncode == 0, run.stderr[-3000:]
    return workdir


def dry_run(workdir: Path, profile: dict, *targets: str) -> tuple[set[str], str]:
    """(the experiments whose jobs ``snakemake -n`` plans, its console) for ``profile`` in ``workdir``."""
    (workdir / "changed.yaml").write_text(yaml.safe_dump(profile))
    run = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "changed.yaml"), "-n",
                                      *targets],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return ({line.split("experiment=")[1].split(",")[0] for line in run.stdout.splitlines()
             if "wildcards:" in line and "experiment=" in line}, run.stdout)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("dag")
    (workdir / "micro.yaml").write_text(yaml.safe_dump(micro_profile()))
    earlier = os.environ.get("REPRO_PROGRESS_INTERVAL")
    os.environ["REPRO_PROGRESS_INTERVAL"] = "1"   # the progress line every second (default: every minute)
    try:
        run = snakemake(workdir, "--cores", "2")
    finally:
        os.environ.pop("REPRO_PROGRESS_INTERVAL")
        if earlier is not None:
            os.environ["REPRO_PROGRESS_INTERVAL"] = earlier
    assert run.returncode == 0, run.stderr[-3000:]
    (workdir / "console.txt").write_text(run.stderr)
    return workdir


@pytest.mark.slow
def test_a_run_prints_the_dags_training_progress(workdir):
    lines = [line for line in (workdir / "console.txt").read_text().splitlines() if line.startswith("progress ")]
    assert len(lines) >= 2, lines
    assert "| runs 3/3 trained | steps 240/240 (100.0 %) | training ETA 0:00:00" in lines[-1]  # 3 runs x 80 steps
    assert any("runs 0/3" in line or "runs 1/3" in line or "runs 2/3" in line for line in lines[:-1])


# What this DAG computes, pinned (the runs are deterministic; docs/embedded.md, "Same numbers on another
# host"): the world's exact oracle and unigram PPL of the test split to float precision, the trained runs to
# 1e-3 relative, below the digits the x86 hosts we measured agree on under the DAG's pins and 10-100 x
# tighter than the seed-to-seed spread, so a change of the models' or the trainer's math shows.
PINNED = {"oracle": 1.81260520130734, "unigram": 120.57085263841002,
          "test/ppl": {"base_s": 63.769406316432864, "pm_s": 65.5440408083813, "concept_k4": 66.09577017511617},
          "codebook": 59.375, "embedded_ppl/ppl": {"base_s": 235373.1792394711, "pm_s": 255597.76683661342}}


@pytest.mark.slow
def test_dag_produces_results_tables_and_report(workdir):
    for exp in ("base_s", "pm_s", "concept_k4"):
        m = json.loads((workdir / f"results/micro/runs/{exp}/seed0/eval/ppl.json").read_text())["metrics"]
        assert (m["test/oracle_ppl"], m["test/unigram_ppl"]) == pytest.approx((PINNED["oracle"], PINNED["unigram"]),
                                                                              rel=1e-12)
        assert m["test/ppl"] == pytest.approx(PINNED["test/ppl"][exp], rel=1e-3)
    for exp in ("base_s", "pm_s"):
        result = json.loads((workdir / f"results/micro/runs/{exp}/seed0/eval/ppl.json").read_text())
        m = result["metrics"]
        assert m["test/oracle_ppl"] < m["test/ppl"] < m["test/unigram_ppl"]
        assert result["provenance"]["checkpoint_sha256"]
        host = result["provenance"]["host_fingerprint"]
        assert host["isa"] and host["cores"] and host["torch"].startswith("2.")
        if host["machine"] in ("x86_64", "AMD64"):  # the jobs ran pinned (workflows/common.smk)
            assert host["pins"] == {"MKL_CBWR": os.environ.get("MKL_CBWR", "AVX2"),
                                    "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY", "avx2")}
        manifest = json.loads((workdir / f"results/micro/runs/{exp}/seed0/final/manifest.json").read_text())
        assert {**manifest["host"], "threads": None} == {**host, "threads": None}  # the host that trained it
        embedded = json.loads((workdir / f"results/micro/runs/{exp}/seed0/eval/embedded.json").read_text())
        assert 0.0 <= embedded["metrics"]["embedded_choice/acc"] <= 1.0
        assert embedded["metrics"]["embedded_ppl/ppl"] == pytest.approx(PINNED["embedded_ppl/ppl"][exp], rel=1e-3)
        assert (workdir / f"results/micro/runs/{exp}/seed0/eval/embedded.samples.jsonl.gz").stat().st_size > 0
    codebook = json.loads((workdir / "results/micro/runs/concept_k4/seed0/eval/codebook.json").read_text())
    assert codebook["metrics"]["test/utilisation_pct"] == PINNED["codebook"]  # a share of counted codes: exact
    assert not (workdir / "results/micro/runs/concept_k4/seed0/eval/embedded.json").exists()  # not in its evals
    assert (workdir / "results/micro/tables/index.json").is_file()
    assert "oracle" in (workdir / "results/micro/report/report.md").read_text().lower()
    assert f"ISA {host['isa']}" in (workdir / "results/micro/report/report.md").read_text()  # the host, at the top
    assert (workdir / "results/micro/report/report.html").stat().st_size > 1000


@pytest.mark.slow
def test_snakemake_report_holds_the_report_tables_audit_and_figures(workdir):
    """``snakemake --report report.zip`` on the built DAG: the report()-annotated outputs are in it."""
    import zipfile

    run = snakemake(workdir, "--report", str(workdir / "report.zip"))
    assert run.returncode == 0, run.stderr[-3000:]
    names = [Path(name).name for name in zipfile.ZipFile(workdir / "report.zip").namelist()]
    assert {"report.html", "audit.md", "table01.csv", "foundation.csv", "curves_unlisted_1.png"} <= set(names)
    figures = sorted(path.name for path in (workdir / "results/micro/report/figures").glob("*.png"))
    assert figures and set(figures) <= set(names)  # every figure of the report, none left out


@pytest.mark.slow
def test_second_run_does_nothing(workdir):
    run = snakemake(workdir, "--cores", "2")
    assert run.returncode == 0
    assert "Nothing to be done" in run.stdout + run.stderr


@pytest.mark.slow
def test_another_interpreter_path_changes_nothing(workdir):
    """A moved checkout or venv runs the jobs with another python path: not a change of settings."""
    here = Path(sys.executable)
    names = [f"python{v}" for v in ("", "3", f"3.{sys.version_info.minor}") if f"python{v}" != here.name]
    python = next(here.parent / n for n in names if (here.parent / n).exists())  # same venv, another path
    run = subprocess.run([str(python), *SNAKEMAKE[1:], "-d", str(workdir), "--configfile", str(workdir / "micro.yaml"),
                          "-n"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "Nothing to be done" in run.stdout + run.stderr, run.stdout[-2000:]


@pytest.mark.slow
def test_changing_one_experiment_reruns_only_it(workdir):
    config = micro_profile()
    config["experiments"][1]["overrides"]["train.lr"] = 1e-3
    (workdir / "changed.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ}
    run = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "changed.yaml"), "-n"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    jobs = run.stdout
    assert "pm_s" in jobs and "experiment=base_s" not in jobs


@pytest.mark.slow
def test_results_of_another_config_are_refused_when_snakemake_lost_its_metadata(workdir, tmp_path):
    """A results folder copied elsewhere (its .snakemake left behind), then the profile edited: the settings
    stamp plans the changed run's re-training; and a run whose config.json is made to say the new settings by
    hand and dated as before, so that nothing re-trains, is refused by the tables job in one line, with the
    fix, and the report built from the old tables is withdrawn."""
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns(".snakemake", ".stamps"))
    config = micro_profile()
    config["experiments"][1]["overrides"]["train.lr"] = 1e-3
    (copy / "micro.yaml").write_text(yaml.safe_dump(config))
    plan = snakemake(copy, "--cores", "2", "-n")
    trains = re.findall(r"output: results/micro/runs/(\w+)/seed0/final/model.safetensors", plan.stdout)
    assert plan.returncode == 0 and trains == ["pm_s"], plan.stdout[-2000:]  # base_s's settings did not change
    settings = copy / "results/micro/runs/pm_s/seed0/config.json"
    then = settings.stat()
    settings.write_text((copy / ".stamps" / "results/micro/runs/pm_s/seed0/config.json" / "want").read_text() + "\n")
    os.utime(settings, ns=(then.st_atime_ns, then.st_mtime_ns))   # edited, dated as before: nothing re-runs
    run = snakemake(copy, "--cores", "2")
    assert run.returncode != 0
    assert "rule pretrain" not in run.stdout + run.stderr  # the settings file agrees: nothing re-trained
    assert ("1 run(s) hold results of another config or other files than the profile's: "
            "results/micro/runs/pm_s/seed0 (train differ); "
            "re-run them (snakemake --forcerun results/micro/runs/pm_s/seed0/config.json") in run.stdout + run.stderr
    assert not (copy / "results/micro/report/report.html").exists()  # the old report is withdrawn, not left on show


@pytest.mark.slow
def test_an_evaluation_setting_changed_without_snakemake_metadata_reruns_that_evaluation_only(workdir, tmp_path):
    """lm-eval's flags reach the harness job as params, not through the run's config: a results folder copied
    without .snakemake, then eval.limit changed, re-runs the harness evaluations and trains nothing."""
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns(".snakemake", ".stamps"))
    config = micro_profile()
    config["defaults"]["eval"] = {**config["defaults"].get("eval", {}), "limit": 5}
    (copy / "micro.yaml").write_text(yaml.safe_dump(config))
    plan = snakemake(copy, "--cores", "2", "-n")
    assert plan.returncode == 0, plan.stderr[-2000:]
    jobs = re.findall(r"^(?:local)?rule (\w+):", plan.stdout, re.M)
    assert jobs.count("evaluate_harness") == 2 and "pretrain" not in jobs and "evaluate_tokens" not in jobs, jobs
    unchanged = snakemake(workdir, "--cores", "2", "-n")   # the original folder, its settings as they were
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr, unchanged.stdout[-2000:]


@pytest.mark.slow
def test_a_seed_added_after_snakemake_lost_its_metadata_reaches_the_tables(workdir, tmp_path):
    """A results folder copied elsewhere (its .snakemake left behind), then a seed added to the profile -- once
    in the profile file, once in the file it extends (outside config/): the runs index the tables read is
    rewritten each time, so the new seed's results are shown."""
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns(".snakemake"))
    config = micro_profile()
    config["experiments"][0]["seeds"] = [0, 1]
    (copy / "micro.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(copy, "--cores", "2", "results/micro/tables/index.json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "rule runs_index" in run.stdout + run.stderr and "rule tables" in run.stdout + run.stderr
    # what the tables read
    assert "base_s/seed1" in json.loads((copy / "results/micro/runs/index.json").read_text())["runs"]
    (copy / "parent.yaml").write_text(yaml.safe_dump(config))
    (copy / "micro.yaml").write_text(yaml.safe_dump({"extends": "parent.yaml", "profile": "micro"}))
    assert snakemake(copy, "--cores", "2", "results/micro/tables/index.json").returncode == 0
    shutil.rmtree(copy / ".snakemake")
    config["experiments"][0]["seeds"] = [0, 1, 2]
    (copy / "parent.yaml").write_text(yaml.safe_dump(config))  # only the parent changes
    run = snakemake(copy, "--cores", "2", "results/micro/tables/index.json")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "base_s/seed2" in json.loads((copy / "results/micro/runs/index.json").read_text())["runs"]


@pytest.mark.slow
def test_changing_eval_settings_reruns_only_the_harness(workdir):
    """eval.batch_size (lm-eval's batch) is outside every run's config: editing it re-trains nothing (the
    edited profile file re-indexes the profiles)."""
    config = micro_profile()
    config["defaults"]["eval"]["batch_size"] = 5
    _, jobs = dry_run(workdir, config)
    rules = {line.split()[1].rstrip(":") for line in jobs.splitlines() if line.startswith("rule ")}
    assert rules == {"evaluate_harness", "runs_index", "profiles_index", "tables", "report", "all"}, rules


# the one lint accepted: the rules declare no conda environment or container, they run the venv (docs/install.md)
NO_SOFTWARE_ENV = "Specify a conda environment or container for each rule."


@pytest.mark.slow
def test_lint_is_clean(tmp_path):
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(micro_profile()))
    run = snakemake(tmp_path, "--lint")
    out = run.stdout + run.stderr
    assert "Lints for" in out or "Congratulations" in out or "no issues" in out.lower(), out[-3000:]
    assert not set(re.findall(r"^ +\* (.+?):$", out, re.M)) - {NO_SOFTWARE_ENV}, out


@pytest.mark.slow
def test_invalid_profile_fails_before_any_job(tmp_path):
    config = micro_profile()
    config["defaults"]["model"]["n_head"] = 5
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(tmp_path, "-n")
    assert run.returncode != 0
    assert "model.d_model=32 is not divisible by model.n_head=5" in run.stdout + run.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace("profile: micro\n", "profile: micro\nprofile: again\n", 1),
     "key 'profile' appears twice in one mapping"),
    (lambda text: text.replace("warmup_steps: 4", "warmup_steps: 400", 1),
     "train.warmup_steps=400 exceeds train.steps=80: the learning rate would never finish warming up"),
    (lambda text: text.replace("train_docs: 300", "train_docs: 300\n    nope: 1", 1),
     "corpus.synthetic.nope: not a setting of the synthetic world; its settings are"),
])
@pytest.mark.slow
def test_plain_snakemake_refuses_what_makes_pre_check_refuses(tmp_path, edit, message):
    """Duplicate YAML keys, a warm-up longer than training, an unknown world setting: one line from plain
    ``snakemake`` (the GPU and SLURM commands call it directly), before any job."""
    text = yaml.safe_dump(micro_profile())
    assert edit(text) != text
    (tmp_path / "micro.yaml").write_text(edit(text))
    run = snakemake(tmp_path, "-n")
    assert run.returncode != 0 and message in run.stdout + run.stderr
    assert "Traceback" not in run.stdout + run.stderr and not (tmp_path / "results").exists()


PIQA_ROWS = [{"goal": "open a jar", "sol1": "twist the lid", "sol2": "eat the lid", "label": 0},
             {"goal": "dry hands", "sol1": "use a towel", "sol2": "use a rock", "label": 0},
             {"goal": "boil water", "sol1": "freeze it", "sol2": "heat it", "label": 1}]
LAMBADA_ROWS = [{"text": "the story of the dog and the dog"}, {"text": "she met the king and the king"}]


def _local_tasks_profile(workdir: Path, **piqa) -> Path:
    """micro.yaml with base_s evaluating zeroshot from local copies of piqa and lambada_openai (local.yaml)."""
    data = workdir / "localdata"
    data.mkdir(exist_ok=True)
    if not (data / "piqa.jsonl").exists():
        (data / "piqa.jsonl").write_text("".join(json.dumps(row) + "\n" for row in PIQA_ROWS))
        (data / "lambada.jsonl").write_text("".join(json.dumps(row) + "\n" for row in LAMBADA_ROWS))
    manifest = {"root": str(data), "tasks": {"piqa": {"path": "piqa.jsonl", **piqa}, "lambada_openai": "lambada.jsonl"}}
    (workdir / "manifest.yaml").write_text(yaml.safe_dump(manifest))
    config = micro_profile()
    config["local_tasks"] = {"manifest": str(workdir / "manifest.yaml")}
    config["experiments"][0]["evals"] = ["ppl", "embedded", "zeroshot", "lm_ppl"]
    (workdir / "local.yaml").write_text(yaml.safe_dump(config))
    return workdir / "local.yaml"


@pytest.mark.slow
def test_real_tasks_from_local_copies_feed_the_dag(workdir):
    """A profile's local_tasks: zeroshot runs the suite's tasks that have copies, offline, into eval/zeroshot.json
    (each file's sha256, exact, the tasks left out); a changed copy re-runs it; a copy that no longer matches
    the manifest's sha256 is refused before any job."""
    profile = _local_tasks_profile(workdir)
    target = "results/micro/runs/base_s/seed0/eval/zeroshot.json"
    run = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(profile), "--cores", "2", target,
                                      target.replace("zeroshot", "lm_ppl")],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((workdir / target).read_text())
    assert result["metrics"]["piqa/acc"] is not None and result["metrics"]["lambada_openai/acc"] is not None
    local = result["details"]["local_data"]
    assert set(local) == {"piqa", "lambada_openai"} and len(local["piqa"]["sha256"]) == 64
    assert (local["piqa"]["exact"] is False
            and "3 documents where lm-eval's validation split has 1838" in local["piqa"]["why"])
    assert {"arc_easy", "sciq", "race"} <= set(result["details"]["unavailable_tasks"])
    assert result["details"]["offline"] is True
    with (workdir / "localdata" / "piqa.jsonl").open("a") as handle:
        handle.write(json.dumps(PIQA_ROWS[0]) + "\n")
    lm_ppl = target.replace("zeroshot", "lm_ppl")  # lambada_openai's copy: piqa is none of its tasks
    planned = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(profile), "-n", target, lm_ppl],
                             capture_output=True, text=True, timeout=300)
    assert planned.returncode == 0 and "suite=zeroshot" in planned.stdout, planned.stdout[-2000:]
    assert "suite=lm_ppl" not in planned.stdout
    profile = _local_tasks_profile(workdir, sha256="0" * 64)
    refused = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(profile), "-n", target],
                             capture_output=True, text=True, timeout=300)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "rule evaluate_harness" not in said
    assert "piqa.jsonl: sha256 " in said and "the file changed; restore it, or put its new sha256" in said


@pytest.mark.slow
def test_a_flipped_bit_in_a_token_split_is_found_before_any_job(workdir, tmp_path):
    """A same-length edit of train.bin (one bit) is found by its sha256 whenever Snakemake plans, named in one
    line with the fix; following the fix (delete the token folder, force its job) plans the runs on it again.
    A file only copied (newer than its manifest, same content) is hashed once and accepted."""
    from tests.workflows.test_ncm_pipeline import _flip_one_bit

    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy)
    tokens = copy / "results/micro/data/world/tokens"
    os.utime(tokens / "train.bin")  # touched: newer than its manifest, same content
    run = snakemake(copy, "-n")
    assert run.returncode == 0 and "rule tokenize" not in run.stdout and "rule pretrain" not in run.stdout, run.stdout
    assert "data/world/tokens/train.bin" in json.loads((copy / "results/micro/.verified.json").read_text())
    _flip_one_bit(tokens / "train.bin")
    run = snakemake(copy, "-n")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "Traceback" not in said
    tokens_manifest = "results/micro/data/world/tokens/manifest.json"
    assert ("1 damaged result file(s): results/micro/data/world/tokens/train.bin: its content differs from the sha256 "
            f"in {tokens_manifest} (edited or damaged after its job wrote it); delete results/micro/data/world/tokens "
            f"and run snakemake --forcerun {tokens_manifest}") in said
    shutil.rmtree(tokens)
    planned, _ = dry_run(copy, micro_profile(), "--forcerun", tokens_manifest)
    assert {"base_s", "pm_s", "concept_k4"} <= planned


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty; point it at a file with documents"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "a binary file (NUL bytes), not text"),
    ("caf\u00e9 au lait\n".encode("latin-1"), "not UTF-8 (byte 3: b'\\xe9'); convert it"),
])
@pytest.mark.slow
def test_an_unreadable_local_corpus_is_refused_before_any_job(tmp_path, content, message):
    """A local corpus that is empty, binary or not UTF-8: one line from plain `snakemake`, naming the setting
    and the file, before any job (it used to fail in the corpus job, or with a pyarrow / decode traceback)."""
    corpus = tmp_path / "docs.txt"
    corpus.write_bytes(content)
    config = micro_profile()
    config["corpus"] = {"id": "mine", "source": "local", "seed": 0, "local": {"train": str(corpus)}}
    config["experiments"] = [{"id": "base_s", "seeds": [0], "evals": ["ppl"]}]
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(tmp_path, "-n")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and f"corpus.local.train={corpus}: {message}" in said, said[-2000:]
    assert "Traceback" not in said and not (tmp_path / "results").exists()



@pytest.mark.slow
def test_judges_and_pretrained_checkpoints_are_refused_before_the_first_job(tmp_path):
    """A Gen. PPL judge given as a missing folder or as a hub name not in the offline cache, and an init_from
    folder holding another family: one line each when the jobs start, before any job (they used to fail in
    evaluate_genppl or pretrain, after the training before them). A dry run still plans."""
    gpt2 = tmp_path / "gpt2_folder"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    config = micro_profile()
    config["genppl"] = {"judges": [str(tmp_path / "no_judge"), "nobody/not-a-cached-model"]}
    config["experiments"] = [{"id": "base_s", "seeds": [0], "evals": ["genppl"]},
                             {"id": "llama_s", "base": "base_s", "evals": ["ppl"],
                              "overrides": {"model.arch": "llama", "train.init_from": str(gpt2)}}]
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(config))
    assert snakemake(tmp_path, "-n").returncode == 0
    run = snakemake(tmp_path, "--cores", "1")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "Traceback" not in said and "rule corpus" not in said, said[-3000:]
    assert f"genppl.judges: {tmp_path / 'no_judge'}: no such folder" in said
    assert ("genppl.judges: nobody/not-a-cached-model: not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 "
            "allows no download at run time") in said
    assert f"experiment llama_s: train.init_from={gpt2}: a gpt2 model, not a llama one" in said
    assert not (tmp_path / "results/micro/data").exists()


@pytest.mark.slow
def test_results_from_other_token_data_are_refused_through_snakemake(workdir, tmp_path):
    """A run whose manifest records other token files than its dataset holds now (a results folder assembled
    from two runs of the data stage, copied with its times, so no evaluation re-runs and refuses first): the
    tables job, reading the token manifest where the profile puts it, refuses the run's results in one line."""
    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, ignore=shutil.ignore_patterns(".snakemake"))
    manifest = copy / "results/micro/runs/pm_s/seed0/final/manifest.json"
    recorded, times = json.loads(manifest.read_text()), manifest.stat()
    recorded["data"]["splits"]["train"] = "0" * 64
    manifest.write_text(json.dumps(recorded))
    os.utime(manifest, ns=(times.st_atime_ns, times.st_mtime_ns))  # copied with its times: nothing re-evaluates
    run = snakemake(copy, "--cores", "2", "--forcerun", "tables")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "rule pretrain" not in said, said[-3000:]
    assert ("1 run(s) hold results of another config or other files than the profile's: "
            "results/micro/runs/pm_s/seed0 (data differ)") in said


@pytest.mark.slow
def test_judges_and_checkpoints_do_not_hold_up_targets_that_do_not_need_them(tmp_path):
    """A judge or init_from checkpoint that would be refused does not stop a run of a target whose jobs need
    neither: the check reads the planned jobs, not every result of the profile."""
    gpt2 = tmp_path / "gpt2_folder"
    gpt2.mkdir()
    (gpt2 / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    config = micro_profile()
    config["genppl"] = {"judges": ["nobody/not-a-cached-model"]}
    config["experiments"] = [{"id": "base_s", "seeds": [0], "evals": ["ppl", "genppl"]},
                             {"id": "llama_s", "base": "base_s", "evals": ["ppl"],
                              "overrides": {"model.arch": "llama", "train.init_from": str(gpt2)}}]
    (tmp_path / "micro.yaml").write_text(yaml.safe_dump(config))
    run = snakemake(tmp_path, "--cores", "1", "results/micro/data/world/tokens/manifest.json")
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
