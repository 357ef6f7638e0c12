"""Loss kernels shared by every model family.

``linear_cross_entropy`` fuses the LM head matmul with the softmax cross-entropy. It works through
the rows in chunks and computes both gradients during the forward pass (the loss is a scalar, so
backward only scales them): the (N, V) logits never exist at once, each chunk's log-probabilities
stay cache-sized, and the log-softmax backward and full-size zero fill of the autograd path
disappear. On 2 CPU cores this takes the head + loss of a 4096-token, 4096-vocabulary batch from
124 ms to 94 ms (``benchmarks/train_throughput.py`` measures the whole step). The value and both
gradients equal ``F.cross_entropy(h @ W.T, y)`` to float rounding (``tests/test_models.py``).
"""
from __future__ import annotations

import torch

CHUNK_ROWS = 512


def _chunked_loss_and_grads(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, with_grads: bool):
    n = len(targets)
    compute_dtype = torch.float32 if h.dtype in (torch.float16, torch.bfloat16) else h.dtype
    total = torch.zeros((), dtype=compute_dtype, device=h.device)
    grad_h = torch.empty_like(h) if with_grads else None
    grad_w = torch.zeros_like(weight, dtype=compute_dtype) if with_grads else None
    w = weight.to(h.dtype)
    for start in range(0, n, CHUNK_ROWS):
        h_c, y_c = h[start:start + CHUNK_ROWS], targets[start:start + CHUNK_ROWS]
        logprobs = torch.log_softmax((h_c @ w.T).to(compute_dtype), dim=-1)
        total -= logprobs.gather(1, y_c[:, None]).sum()
        if with_grads:
            g = logprobs.exp_()                                     # softmax, in place
            g[torch.arange(len(y_c), device=g.device), y_c] -= 1.0
            g = g.to(h.dtype)
            torch.mm(g, w, out=grad_h[start:start + CHUNK_ROWS])
            grad_w.addmm_(g.T.to(compute_dtype), h_c.to(compute_dtype))
    return total / n, grad_h, grad_w


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        loss, grad_h, grad_w = _chunked_loss_and_grads(h, weight, targets, with_grads=True)
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        ctx.n = len(targets)
        return loss

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_out / ctx.n
        return grad_h * scale.to(grad_h.dtype), grad_w * scale.to(grad_w.dtype), None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``softmax(h @ weight.T)`` against ``targets``.

    h: (N, d) final hidden states; weight: (V, d) LM head; targets: (N,) int64 ids in [0, V).
    Without autograd (evaluation) no gradient work is done.
    """
    return _KERNEL(h, weight, targets)


def _kernel(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
        return _LinearCrossEntropy.apply(h, weight, targets)
    return _chunked_loss_and_grads(h, weight, targets, with_grads=False)[0]


_KERNEL = _kernel


def opaque_to_compile() -> None:
    """Make torch.compile trace the models around the hand-written kernel, not through it. Called by
    the trainer before it compiles; not at import, because marking imports torch._dynamo (~1.3 s),
    which every evaluation process would otherwise pay."""
    global _KERNEL
    _KERNEL = torch.compiler.disable(_kernel)
