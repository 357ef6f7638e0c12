"""NCM's conditional tasks through Snakemake, as a user runs them: paired datasets (the world's
translation pairs, generated Sudoku puzzles) built by the data rules, the per-task tokenizer on the
targets, the generator on target-side text, the conditional generator built on it, the AR and
masked-diffusion baselines on the same pairs, and the cond / MBR / guidance evaluations with their
NFE; a changed dataset re-runs only what reads it; a malformed external Sudoku file is one line."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.workflows.test_ncm_pipeline import result
from tests.workflows.test_workflow import ROOT, SNAKEMAKE, built, dry_run

K, L, P = 4, 16, 32


def external_csv(path: Path) -> Path:
    """Three puzzles in the Kaggle quizzes,solutions format (81 characters, 0 = empty)."""
    from corpora.sudoku import generate

    rows = generate(3, 33, seed=7, stream=5)
    path.write_text("quizzes,solutions\n" + "".join(f"{r['source'].replace('|', '')},{r['target'].replace('|', '')}\n"
                                                     for r in rows))
    return path


def conditional_profile(external: Path | None = None) -> dict:
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config.pop("scaling_laws")  # its grid is not in this profile
    config["profile"] = "micro"
    config["corpus"]["synthetic"] = {"train_docs": 60, "valid_docs": 10, "test_docs": 10}
    config["tokenizer"]["vocab_size"] = 400
    config["datasets"] = {
        "tr": {"corpus": {"source": "pairs", "seed": 0,
                          "synthetic": {"train_docs": 60, "valid_docs": 10, "test_docs": 10},
                          "pairs": {"task": "translate", "n": {"train": 300, "valid": 20, "test": 20}}},
               "tokenizer": "corpus", "layout": {"source_len": P, "target_len": L}},
        "sd": {"corpus": {"source": "sudoku", "seed": 0,
                          "sudoku": {"tiers": ["easy", "hard"], "n": {"train": 20, "valid": 4, "test": 4},
                                     **({"external": str(external)} if external else {})}},
               "tokenizer": {"kind": "chars", "alphabet": "0123456789|"},
               "layout": {"source_len": 89, "target_len": 89}},
    }
    config["defaults"]["model"].update(seq_len=L, d_model=32, n_layer=1, n_head=2)
    config["defaults"]["train"].update(steps=12, batch_size=4, micro_batch_size=4, warmup_steps=2,
                                       log_interval=6, eval_interval=12, checkpoint_interval=12, eval_batches=1)
    config["conditional"] = {"examples": 6, "batch_size": 4, "seed": 0}
    ncm = {"paper": "ncm"}
    tok = {"model.arch": "ncm_tokenizer", "model.n_scales": K, "model.codebook_size": 32,
           "train.loss_weights": {"rec": 1.0, "vq": 1.0}}
    config["experiments"] = [
        {"id": "tok", **ncm, "data": "tr", "overrides": {**tok, "model.seq_len": L}, "evals": ["recon"]},
        {"id": "lm", **ncm, "data": "tr", "upstream": "tok",
         "overrides": {"model.arch": "ncm", "model.seq_len": L, "train.loss_weights": {"gen": 1.0}},
         "evals": ["recon"]},
        {"id": "gen", "base": "lm", "upstream": "lm",
         "overrides": {"model.seq_len": P + L, "model.prefix_len": P},
         "evals": ["cond", "cond_mbr2", "cond_cfg2", "cond_k2", "cond_k4"]},
        {"id": "ar", **ncm, "data": "tr", "overrides": {"model.seq_len": P + L}, "evals": ["cond"]},
        {"id": "mdlm", "base": "ar", "overrides": {"model.arch": "mdlm_gpt2", "model.prefix_len": P,
                                                  "train.loss_weights": {"nelbo": 1.0}}},
        {"id": "sd_tok", **ncm, "data": "sd", "overrides": {**tok, "model.seq_len": 89}, "evals": ["recon"]},
        {"id": "sd_ar", **ncm, "data": "sd", "overrides": {"model.seq_len": 178}, "evals": ["cond"]},
    ]
    return config


@pytest.fixture(scope="module")
def external(tmp_path_factory) -> Path:
    return external_csv(tmp_path_factory.mktemp("external") / "puzzles.csv")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, external) -> Path:
    return built(tmp_path_factory, "ncm_cond", conditional_profile(external), "ncm")


@pytest.mark.slow
def test_paired_datasets_and_stages_through_the_dag(workdir):
    data = workdir / "results/micro/data"
    assert json.loads((data / "tr/tokens/manifest.json").read_text())["layout"] == {"source_len": P, "target_len": L}
    assert not (data / "tr/tokenizer.json").exists()  # the translation pairs use the corpus's BPE
    assert json.loads((data / "sd/tokens/manifest.json").read_text())["vocab_size"] == 12
    manifest = json.loads((workdir / "results/micro/runs/gen/seed0/final/manifest.json").read_text())
    assert manifest["upstream"]["experiment"] == "lm" and manifest["config"]["model"]["prefix_len"] == P
    assert result(workdir, "tok", "recon")["details"]["window"].startswith("the targets of the first")
    sd = result(workdir, "sd_tok", "recon")["metrics"]
    assert {"easy/token_acc", "hard/token_acc"} <= set(sd)


@pytest.mark.slow
def test_each_generator_records_its_calls_beside_its_scores(workdir):
    cond, mbr, cfg = (result(workdir, "gen", name)["metrics"] for name in ("cond", "cond_mbr2", "cond_cfg2"))
    assert cond["samples/nfe"] == K and mbr["samples/nfe"] == 2 * K and cfg["samples/nfe"] == 2 * K
    assert mbr["samples/candidates"] == 2 and result(workdir, "gen", "cond_mbr2")["details"]["utility"] == "bleu"
    k2, k4 = (result(workdir, "gen", f"cond_k{j}")["metrics"] for j in (2, K))
    assert k2["samples/nfe"] == K - 2 and k4["samples/nfe"] == 0  # the generator completes real coarse scales
    ar, mdlm = result(workdir, "ar", "cond")["metrics"], result(workdir, "mdlm", "cond")["metrics"]
    assert 1 <= ar["samples/nfe"] <= L and 1 <= mdlm["samples/nfe"] <= L + 1
    for m in (cond, mbr, cfg, ar, mdlm):
        assert (m["samples/n"] == 6 and 0 <= m["test/bleu"] <= 100 and 0 <= m["test/rougeL"] <= 1
                and m["samples/time_s"] > 0)
    board = result(workdir, "sd_ar", "cond")["metrics"]
    assert {"easy/board_acc", "hard/board_acc", "external/board_acc", "test/board_acc"} <= set(board)
    assert board["easy/n"] == board["external/n"] == 2 and board["ceiling/board_acc"] == 1.0  # 6 examples, 3 tiers
    samples = (workdir / "results/micro/runs/sd_ar/seed0/eval/cond.samples.jsonl").read_text().splitlines()
    assert {json.loads(s)["tier"] for s in samples} == {"easy", "hard", "external"}


@pytest.mark.slow
def test_a_changed_dataset_reruns_only_what_reads_it(workdir, external):
    config = conditional_profile(external)
    config["datasets"]["sd"]["corpus"]["sudoku"]["n"]["train"] = 21
    planned, console = dry_run(workdir, config, "ncm")
    assert planned == {"sd_tok", "sd_ar"}
    assert "dataset=sd" in console and "dataset=tr" not in console
    external.write_text("".join(external.read_text().splitlines(keepends=True)[:-1]))  # an edited file, same path
    planned, console = dry_run(workdir, conditional_profile(external), "ncm")
    assert planned == {"sd_tok", "sd_ar"} and "rule corpus" in console


@pytest.mark.slow
def test_a_malformed_external_sudoku_file_is_one_line_naming_file_and_line(workdir, tmp_path):
    bad = tmp_path / "puzzles.csv"
    bad.write_text("quizzes,solutions\n" + "0" * 80 + "," + "1" * 81 + "\n")
    config = conditional_profile()
    config["profile"] = "micro_bad"
    config["datasets"]["sd"]["corpus"]["sudoku"]["external"] = str(bad)
    config["experiments"] = [e for e in config["experiments"] if e["id"] == "sd_ar"]
    (workdir / "bad.yaml").write_text(yaml.safe_dump(config))
    run = subprocess.run(SNAKEMAKE + ["-d", str(workdir), "--configfile", str(workdir / "bad.yaml"),
                                      "--cores", "1", "ncm"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert f"{bad}:2" in run.stderr and "rule pretrain" not in run.stderr
