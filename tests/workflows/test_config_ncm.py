"""Profile keys of the NCM pipeline: paper tags, upstream runs, generative evaluations, Gen. PPL judges.
Every bad value is one line naming the key and the fix, before any job runs."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workflows.experiments import ConfigError, genppl_settings, resolve, run_config, validate

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def profile() -> dict:
    return yaml.safe_load((ROOT / "config" / "default.yaml").read_text())


def _entry(config: dict, exp_id: str) -> dict:
    return next(e for e in config["experiments"] if e["id"] == exp_id)


def _error(config) -> str:
    with pytest.raises(ConfigError) as e:
        validate(config, "p.yaml")
    message = str(e.value)
    assert "\n" not in message and message.startswith("p.yaml")
    return message


def test_upstream_fills_the_generator_tokenizer_and_is_in_the_run_config(profile):
    exps = resolve(profile)
    ncm, tok = exps["ncm_s"], exps["ncm_tok_s"]
    assert ncm["upstream"] == {"experiment": "ncm_tok_s", "seed": tok["seeds"][0]}
    assert ncm["model"]["tokenizer"] == tok["model"]  # the stage-1 model settings, as the profile resolves them
    from workflows.experiments import load_profile
    small = resolve(load_profile(ROOT / "config" / "small.yaml"))
    assert small["ncm_blockcausal_s"]["upstream"]["experiment"] == "ncm_tok_s"  # inherited from its base
    assert "ncm_blockcausal_s" not in exps  # a one-seed filler: config/small.yaml only
    run = run_config(profile, "ncm_s", 0)
    assert run["upstream"] == {"experiment": "ncm_tok_s", "seed": 0}
    # defaults explicit
    assert run["model"]["tokenizer"]["n_scales"] == 12 and run["model"]["tokenizer"]["d_code"] == 32
    # a change of the tokenizer's settings changes the generator's run config (its hash: Snakemake re-runs it)
    _entry(profile, "ncm_tok_s")["overrides"]["model.codebook_size"] = 256
    assert run_config(profile, "ncm_s", 0)["model"]["tokenizer"]["codebook_size"] == 256
    assert "upstream" not in run_config(profile, "base_gpt2_s", 0)


def test_paper_tags_are_inherited_and_default_to_conceptlm(profile):
    exps = resolve(profile)
    assert exps["base_gpt2_s"]["paper"] == "conceptlm"
    assert {exps[e]["paper"] for e in ("ncm_tok_s", "ncm_s", "ar_gpt2_ncm_s", "mdlm_s", "judge_gpt2_ncm")} == {"ncm"}


@pytest.mark.parametrize("change, expected", [
    (lambda c: _entry(c, "ncm_s").pop("upstream"), "model.arch=ncm trains on top of a ncm_tokenizer run; set upstream"),
    (lambda c: _entry(c, "ncm_s").update(upstream="nope"), "upstream 'nope' is not an experiment id"),
    (lambda c: _entry(c, "ncm_s").update(upstream="base_gpt2_s"), "upstream 'base_gpt2_s' has model.arch=gpt2"),
    (lambda c: _entry(c, "base_gpt2_s").update(upstream="ncm_tok_s"), "does not build on another run; drop upstream"),
    (lambda c: _entry(c, "ncm_tok_s")["overrides"].update({"model.seq_len": 64}),
     "upstream 'ncm_tok_s' has a window of 64 tokens and this experiment's target window is 128"),
    (lambda c: _entry(c, "ncm_s")["overrides"].update({"model.tokenizer": {"arch": "ncm_tokenizer"}}),
     "drop the model.tokenizer override"),
    (lambda c: c["genppl"].update(temperature=0.9), "masked diffusion samples at temperature 1"),
    (lambda c: c["genppl"].update(top_k=5), "masked diffusion samples at temperature 1"),
    (lambda c: c["genppl"].update(temperature=0), "temperature"),
    (lambda c: c["genppl"].pop("judges"), "needs genppl.judges"),
    (lambda c: _entry(c, "judge_gpt2_ncm")["overrides"].update({"model.activation": "swiglu"}),
     "has model.activation=swiglu"),
    (lambda c: _entry(c, "ncm_tok_s")["overrides"].update({"model.scale_lengths": [1, 4, 2, 128], "model.n_scales": 4}),
     "not strictly increasing"),
    (lambda c: _entry(c, "ncm_tok_s")["overrides"].update({"model.scale_lengths": [1, 4, 64]}), "ends at 64"),
    (lambda c: _entry(c, "ncm_tok_s")["overrides"].update({"model.n_scales": 129}), "n_scales"),
    (lambda c: _entry(c, "ncm_s").update(evals=["ppl"]), "evals: ppl scores next-token likelihoods"),
    (lambda c: _entry(c, "base_gpt2_s").update(evals=["recon"]), "evals: recon measures an NCM tokenizer"),
    (lambda c: _entry(c, "ncm_s").update(evals=["genppl_s8"]), "genppl_s8 sets the sampling steps of masked diffusion"),
    (lambda c: _entry(c, "ncm_tok_s").update(evals=["genppl"]), "ncm_tokenizer has no sampler"),
    (lambda c: c.pop("genppl"), "needs the profile's genppl section"),
    (lambda c: c["genppl"].update(judges=["ncm_s"]), "genppl.judges: experiment 'ncm_s' has model.arch=ncm"),
    (lambda c: _entry(c, "judge_gpt2_ncm").update(evals=["ppl", "genppl"]), "the judge cannot be scored by itself"),
    (lambda c: _entry(c, "ncm_s").update(paper="nmc"), "paper"),
    (lambda c: _entry(c, "mdlm_s").update(evals=["genppl_s0"]), "evals"),
    (lambda c: _entry(c, "ar_gpt2_ncm_s").update(evals=["genppl_k3"]), "genppl_k3 completes the first 3 scales"),
    (lambda c: _entry(c, "ncm_s").update(evals=["genppl_k13"]), "K=12"),
    (lambda c: _entry(c, "ncm_s").update(evals=["genppl_x"]), "evals"),
    (lambda c: c["genppl"].update(temperature=-1), "temperature"),
])
def test_bad_ncm_settings_are_one_line_errors(profile, change, expected):
    change(profile)
    assert expected in _error(profile)


def test_genppl_settings_fill_defaults(profile):
    s = genppl_settings(profile)
    assert (s["judges"] == ["judge_gpt2_ncm"] and s["samples"] == 64 and s["top_p"] is None
            and s["judge_batch_size"] == 8)


def test_diagnostic_variants_validate(profile):
    _entry(profile, "ncm_s")["evals"] = ["genppl", "genppl_k0", "genppl_k6", "genppl_k12"]
    _entry(profile, "ncm_tok_s")["evals"] = ["recon", "genppl_data"]  # the data row: any run of the right L
    exps = resolve(validate(profile, "p.yaml"))
    assert exps["ncm_s"]["evals"] == ["genppl", "genppl_k0", "genppl_k6", "genppl_k12"]
    assert exps["ncm_tok_s"]["evals"] == ["recon", "genppl_data"]


def test_a_judge_folder_that_is_not_a_transformers_model_is_refused(profile, tmp_path):
    profile["genppl"]["judges"] = [str(tmp_path)]
    assert "is a folder without config.json" in _error(profile)


def test_top_p_one_is_no_truncation_for_masked_diffusion(profile):
    profile["genppl"]["top_p"] = 1.0
    assert genppl_settings(validate(profile, "p.yaml"))["top_p"] == 1.0


def test_sweeps_fill_placeholders_in_upstream(profile):
    profile["experiments"] += [
        {"id": "tok_k{model.n_scales}", "base": "ncm_tok_s", "sweep": {"model.n_scales": [6, 8]}},
        {"id": "gen_k{model.alpha}", "base": "ncm_s", "upstream": "tok_k{model.alpha}",
         "sweep": {"model.alpha": [6, 8]}, "evals": ["genppl"]}]
    exps = resolve(validate(profile, "p.yaml"))
    assert (exps["gen_k8"]["upstream"]["experiment"] == "tok_k8"
            and exps["gen_k8"]["model"]["tokenizer"]["n_scales"] == 8)


def test_hub_judges_need_no_experiment(profile):
    profile["genppl"]["judges"] = ["gpt2-large", "judge_gpt2_ncm"]
    assert genppl_settings(validate(profile, "p.yaml"))["judges"] == ["gpt2-large", "judge_gpt2_ncm"]


def test_the_embedded_mdlm_rows_use_rotary_positions_and_the_ar_rows_do_not(profile):
    """MDLM's reference DiT has rotary positions and no table (models/mdlm.py); the AR baselines keep GPT-2's."""
    exps = resolve(profile)
    mdlm = [e for e, c in exps.items() if c["model"]["arch"] == "mdlm_gpt2"]
    assert sorted(mdlm) == ["mdlm_s", "mdlm_sudoku_s", "mdlm_wmt_s", "mdlm_xsum_s"]
    assert {exps[e]["model"]["positional"] for e in mdlm} == {"rotary"}
    for ar in ("ar_gpt2_ncm_s", "ar_wmt_s", "ar_xsum_s", "ar_sudoku_s"):
        assert exps[ar]["model"].get("positional", "learned") == "learned"
    assert run_config(profile, "mdlm_s", 0)["model"]["positional"] == "rotary"


def test_a_missing_relative_folder_is_named_in_the_hub_names_refusal(tmp_path, monkeypatch):
    """``models/judge`` with ``models/`` a folder here is still a hub name (an org may share a folder's name),
    and the refusal of an uncached hub name says that the folder it may have meant does not exist."""
    from common.hub import config_of, looks_like_folder

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "models").mkdir()
    assert not looks_like_folder("models/judge") and looks_like_folder("./models/judge")
    config, why = config_of("models/judge")
    assert (config is None
            and why.endswith("(models/ is a folder here: if you meant a folder, models/judge does not exist)"))
