"""The GPU throughput script's own check, on a CPU at a tiny shape: every arm steps, the JSON holds what
docs/benchmarks.md quotes (tokens/s, step time, MFU, the two target ratios)."""
import json


def test_gpu_throughput_script_runs_every_arm_and_writes_its_ratios(tmp_path):
    from benchmarks.gpu_throughput import ARMS, main

    out = tmp_path / "gpu.json"
    main(["--device", "cpu", "--tiny", "--no-compile", "--steps", "2", "--warmup", "1", "--out", str(out)])
    result = json.loads(out.read_text())
    assert set(result["arms"]) == set(ARMS)
    for arm in result["arms"].values():
        assert arm["tokens_per_s"] > 0 and 0 < arm["mfu"] < 1 and arm["flops_per_token"] > 0
    assert set(result["ratios"]) == {"base_over_hf_tokens_per_s", "conceptlm_over_pm_step_time"}
    assert result["arms"]["pm"]["flops_per_token"] > result["arms"]["base"]["flops_per_token"]
