"""NCM configs: the scale-length schedules, and every bad setting a one-line error naming its key,
raised when the config is built (so profile validation refuses it before any job runs)."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from models.configs import SCHEDULES, schedule_lengths
from models.registry import model_config
from workflows.experiments import ConfigError, resolve, run_config, validate

ROOT = Path(__file__).resolve().parents[2]
TOK = {"arch": "ncm_tokenizer", "d_model": 16, "n_layer": 1, "n_head": 2, "codebook_size": 8, "d_code": 4}


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("L,K", [(128, 12), (1024, 32), (256, 12), (16, 4), (5, 5), (7, 1), (89, 12), (48, 8)])
def test_schedules_are_strictly_increasing_and_end_at_L(schedule, L, K):
    ls = schedule_lengths(L, K, schedule)
    assert len(ls) == K and ls[0] >= 1 and ls[-1] == L
    assert all(b > a for a, b in zip(ls, ls[1:]))


def test_schedule_definitions_are_pinned():
    """The docstring's definitions at NCM's L 128, K 12 (TinyStories / LM1B)."""
    assert schedule_lengths(128, 12, "exponential") == (1, 2, 3, 5, 8, 11, 17, 25, 38, 57, 85, 128)
    assert schedule_lengths(128, 12, "quadratic") == (1, 4, 8, 14, 22, 32, 44, 57, 72, 89, 108, 128)
    assert schedule_lengths(128, 12, "linear") == (11, 21, 32, 43, 53, 64, 75, 85, 96, 107, 117, 128)
    assert schedule_lengths(128, 12, "sqrt")[:3] == (37, 52, 64)
    assert schedule_lengths(128, 12, "log")[:3] == (35, 55, 69)
    assert schedule_lengths(4, 4, "exponential") == (1, 2, 3, 4)  # K = L: every length once


def test_explicit_lengths_and_default_K():
    _, cfg = model_config({**TOK, "scale_lengths": [1, 4, 16]}, vocab_size=50, seq_len=16)
    assert cfg.lengths == (1, 4, 16) and cfg.K == 3
    _, cfg = model_config(dict(TOK), vocab_size=50, seq_len=128)
    assert cfg.K == 12 and cfg.lengths == schedule_lengths(128, 12, "exponential")


@pytest.mark.parametrize("fields,key", [
    ({"n_scales": 17}, "model.n_scales=17"),                       # K > L
    ({"n_scales": 0}, "model.n_scales=0"),
    ({"scale_lengths": [1, 4, 8]}, "model.scale_lengths"),          # does not end at L
    ({"scale_lengths": [1, 8, 8, 16]}, "model.scale_lengths"),      # not strictly increasing
    ({"scale_lengths": [0, 16]}, "model.scale_lengths"),
    ({"scale_lengths": [2, 16], "n_scales": 3}, "model.n_scales=3"),
    ({"length_schedule": "cubic"}, "model.length_schedule"),
    ({"down": "max"}, "model.down"), ({"up": "cubic"}, "model.up"),
    ({"phi_ratio": 1.5}, "model.phi_ratio"), ({"nested_dropout": 2.0}, "model.nested_dropout"),
    ({"codebook_size": 1}, "model.codebook_size"), ({"vq_scales": "first"}, "model.vq_scales"),
    ({"codebook_sizes": [4, 4]}, "model.codebook_sizes"),
    ({"n_scales": 4, "codebook_sizes": [4, 4, 1, 4]}, "model.codebook_sizes"),
    ({"n_scales": 4, "codebook_sizes": [4, 4, 8, 8], "shared_codebook": True}, "model.codebook_sizes"),
    ({"straight_through": "code"}, "model.straight_through"),
])
def test_bad_tokenizer_settings_are_one_line_errors_naming_the_key(fields, key):
    with pytest.raises(ValueError) as e:
        model_config({**TOK, **fields}, vocab_size=50, seq_len=16)
    assert key in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("fields,key", [
    ({"tokenizer": None}, "model.tokenizer is required"),
    ({"tokenizer": {**TOK, "seq_len": 32}}, "model.tokenizer.seq_len=32"),    # a tokenizer run of another L
    ({"tokenizer": {**TOK, "n_scales": 40}}, "model.tokenizer.n_scales=40"),  # K > L
    ({"tokenizer": {**TOK, "arch": "gpt2"}}, "model.tokenizer.arch"),
    ({"tokenizer": {**TOK, "chunk_size": 4}}, "model.tokenizer.chunk_size"),
    ({"attention": "causal"}, "model.attention"), ({"perturb_rate": 1.0}, "model.perturb_rate"),
    ({"head": "tied"}, "model.head"),
])
def test_bad_generator_settings_are_one_line_errors_naming_the_key(fields, key):
    with pytest.raises(ValueError) as e:
        model_config({"arch": "ncm", "d_model": 16, "n_layer": 1, "n_head": 2, "tokenizer": TOK, **fields},
                     vocab_size=50, seq_len=16)
    assert key in str(e.value) and "\n" not in str(e.value)


def ncm_profile(tmp_path) -> dict:
    """The default profile on a local corpus with a tokenizer and a generator experiment."""
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.jsonl").write_text('{"text": "hello"}\n')
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config["corpus"] = {"id": "local", "source": "local",
                        "local": {s: str(tmp_path / f"{s}.jsonl") for s in ("train", "valid", "test")}}
    for entry in config["experiments"]:
        if "evals" in entry:
            entry["evals"] = [e for e in entry["evals"] if e != "embedded"]
    tok = {"model.arch": "ncm_tokenizer", "model.codebook_size": 64, "model.n_scales": 8,
           "model.length_schedule": "quadratic", "train.loss_weights": {"rec": 1.0, "vq": 1.0}}
    gen = {"model.arch": "ncm", "model.attention": "block_causal", "model.alpha": 0.5,
           "train.loss_weights": {"gen": 1.0}}
    config["experiments"] += [{"id": "ncm_tok_t", "overrides": tok, "evals": ["recon"]},
                              {"id": "ncm_t", "upstream": "ncm_tok_t", "overrides": gen, "evals": ["recon"]}]
    return config


def test_profile_with_ncm_experiments_validates_and_writes_every_default(tmp_path):
    config = ncm_profile(tmp_path)
    validate(config)
    assert resolve(config)["ncm_t"]["model"]["attention"] == "block_causal"
    tok = run_config(config, "ncm_tok_t", 0)["model"]
    assert tok["vq_beta"] == 0.25 and tok["nested_dropout"] == 1.0 and tok["length_schedule"] == "quadratic"
    gen = run_config(config, "ncm_t", 0)["model"]
    assert gen["perturb_rate"] == 0.1 and gen["tokenizer"]["n_scales"] == 8


@pytest.mark.parametrize("exp,key,value,message", [
    ("ncm_tok_t", "model.n_scales", 300, "model.n_scales=300"),
    ("ncm_tok_t", "model.scale_lengths", [1, 8, 64], "model.scale_lengths"),
    ("ncm_tok_t", "model.seq_len", 128, "upstream 'ncm_tok_t' has a window of 128 tokens"),  # a tokenizer of another L
    ("ncm_tok_t", "train.loss_weights", {"ntp": 1.0}, "train.loss_weights.ntp"),
])
def test_profile_validation_refuses_bad_ncm_settings(tmp_path, exp, key, value, message):
    config = ncm_profile(tmp_path)
    entry = next(e for e in config["experiments"] if e["id"] == exp)
    entry["overrides"] = {**copy.deepcopy(entry["overrides"]), key: value}
    with pytest.raises(ConfigError) as e:
        validate(config)
    assert message in str(e.value) and "\n" not in str(e.value)
