"""ConceptLM: next concept prediction in a discrete latent space (Liu et al., arXiv 2602.08984).

A token LM (GPT-2, Pythia or Llama backbone, ``models.token_lm``) with a slower concept path spliced
in after its first ``insert_layer`` layers (Fig. 2, §2):

1. encoder: the first ``insert_layer`` token layers; 0 pools the token embeddings (GPT-2's main
   setting L0; Pythia and Llama use the first layer, §4.1, App. B.2);
2. chunk states: the mean of every k = ``chunk_size`` consecutive encoder states,
   ``c_j = mean(h_{jk} .. h_{jk+k-1})`` (§2.2; a trailing partial chunk is left out, as in the code);
3. concept transformer: ``concept_layers`` backbone blocks, causal over the chunk sequence (§2.3),
   then S heads of N coefficients each and the predicted concept ``c_hat = concat_s sum_n w_sn e_sn``
   over the transformed codes of the product codebook (``models.quantizers``, §2.2-2.3). Row j of
   the predictions is the prediction of chunk j+1 from chunks <= j. With rotary backbones the
   chunk sequence keeps the position of each chunk's first token (Pythia and Llama code);
   with GPT-2 it has no positional signal (GPT-2 code);
4. shift: position t receives the prediction of chunk floor((t+1)/k) -- made from the chunks before
   it, all complete by position t -- and zeros for t < k - 1: each prediction repeated k times and
   shifted right by k - 1 (§2.3; docs/sources.md, "ConceptLM: what the paper leaves open", item 1; the
   paper's printed index floor(t/(k-1)) leaks the future from position 2k - 2 on, see
   ``tests/models/test_concept_causality.py``);
5. decoder: the remaining token layers on ``h_t + shifted concept``, final norm and LM head.

Losses (§3), each on/off by a flag here (an off term is not computed) and weighted by the
trainer's ``train.loss_weights`` (default 1 each, the paper's L = NTP + NCP + VQ):

* ``ntp``: next-token cross-entropy (fused head + loss, ``models.losses``);
* ``ncp``: MSE between each prediction and the next chunk's state, the target detached; its
  gradient reaches the encoder through the concept transformer's input (code; docs/sources.md,
  "ConceptLM: what the paper leaves open", item 2);
* ``vq``: codebook + 0.25 x commitment loss on the *detached* chunk states, so the VQ loss trains the
  code transform only (§3 text and Fig. 3; the printed formula would also pull on the encoder).

Every ambiguity of the paper listed in docs/sources.md ("ConceptLM: what the paper leaves open",
"ConceptLM: the authors' code") is a switch of ``ConceptOptions``. Its defaults are the authors' code
for the backbone: the Pythia code (P), with ``ConceptOptions.backbone_defaults`` giving the GPT-2
code's (G) and the Llama code's (L) differences on those backbones. Per backbone (item of
docs/sources.md, "ConceptLM: the authors' code"; file line):

=======================  ==============================  =====================  =========================
field                    GPT-2 (G)                       Pythia (P)             Llama (L)
=======================  ==============================  =====================  =========================
insert_layer             0 (§4.1, Table 14)              1 (§4.1, App. B.2)     1 (§4.1)
fusion                   norm_add: ln_f(h) + ln_f(c)     add (11; P L546)       add (11; see below)
                         (11; G L401-404)
concept_norm             False (2; none in G)            True (2; P L60, L135)  False (L L756-773: heads
                                                                                on the layers' output)
code_transform           linear, bias-free (4; G         mlp (4; P L244-255)    mlp (4; L L506-517)
                         L194-200, SimVQ default)
vq_segment_reduction     sum (6; G L358)                 mean (6; P L493)       mean (6; L L745)
concept positions        none (2; no wpe, no rotary)     rotary j*k (2; P L118) rotary j*k (2; L L720)
=======================  ==============================  =====================  =========================

Common to all three (recorded here, not switches):

* coefficient heads: S ``nn.Linear(d, N)`` *with* bias (7; G L42, P L67, L L519/L556): here one
  ``nn.Linear(d, S * N, bias=True)``, N(0, ``init_std``) with a zero bias, as ``post_init`` leaves them
  (HF ``_init_weights``). S = ``n_head`` (4; G fixes it, P/L with ``vq_patch_ratio`` 1).
* concept layers: backbone blocks built from the model's config (G L34, P L57, L L494-496), initialised
  as the model's blocks, output projections included: 0.02 / sqrt(2 ``n_layer``) with the *model's*
  ``n_layer`` on GPT-2 (HF ``GPT2PreTrainedModel._init_weights`` reads ``config.n_layer`` for every
  ``GPT2Block``), unscaled 0.02 on Pythia and Llama (their HF ``_init_weights``; switch
  ``scale_residual_init``, ``models.token_lm``). Same dropout as the backbone; the concept norm is the
  backbone's norm with its eps (P L60).
* codebook: frozen N(0, 1/d_s) base codes and an N(0, 0.02) transform with zero biases (5;
  ``models.quantizers``).
* the VQ in eval mode: G (L345) and L (L737) quantise only ``if self.training``, P always. Here the
  assignment and the VQ loss are computed whenever targets are given (P): the logits are the same, the
  trainer's validation reads the NTP loss only, and ``evals.codebook`` needs the assignment.
* not reproduced from L (a documented deviation, no switch): its fusion ``h + sg(c_hat)`` (11), with
  which the NTP loss cannot train the concept path, and its NCP target, the model's own argmax codes
  (9); conceptlm_llama keeps P's fusion and NCP.

ContextLM (``models.contextlm``) is this model with a linear predictor and no codebook or NCP.
"""
from __future__ import annotations

import torch
from torch import nn

from models.blocks import init_weights, make_norm
from models.losses import linear_cross_entropy
from models.quantizers import ProductVQ, codebook_usage
from models.token_lm import (TokenLM, block_matmul_params, make_block, make_rotary, residual_init_depth,
                             token_lm_flops_per_token)


def shift_broadcast(c_hat: torch.Tensor, k: int, length: int) -> torch.Tensor:
    """Token-aligned concepts (§2.3; docs/sources.md, "ConceptLM: what the paper leaves open", item 1):
    (B, M, d) predictions -> (B, length, d).

    Row j of ``c_hat`` predicts chunk j+1 from chunks <= j. Position t receives row
    floor((t+1)/k) - 1, the prediction of chunk floor((t+1)/k); positions t < k - 1 get zeros. For
    k = 4: positions 0-2 zero, 3-6 the prediction of chunk 1 (made from chunk 0, complete at t = 3),
    7-10 that of chunk 2, ... The Pythia code's construction: prepend a zero row, repeat every row
    k times, drop the first position.
    """
    rows = torch.cat([c_hat.new_zeros(c_hat.shape[0], 1, c_hat.shape[2]), c_hat], dim=1)
    return rows.repeat_interleave(k, dim=1)[:, 1:length + 1]


class ConceptLM(TokenLM):
    """The token backbone (``TokenLM``: embedding, blocks, final norm, head) with the concept path."""

    # Monitor metrics the trainer reports as a warning the first time they are non-zero.
    ALERTS = {"vq_collapse": "codebook collapse: a segment's usage perplexity fell under max(2, 5% of N) codes "
                             "(App. E.3); see metric/vq_ppl_s* in the training log"}

    # Mechanism checks (``evals.mechanisms``, §2.3): a callable (c, c_hat) -> the predictions the decoder
    # fuses in place of c_hat (same shape); None, the default, leaves ``forward`` as it is.
    intervention = None

    def __init__(self, cfg):
        super().__init__(cfg)  # embedding, token layers (encoder + decoder), final norm, LM head
        d, S, N = cfg.d_model, cfg.segments, cfg.codebook_size
        rotary = make_rotary(cfg, stride=cfg.chunk_size)
        self.concept_blocks = nn.ModuleList(make_block(cfg, rotary) for _ in range(cfg.concept_layers))
        self.concept_norm = make_norm(cfg.norm, d, cfg.norm_eps, cfg.bias) if cfg.concept_norm else nn.Identity()
        # with a bias on every backbone, as the authors' nn.Linear heads (docs/sources.md, "ConceptLM: the
        # authors' code", item 7)
        self.concept_head = nn.Linear(d, S * N if cfg.predictor == "codebook" else d, bias=True)
        self.quantizer = ProductVQ(d, S, N, cfg.code_transform) if cfg.predictor == "codebook" else None
        for part in (self.concept_blocks, self.concept_norm, self.concept_head, self.quantizer):
            if part is not None:  # output projections scaled by the model's depth, as the token blocks
                init_weights(part, cfg.init_std, residual_init_depth(cfg), root=self)

    def fsdp_units(self) -> list[nn.Module]:
        return [*self.blocks, *self.concept_blocks]

    def encode(self, idx: torch.Tensor) -> torch.Tensor:
        """Encoder states (B, T, d): the embeddings through the first ``insert_layer`` token layers."""
        x = self.embed(idx)
        for block in self.blocks[:self.cfg.insert_layer]:
            x = block(x)
        return x

    def chunk_states(self, x: torch.Tensor) -> torch.Tensor:
        """Mean-pooled chunk states c (B, M, d) of encoder states x (B, T, d), M = T // k (§2.2); a
        trailing partial chunk is left out."""
        k = self.cfg.chunk_size
        m = x.shape[1] // k
        return x[:, :m * k].unflatten(1, (m, k)).mean(2)

    def concepts(self, x: torch.Tensor, codes: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Chunk states c (B, M, d) of encoder states x (B, T, d) and the predictions c_hat (B, M, d),
        row j predicting c_{j+1} from c_{<=j} (§2.3)."""
        if x.shape[1] < self.cfg.chunk_size:  # no concept exists yet (positions < k - 1 get zeros)
            empty = x.new_zeros(x.shape[0], 0, x.shape[2])
            return empty, empty
        c = self.chunk_states(x)
        z = c
        for block in self.concept_blocks:
            z = block(z)
        out = self.concept_head(self.concept_norm(z))
        if codes is None:  # ContextLM: the head's output is the next-context embedding
            return c, out
        w = out.unflatten(-1, (self.cfg.segments, self.cfg.codebook_size))
        if self.cfg.coefficients == "softmax":
            w = w.softmax(-1)
        return c, self.quantizer.combine(w, codes)

    def fuse(self, x: torch.Tensor, concept: torch.Tensor) -> torch.Tensor:
        """The decoder's input: ``h + c`` (add), ``ln_f(h) + ln_f(c)`` (norm_add) or, as a diagnostic,
        ``ln_f(h)`` with the concept dropped (norm_only: what the GPT-2 fusion does to the token path
        alone; with ``ncp``/``vq`` off it is a token model with a normalised decoder input)."""
        if self.cfg.fusion == "norm_add":
            return self.ln_f(x) + self.ln_f(concept)
        if self.cfg.fusion == "norm_only":
            return self.ln_f(x)
        return x + concept

    def ncp_loss(self, c: torch.Tensor, c_hat: torch.Tensor) -> torch.Tensor:
        """L_NCP between prediction j and chunk state j+1 (§3)."""
        target = c[:, 1:].detach() if self.cfg.ncp_detach_target else c[:, 1:]
        err = (c_hat[:, :-1] - target).pow(2)
        return err.mean() if self.cfg.ncp_reduction == "mean" else err.sum(-1).mean()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        """As ``TokenLM.forward``; with targets also the NCP / VQ losses that are on and, with a
        codebook, its usage metrics (``models.quantizers.codebook_usage``)."""
        cfg = self.cfg
        x = self.encode(idx)
        codes = self.quantizer.codes() if self.quantizer is not None else None
        c, c_hat = self.concepts(x, codes)
        fused = c_hat if self.intervention is None else self.intervention(c, c_hat)
        x = self.fuse(x, shift_broadcast(fused, cfg.chunk_size, idx.shape[1]))
        for block in self.blocks[cfg.insert_layer:]:
            x = block(x)
        h = self.ln_f(x)
        if targets is None:
            return {"logits": self.lm_head(h)}
        losses = {"ntp": linear_cross_entropy(h.flatten(0, 1), self.lm_head.weight, targets.flatten())}
        if cfg.ncp:
            losses["ncp"] = self.ncp_loss(c, c_hat)
        if self.quantizer is None:
            return {"losses": losses}
        c_vq = c.detach() if cfg.vq_detach_input else c
        index = self.quantizer.assign(c_vq, codes)
        if cfg.vq:
            losses["vq"] = self.quantizer.loss(c_vq, codes, index, cfg.vq_beta, cfg.vq_segment_reduction)
        return {"losses": losses, "metrics": codebook_usage(index, cfg.codebook_size)}


def concept_lm_flops_per_token(cfg) -> float:
    """Token-LM FLOPs (``token_lm_flops_per_token``) plus 1/k of one chunk's concept-path FLOPs: the
    concept layers on T/k positions (6 x block weights + 12 d T/k each), and the predictor -- S x N
    coefficient heads (6 d S N), the weighted code sum (6 N d) and the nearest-neighbour distances
    (2 N d, forward only) with a codebook, one d x d map (6 d^2) without. The code transform runs once
    per step, not per token, and is left out; so are pooling and the fusion add."""
    k, d, n = cfg.chunk_size, cfg.d_model, cfg.codebook_size
    layers = cfg.concept_layers * (6.0 * block_matmul_params(cfg) + 12.0 * d * cfg.seq_len / k)
    head = 6.0 * d * cfg.segments * n + 8.0 * n * d if cfg.predictor == "codebook" else 6.0 * d * d
    return token_lm_flops_per_token(cfg) + (layers + head) / k
