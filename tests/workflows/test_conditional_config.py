"""Profile keys of paired data and conditional evaluations: every bad value is one line naming the key
and the fix, before any job runs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.workflows.test_config_ncm import _entry, _error
from workflows.experiments import datasets, resolve, run_config, validate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def default() -> dict:
    return yaml.safe_load((ROOT / "config" / "default.yaml").read_text())


def test_datasets_resolve_with_their_tokenizer_files_and_layouts(default):
    ds = datasets(default)
    assert ds["world_translate"]["tokenizer_of"] == "world" and ds["sudoku"]["tokenizer_of"] == "sudoku"
    run = run_config(default, "ncm_wmt_s", 0)
    assert run["layout"] == {"source_len": 48, "target_len": 24} and run["corpus"]["id"] == "world_translate"
    assert run["model"]["prefix_len"] == 48 and run["upstream"]["experiment"] == "ncm_lm_wmt"
    assert "layout" not in run_config(default, "base_gpt2_s", 0)  # the main corpus's runs are unchanged
    exps = resolve(default)
    assert exps["ncm_xsum_s"]["model"]["tokenizer"] == exps["ncm_tok_xsum"]["model"]


BAD = [
    (lambda c: _entry(c, "ar_wmt_s")["overrides"].update({"model.seq_len": 60}),
     "model.seq_len=60: world_translate holds 48 source + 24 target tokens"),
    (lambda c: _entry(c, "mdlm_wmt_s")["overrides"].update({"model.prefix_len": 40}), "set model.prefix_len: 48"),
    (lambda c: _entry(c, "ar_gpt2_ncm_s").update(evals=["cond"]), "is a plain corpus"),
    (lambda c: _entry(c, "ar_wmt_s").update(evals=["cond_cfg2"]), "guidance is NCM's"),
    (lambda c: _entry(c, "ncm_wmt_s").update(evals=["cond_k9"]), "tokenizer has K=6"),
    (lambda c: _entry(c, "ncm_wmt_s")["overrides"].update({"model.cond_dropout": 0.0}), "model.cond_dropout=0"),
    (lambda c: _entry(c, "ar_wmt_s").update(evals=["ppl"]), "holds paired examples"),
    (lambda c: c["datasets"]["sudoku"].update(layout={"source_len": 81, "target_len": 81}), "at least 89"),
    (lambda c: c["datasets"]["sudoku"].update(tokenizer={"kind": "chars", "alphabet": "0123456789"}), "0-9 and '|'"),
    (lambda c: c["datasets"]["world_summary"].update(tokenizer="nope"), "not a dataset with its own tokenizer"),
    (lambda c: c["datasets"].update(corpus=c["datasets"]["sudoku"]), "names the main corpus"),
    (lambda c: _entry(c, "ncm_wmt_s").update(upstream="ncm_lm_xsum"),  # same tokenizer file, other data: allowed...
     None),
    (lambda c: (c["datasets"]["world_summary"].update(tokenizer={"kind": "bpe", "vocab_size": 2048,
                                                                 "min_frequency": 2}),
                _entry(c, "ncm_wmt_s").update(upstream="ncm_lm_xsum")),
     "build on a run of the same tokenizer"),  # ...but another tokenizer is refused
    (lambda c: c["genppl"].update(judges=["ar_wmt_s"]), "train it on the main corpus"),
]


@pytest.mark.parametrize("mutate, message", BAD)
def test_bad_paired_settings_are_one_line_errors(default, mutate, message):
    config = copy.deepcopy(default)
    mutate(config)
    if message is None:
        validate(config, "p.yaml")
    else:
        assert message in _error(config)


def test_an_unconditional_generator_cannot_continue_a_conditional_one(default):
    config = copy.deepcopy(default)
    config["experiments"].append({"id": "back", "base": "ncm_lm_wmt", "upstream": "ncm_wmt_s"})
    assert "model.prefix_len=48 and this experiment 0" in _error(config)
