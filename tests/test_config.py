"""Profiles: every kind of invalid config fails before any job, in one line naming key and fix."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from workflows.experiments import ConfigError, resolve, run_config, validate

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def profile(tmp_path) -> dict:
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.jsonl").write_text('{"text": "hello"}\n')
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config["corpus"] = {"id": "local", "source": "local",
                        "local": {s: str(tmp_path / f"{s}.jsonl") for s in ("train", "valid", "test")}}
    return config


def test_default_profile_is_valid_and_resolves():
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    validate(config)
    exps = resolve(config)
    assert exps["pm_s"]["model"]["n_layer"] == exps["base_s"]["model"]["n_layer"] + 2
    assert exps["pm_m"]["model"]["d_model"] == 160  # inherited from its base
    run = run_config(config, "pm_m", 0)
    assert run["seed"] == 0
    assert run["model"]["n_layer"] == 6 and run["model"]["mlp_ratio"] == 4  # registry defaults written out
    assert run_config(config, "conceptlm_s", 0)["model"]["fusion"] == "norm_add"  # GPT-2 backbone default


def _error(config) -> str:
    with pytest.raises(ConfigError) as e:
        validate(config, "p.yaml")
    message = str(e.value)
    assert "\n" not in message
    return message


def test_unknown_key(profile):
    profile["defaults"]["train"]["learning_rate"] = 1e-3
    assert "defaults.train: unknown key 'learning_rate'" in _error(profile)


def test_unknown_override_key(profile):
    profile["experiments"][1]["overrides"]["model.n_layers"] = 3
    assert "experiments[pm_s]" in (m := _error(profile)) and "'n_layers'" in m


def test_heads_must_divide_width(profile):
    profile["experiments"][0]["overrides"] = {"model.n_head": 5}
    assert "model.d_model=128 is not divisible by model.n_head=5" in _error(profile)


def test_vocabulary_smaller_than_bytes(profile):
    profile["tokenizer"]["vocab_size"] = 200
    assert "tokenizer.vocab_size" in (m := _error(profile)) and "at least 257" in m


@pytest.mark.parametrize("key,value", [("lr", 0), ("lr", -1e-3), ("weight_decay", -0.1), ("steps", 0)])
def test_non_positive_rates(profile, key, value):
    profile["defaults"]["train"][key] = value
    assert f"defaults.train.{key}" in _error(profile)


def test_unknown_model(profile):
    profile["defaults"]["model"]["arch"] = "gpt5"
    assert "model.arch='gpt5' is not a registered model" in _error(profile)


def test_unknown_corpus(profile):
    profile["corpus"] = {"id": "c", "source": "hf", "hf": {"name": "bookcorpus2",
                                                          "max_docs": {"train": 1, "valid": 1, "test": 1}}}
    assert "corpus.hf.name='bookcorpus2' is not a known corpus" in _error(profile)
    profile["corpus"]["source"] = "ftp"
    assert "corpus.source" in _error(profile)


def test_missing_corpus_file(profile, tmp_path):
    profile["corpus"]["local"]["valid"] = str(tmp_path / "nope.jsonl")
    assert "corpus.local.valid" in (m := _error(profile)) and "no such file" in m


def test_batch_must_split_into_micro_batches(profile):
    profile["defaults"]["train"]["micro_batch_size"] = 5
    assert "train.batch_size=16 is not a multiple of train.micro_batch_size=5" in _error(profile)


def test_base_problems(profile):
    bad = copy.deepcopy(profile)
    bad["experiments"][1]["base"] = "nope"
    assert "base 'nope' is not an experiment id" in _error(bad)
    bad = copy.deepcopy(profile)
    bad["experiments"][0]["base"] = "pm_s"
    assert "is a cycle" in _error(bad)
    bad = copy.deepcopy(profile)
    bad["experiments"].append({"id": "base_s"})
    assert "appears twice" in _error(bad)


def test_unknown_experiment_id(profile):
    with pytest.raises(ConfigError, match="unknown experiment 'base_xl'"):
        run_config(profile, "base_xl", 0)


def test_full_scale_profiles_are_valid():
    for path in sorted((ROOT / "config").glob("*.yaml")):
        config = yaml.safe_load(path.read_text())
        if config["corpus"]["source"] == "local":
            continue  # points at the user's files
        validate(config, path.name)
