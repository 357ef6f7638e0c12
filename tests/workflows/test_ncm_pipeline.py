"""NCM through Snakemake, as a user runs it (`snakemake ncm`): the tokenizer run first, the generator
on top of it (upstream), the AR and masked-diffusion baselines, the judge exported to transformers,
Gen. PPL of each sampler with its NFE, the tokenizer's reconstruction; a re-trained tokenizer
re-trains the generator; per-paper targets select their paper's runs only."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.workflows.test_workflow import ROOT, built, dry_run

L, K = 16, 4


def ncm_profile() -> dict:
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config["profile"] = "micro"
    config.pop("scaling_laws")  # its grid is not in this profile
    config["corpus"]["synthetic"] = {"train_docs": 300, "valid_docs": 20, "test_docs": 20}
    config["tokenizer"]["vocab_size"] = 400
    config["defaults"]["model"].update(seq_len=L, d_model=32, n_layer=1, n_head=2)
    config["defaults"]["train"].update(steps=30, batch_size=8, micro_batch_size=8, warmup_steps=3,
                                       log_interval=10, eval_interval=30, checkpoint_interval=30)
    config["genppl"] = {"judges": ["judge"], "samples": 6, "batch_size": 4, "temperature": 1.0, "seed": 0}
    ncm = {"paper": "ncm", "overrides": {"model.seq_len": L}}
    config["experiments"] = [
        {"id": "base_s", "evals": ["ppl"]},  # a ConceptLM row: not in `snakemake ncm`
        {"id": "tok", **ncm, "overrides": {"model.arch": "ncm_tokenizer", "model.n_scales": K,
                                           "model.codebook_size": 32,
                                           "model.seq_len": L, "train.loss_weights": {"rec": 1.0, "vq": 1.0}},
         "evals": ["recon", "genppl_data"]},
        {"id": "gen", **ncm, "upstream": "tok", "overrides": {"model.arch": "ncm", "model.seq_len": L,
                                                             "train.loss_weights": {"gen": 1.0}},
         "evals": ["recon", "genppl", "genppl_k2", "genppl_k4"]},
        {"id": "ar", **ncm, "evals": ["genppl"]},
        {"id": "mdlm", "base": "ar", "overrides": {"model.arch": "mdlm_gpt2", "train.loss_weights": {"nelbo": 1.0}},
         "evals": ["genppl_s4", "genppl_s8"]},
        {"id": "judge", "base": "ar", "overrides": {"model.d_model": 48}, "evals": ["ppl"]},
    ]
    return config


def runs(workdir: Path, exp: str) -> Path:
    return workdir / f"results/micro/runs/{exp}/seed0"


def result(workdir: Path, exp: str, name: str) -> dict:
    return json.loads((runs(workdir, exp) / "eval" / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return built(tmp_path_factory, "ncm", ncm_profile(), "ncm")


@pytest.mark.slow
def test_ncm_target_trains_the_generator_on_its_tokenizer_run(workdir):
    assert not runs(workdir, "base_s").exists()  # another paper's run: not part of `snakemake ncm`
    tok = json.loads((runs(workdir, "tok") / "final" / "manifest.json").read_text())
    gen = json.loads((runs(workdir, "gen") / "final" / "manifest.json").read_text())
    assert gen["upstream"] == {"experiment": "tok", "seed": 0, "model_sha256": tok["model_sha256"]}
    assert gen["config"]["model"]["tokenizer"]["n_scales"] == K
    recon_tok, recon_gen = result(workdir, "tok", "recon"), result(workdir, "gen", "recon")
    # the generator carries the frozen tokenizer: the same reconstruction
    assert recon_tok["metrics"]["test/token_acc"] == recon_gen["metrics"]["test/token_acc"]
    assert (workdir / "results/micro/judges/judge/config.json").is_file()


@pytest.mark.slow
def test_each_sampler_records_its_network_calls_and_gen_ppl(workdir):
    gen, ar = result(workdir, "gen", "genppl")["metrics"], result(workdir, "ar", "genppl")["metrics"]
    assert gen["samples/nfe"] == K  # one generator call per scale
    assert ar["samples/nfe"] == L - 1  # a one-token prompt, L - 1 tokens, one call each (KV cache)
    assert 1 <= result(workdir, "mdlm", "genppl_s4")["metrics"]["samples/nfe"] <= 4 + 1  # + the final denoising call
    for metrics in (gen, ar):
        assert metrics["genppl/ppl"] > 1 and metrics["samples/n"] == 6 and metrics["samples/time_s"] > 0
        assert "world/sample_accept_rate" in metrics and "world/prefix_accept_rate" in metrics  # None: nothing judged
    samples = (runs(workdir, "gen") / "eval" / "genppl.samples.jsonl").read_text().splitlines()
    assert len(samples) == 6 and all(len(json.loads(line)["ids"]) == L for line in samples)


def _ids(workdir: Path, exp: str, name: str) -> list[list[int]]:
    lines = (runs(workdir, exp) / "eval" / f"{name}.samples.jsonl").read_text().splitlines()
    return [json.loads(line)["ids"] for line in lines]


@pytest.mark.slow
def test_diagnostic_variants_isolate_the_generator_from_the_tokenizer(workdir):
    """genppl_data scores the test windows; genppl_k<j> completes j real scales: K of them is the
    tokenizer's reconstruction of those windows, made without a generator call (block-diagonal)."""
    import numpy as np
    import torch

    from evals.perplexity import load_trained

    data = _ids(workdir, "tok", "genppl_data")
    tokens = np.fromfile(workdir / "results/micro/data/world/tokens/test.bin", dtype=np.uint16)
    assert data == tokens[:6 * L].astype(np.int64).reshape(6, L).tolist()
    assert result(workdir, "tok", "genppl_data")["metrics"]["samples/nfe"] == 0
    tok, _ = load_trained(runs(workdir, "tok") / "final", "cpu")
    with torch.no_grad():
        recon = tok.tokens(tok.decode(tok.cumulative(tok.encode(torch.tensor(data)), K))).tolist()
    assert _ids(workdir, "gen", f"genppl_k{K}") == recon
    assert [result(workdir, "gen", f"genppl_k{j}")["metrics"]["samples/nfe"] for j in (2, K)] == [K - 2, 0]


@pytest.mark.slow
def test_retrained_tokenizer_retrains_the_generator(workdir):
    config = ncm_profile()
    config["experiments"][1]["overrides"]["train.steps"] = 31
    planned, _ = dry_run(workdir, config, "ncm")
    assert {"tok", "gen"} <= planned and not planned & {"ar", "mdlm", "judge"}


@pytest.mark.slow
def test_evaluate_cli_fills_defaults_and_refuses_what_the_model_cannot_do(workdir, tmp_path):
    """The CLI the rule runs: a partial --settings gets the profile defaults; steps on an AR run, a missing
    judge (before any sampling: no samples file) and temperature on masked diffusion are one-line errors."""
    import sys

    def evaluate(exp, *args, name="ok"):
        out = tmp_path / f"{exp}_{name}.json"
        run = subprocess.run([sys.executable, "-m", "workflows.cli", "eval-genppl", "--run-dir",
                              str(runs(workdir, exp)),
                              "--tokenizer", str(workdir / "results/micro/data/world/tokenizer.json"),
                              "--tokens", str(workdir / "results/micro/data/world/tokens"), "--out", str(out), *args],
                             capture_output=True, text=True, timeout=300, env={**__import__("os").environ,
                                                                              "HF_HUB_OFFLINE": "1"})
        return run, out

    judge = ["--judge", str(workdir / "results/micro/judges/judge")]
    run, out = evaluate("ar", *judge, "--settings", '{"samples": 2}')
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(out.read_text())["metrics"]["samples/n"] == 2
    for n, (exp, args, message) in enumerate((
            ("ar", [*judge, "--eval", "genppl_s7"], "sampling steps are masked diffusion's"),
            ("ar", ["--judge", "no-such-judge-offline"], "no-such-judge-offline"),
            ("mdlm", [*judge, "--settings", '{"temperature": 0.5}', "--eval", "genppl_s4"],
             "masked diffusion samples at temperature 1"))):
        run, out = evaluate(exp, *args, *([] if "--settings" in args else ["--settings", "{}"]), name=f"bad{n}")
        assert run.returncode == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
        assert not out.with_name(f"{out.stem}.samples.jsonl").exists()  # refused before any sample was drawn


@pytest.mark.slow
def test_killed_generator_resumes_through_snakemake_to_the_uninterrupted_weights(workdir, tmp_path):
    """`snakemake` on a generator killed with SIGKILL mid-run (after its step-20 checkpoint), then re-run as a
    user re-runs it: it resumes on the same upstream tokenizer and ends with the weights of an uninterrupted run."""
    import os
    import shutil

    from tests.workflows.test_workflow import SNAKEMAKE

    config = ncm_profile()
    config["experiments"][2]["overrides"]["train.checkpoint_interval"] = 10  # gen: a new run, the tokenizer kept
    target = "results/micro/runs/gen/seed0/final/model.safetensors"

    def run(folder: Path, kill_after: int | None = None):
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        env.pop("REPRO_SIGKILL_AFTER_STEP", None)
        if kill_after is not None:
            env["REPRO_SIGKILL_AFTER_STEP"] = str(kill_after)
        return subprocess.run(SNAKEMAKE + ["-d", str(folder), "--configfile", str(folder / "changed.yaml"), "--cores",
                                           "2", target], capture_output=True, text=True, env=env, timeout=600)

    copies = {}
    for name in ("killed", "reference"):
        copies[name] = tmp_path / name
        shutil.copytree(workdir, copies[name], symlinks=True)
        (copies[name] / "changed.yaml").write_text(yaml.safe_dump(config))
    assert run(copies["killed"], kill_after=20).returncode != 0
    assert not (copies["killed"] / target).exists()
    resumed = run(copies["killed"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming at step 20" in (copies["killed"] / "results/micro/runs/gen/seed0/logs/pretrain.log").read_text()
    reference = run(copies["reference"])
    assert reference.returncode == 0, reference.stderr[-3000:]
    sha = [json.loads((copies[name] / "results/micro/runs/gen/seed0/final/manifest.json").read_text())["model_sha256"]
           for name in ("killed", "reference")]
    assert sha[0] == sha[1]
    tok = [json.loads((folder / "results/micro/runs/tok/seed0/final/manifest.json").read_text())["model_sha256"]
           for folder in (workdir, copies["killed"])]
    assert tok[0] == tok[1]  # the upstream tokenizer was kept, not retrained


def _flip_one_bit(path: Path, at: int = 1000) -> None:
    """A same-length edit: one bit of the file's byte ``at`` (of its middle for a short file) flipped in place."""
    data = bytearray(path.read_bytes())
    at = min(at, len(data) // 2)
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.slow
def test_a_damaged_upstream_is_refused_before_its_downstream_loses_its_outputs(workdir, tmp_path):
    """The tokenizer's final weights damaged after its run (one bit): plain `snakemake ncm` would re-train the
    generator on them, deleting its good final/ first. It is refused before any job, in one line naming the
    file and the folder to delete; the generator's weights are untouched."""
    import shutil

    from tests.workflows.test_workflow import snakemake

    copy = tmp_path / "copy"
    shutil.copytree(workdir, copy, symlinks=True)
    damaged = runs(copy, "tok") / "final" / "model.safetensors"
    generator = runs(copy, "gen") / "final" / "model.safetensors"
    before = generator.read_bytes()
    _flip_one_bit(damaged)
    run = snakemake(copy, "--cores", "2", "ncm")
    said = run.stdout + run.stderr
    assert run.returncode != 0 and "rule pretrain" not in said and "Traceback" not in said, said[-3000:]
    assert (f"{damaged.relative_to(copy)}: its content differs from the sha256 in "
            f"{(runs(copy, 'tok') / 'final' / 'manifest.json').relative_to(copy)}") in said
    assert f"delete {runs(copy, 'tok').relative_to(copy)} and re-run snakemake, which re-trains it" in said
    assert generator.read_bytes() == before
