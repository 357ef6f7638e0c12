"""The DLCM cross-attention benchmark end to end at toy sizes: every arm timed per pass, ratios from the
medians, the arms agreeing with replication, and a failing flex arm recorded instead of crashing."""
from __future__ import annotations

import json

import pytest

from benchmarks import dlcm_attention

TINY = ["--seq-lens", "40", "--intervals", "3", "--heads", "2", "--head-dim", "8", "--rounds", "2", "--warmup", "1",
        "--threads", "1", "--device", "cpu", "--flex", "eager"]


def test_every_arm_timed_ratios_from_medians_and_arms_agree(tmp_path):
    out = tmp_path / "dlcm_attention.json"
    returned = dlcm_attention.main([*TINY, "--seq-lens", "40", "24", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r == json.loads(json.dumps(returned))
    assert [(c["seq_len"], c["interval"], c["concepts"]) for c in r["cases"]] == [(40, 3, 14), (24, 3, 8)]
    for case in r["cases"]:
        fwd, both = case["forward"], case["forward_backward"]
        assert set(fwd["arms"]) == set(both["arms"]) == {"replicate", "mask", "flex_eager"}
        for arm in [*fwd["arms"].values(), both["arms"]["replicate"], both["arms"]["mask"]]:
            assert arm["median_ms"] > 0 and arm["iqr_ms"][0] <= arm["median_ms"] <= arm["iqr_ms"][1]
        ms = {n: a["median_ms"] for n, a in fwd["arms"].items()}
        assert fwd["ratios"]["replicate_over_mask"] == ms["replicate"] / ms["mask"]
        assert fwd["ratios"]["flex_eager_over_replicate"] == ms["flex_eager"] / ms["replicate"]
        if "error" in both["arms"]["flex_eager"]:  # torch 2.13 has no flex backward on CPU
            assert "backward" in both["arms"]["flex_eager"]["error"]
            assert both["ratios"]["flex_eager_over_replicate"] is None
    # the agreement (first size only): mask equals replication in values and input grads, flex in values
    agree = r["agreement"]
    assert r["agreement_size"] == {"seq_len": 40, "interval": 3, "head_dim": 8}
    assert agree["replicate"] == {"output": 0.0, "grad_x": 0.0, "grad_z": 0.0}
    assert agree["replicate_output_max_abs"] > 0
    for key in ("output", "grad_x", "grad_z"):
        assert agree["mask"][key] < 1e-5
    assert agree["flex_eager"]["output"] < 1e-5
    assert r["paper"]["flex_over_replicate"] == [1.26, 1.73] and r["environment"]["threads"] == 1


def test_a_failing_flex_arm_keeps_its_error(tmp_path, monkeypatch):
    def broken(seg, rows):
        raise RuntimeError("no flex here")

    from evals import dlcm_kernels

    monkeypatch.setattr(dlcm_kernels, "flex_visibility", broken)
    r = dlcm_attention.main([*TINY, "--out", str(tmp_path / "r.json")])
    for name in dlcm_attention.PASSES:
        arms = r["cases"][0][name]["arms"]
        assert "no flex here" in arms["flex_eager"]["error"] and arms["replicate"]["median_ms"] > 0
        assert r["cases"][0][name]["ratios"]["flex_eager_over_replicate"] is None
    assert "no flex here" in r["agreement"]["flex_eager"]["error"]


def test_rounds_below_two_rejected(tmp_path):
    with pytest.raises(SystemExit):
        dlcm_attention.main([*TINY, "--rounds", "1", "--out", str(tmp_path / "r.json")])
