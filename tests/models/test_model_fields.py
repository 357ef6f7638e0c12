"""The model keys of a profile are the fields of the arch's config dataclass, and nothing else lists them:
every field is accepted, anything else is refused, wrong types and choices are one-line errors."""
from __future__ import annotations

import copy
import dataclasses
import typing
from pathlib import Path

import pytest
import yaml

from models.fields import choices, declared_types
from models.registry import NON_CAUSAL, REGISTRY, model_config
from workflows.experiments import SCHEMA_PATH, ConfigError, explicit_model, resolve, run_config, validate

ROOT = Path(__file__).resolve().parents[2]
SPECS = {**REGISTRY, **NON_CAUSAL}
FIXED = {"vocab_size": 64, "seq_len": 32}
TINY = {"d_model": 32, "n_layer": 2, "n_head": 2}
TOKENIZER = {"arch": "ncm_tokenizer", **TINY, "n_scales": 4}


@pytest.fixture
def profile() -> dict:
    return yaml.safe_load((ROOT / "config" / "default.yaml").read_text())


def _error(config) -> str:
    with pytest.raises(ConfigError) as e:
        validate(config, "p.yaml")
    assert "\n" not in str(e.value)
    return str(e.value)


def test_the_schema_leaves_the_model_section_to_the_dataclasses():
    model = yaml.safe_load(SCHEMA_PATH.read_text())["$defs"]["model"]
    assert model["type"] == "object" and not {"properties", "additionalProperties", "required"} & set(model)


@pytest.mark.parametrize("arch", sorted(SPECS))
def test_every_field_of_every_model_is_accepted_with_its_own_value(arch):
    """Each field written out with the value it resolves to gives the same config (so the same run)."""
    given = {"arch": arch, **TINY, **({"tokenizer": TOKENIZER} if arch == "ncm" else {})}
    _, typed = model_config(given, **FIXED)
    every = {f.name: getattr(typed, f.name) for f in dataclasses.fields(typed) if f.name not in FIXED}
    assert model_config({"arch": arch, **every}, **FIXED)[1] == typed


@pytest.mark.slow
def test_every_default_written_out_in_a_profile_changes_no_run_config(profile):
    """For every causal arch: an experiment overriding every model field with its resolved value validates
    and has the run config (hence the config hash) of the same experiment without them."""
    for arch in sorted(REGISTRY):
        plain = {"id": f"plain_{arch}", "base": "base_gpt2_s", "overrides": {"model.arch": arch}}
        config = {**profile, "experiments": profile["experiments"] + [plain]}
        model = explicit_model(resolve(config)[plain["id"]]["model"])
        every = {**plain, "id": f"every_{arch}", "overrides": {f"model.{k}": v for k, v in model.items()}}
        config["experiments"] = config["experiments"] + [every]
        validate(config)
        assert {**run_config(config, every["id"], 0), "id": None} == {**run_config(config, plain["id"], 0), "id": None}


def test_a_diagnostic_switch_left_off_is_not_in_the_run_config_and_set_it_is(profile):
    """models.fields.off_switch: DLCM's token_window while null leaves the run config (and its hash) as it
    was before the field existed; set, it is written out like every other field."""
    off = explicit_model(resolve(profile)["dlcm_s"]["model"])
    assert "token_window" not in off and "decoder_skip" in off
    config = {**profile, "experiments": profile["experiments"] + [
        {"id": "dlcm_w8", "base": "dlcm_s", "overrides": {"model.token_window": 8}}]}
    on = explicit_model(resolve(config)["dlcm_w8"]["model"])
    assert on == {**off, "token_window": 8}
    fields = {f.name: f
              for f in dataclasses.fields(model_config({k: v for k, v in on.items() if k != "seq_len"}, **FIXED)[1])}
    assert [name for name, f in fields.items() if f.metadata] == ["token_window", "null_concept", "cross_positions"]


def test_unknown_model_keys_are_one_line_errors_naming_the_key(profile):
    bad = copy.deepcopy(profile)
    bad["defaults"]["model"]["n_layers"] = 4
    message = _error(bad)
    assert "model.n_layers: gpt2 models have no field 'n_layers'; did you mean 'n_layer'?" in message
    bad = copy.deepcopy(profile)
    next(e for e in bad["experiments"] if e["id"] == "conceptlm_gpt2_s")["overrides"]["model.codebook"] = 8
    assert "experiments[conceptlm_gpt2_s]: model.codebook: conceptlm_gpt2 models have no field" in _error(bad)
    bad = copy.deepcopy(profile)
    bad["defaults"]["model"]["vocab_size"] = 300
    assert "model.vocab_size is set by the data; drop it" in _error(bad)
    bad = copy.deepcopy(profile)
    del bad["defaults"]["model"]["d_model"]
    assert "model.d_model is required by gpt2 models" in _error(bad)


@pytest.mark.parametrize("key,value,words", [
    ("d_model", "64", "model.d_model='64': use an integer"),
    ("d_model", True, "model.d_model=True: use an integer"),
    ("bias", "yes", "model.bias='yes': use true or false"),
    ("dropout", "0.1", "model.dropout='0.1': use a number"),
    ("n_kv_head", 2.5, "model.n_kv_head=2.5: use an integer or null"),
    ("activation", "relu", "model.activation='relu': use one of ['gelu_tanh', 'gelu', 'swiglu']"),
    ("positional", None, "model.positional=None: use one of ['learned', 'rotary']"),
    ("rope_scaling", [8.0], "model.rope_scaling=[8.0]: use a mapping or null"),
    ("rope_scaling", {"factor": 8.0}, "give rope_type llama3 and factor"),
    ("n_layer", 0, "model.n_layer=0: use a positive integer"),
    ("dropout", 1.0, "model.dropout=1.0: use a probability in [0, 1)"),
    ("norm_eps", 0, "model.norm_eps=0: use a number > 0"),
    ("rotary_pct", 0, "model.rotary_pct=0"),
    ("mlp_hidden", 0, "model.mlp_hidden=0"),
    ("arch", ["gpt2"], "is not a registered model"),
])
def test_wrong_types_choices_and_ranges_are_one_line_errors(profile, key, value, words):
    profile["defaults"]["model"][key] = value
    assert words in _error(profile)


def test_a_concept_field_is_checked_by_its_dataclass_once(profile):
    """The chunk size dividing seq_len is ConceptOptions' check (the profile check has no copy of it)."""
    profile["experiments"].append({"id": "k3", "base": "base_gpt2_s",
                                   "overrides": {"model.arch": "conceptlm_gpt2", "model.chunk_size": 3}})
    assert "experiments[k3]: model.chunk_size=3 does not divide model.seq_len=256" in _error(profile)
    profile["experiments"][-1]["overrides"]["model.chunk_size"] = "4"
    assert "model.chunk_size='4': use an integer" in _error(profile)


def _kinds(kind):
    if typing.get_origin(kind) in (typing.Union, type(int | None)):
        return [k for option in typing.get_args(kind) for k in _kinds(option)]
    return [kind]


@pytest.mark.parametrize("arch", sorted(SPECS))
def test_every_field_has_a_checked_type_and_one_declaration(arch):
    """Every field's type is one the check knows, a string field lists its choices (Literal), and a class
    that changes a field's default (PythiaConfig, family_config's backbone defaults) keeps its type."""
    cls = SPECS[arch].config_cls
    types = declared_types(cls)
    for name, kind in types.items():
        for k in _kinds(kind):
            assert choices(k) is not None or k in (int, float, bool, dict, tuple, type(None)), (name, k)
    for klass in cls.__mro__:
        own = set(vars(klass).get("__annotations__", {})) & set(types)
        hints = typing.get_type_hints(klass)
        assert {name: hints[name] for name in own} == {name: types[name] for name in own}, klass
