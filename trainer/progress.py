"""What a person reads of a running training: one line per log interval and one per validation.

On a terminal the trainer draws a tqdm bar and prints the validation lines above it; elsewhere (a
Snakemake job's ``logs/pretrain.log``) it prints ``log_line`` every ``train.log_interval`` steps and
``valid_line`` whenever it measures the validation loss::

    [base_s seed 0] step 40/200 | loss 3.4521 (ntp 3.1021 ncp 0.2500 vq 0.1000) | lr 3.00e-04 | gnorm 0.84
        | 12345 tok/s | 1.21 TFLOP/s 31.2% MFU | eta 0:01:23
    [base_s seed 0] step 40/200 | valid loss 3.5012 (ntp)

The loss terms are every ``loss/<term>`` of the step's row (``Trainer.step``), in the model's order;
tok/s and the ETA (remaining steps at the interval's seconds per step) are measured over the last
interval. FLOP/s is the registry's FLOPs per token (6 N + attention, forward and backward) times
tok/s; MFU divides it by the peak of all processes. The peak per device is ``REPRO_PEAK_TFLOPS`` when
set, else the bf16 dense peak of a known CUDA GPU (``PEAK_TFLOPS``) when the run trains under bf16
autocast; otherwise there is none (a CPU has no meaningful one) and a line shows FLOP/s alone.
"""
from __future__ import annotations

import math
import os

import torch

from common.errors import ReproError

PEAK_ENV = "REPRO_PEAK_TFLOPS"
SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))

PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0), ("H200", 989.0), ("A100", 312.0))
"""bf16 dense (no sparsity) tensor-core peaks of NVIDIA's data sheets, by a part of the device name;
the first match counts, so a variant precedes its family."""


def peak_flops(device: torch.device, bf16: bool, world: int = 1) -> tuple[float | None, str]:
    """(peak FLOP/s of ``world`` processes on ``device``, where that peak comes from); the peak is None
    when nothing declares one, and the note then says how to set it."""
    if PEAK_ENV in os.environ:
        return world * env_peak() * 1e12, f"{PEAK_ENV}={os.environ[PEAK_ENV]}"
    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else device.type
    tflops = next((t for part, t in PEAK_TFLOPS if part in name), None) if cuda and bf16 else None
    if tflops is None:
        what = f"{name} without bf16" if cuda and not bf16 else name
        return None, f"no peak FLOP/s declared for {what} ({PEAK_ENV} sets one)"
    return world * tflops * 1e12, f"{name}, bf16 dense"


def env_peak() -> float:
    """``REPRO_PEAK_TFLOPS`` as a positive number of TFLOP/s per device."""
    text = os.environ[PEAK_ENV]
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not (math.isfinite(value) and value > 0):
        raise ReproError(f"{PEAK_ENV}={text!r} is not a positive number of TFLOP/s; set it to one device's peak "
                         "(e.g. 989 for an H100 in bf16) or unset it")
    return value


def log_line(row: dict, steps: int, tokens_per_step: int, flops_per_token: float, peak: float | None) -> str:
    """The line of a logged training ``row`` (``step``, ``loss``, ``loss/<term>``, ``lr``, ``grad_norm``,
    ``tok_per_s``) of a run of ``steps`` steps; MFU against ``peak`` FLOP/s when there is one."""
    terms = " ".join(f"{key[5:]} {value:.4f}" for key, value in row.items() if key.startswith("loss/"))
    rate = row["tok_per_s"]
    flops = flops_per_token * rate
    mfu = f" {100 * flops / peak:.1f}% MFU" if peak else ""
    eta = (steps - row["step"]) * tokens_per_step / rate
    return (f"step {row['step']}/{steps} | loss {row['loss']:.4f} ({terms}) | lr {row['lr']:.2e} | "
            f"gnorm {row['grad_norm']:.2f} | {rate:.0f} tok/s | {si(flops)}FLOP/s{mfu} | eta {clock(eta)}")


def valid_line(step: int, steps: int, loss: float, term: str) -> str:
    """The line of a validation loss (of the model's primary ``term``) measured after ``step`` steps."""
    return f"step {step}/{steps} | valid loss {loss:.4f} ({term})"


def si(value: float) -> str:
    """``value`` with three significant digits and an SI prefix: 1.21e12 -> '1.21 T'."""
    value = float(f"{value:.3g}")  # rounded first, so 999.7e9 reads '1 T', not '1e+03 G'
    scale, prefix = next(((s, p) for s, p in SI_PREFIXES if abs(value) >= s), (1.0, ""))
    return f"{value / scale:.3g} {prefix}"


def clock(seconds: float) -> str:
    """h:mm:ss of ``seconds``, rounded to the second; hours past 24 stay hours."""
    hours, rest = divmod(round(seconds), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
