"""The entry point the workflow calls: result JSON in the project's schema with versions, n-shot,
limit, seeds and a traceable sample log; bad input is one line on stderr and exit code 2 before any
evaluation (and no result file)."""
from __future__ import annotations

import gzip
import json
import shutil
from importlib import metadata
from pathlib import Path

import jsonschema
import pytest

from workflows.cli import main as cli_main
from evals.tasks.local_data import EXAMPLE_CONFIG

SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "config" / "schemas" / "result.schema.json").read_text())


def main(argv):
    """The lm-eval tool of the one command line (``eval-<suite>`` is the same command with its suite)."""
    return cli_main(["lm-eval", *argv])


def cli(world_run, embedded_dir, out, *extra):
    return main(["--run-dir", str(world_run["run_dir"]), "--tokenizer", str(world_run["tokenizer"]),
                 "--task-dir", str(embedded_dir), "--out", str(out), *extra])


def test_result_json_is_complete_and_traceable(world_run, embedded_dir, tmp_path, capsys):
    out = tmp_path / "world_tiny" / "seed0" / "eval" / "embedded.json"
    assert cli(world_run, embedded_dir, out, "--tasks", "embedded", "--limit", "6", "--batch-size", "8") == 0
    assert "embedded_cloze/acc" in capsys.readouterr().out
    r = json.loads(out.read_text())
    jsonschema.validate(r, SCHEMA)
    assert (r["experiment"], r["seed"], r["eval"]) == ("world_tiny", 0, "embedded")
    m, d = r["metrics"], r["details"]
    for key in ("embedded_cloze/acc", "embedded_cloze/perplexity", "embedded_choice/acc", "embedded_choice/acc_norm",
                "embedded_ppl/word_perplexity", "embedded_ppl/bits_per_byte", "embedded_ppl/ppl"):
        assert isinstance(m[key], float), key
    assert m["embedded_ppl/ppl"] == m["embedded_ppl/word_perplexity"]
    assert d["table_metrics"]["embedded_ppl/ppl"]["metric"] == "word_perplexity"
    assert (d["harness"]["lm_eval"] == metadata.version("lm-eval")
            and d["harness"]["model_info"]["adapter"] == "concept-repro")
    assert d["limit"] == 6 and d["seeds"]["fewshot_random_seed"] == 1234 and d["batch_size"] == 8
    for task in ("embedded_cloze", "embedded_choice", "embedded_ppl"):
        t = d["tasks"][task]
        assert t["version"] == 1.0 and t["n_shot"] == 0 and t["n_samples"]["effective"] == 6
    assert r["provenance"]["checkpoint_sha256"] == d["harness"]["model_info"]["checkpoint_sha256"]
    with gzip.open(out.parent / "embedded.samples.jsonl.gz", "rt") as handle:  # compressed by default
        samples = [json.loads(x) for x in handle.read().splitlines()]
    assert len(samples) == d["samples"]["n"] == 18
    choice = [s for s in samples if s["task"] == "embedded_choice"]
    assert sum(s["acc"] for s in choice) / len(choice) == pytest.approx(m["embedded_choice/acc"])
    assert all(len(s["arguments"]) == 4 and len(s["resps"]) == 4 for s in choice)
    from tables.results import load_results  # the tables builder reads it (and not the sample log)

    loaded = load_results(tmp_path)
    assert loaded[("world_tiny", "embedded", "embedded_choice/acc")].mean == m["embedded_choice/acc"]


def test_the_plan_is_checked_before_anything_heavy_is_imported(world_run, embedded_dir, tmp_path):
    """``plan`` resolves suites, checks folders, the checkpoint's manifest and the local-data config without
    importing torch or lm-eval; its refusals need no model."""
    import subprocess
    import sys

    from evals.harness.errors import HarnessError
    from evals.harness.run import plan

    out = tmp_path / "eval" / "x.json"
    code = (f"import sys\nfrom evals.harness.run import plan\n"
            f"p = plan({str(world_run['run_dir'])!r}, {str(world_run['tokenizer'])!r}, 'embedded,piqa', {str(out)!r}, "
            f"task_dirs=[{str(embedded_dir)!r}], local_data={str(EXAMPLE_CONFIG)!r}, limit=3, batch_size=4)\n"
            "assert p.final_dir.name == 'final' and p.samples.name == 'x.samples.jsonl.gz' and p.batch_size == 4\n"
            "assert list(p.tasks.tasks) == ['embedded_cloze', 'embedded_choice', 'embedded_ppl', 'piqa'], p.tasks\n"
            "assert 'piqa' in p.local and p.local_dir.name == '.x_local_tasks' and not p.local_dir.exists()\n"
            # a task named directly: the tables' metric of the suite that lists it, offline (its copy is local)
            "assert [m.key for m in p.tasks.table_metrics][-1] == 'piqa/acc' and p.offline\n"
            "print([m for m in ('torch', 'lm_eval', 'transformers', 'datasets') if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    assert not plan(world_run["run_dir"], world_run["tokenizer"], "piqa", out).offline  # from the hub
    with pytest.raises(HarnessError, match="--local-only needs --local-data"):
        plan(world_run["run_dir"], world_run["tokenizer"], "piqa", out, local_only=True)
    with pytest.raises(HarnessError, match="none of the tasks .* has a local copy"):
        plan(world_run["run_dir"], world_run["tokenizer"], "sciq", out, local_data=EXAMPLE_CONFIG, local_only=True)
    with pytest.raises(HarnessError, match=r"did you mean \['arc_easy'\]"):  # a typo, not a missing copy
        plan(world_run["run_dir"], world_run["tokenizer"], "arc_easyy", out, local_data=EXAMPLE_CONFIG, local_only=True)
    with pytest.raises(HarnessError, match="task folder not found"):
        plan(world_run["run_dir"], world_run["tokenizer"], "embedded", out, task_dirs=[tmp_path / "none"])
    with pytest.raises(HarnessError, match="no manifest"):
        plan(tmp_path, world_run["tokenizer"], "embedded", out)
    assert not out.parent.exists()


def test_request_cache_is_keyed_by_checkpoint(world_run, embedded_dir, tmp_path):
    from evals.harness.run import evaluate

    kw = dict(task_dirs=[embedded_dir], limit=4, cache_dir=tmp_path / "cache")
    a = evaluate(world_run["run_dir"], world_run["tokenizer"], "embedded_cloze", tmp_path / "a.json", **kw)
    b = evaluate(world_run["run_dir"], world_run["tokenizer"], "embedded_cloze", tmp_path / "b.json", **kw)
    sha = a["provenance"]["checkpoint_sha256"]
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [Path(a["details"]["request_cache"]).name + "_rank0.db"]
    assert sha[:16] in a["details"]["request_cache"]
    assert b["details"]["harness"]["adapter_stats"]["forward_rows"] == 0  # every answer came from the cache
    assert a["metrics"] == b["metrics"]


def expect_error(capsys, code, needle, out):
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and needle in err, err
    assert not Path(out).exists()


def test_bad_input_fails_before_evaluation(world_run, harness_run, embedded_dir, tmp_path, capsys):
    out = tmp_path / "eval" / "x.json"
    expect_error(capsys, cli(world_run, embedded_dir, out, "--tasks", "embedded", "--expect-arch", "pythia"),
                 "expected 'pythia'", out)
    expect_error(capsys, cli(world_run, embedded_dir, out, "--tasks", "conceptlm_zeroshot,conceptlm_8b"),
                 "0-shot and 25-shot", out)
    bad_tok = main(["--run-dir", str(world_run["run_dir"]), "--tokenizer", str(harness_run["tokenizer"]),
                    "--tasks", "embedded", "--task-dir", str(embedded_dir), "--out", str(out)])
    expect_error(capsys, bad_tok, "is not the one the checkpoint in", out)
    hf_like = tmp_path / "hf_model"
    hf_like.mkdir()
    (hf_like / "config.json").write_text("{}")
    expect_error(capsys, main(["--run-dir", str(hf_like), "--tokenizer", str(world_run["tokenizer"]), "--tasks",
                               "embedded", "--task-dir", str(embedded_dir), "--out", str(out)]),
                 "not a checkpoint of this suite", out)
    other = tmp_path / "other_family" / "final"
    shutil.copytree(world_run["final"], other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["config"]["model"]["arch"] = "retired_family"
    (other / "manifest.json").write_text(json.dumps(manifest))
    expect_error(capsys, main(["--run-dir", str(other.parent), "--tokenizer", str(world_run["tokenizer"]), "--tasks",
                               "embedded", "--task-dir", str(embedded_dir), "--out", str(out)]),
                 "model family 'retired_family', which is not registered", out)
    (tmp_path / "local.yaml").write_text(f"root: {tmp_path}\ntasks:\n  piqa: {{path: missing.jsonl}}\n")
    expect_error(capsys, cli(world_run, embedded_dir, out, "--tasks", "piqa", "--local-data",
                             str(tmp_path / "local.yaml")),
                 "missing.jsonl: file of task piqa not found; fix tasks.piqa.path", out)


@pytest.mark.slow
def test_unknown_task_names_the_nearest(world_run, embedded_dir, tmp_path, capsys):
    out = tmp_path / "x.json"
    expect_error(capsys, cli(world_run, embedded_dir, out, "--tasks", "embeded_cloze"), "unknown task 'embeded_cloze'",
                 out)


def test_local_verification_skips_without_its_data(world_run, embedded_dir, tmp_path, capsys):
    out = tmp_path / "x.json"
    assert cli(world_run, embedded_dir, out, "--tasks", "conceptlm_zeroshot", "--local-only", "--local-data",
               str(EXAMPLE_CONFIG),
               "--local-root", str(tmp_path / "absent"), "--skip-missing-root") == 0
    assert "skipped" in capsys.readouterr().out and not out.exists()


def test_the_runs_own_tokenizer_is_found_beside_it(world_run, tmp_path):
    """Without --tokenizer: the data/<dataset>/tokenizer.json of the run's results folder whose sha256 the
    checkpoint recorded (another tokenizer beside it is passed over); none there is a one-line error."""
    from evals.harness.checkpoints import run_tokenizer
    from evals.harness.errors import HarnessError

    final = tmp_path / "results" / "runs" / "world_tiny" / "seed0" / "final"
    shutil.copytree(world_run["final"], final)
    with pytest.raises(HarnessError, match="no tokenizer.json under .* is the one this run was trained with"):
        run_tokenizer(final)
    other = tmp_path / "results" / "data" / "aaa" / "tokenizer.json"
    other.parent.mkdir(parents=True)
    other.write_text(world_run["tokenizer"].read_text().replace('"<|endoftext|>"', '"<|end|>"', 1))
    own = tmp_path / "results" / "data" / "world" / "tokenizer.json"
    own.parent.mkdir(parents=True)
    shutil.copy(world_run["tokenizer"], own)
    assert run_tokenizer(final) == own
