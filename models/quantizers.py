"""Product vector quantisation of chunk states: ConceptLM's concept vocabulary (arXiv 2602.08984 §2.2).

A concept ``c`` (d features) is split into S segments of d/S features; segment s has its own N codes,
so the vocabulary has N^S combinations for N * d code scalars (§2.2; docs/sources.md, "ConceptLM: what
the paper leaves open", item 5).

Codes follow SimVQ (Zhu et al. 2025), as the authors' code does (``vector_quantize_pytorch.SimVQ``,
docs/sources.md, "ConceptLM: the authors' code", item 5): the base codes are a *frozen* Gaussian table
(``randn * (d/S)^-0.5``) and what is learned is a per-segment transform of them. ``transform='mlp'`` is
the two-layer MLP with ReLU of the paper (§4.1, App. E.3: it prevents the collapse a plain map shows at
shallow insertion) and of the Pythia/Llama code (the default on Pythia and Llama); ``'linear'`` is the
single bias-free linear map ``nn.Linear(d/S, d/S, bias=False)`` the GPT-2 code gets from the library
default (item 4 of the same section; the default of ``conceptlm_gpt2``). The transform is initialised like
the rest of the model (``blocks.init_weights``: N(0, 0.02), zero biases), which is what the authors'
``transformers`` models do to every ``nn.Linear`` they contain, SimVQ's included (``post_init``; our
inference, the training code is not released). The predicted concepts then start below the token states'
scale (checked for d = 32-768, both transforms, GPT-2 and Pythia); with ``nn.Linear``'s default
initialisation they start 5-10 times above it and drown the token embeddings at insertion depth 0.

The nearest-neighbour assignment (under ``no_grad``) and the VQ loss
``||sg(c) - q||^2 + beta ||c - sg(q)||^2`` (§3; beta = 0.25, the library default) take the pooled
states the model passes in: ConceptLM passes them detached (§3, Fig. 3), so the loss trains the
code transform only. Not reproduced from the library: the rotation-trick output and the extra
``(rotated - c)^2`` term of the Pythia code. The quantised vectors are never used in ConceptLM's
forward pass (the decoder gets a weighted sum of codes, §2.3), so with detached inputs the rotation
trick changes no gradient; the extra term equals the codebook term in value.
"""
from __future__ import annotations

import torch
from torch import nn

COLLAPSE_FRACTION = 0.05  # a segment using fewer than max(2, 5 % of N) codes effectively has collapsed


class ProductVQ(nn.Module):
    def __init__(self, d_model: int, n_segments: int, codebook_size: int, transform: str):
        super().__init__()
        self.S, self.N, self.ds = n_segments, codebook_size, d_model // n_segments
        self.transform = transform
        self.register_buffer("base_codes", torch.randn(self.S, self.N, self.ds) * self.ds ** -0.5)
        hidden = 2 * self.ds if transform == "mlp" else self.ds
        self.in_weight = nn.Parameter(torch.empty(self.S, self.ds, hidden))
        if transform == "mlp":  # biases kept 1-D so that the trainer does not weight-decay them
            self.in_bias = nn.Parameter(torch.empty(self.S * hidden))
            self.out_weight = nn.Parameter(torch.empty(self.S, hidden, self.ds))
            self.out_bias = nn.Parameter(torch.empty(self.S * self.ds))

    def codes(self) -> torch.Tensor:
        """The transformed codes, (S, N, d/S): what the assignment and the concept predictor use."""
        if self.transform == "linear":
            return self.base_codes @ self.in_weight
        hidden = torch.relu(torch.baddbmm(self.in_bias.view(self.S, 1, -1), self.base_codes, self.in_weight))
        return torch.baddbmm(self.out_bias.view(self.S, 1, -1), hidden, self.out_weight)

    def segments(self, c: torch.Tensor) -> torch.Tensor:
        return c.unflatten(-1, (self.S, self.ds))

    @torch.no_grad()
    def assign(self, c: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """Index of the nearest code of every segment: (..., d) -> (..., S) int64."""
        x = self.segments(c)
        dist = (x.pow(2).sum(-1, keepdim=True) - 2 * torch.einsum("...sd,snd->...sn", x, codes)
                + codes.pow(2).sum(-1))
        return dist.argmin(-1)

    def loss(self, c: torch.Tensor, codes: torch.Tensor, index: torch.Tensor, beta: float,
             segment_reduction: str) -> torch.Tensor:
        """Codebook + beta * commitment MSE of each segment, averaged (Pythia/Llama code) or summed (GPT-2
        code; docs/sources.md, "ConceptLM: the authors' code", item 6; the ``conceptlm_gpt2`` default) over
        segments."""
        x = self.segments(c)
        q = codes[torch.arange(self.S, device=index.device), index]           # (..., S, d/S)
        per_segment = ((x.detach() - q).pow(2) + beta * (x - q.detach()).pow(2)).flatten(0, -3).mean((0, 2))
        return per_segment.mean() if segment_reduction == "mean" else per_segment.sum()

    def combine(self, weights: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """sum_n w[..., s, n] * code[s, n], concatenated over segments: (..., S, N) -> (..., d) (§2.3)."""
        return torch.einsum("...sn,snd->...sd", weights, codes).flatten(-2)


def codebook_usage(index: torch.Tensor, codebook_size: int) -> dict[str, float]:
    """Monitoring metrics of a batch of assignments ``index`` (..., S), logged as ``metric/<name>``:

    * ``vq_util_pct``: codes used at least once, % of N, averaged over segments;
    * ``vq_ppl_s<i>``: usage perplexity exp(H) of segment i (N when uniform, 1 when collapsed to one
      code), and ``vq_ppl_mean``;
    * ``vq_dead_codes``: codes no chunk of the batch was assigned to, summed over segments;
    * ``vq_collapse``: 1.0 when a segment's usage perplexity is under max(2, ``COLLAPSE_FRACTION`` * N),
      a warning (App. E.3 reports collapse without the MLP transform at shallow insertion), else 0.0.
    """
    flat = index.reshape(-1, index.shape[-1])
    n_seg = flat.shape[1]
    offsets = torch.arange(n_seg, device=flat.device) * codebook_size
    counts = torch.bincount((flat + offsets).flatten(), minlength=n_seg * codebook_size).view(n_seg, codebook_size)
    p = counts / counts.sum(1, keepdim=True)
    ppl = torch.exp(-(p * p.clamp_min(1e-30).log()).sum(1))
    used = (counts > 0).sum(1)
    stats = torch.cat([ppl, (100.0 * used / codebook_size).mean()[None], (codebook_size - used).sum()[None]]).tolist()
    ppl_list, util, dead = stats[:n_seg], stats[n_seg], stats[n_seg + 1]
    return {"vq_util_pct": util, "vq_ppl_mean": sum(ppl_list) / n_seg, "vq_dead_codes": dead,
            "vq_collapse": float(min(ppl_list) < max(2.0, COLLAPSE_FRACTION * codebook_size)),
            **{f"vq_ppl_s{i}": v for i, v in enumerate(ppl_list)}}
