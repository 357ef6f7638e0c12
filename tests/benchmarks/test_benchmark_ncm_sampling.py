"""The NCM sampling benchmark end to end at toy sizes: every arm timed and recorded, NFE as each model
counts it, speed-ups from the medians; trained runs loaded from their final/ and judged."""
from __future__ import annotations

import json
import os

import pytest
import torch

from benchmarks import ncm_sampling
from benchmarks.common import BenchmarkError
from common.io import sha256_file
from models.registry import build_model

TINY = ["--seq-len", "16", "--scales", "4", "--d-model", "16", "--layers", "1", "--heads", "4", "--vocab", "24",
        "--codebook", "8", "--d-code", "8", "--batch", "1", "2", "--rounds", "2", "--warmup", "1", "--threads", "1"]


def test_every_arm_timed_with_its_own_nfe_and_ratios_from_medians(tmp_path):
    out = tmp_path / "ncm_sampling.json"
    returned = ncm_sampling.main([*TINY, "--out", str(out)])
    r = json.loads(out.read_text())
    assert r == json.loads(json.dumps(returned))
    assert set(r["batches"]) == {"1", "2"}
    for batch, res in r["batches"].items():
        assert set(res["arms"]) == {"ncm", "ar", "mdlm"} and res["batch"] == int(batch)
        for arm in res["arms"].values():
            assert arm["median_s"] > 0 and arm["iqr_s"][0] <= arm["median_s"] <= arm["iqr_s"][1]
            assert arm["samples_per_s"] == pytest.approx(int(batch) / arm["median_s"])
            assert arm["entropy_samples"] == 2 * int(batch)
            assert 0 < arm["entropy"] <= torch.log(torch.tensor(16.0)).item() + 1e-9
        s = res["speedup"]
        arms = res["arms"]
        assert s["ncm_over_ar"] == arms["ar"]["median_s"] / arms["ncm"]["median_s"]
        assert s["ncm_over_mdlm"] == arms["mdlm"]["median_s"] / arms["ncm"]["median_s"]
        # the two-term cost model reproduces both arms' measured times per sample
        m, c = res["cost_model"], r["cost"]
        for name in ("ncm", "ar"):
            model_s = m["per_block_call_s"] * c[name]["block_calls"] + m["per_mflop_s"] * c[name]["flops"] / 1e6
            assert model_s == pytest.approx(arms[name]["median_s"] / int(batch), rel=1e-9)
    for name in ("ncm", "ar", "mdlm"):
        assert r["gen_ppl"][name]["gen_ppl"] is None and "trained runs" in r["gen_ppl"][name]["why"]
    arms = r["batches"]["2"]["arms"]
    # NCM: one generator call per scale
    assert arms["ncm"]["nfe"] == 4 and arms["ncm"]["nfe_range"] == [4, 4]
    assert arms["ncm"]["scale_lengths"][-1] == 16 and len(arms["ncm"]["scale_lengths"]) == 4
    # AR: the count generate itself reports for a one-token prompt and L - 1 new tokens
    cfg = ncm_sampling.arm_config("ar", type("A", (), {"d_model": 16, "layers": 1, "heads": 4})())
    ar = build_model(cfg, vocab_size=24, seq_len=16).eval()
    own = ar.generate(torch.zeros(2, 1, dtype=torch.long), 15, generator=torch.Generator().manual_seed(0)).nfe
    assert arms["ar"]["nfe"] == own and arms["ar"]["nfe_range"] == [own, own]
    # MDLM: the caching sampler's own count, at most steps + 1 (steps = L by default)
    assert 1 <= arms["mdlm"]["nfe_range"][0] <= arms["mdlm"]["nfe"] <= arms["mdlm"]["nfe_range"][1] <= 17
    # the bound counted from the models: K + 1 calls (K generator calls, one decode) against L - 1
    cost = r["cost"]
    assert cost["ncm"]["calls"] == 5 and cost["ar"]["calls"] == 15
    assert cost["ncm"]["block_calls"] == 4 * 1 + 1 and cost["ar"]["block_calls"] == 15 * 1
    assert cost["ratio_ar_over_ncm"]["block_calls"] == 15 / 5
    assert r["target"]["batch"] == 1 and r["target"]["measured_met"] == (
        r["batches"]["1"]["speedup"]["ncm_over_ar"] >= ncm_sampling.TARGET)
    assert set(r["load_avg_1min"]) == {"before", "after", "cores", "loaded", "why"} and r["environment"]["threads"] == 1
    # the host that produced the figures, not just "x86_64"
    assert {"cpu", "vendor", "cpu_isa", "isa", "cores", "torch", "onednn", "blas"} <= set(r["environment"]["host"])
    # the same generator shape for all three arms, the NCM tokenizer outside the generator's count
    assert {arm["model"]["d_model"] for arm in arms.values()} == {16}
    assert arms["ncm"]["tokenizer_params"] > 0


def test_flops_of_the_bound_by_hand():
    """Forward FLOPs per sample at a size small enough to count by hand (1 layer, d 16, L 4, K 2 scales), with
    block-diagonal and with block-causal attention (a scale's keys: itself, or every scale up to it)."""
    a = type("A", (), {"d_model": 16, "layers": 1, "heads": 4, "tok_layers": None, "scales": 2, "codebook": 8,
                       "d_code": 8, "schedule": "exponential"})()
    ncm = build_model(ncm_sampling.arm_config("ncm", a), vocab_size=24, seq_len=4)
    ar = build_model(ncm_sampling.arm_config("ar", a), vocab_size=24, seq_len=4)
    lengths = list(ncm.lengths)
    block = 2 * (4 * 16 * 16 + 2 * 16 * 64)          # qkv + proj + the MLP (4 d), per position
    want_ncm = sum(l * (block + 4 * 16 * l + 2 * 16 * 8) for l in lengths) + 4 * (block + 4 * 16 * 4 + 2 * 16 * 24)
    want_ar = sum(block + 4 * 16 * t + 2 * 16 * 24 for t in (1, 2, 3))
    cost = ncm_sampling.sampling_cost(ncm, ar, 4)
    assert cost["ncm"]["flops"] == pytest.approx(want_ncm) and cost["ar"]["flops"] == pytest.approx(want_ar)
    causal = build_model({**ncm_sampling.arm_config("ncm", a), "attention": "block_causal"}, vocab_size=24, seq_len=4)
    keys = [sum(lengths[:k + 1]) for k in range(len(lengths))]
    want_causal = sum(l * (block + 4 * 16 * n + 2 * 16 * 8) for l, n in zip(lengths, keys)) + 4 * (
        block + 4 * 16 * 4 + 2 * 16 * 24)
    assert ncm_sampling.sampling_cost(causal, ar, 4)["ncm"]["flops"] == pytest.approx(want_causal) != want_ncm


def test_the_cost_model_says_what_the_target_takes():
    """docs/benchmarks.md's figures (AMD EPYC, batch 1): o 0.160 ms per block call, c 0.0345 ms per MFLOP, NCM's FLOPs
    5.9x faster for 8x; and the other cases by construction."""
    cost = {"ncm": {"block_calls": 52, "flops": 382.36e6}, "ar": {"block_calls": 508, "flops": 91.55e6}}
    res = lambda tn, ta: {"batch": 1, "arms": {"ncm": {"median_s": tn}, "ar": {"median_s": ta}}}  # noqa: E731
    m = ncm_sampling.cost_model(cost, res(21.5e-3, 84.5e-3))
    assert m["need"] == "faster_flops" and m["per_block_call_s"] == pytest.approx(0.160e-3, abs=1e-6)
    assert (m["per_mflop_s"] == pytest.approx(0.0345e-3, abs=1e-6)
            and m["compute_speedup_needed"] == pytest.approx(5.9, abs=0.1))
    assert ncm_sampling.cost_model(cost, res(10e-3, 84.5e-3))["need"] == "met"
    # more block calls than AR's / 8: o 0.16 ms, c 1 ms per MFLOP, NCM's 100 block calls alone over AR's time / 8
    many = {"ncm": {"block_calls": 100, "flops": 1e6}, "ar": {"block_calls": 508, "flops": 2e6}}
    m = ncm_sampling.cost_model(many, res(100 * 0.16e-3 + 1e-3, 508 * 0.16e-3 + 2e-3))
    assert m["need"] == "impossible" and m["per_block_call_s"] == pytest.approx(0.16e-3)


def test_a_loaded_machine_meets_no_target(tmp_path, monkeypatch, capsys):
    """A 1-minute load above the cores: the run says so and reports no target as met, whatever the ratio."""
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 3.0, 0.0, 0.0))
    monkeypatch.setattr(ncm_sampling, "TARGET", 1e-9)   # any ratio meets it
    r = ncm_sampling.main([*TINY, "--out", str(tmp_path / "r.json")])
    assert r["load_avg_1min"]["loaded"] and r["target"]["measured_met"] and not r["target"]["met"]
    assert "machine loaded" in r["target"]["refused"]
    assert "not judged (machine loaded" in capsys.readouterr().out


WORDS = ["<eos>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "big", "red", "sun"]


def write_run(root, name: str, model_cfg: dict) -> str:
    """A final/ folder as the trainer writes it (weights, manifest with their sha256), fresh weights."""
    from trainer.checkpoint import save_weights

    final = root / name / "final"
    final.mkdir(parents=True)
    torch.manual_seed(1)
    save_weights(build_model(model_cfg, vocab_size=len(WORDS), seq_len=16), final / "model.safetensors")
    (final / "manifest.json").write_text(json.dumps({
        "config": {"model": {**model_cfg, "seq_len": 16}}, "vocab_size": len(WORDS),
        "model_sha256": sha256_file(final / "model.safetensors")}))
    return str(root / name)


def test_trained_runs_are_loaded_and_judged(tmp_path):
    os.environ["HF_HUB_OFFLINE"] = "1"
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}))  # every id decodes to a known word
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<eos>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(WORDS), n_positions=32, n_embd=16, n_layer=1, n_head=2,
                               bos_token_id=0, eos_token_id=0)).save_pretrained(tmp_path / "judge")
    PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"),
                            eos_token="<eos>").save_pretrained(tmp_path / "judge")
    shape = {"d_model": 16, "n_layer": 1, "n_head": 4}
    ncm_tok = {"arch": "ncm_tokenizer", **shape, "n_scales": 4, "codebook_size": 8, "d_code": 8}
    runs = {"ncm": write_run(tmp_path, "ncm", {"arch": "ncm", **shape, "tokenizer": ncm_tok}),
            "ar": write_run(tmp_path, "ar", {"arch": "gpt2", **shape}),
            "mdlm": write_run(tmp_path, "mdlm", {"arch": "mdlm_gpt2", **shape})}
    base = [*TINY, "--vocab", str(len(WORDS)), "--out", str(tmp_path / "r.json")]
    r = ncm_sampling.main([*base, "--runs", *(f"{k}={v}" for k, v in runs.items()), "--judge", str(tmp_path / "judge"),
                           "--tokenizer", str(tmp_path / "tokenizer.json")])
    for name, arm in r["batches"]["2"]["arms"].items():
        assert arm["weights"] == str(tmp_path / name / "final")
        assert r["gen_ppl"][name]["gen_ppl"] > 1 and r["gen_ppl"][name]["judged_tokens"] > 0
    assert r["batches"]["1"]["arms"]["ncm"]["nfe"] == 4
    with pytest.raises(BenchmarkError, match="--scales 4"):
        ncm_sampling.main([*base, "--scales", "3", "--runs", f"ncm={runs['ncm']}"])
    with pytest.raises(SystemExit):  # the judge needs trained runs
        ncm_sampling.main([*TINY, "--judge", str(tmp_path / "judge"), "--tokenizer", str(tmp_path / "tokenizer.json")])


@pytest.mark.parametrize("change, words", [(["--batch", "0"], "--batch 0: give positive sizes"),
                                           (["--warmup", "-1"], "--warmup -1: give positive sizes"),
                                           (["--heads", "3"], "the ncm arm at these sizes:"),
                                           (["--scales", "40"], "the ncm arm at these sizes:")])
def test_bad_sizes_are_refused_in_one_line(change, words, tmp_path, capsys):
    argv = [*TINY, *change, "--out", str(tmp_path / "r.json")]
    try:
        ncm_sampling.main(argv)
    except SystemExit as stop:          # argparse: status 2, the message on stderr
        assert stop.code == 2 and words in capsys.readouterr().err
    except BenchmarkError as error:     # entry_point prints it as one line with status 2
        assert words in str(error) and "\n" not in str(error)
    else:
        raise AssertionError(f"{change} was accepted")
