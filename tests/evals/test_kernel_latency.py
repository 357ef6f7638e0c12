"""DLCM Table 6 as a result (evals/kernel_latency.py): Table 6's row ids, the arms' medians as its columns,
the caveats that make a CPU measurement an analogue; the DAG path is in tests/workflows/test_dlcm_pipeline.py."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from evals.kernel_latency import KERNEL_DEFAULTS, evaluate_kernel, row_id

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "config/schemas/result.schema.json").read_text())


def test_row_ids_are_table_6s():
    assert row_id(2048, 1024) == "s2k_h1024" and row_id(16384, 4096) == "s16k_h4096"
    assert row_id(640, 64) == "s640_h64"  # no multiple of 1024: written out, never rounded into a paper row


def test_every_row_gets_the_arms_medians_and_the_caveats_of_its_device(tmp_path):
    settings = {**KERNEL_DEFAULTS, "rows": [{"seq_len": 256, "hidden": 32}, {"seq_len": 1024, "hidden": 32}],
                "heads": 2, "flex": "eager", "rounds": 2, "warmup": 0, "paper": "dlcm", "benchmark": "dlcm_attention"}
    out = tmp_path / "eval" / "kernel.json"
    record = evaluate_kernel("bench", settings, out)
    assert json.loads(out.read_text()) == record
    jsonschema.validate(record, SCHEMA)
    assert sorted(record["metrics"]) == sorted(f"{r}/{c}_ms" for r in ("s256_h32", "s1k_h32")
                                               for c in ("flex", "flash", "mask"))
    assert all(value > 0 for value in record["metrics"].values())
    case = record["details"]["cases"]["s1k_h32"]
    assert (case["seq_len"], case["interval"], case["hidden"], case["concepts"]) == (1024, 6, 32, 171)
    assert record["metrics"]["s1k_h32/flash_ms"] == case["forward"]["arms"]["replicate"]["median_ms"]
    assert record["metrics"]["s1k_h32/flex_ms"] == case["forward"]["arms"]["flex_eager"]["median_ms"]
    assert "forward_backward" not in case  # the pass asked for, only
    caveats = record["details"]["caveats"]
    assert caveats[0].startswith("measured on cpu") and "FlexAttention unfused (eager), not compiled" in caveats
    assert "2 heads, interval 6 (the paper: 32, 6)" in caveats
    agreement = record["details"]["cases"]["s256_h32"]["agreement"]  # the arms compute the same thing
    assert agreement["mask"]["output"] < 1e-4 and agreement["flex_eager"]["output"] < 1e-4


def test_an_arm_that_cannot_run_says_why_and_cuda_without_cuda_is_refused(tmp_path):
    import pytest
    import torch

    from common.errors import ReproError

    settings = {**KERNEL_DEFAULTS, "rows": [{"seq_len": 128, "hidden": 32}], "heads": 2, "flex": "eager", "rounds": 2,
                "warmup": 0, "pass": "forward_backward", "paper": "dlcm", "benchmark": "dlcm_attention"}
    record = evaluate_kernel("bench", settings, tmp_path / "kernel.json")
    assert record["metrics"]["s128_h32/flash_ms"] > 0
    if not torch.cuda.is_available():  # torch has no FlexAttention backward on CPU: an empty cell that says why
        assert record["metrics"]["s128_h32/flex_ms"] is None
        assert any(c.startswith("flex arm did not run at s128_h32: ") for c in record["details"]["caveats"])
        with pytest.raises(ReproError, match="kernel_benchmarks.bench.device=cuda: this machine has no CUDA"):
            evaluate_kernel("bench", {**settings, "device": "cuda"}, tmp_path / "cuda.json")
