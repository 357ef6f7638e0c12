"""Loss kernels shared by every model family.

``linear_cross_entropy`` fuses the LM head matmul with the softmax cross-entropy. It works through
the rows in chunks and computes both gradients during the forward pass (the loss is a scalar, so
backward only scales them): the (N, V) logits never exist at once, each chunk's probabilities stay
cache-sized (256 rows: 2 MiB at V = 2048), and the log-softmax backward and full-size zero fill of
the autograd path disappear. One ``softmax`` per chunk gives the gradient ``p - onehot`` and the
loss ``-log p[target]`` (no log-softmax followed by an ``exp``); the rare rows whose target
probability is below the normal float range get their loss from ``logsumexp`` instead. On CPU in
fp32 the three products with ``W`` go through oneDNN (``models.kernels``). Forward + backward of the head +
loss on 2 CPU cores: 2048 tokens, vocabulary 2048, d 64 (the embedded ``s`` batch) 18 ms instead of
27 ms with 512-row chunks, log-softmax and MKL; 4096 tokens, 4096, d 128: 85 instead of 114 ms (1
core: 29 vs 44, 176 vs 227; ``benchmarks/train_throughput.py`` measures the whole step). The value
and both gradients equal ``F.cross_entropy(h @ W.T, y)`` to float rounding (``tests/models/test_models.py``).
"""
from __future__ import annotations

import torch

from models.kernels import matmul_t as _matmul_t
from models.kernels import onednn as _onednn

CHUNK_ROWS = 256
# log p(target) below this (p < 1.8e-35) is recomputed from the logits: the softmax output is only
# relatively accurate down to the smallest normal float (1.2e-38) and is flushed to 0 below it
LOG_P_FLOOR = -80.0


def _chunked_loss_and_grads(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, with_grads: bool,
                            row_weights: torch.Tensor | None = None, with_hits: bool = False):
    """(loss, grad_h, grad_w, nll, hits): the mean cross-entropy, or sum_i row_weights[i] nll_i when
    ``row_weights`` (N,) is given, the gradients of that loss, the per-row nll (N,) and, with
    ``with_hits``, whether each row's argmax is its target (N,) bool (else None)."""
    n = len(targets)
    compute_dtype = torch.float32 if h.dtype in (torch.float16, torch.bfloat16) else h.dtype
    log_p = torch.empty(n, dtype=compute_dtype, device=h.device)       # log p(target) per row
    hits = torch.empty(n, dtype=torch.bool, device=h.device) if with_hits else None
    scale = None if row_weights is None else row_weights.to(compute_dtype)[:, None]
    grad_h = torch.empty_like(h) if with_grads else None
    w = weight.to(h.dtype)
    onednn = _onednn(h)
    # oneDNN accumulates grad_w.T (d, V), contiguous: h_c.T @ g as one a @ b.T product per chunk
    grad_w = (h.new_zeros(h.shape[1], len(weight)) if onednn else torch.zeros_like(weight, dtype=compute_dtype)
              ) if with_grads else None
    w_t = w.T.contiguous() if with_grads and onednn else None   # grad_h = g @ w = g @ w_t.T
    minus_one = torch.full((1, 1), -1.0, dtype=compute_dtype, device=h.device)
    for start in range(0, n, CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        h_c, y_c = h[rows], targets[rows, None]
        probs = torch.softmax(_matmul_t(h_c, w, onednn).to(compute_dtype), dim=-1)  # max, exp and sum, scale
        torch.log(probs.gather(1, y_c), out=log_p[rows, None])
        if with_hits:
            hits[rows] = probs.argmax(1) == y_c[:, 0]
        if with_grads:
            g = probs.scatter_add_(1, y_c, minus_one.expand(len(y_c), 1))  # softmax - onehot
            g = (g if scale is None else g.mul_(scale[rows])).to(h.dtype)
            if onednn:
                grad_h[rows] = _matmul_t(g, w_t, onednn)
                grad_w.add_(_matmul_t(h_c.T, g.T, onednn))
            else:
                torch.mm(g, w, out=grad_h[rows])
                grad_w.addmm_(g.T.to(compute_dtype), h_c.to(compute_dtype))
    tiny = (log_p < LOG_P_FLOOR).nonzero().squeeze(1)   # rare: a target far below the row's maximum
    if len(tiny):
        logits = _matmul_t(h[tiny], w, onednn).to(compute_dtype)
        log_p[tiny] = logits.gather(1, targets[tiny, None]).squeeze(1) - torch.logsumexp(logits, dim=-1)
    if with_grads and onednn:
        grad_w = grad_w.T.contiguous()
    loss = -log_p.sum() / n if scale is None else -(log_p * scale[:, 0]).sum()
    return loss, grad_h, grad_w, -log_p, hits


class _LinearCrossEntropy(torch.autograd.Function):
    """The loss of ``_chunked_loss_and_grads``, its gradients computed in the forward pass; the per-row
    nll and hits come out beside it, not differentiable."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, row_weights, with_hits: bool):
        loss, grad_h, grad_w, nll, hits = _chunked_loss_and_grads(h, weight, targets, True, row_weights, with_hits)
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        ctx.n = len(targets) if row_weights is None else 1  # the mean's 1/n; row weights carry their own
        ctx.mark_non_differentiable(nll, *([hits] if with_hits else []))
        return (loss, nll, hits) if with_hits else (loss, nll)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor, *_):
        grad_h, grad_w = ctx.saved_tensors
        scale = grad_out / ctx.n
        return grad_h * scale.to(grad_h.dtype), grad_w * scale.to(grad_w.dtype), None, None, None


def linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``softmax(h @ weight.T)`` against ``targets``.

    h: (N, d) final hidden states; weight: (V, d) LM head; targets: (N,) int64 ids in [0, V).
    Without autograd (evaluation) no gradient work is done.
    """
    return _KERNEL(h, weight, targets, None, False)[0]


def weighted_linear_cross_entropy(h: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                                  row_weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, nll, hits) in one pass over the rows: loss = sum_i row_weights[i] * nll_i (differentiable;
    several groups of rows, each its own mean, in one call: NCM's scales, MDLM's per-sequence weights),
    the per-row cross-entropy nll (N,) and argmax hits (N,) bool, both detached. Arguments as
    ``linear_cross_entropy``, with row_weights (N,) float."""
    return _KERNEL(h, weight, targets, row_weights, True)


def _kernel(h, weight, targets, row_weights, with_hits):
    if torch.is_grad_enabled() and (h.requires_grad or weight.requires_grad):
        return _LinearCrossEntropy.apply(h, weight, targets, row_weights, with_hits)
    loss, _, _, nll, hits = _chunked_loss_and_grads(h, weight, targets, False, row_weights, with_hits)
    return (loss, nll, hits) if with_hits else (loss, nll)


_KERNEL = _kernel


def opaque_to_compile() -> None:
    """Make torch.compile trace the models around the hand-written kernel, not through it. Called by
    the trainer before it compiles; not at import, because marking imports torch._dynamo (~1.3 s),
    which every evaluation process would otherwise pay."""
    global _KERNEL
    _KERNEL = torch.compiler.disable(_kernel)
