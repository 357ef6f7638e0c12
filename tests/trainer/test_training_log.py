"""The lines a person reads of a training (trainer.progress): one per log interval off a terminal, one
per validation everywhere, with every loss term, lr, tok/s, FLOP/s (MFU with a peak) and the ETA."""
from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from common.errors import ReproError
from trainer.progress import PEAK_ENV, clock, log_line, peak_flops, si, valid_line
from trainer.train import Trainer

ROW = {"loss": 3.45214, "loss/ntp": 3.10213, "loss/ncp": 0.25, "loss/vq": 0.1, "metric/vq_collapse": 0.0,
       "lr": 3e-4, "grad_norm": 0.8412, "step": 40, "tokens": 40_000, "tok_per_s": 2000.0}
TRAIN = re.compile(r"\[tiny seed 0\] step (\d+)/12 \| loss \d+\.\d{4} \((.*)\) \| lr \d\.\d\de[-+]\d\d \| "
                   r"gnorm \d+\.\d\d \| \d+ tok/s \| [\d.]+ [kMGTP]?FLOP/s( [\d.]+% MFU)? \| eta \d+:\d\d:\d\d")
VALID = re.compile(r"\[tiny seed 0\] step (\d+)/12 \| valid loss (\d+\.\d{4}) \((\w+)\)")


def test_a_row_reads_as_one_stable_line():
    # 160 steps left at 1000 tokens/step and 2000 tok/s: 80 s; 1e6 FLOPs/token x 2000 tok/s = 2 GFLOP/s
    assert log_line(ROW, 200, 1000, 1e6, None) == ("step 40/200 | loss 3.4521 (ntp 3.1021 ncp 0.2500 vq 0.1000) | "
                                                   "lr 3.00e-04 | gnorm 0.84 | 2000 tok/s | 2 GFLOP/s | eta 0:01:20")
    assert log_line(ROW, 200, 1000, 1e6, 8e9).endswith("| 2 GFLOP/s 25.0% MFU | eta 0:01:20")
    assert valid_line(6, 12, 3.98766, "nelbo") == "step 6/12 | valid loss 3.9877 (nelbo)"


def test_clock_and_prefixes():
    assert [clock(s) for s in (0, 59.6, 3599.4, 90061)] == ["0:00:00", "0:01:00", "0:59:59", "25:01:01"]
    assert [si(v) for v in (12.0, 1.234e12, 999.7e9, 5.5e15)] == ["12 ", "1.23 T", "1 T", "5.5 P"]


def test_the_peak_is_declared_never_guessed(monkeypatch):
    monkeypatch.delenv(PEAK_ENV, raising=False)
    cpu = torch.device("cpu")
    assert peak_flops(cpu, bf16=False) == (None, f"no peak FLOP/s declared for cpu ({PEAK_ENV} sets one)")
    cuda = torch.device("cuda", 0)
    for name, tflops in (("NVIDIA H100 PCIe", 756), ("NVIDIA H100 80GB HBM3", 989), ("NVIDIA H200", 989),
                         ("NVIDIA A100-SXM4-80GB", 312)):
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device, name=name: name)
        assert peak_flops(cuda, bf16=True, world=2) == (2 * tflops * 1e12, f"{name}, bf16 dense")
        assert peak_flops(cuda, bf16=False) == (None, f"no peak FLOP/s declared for {name} without bf16 "
                                                      f"({PEAK_ENV} sets one)")  # the table holds bf16 peaks only
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA T4")
    assert peak_flops(cuda, bf16=True)[0] is None
    monkeypatch.setenv(PEAK_ENV, "0.5")
    assert peak_flops(cpu, bf16=False, world=4) == (2e12, f"{PEAK_ENV}=0.5")
    for bad in ("fast", "0", "-3", "inf", "nan"):
        monkeypatch.setenv(PEAK_ENV, bad)
        with pytest.raises(ReproError, match=rf"^{PEAK_ENV}='{bad}' is not a positive number of TFLOP/s; set it"):
            peak_flops(cpu, bf16=False)


def read_log(run_dir):
    return [json.loads(line) for line in (run_dir / "train" / "metrics.jsonl").read_text().splitlines()]


def test_a_run_off_a_terminal_prints_a_line_per_interval_and_validation(tiny_data, run_cfg, tmp_path, capsys,
                                                                      monkeypatch):
    monkeypatch.delenv(PEAK_ENV, raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    run_cfg["model"]["arch"] = "conceptlm_gpt2"  # three loss terms
    Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()
    out = capsys.readouterr().out.splitlines()
    train = [m for m in map(TRAIN.fullmatch, out) if m]
    assert [int(m[1]) for m in train] == [2, 4, 6, 8, 10, 12]
    assert all(m[2].split()[::2] == ["ntp", "ncp", "vq"] and m[3] is None for m in train)  # no peak on a CPU
    assert train[-1][0].endswith("eta 0:00:00")
    logged = [r for r in read_log(tmp_path) if r.get("split") == "valid"]
    valid = [m for m in map(VALID.fullmatch, out) if m]
    assert [(int(m[1]), m[2], m[3]) for m in valid] == [(r["step"], f"{r['valid/loss']:.4f}", "ntp") for r in logged]
    assert [int(m[1]) for m in valid] == [6, 12]
    assert "no peak FLOP/s declared for cpu (REPRO_PEAK_TFLOPS sets one)" in "\n".join(out)


def test_on_a_terminal_only_validation_lines_print_and_a_peak_gives_mfu(tiny_data, run_cfg, tmp_path, capsys,
                                                                         monkeypatch):
    monkeypatch.setenv(PEAK_ENV, "0.001")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "bar").run()
    out = capsys.readouterr().out
    assert not TRAIN.search(out) and [m[1] for m in VALID.finditer(out)] == ["6", "12"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    Trainer(run_cfg, tiny_data["tokens"], tmp_path / "log").run()
    out = capsys.readouterr().out
    assert "MFU against 0.001 TFLOP/s (REPRO_PEAK_TFLOPS=0.001)" in out
    train = [m for m in map(TRAIN.fullmatch, out.splitlines()) if m]
    assert len(train) == 6 and all(m[2].startswith("ntp ") and m[3] for m in train)


def test_a_malformed_peak_is_a_one_line_error_before_training(tiny_data, run_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv(PEAK_ENV, "989 TFLOP/s")
    with pytest.raises(ReproError, match=f"^{PEAK_ENV}='989 TFLOP/s' is not a positive number"):
        Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    assert not (tmp_path / "train").exists()


@pytest.mark.parametrize("steps, every, first", [(600, 100, 1), (600, 100, 120), (150, 200, 1), (150, 200, 31),
                                                (7, 1, 3), (10, 3, 10), (10, 3, 11)])
def test_validation_steps_are_the_steps_is_validation_step_marks(steps, every, first):
    from trainer.metrics import is_validation_step, validation_steps

    train = {"steps": steps, "eval_interval": every}
    assert validation_steps(train, first) == [s for s in range(first, steps + 1) if is_validation_step(s, train)]
