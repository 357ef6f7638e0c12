"""Multi-token prediction (Gloeckle et al. 2024, "Better & Faster Large Language Models via Multi-token
Prediction", arXiv 2404.19737): ConceptLM's token-space baseline (arXiv 2602.08984 §5.2, Table 4:
"MTP", four future tokens on Pythia-160M).

The backbone's layers are the shared trunk and its final norm + LM head the next-token head (the
``ntp`` loss, and the only logits at inference, so the model stays strictly causal). Each further
future token i = 2..``n_future`` has its own head: one backbone block on the trunk's output, then
the shared final norm and (un)embedding, trained on token t + i. The ``mtp`` loss combines their
cross-entropies; the trainer weights it with ``train.loss_weights.mtp`` (default 1). With
four future tokens this adds three blocks to the backbone (ConceptLM adds two concept layers on
T/k positions); Table 4 does not say how its MTP heads were built.

Defaults and their sources:

* ``mtp_reduction`` sum: Gloeckle et al. §2 (Method) train on the n-token cross-entropy
  L_n = -sum_t sum_{i=1..n} log P(x_{t+i} | z_{t:1}), the *sum* over the n heads; ``ntp`` + the summed
  ``mtp`` with unit weights is that loss per token. ``mean`` (switch) divides the future heads' part
  by n - 1.
* heads: one transformer block each on the shared trunk, a shared unembedding (Gloeckle et al. §2); our
  next-token head has no block of its own (the trunk is the whole backbone, so Base and MTP share it).
* head and unembedding: the backbone's ``lm_head`` and ``ln_f``, hence its tying (untied on every
  backbone by default, ``models.token_lm``).
* initialisation: the future blocks as the backbone's blocks, output projections scaled by the
  model's ``n_layer`` where the backbone scales (GPT-2), unscaled on Pythia and Llama
  (``scale_residual_init``); Gloeckle et al. do not state an initialisation.
"""
from __future__ import annotations

import torch
from torch import nn

from models.blocks import init_weights
from models.losses import linear_cross_entropy
from models.token_lm import (TokenLM, block_matmul_params, make_block, make_rotary, residual_init_depth,
                             token_lm_flops_per_token)


class MTPLM(TokenLM):
    def __init__(self, cfg):
        super().__init__(cfg)
        rotary = make_rotary(cfg)
        self.future_blocks = nn.ModuleList(make_block(cfg, rotary) for _ in range(cfg.n_future - 1))
        init_weights(self.future_blocks, cfg.init_std, residual_init_depth(cfg), root=self)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        h = self.ln_f(x)
        if targets is None:
            return {"logits": self.lm_head(h)}
        t, w = idx.shape[1], self.lm_head.weight
        future = torch.stack([
            linear_cross_entropy(self.ln_f(block(x))[:, :t - i].flatten(0, 1), w, targets[:, i:].flatten())
            for i, block in enumerate(self.future_blocks, start=1)])  # head i + 1 predicts targets[t + i]
        return {"losses": {"ntp": linear_cross_entropy(h.flatten(0, 1), w, targets.flatten()),
                           "mtp": future.sum() if self.cfg.mtp_reduction == "sum" else future.mean()}}


def mtp_flops_per_token(cfg) -> float:
    """Token-LM FLOPs plus, per extra head, one block (6 x weights + 12 d T) and one unembedding (6 V d)."""
    extra = 6.0 * block_matmul_params(cfg) + 12.0 * cfg.d_model * cfg.seq_len + 6.0 * cfg.vocab_size * cfg.d_model
    return token_lm_flops_per_token(cfg) + (cfg.n_future - 1) * extra
