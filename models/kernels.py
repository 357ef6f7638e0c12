"""Matrix products of the CPU training step, routed through oneDNN where it is faster than MKL.

On CPU in fp32, PyTorch sends ``nn.Linear`` (``addmm``) and its backward (``mm``) to MKL. At the
embedded shapes (2,048 rows, widths 64-256, 2 cores) oneDNN's ``x @ w.T`` (``torch.ops.mkldnn.
_linear_pointwise``, the op Inductor's CPU linears use) takes about half the time: 2048x64 @ 64x192
0.12 ms against 0.25 ms, 2048x256 @ 256x64 0.15 against 0.33 ms. ``Linear`` is ``nn.Linear`` (same
parameters, same state dict) whose forward and input gradient go through oneDNN; the weight
gradient ``g.T @ x`` stays with MKL (its operands are transposed views, which oneDNN would copy
first). Below ``ONEDNN_MIN_ROWS`` rows (decoding) and anywhere else (GPU, half precision,
torch.compile tracing, builds without oneDNN) it is ``F.linear``. Values equal ``F.linear`` to float rounding
(``tests/models/test_models.py``). ``benchmarks/train_throughput.py`` measures the whole step.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

try:  # absent from builds without oneDNN
    _ONEDNN_LINEAR = torch.ops.mkldnn._linear_pointwise if torch.backends.mkldnn.is_available() else None
except (AttributeError, RuntimeError):
    _ONEDNN_LINEAR = None


def onednn(x: torch.Tensor) -> bool:
    """Whether ``matmul_t`` on ``x`` goes through oneDNN: fp32 on CPU, outside torch.compile tracing."""
    return (_ONEDNN_LINEAR is not None and x.device.type == "cpu" and x.dtype == torch.float32
            and not torch.compiler.is_compiling())


def matmul_t(a: torch.Tensor, b: torch.Tensor, use_onednn: bool, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b.T (+ bias)`` for 2-D ``a`` (N, k) and ``b`` (M, k)."""
    if use_onednn:
        return _ONEDNN_LINEAR(a, b, bias, "none", [], "")
    return F.linear(a, b, bias)


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _ONEDNN_LINEAR(x, weight, bias, "none", [], "")

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors
        return _Linear.backward_from(ctx, grad.contiguous(), x, weight, ctx.has_bias)

    @staticmethod
    def backward_from(ctx, grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, has_bias: bool):
        """Gradients of ``x @ weight.T + bias`` for the output gradient ``grad`` (contiguous)."""
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        grad_x = _ONEDNN_LINEAR(grad, weight.T.contiguous(), None, "none", [], "") if need_x else None
        grad_w = grad.T @ x if need_w else None
        grad_b = grad.sum(0) if has_bias and need_b else None
        return grad_x, grad_w, grad_b


class _LinearGelu(torch.autograd.Function):
    """``gelu(x @ w.T + b)`` with the GELU applied inside oneDNN's product (no pass over the
    pre-activation in memory); backward recomputes the pre-activation (one product) instead of
    storing it. Tanh-approximated GELU at 2048x256: 0.23 ms fused against 0.48 ms product + ``F.gelu``."""

    @staticmethod
    def forward(ctx, x, weight, bias, approximate: str):
        ctx.save_for_backward(x, weight, bias)
        ctx.approximate = approximate
        return _ONEDNN_LINEAR(x, weight, bias, "gelu", [], approximate)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight, bias = ctx.saved_tensors
        pre = _ONEDNN_LINEAR(x, weight, bias, "none", [], "")
        grad_pre = torch.ops.aten.gelu_backward(grad.contiguous(), pre, approximate=ctx.approximate)
        return *_Linear.backward_from(ctx, grad_pre, x, weight, bias is not None), None


# Rows below which MKL's addmm is used: oneDNN's call costs ~13 us whatever the size (d 64 -> 192 on 2
# cores: 1 row 2.6 vs 13.3 us, 16 rows 5.7 vs 14.4, 64 rows 12.1 vs 16.9, 256 rows 34.9 vs 27.0), which
# matters where decoding feeds a row per sequence per call (KV-cached generation). Kept low (a batch of
# 32 decoded sequences) so that evaluation batches, which hold whole windows, all take one kernel.
ONEDNN_MIN_ROWS = 32


def _use_onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    return (onednn(x) and weight.dtype == torch.float32 and (bias is None or bias.dtype == torch.float32)
            and x.numel() >= ONEDNN_MIN_ROWS * x.shape[-1])


def _needs_grad(*tensors: torch.Tensor | None) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for x (..., d_in), through oneDNN on CPU in fp32."""
    if not _use_onednn(x, weight, bias):
        return F.linear(x, weight, bias)
    flat = x.reshape(-1, x.shape[-1])
    if _needs_grad(x, weight, bias):
        out = _Linear.apply(flat, weight, bias)
    else:
        out = _ONEDNN_LINEAR(flat, weight, bias, "none", [], "")
    return out.view(*x.shape[:-1], weight.shape[0])


def linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, approximate: str) -> torch.Tensor:
    """``F.gelu(F.linear(x, weight, bias), approximate=approximate)``, fused by oneDNN on CPU in fp32."""
    if not _use_onednn(x, weight, bias):
        return F.gelu(F.linear(x, weight, bias), approximate=approximate)
    flat = x.reshape(-1, x.shape[-1])
    if _needs_grad(x, weight, bias):
        out = _LinearGelu.apply(flat, weight, bias, approximate)
    else:
        out = _ONEDNN_LINEAR(flat, weight, bias, "gelu", [], approximate)
    return out.view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` computed by ``linear`` (oneDNN on CPU in fp32); parameters and state dict unchanged."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)
