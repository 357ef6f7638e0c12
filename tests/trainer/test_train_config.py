"""The train and eval sections are typed (trainer/config.py, evals/config.py): their fields are the schema's
properties, the train defaults are filled in where a profile leaves them out, and a wrong key, type or
missing setting is one line naming it."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from trainer.config import TrainConfig
from workflows.experiments import ConfigError, load_profile, resolve

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_lists_exactly_the_typed_fields():
    schema = yaml.safe_load((ROOT / "config" / "schemas" / "config.schema.yaml").read_text())
    assert set(schema["$defs"]["train"]["properties"]) == {f.name for f in dataclasses.fields(TrainConfig)}


def test_defaults_are_filled_in_and_explicit_settings_kept():
    section = {"steps": 10, "batch_size": 8, "micro_batch_size": 4, "lr": 1e-3, "min_lr_ratio": 0.1,
               "warmup_steps": 2, "weight_decay": 0.1, "betas": [0.9, 0.95], "log_interval": 1, "eval_interval": 5,
               "eval_batches": 1, "checkpoint_interval": 5, "keep_checkpoints": 2, "snapshot_interval": None}
    resolved = TrainConfig.resolve(section)
    assert resolved == {**section, "eps": 1e-8, "grad_clip": 1.0, "compile": False, "precision": "auto",
                        "loss_weights": {"ntp": 1.0}}  # the null switch stays as given; unset ones are not written
    assert TrainConfig.resolve(resolved) == resolved  # a run's config is already complete
    with pytest.raises(ValueError, match=r"^train\.lrr: the train section has no field 'lrr'; did you mean 'lr'\?"):
        TrainConfig.resolve({**section, "lrr": 1})
    with pytest.raises(ValueError, match=r"^train\.precision='fp16': use one of \['auto', 'fp32', 'bf16'\]"):
        TrainConfig.resolve({**section, "precision": "fp16"})
    with pytest.raises(ValueError, match=r"^train\.steps is required; set it$"):
        TrainConfig.resolve({k: v for k, v in section.items() if k != "steps"})


def test_a_profile_leaves_the_defaults_out_and_its_runs_list_them():
    profile = load_profile(ROOT / "config" / "default.yaml", files=False)
    assert "eps" not in profile["defaults"]["train"]  # said once, in trainer/config.py
    train = resolve(profile)["base_gpt2_s"]["train"]
    assert (train["eps"], train["grad_clip"], train["loss_weights"]) == (1e-8, 1.0, {"ntp": 1.0})
    broken = copy.deepcopy(profile)
    broken["experiments"][0].setdefault("overrides", {})["train.precison"] = "bf16"
    with pytest.raises(ConfigError, match=r"train\.precison: the train section has no field 'precison'; did you "
                                          r"mean 'precision'\?"):
        resolve(broken, "p.yaml")


def test_the_eval_section_is_typed_too():
    from evals.config import EvalConfig

    schema = yaml.safe_load((ROOT / "config" / "schemas" / "config.schema.yaml").read_text())
    assert set(schema["$defs"]["eval"]["properties"]) == {f.name for f in dataclasses.fields(EvalConfig)}
    assert EvalConfig.of({"limit": 5}) == EvalConfig(batch_size=16, limit=5)
    with pytest.raises(ValueError, match=r"^eval\.batch: the eval section has no field 'batch'; known keys: "
                                         r"batch_size, limit$"):
        EvalConfig.of({"batch": 8})
    with pytest.raises(ValueError, match=r"^eval\.limit='5': use an integer or null$"):
        EvalConfig.of({"limit": "5"})


def test_a_bad_setting_is_named_where_it_was_written():
    profile = load_profile(ROOT / "config" / "default.yaml", files=False)
    broken = copy.deepcopy(profile)
    broken["defaults"]["train"]["steps"] = 600.0
    with pytest.raises(ConfigError, match=r"^p\.yaml: defaults: train\.steps=600\.0: give a whole number"):
        resolve(broken, "p.yaml")
    broken = copy.deepcopy(profile)
    broken["experiments"][0].setdefault("overrides", {})["train.betas"] = 0.9
    with pytest.raises(ConfigError, match=r"experiments\[base_gpt2_s\]: train\.betas=0\.9: use a list$"):
        resolve(broken, "p.yaml")


def test_an_off_switch_set_to_null_switches_it_off():
    from workflows.experiments import validate

    profile = load_profile(ROOT / "config" / "default.yaml", files=False)
    profile["defaults"]["eval"]["limit"] = 5
    profile["experiments"][0].setdefault("overrides", {}).update({"eval.limit": None, "train.init_from": None,
                                                                   "train.parallel": None})
    validate(profile, "p.yaml", files=False)
    exp = resolve(profile, "p.yaml")[profile["experiments"][0]["id"]]
    assert exp["eval"]["limit"] is None and exp["train"]["init_from"] is None and exp["train"]["parallel"] is None
