"""DLCM: Dynamic Large Concept Models (arXiv 2512.24617v2), one model on any backbone's blocks.

No code of the paper is public; the sources are the v2 text, cited by section, equation or table and by
the entry names ("Pipeline", "Boundary predictor", "Global Parser", ...) of docs/sources.md, "DLCM: what
the paper specifies"; what it leaves unspecified is docs/sources.md, "DLCM: what the paper leaves open"
(cited "open N" for its item N); and H-Net's dynamic chunking (goombalab/hnet @ 3673fe12, docs/sources.md,
"H-Net dynamic chunking (goombalab/hnet)", cited as "H-Net <file>"). A token stream of the backbone's
width ``d_model`` (d_token) wraps a wider concept stream (``d_concept``), in four stages ("Pipeline"):

1. **encoder**: the first ``n_layer - decoder_layers`` backbone blocks, causal, on the token embeddings:
   H = E(x), (B, T, d_token).
2. **dynamic segmentation** ("Boundary predictor", §3.3): q_t = W_q h_t, k_t = W_k h_t (``d_scan``
   wide, bias-free, identity-initialised as H-Net dc.py:50-59), p_t = (1 - cos(q_{t-1}, k_t)) / 2 and
   p_1 = 1 (the first token always opens a segment). b_t = 1 means token t OPENS a new segment. Training
   draws b_t ~ Bernoulli(p~_t) with the temperature-sharpened p~_t = sigmoid((logit p_t - logit tau) /
   alpha) (``sharpen``); inference takes b_t = [p_t >= tau] (tau = ``boundary_threshold`` = 0.5, §3.3).
   The two rules realise different ratios from the same p: the compression loss sees training's b, so
   it pulls training's ratio to R, and the threshold of inference then lands elsewhere (the boundaries
   evaluation reports both). ``boundary_temperature: 0`` is H-Net's rule (dc.py: the same threshold in
   training and inference, no sampling): one rule for the loss and for inference. The rule-based
   predictor (§8.1) has no projections: p_t = (1 - cos(h_{t-1}, h_t)) / 2, b_t = [p_t >= tau] in
   training and inference. §8.1 does not give its tau: ``boundary_calibration: quantile`` replaces the
   fixed tau by a running quantile of p (a buffer, checkpointed with the weights): each training forward
   takes the quantile above which a window of T tokens opens T / R segments and blends it in with
   ``calibration_momentum``; inference uses the value as trained (either predictor). Straight-through estimator (H-Net
   hnet.py STE, :20-30): the cross-attention
   output of token t is multiplied by 1 + c_t - sg(c_t), c_t the probability of the decision taken
   (p~_t if b_t else 1 - p~_t): 1 in value, and the LM gradient reaches the router through it (and through
   the EMA below). ``router_lm_gradient: false`` cuts both: p then learns from L_aux alone (§3.3: the discrete
   decision decoupled from the LM loss, against the paper's account of CE gradients overpowering L_aux,
   "Boundary predictor").
3. **concepts**: every segment's encoder states are mean-pooled and mapped up, c_k = W_up mean_{t in
   S_k} h_t (Eq. 7), then a causal transformer of ``concept_layers`` backbone blocks of width
   ``d_concept`` with ``concept_heads`` heads (Table 3: 16 layers, 3072, 48 heads, 24 KV heads) and a
   final norm: Z = M(C). ``smoothing``: S(Z) of the paper is unspecified (open 2); ``ema`` is H-Net's
   dechunk EMA (dc.py:239-313) over concepts, z~_j = p_j z_j + (1 - p_j) z~_{j-1} with p_j the boundary
   probability of segment j's first token, clamped to [1e-4, 1 - 1e-4] (H-Net); ``none`` is Z itself.
4. **decoder**: a cross-attention block from tokens to concepts ("Pipeline": Psi(H, Z~) =
   softmax(QK^T / sqrt(d_head) + M) V W_O + H, Q from the tokens, K, V from the concepts, RMSNorm on Q and
   K per head, Eq. 16; then an MLP of the token width, Table 3 "Interm. Size (Cross)"), then the
   remaining ``decoder_layers`` backbone blocks, the final norm and the LM head.
   ``decoder_skip``: Psi's "+ H" is an identity ("Pipeline"), so the decoder's causal self-attention blocks get
   the whole token stream and the concepts of completed segments add nothing it lacks (segments before
   j(t) are tokens it already attends to): trained that way at the embedded scale the concept path goes
   unused (the mechanism checks' zero / null_only / swap within 0.001 nats). ``zero_proj`` replaces the
   first cross block's "+ H" by W_r H with W_r zero-initialised, H-Net's ``residual_proj`` (hnet.py:106-109,
   the decoder input dechunk_out * STE + residual_proj(encoder_out)): at init the decoder reads the
   concepts alone and the token skip opens as W_r learns. Measured at the embedded shape (d 64, d_concept
   128, 2 concept layers, R 4, batch 8 x 256, 300 steps, seed 0): zero / null_only rise from 0.001 to 0.09
   nats but swap stays 0.002 and the test NLL is 0.3 nats worse (2.77 vs 2.47): the decoder then reads the
   path as a near-constant input (the concepts' values vary 8% of their norm), not their content; the
   default stays the paper's identity.
   ``cross_positions``: Psi has no position term, so a token can tell its most recent concept from older
   ones by content only (the count weighting below favours long segments, not recent ones). ``rotary``
   (ours; unspecified in the paper, open 4) applies RoPE to Q at the token's position and to each replicated key at its
   copy's position (Eq. 17 puts the copies at token positions), so the scores can depend on how far back a
   concept's segment lies. At the embedded shape and 600 steps it turns the unused path into a used one in 2
   of 3 seeds (swap +0.022 / +0.066 / +0.002 nats; with ``zero_proj`` +0.24-0.26 at a 0.15-nat worse test
   NLL); ``config/diagnostics.yaml`` has the rows. Off (null) by default.

``null_concept: first_segment`` shows the null to the first segment's tokens only (they see no concept yet); the
later tokens attend over real concepts alone, as Psi, which has no null (``mask`` attention only: replication's
causal attention sees the null's copies at the first segment's positions). At the embedded shape the path stays
idle with it too (``config/diagnostics.yaml``, ``dlcm_s_null1``): the null is not where the decoder parks it.

**Causality rule of the decoder's cross-attention.** Token t (in segment j(t), counted from 0) sees the
concepts j < j(t), and a learned null concept (row 0 of the key/value sequence, so segment 0 attends to
something). Equivalently: token t sees concept j iff every token of segment j is at or before t AND the
boundary that closes segment j (b at the first token of segment j + 1) is at or before t. The second
half is what makes it causal: a segment ending exactly at t is closed by b_{t+1}, which depends on token
t + 1 (the target of position t), and its mean pools every token of the segment; a token may therefore
never see its own segment's concept (open 5: the paper's "j <= j(t)" with mean pooling leaks the
target). Both the values (concept j depends on tokens <= the end of segment j < t) and the mask (which
depends on b_{<=t}) are functions of tokens <= t. In eval mode the concept axis is padded to the input
length, so the shapes of every computation are those of the input too and the logits at <= t are bit-
identical whatever follows t; training pads to the batch's largest concept count (equal to float rounding).

**Concept replication** ("Concept replication", Eq. 17): K, V of the null + M concepts are gathered to
the T token positions -- position i holds the concept before its own segment, concept j(i) - 1 (the null
for segment 0) -- and one causal T x T attention (``F.scaled_dot_product_attention(is_causal=True)``,
the kernels the paper runs as FlashAttention varlen) gives each token exactly the visible set above.
Under a causal mask concept j appears once per replicated position at or before t, so its softmax
weight is multiplied by that count: replication computes softmax_j(q.k_j / sqrt(d) + log n_tj) v_j with
n_tj = #{i <= t : j(i) - 1 = j}, a segment-length-weighted cross-attention (open 6), not
Psi's plain cross-attention over M concepts. ``decoder_attention: mask`` is the explicit reference:
cross-attention over the null + M concepts with the bias log n_tj (-inf where n_tj = 0: the mask), equal
to replication in values and gradients (``tests/models/test_dlcm_model``); with ``concept_weighting: uniform`` it is
Psi's plain masked cross-attention (bias 0 / -inf), which replication cannot express.

**Compression loss** ("Global Parser", Eq. 10; H-Net utils/train.py:13-40): L_aux = R / (R - 1) [(R - 1)
F G + (1 - F)(1 - G)] - 1 with F the fraction of boundaries (not differentiable) and G the mean p
(differentiable), minimal (0) at F = G = 1 / R; the model returns lambda L_aux as loss ``aux``. ``parser:
global`` (Table 4's Global Parser): F and G over the whole batch: ``all_reduce_parser_stats`` sums them
over the data-parallel ranks (torch.distributed, when initialised) and ``ParserStats.window()`` adds up
the micro-batches of an optimizer step. The value is the global one; G's gradient is the local mean's,
which DDP's gradient average and the trainer's 1/accum turn into the global mean's. A micro-batch only
sees the micro-batches before it (F is exact on the step's last one): the statistics of later
micro-batches do not exist yet when an earlier one runs backward. ``parser: sequence`` (Table 4's
"Normal"): F, G and L_aux per sequence, averaged. Metrics: ``ratio`` (realised tokens per concept),
``boundary_rate`` (F), ``boundary_prob`` (G), its standard deviation and ``boundary_prob_mid`` (the
share of p in [0.4, 0.6]: H-Net issue 17's p hovering at 0.5), ``aux_raw`` (L_aux before lambda).

**Decoupled muP** ("Decoupled muP", §6.1). With ``mup_base_width`` = d_base: s_token = d_model / d_base,
s_concept = d_concept / d_base. Hidden matrices (every matrix except the embeddings and the head) start
with variance sigma^2 / s (std ``init_std`` / sqrt(s)) and train with the learning rate eta / s of their
width; embeddings (``wte``, ``wpe``, the untied head, the null concept) and every vector (biases, norm
gains) keep eta ("Decoupled muP": embeddings and biases at a fixed eta); the logits are (h W_unemb^T) /
s_token; AdamW's eps is divided by s in the scaled groups. Token components (encoder, router, decoder) use
s_token and eta_base^token; the concept backbone s_concept and eta_base^concept = ``mup_concept_lr_ratio``
x eta_base^token (§6.1.2: about equal). The two matrices between the widths are assigned by
``mup_bridge``: ``fan_in`` (default: muP's Adam rule, eta and sigma^2 proportional to 1 / fan-in) puts
W_up (d_token -> d_concept) with the token groups and the cross-attention's K/V (d_concept -> heads) with
the concept groups; ``module`` puts W_up with the backbone and K/V with the decoder, as §6.1 lists
modules. ``param_groups(base_lr, weight_decay)`` returns the optimizer groups (``lr_mult`` = the group's
multiplier on the scheduled LR). Without ``mup_base_width`` both s are 1: the backbone's init, no logit
scale, every group at base_lr.

Not modelled (recorded here): the scaling law (Eq. 22; its P, the concept backbone's share of the
parameters, is not a field), packed varlen training (the window is one sequence), FlashAttention varlen
itself (SDPA's kernels stand in), the decay law. KV-cached decoding: generation recomputes the forward.
"""
from __future__ import annotations

import contextlib
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from models.blocks import MLP, Block, Rotary, init_weights, make_norm
from models.configs import matrix_params
from models.kernels import Linear
from models.losses import linear_cross_entropy
from models.token_lm import TokenLM, token_lm_flops_per_token

P_CLAMP = 1e-6      # p clamped to [P_CLAMP, 1 - P_CLAMP] before its logit (sharpening)
EMA_CLAMP = 1e-4    # H-Net dc.py: the EMA's p clamped to [1e-4, 1 - 1e-4]

# --- boundaries ----------------------------------------------------------------------------------------


class BoundaryRouter(nn.Module):
    """p_t = (1 - cos(q_{t-1}, k_t)) / 2 for t >= 1, p_0 = 1 ("Boundary predictor"; H-Net dc.py:84-101).
    ``learned``: q = W_q h, k = W_k h, bias-free, identity at init (H-Net dc.py:50-59, kept by
    ``reset_parameters``); rule: q = k = h."""

    def __init__(self, d_model: int, d_scan: int, learned: bool):
        super().__init__()
        self.q = Linear(d_model, d_scan, bias=False) if learned else None
        self.k = Linear(d_model, d_scan, bias=False) if learned else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.q is not None:
            with torch.no_grad():
                nn.init.eye_(self.q.weight)
                nn.init.eye_(self.k.weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        q, k = (self.q(h), self.k(h)) if self.q is not None else (h, h)
        cos = F.cosine_similarity(q[:, :-1], k[:, 1:], dim=-1)
        p = ((1 - cos) / 2).clamp(0.0, 1.0)
        return torch.cat([p.new_ones(p.shape[0], 1), p], dim=1)


def sharpen(p: torch.Tensor, tau, alpha: float) -> torch.Tensor:
    """Training's temperature-sharpened probability p~ = sigmoid((logit p - logit tau) / alpha) (§3.3;
    p clamped to [P_CLAMP, 1 - P_CLAMP]): 1/2 at p = tau, the threshold [p >= tau] as alpha -> 0."""
    pc = p.clamp(P_CLAMP, 1 - P_CLAMP)
    tau = torch.as_tensor(tau, dtype=pc.dtype, device=pc.device)
    return torch.sigmoid((torch.logit(pc) - torch.logit(tau)) / alpha)


def segment_ids(b: torch.Tensor) -> torch.Tensor:
    """Segment index of every token, (B, T) long: b_t = 1 opens a new segment; b_0 must be 1."""
    return b.long().cumsum(1) - 1


def visible_counts(seg: torch.Tensor, n_rows: int) -> torch.Tensor:
    """n[b, t, r] (float): how many key positions i <= t hold row r of [null, concept 0, concept 1, ...]
    under replication (position i holds row seg(i), i.e. concept seg(i) - 1): > 0 exactly for the rows a
    token sees (the null and the concepts before its own segment), and the weight replication gives them."""
    return F.one_hot(seg, n_rows).to(torch.float32).cumsum(1)


# --- compression loss ------------------------------------------------------------------------------------
def all_reduce_parser_stats(stats: torch.Tensor) -> torch.Tensor:
    """The Global Parser's synchronisation hook ("Global Parser": AllReduce-synced): the (detached) statistics summed
    over the data-parallel ranks when torch.distributed is initialised, else as given. Every rank runs
    the same forwards under DDP, so the collective matches up; eval-mode forwards never call it."""
    if dist.is_available() and dist.is_initialized():
        stats = stats.clone()
        dist.all_reduce(stats)
    return stats


class ParserStats:
    """The Global Parser's accumulation over the micro-batches of one optimizer step ("Global Parser":
    accumulated micro-batches). Inside ``window()`` every training forward adds its (all-reduced) sums of boundaries,
    probabilities and tokens and its loss uses the running total; outside it each forward's statistics
    stand alone. The trainer opens one window per optimizer step: ``with model.parser_stats.window(): ...``."""

    def __init__(self):
        self.open, self.sums = False, None

    @contextlib.contextmanager
    def window(self):
        self.open, self.sums = True, None
        try:
            yield self
        finally:
            self.open, self.sums = False, None

    def add(self, stats: torch.Tensor) -> torch.Tensor:
        if not self.open:
            return stats
        self.sums = stats if self.sums is None else self.sums + stats
        return self.sums


def ratio_loss(f: torch.Tensor, g: torch.Tensor, ratio: float) -> torch.Tensor:
    """L_aux = R/(R-1) [(R-1) F G + (1-F)(1-G)] - 1 (Eq. 10: H-Net's load_balancing_loss minus 1)."""
    return ratio / (ratio - 1) * ((ratio - 1) * f * g + (1 - f) * (1 - g)) - 1


def compression_loss(p: torch.Tensor, b: torch.Tensor, ratio: float, parser: str, sync=None) -> torch.Tensor:
    """L_aux of probabilities p and decisions b (B, T). ``sequence``: per sequence, averaged. ``global``:
    F and G over the batch; ``sync`` maps the local sums [boundaries, probabilities, tokens] to the global
    ones (all-reduce, micro-batch accumulation); the value uses the global G, the gradient the local mean."""
    bf = b.to(p.dtype)
    if parser == "sequence":
        return ratio_loss(bf.mean(1), p.mean(1), ratio).mean()
    local = torch.stack([bf.sum(), p.detach().sum(), p.new_tensor(float(p.numel()))])
    total = sync(local) if sync is not None else local
    g_local = p.mean()
    g = g_local + (total[1] / total[2] - g_local).detach()
    return ratio_loss(total[0] / total[2], g, ratio)


# --- decoder cross-attention -------------------------------------------------------------------------------
class ConceptCrossAttention(nn.Module):
    """Causal cross-attention from tokens (d_token) to [null, concepts] (d_concept) with RMSNorm on Q and K
    per head (Eq. 16). ``replicate``: K, V gathered to the token positions and causal SDPA (Eq. 17);
    ``mask``: the explicit reference over the concept rows (module docstring)."""

    def __init__(self, d_model: int, d_concept: int, n_head: int, n_kv_head: int, bias: bool, dropout: float,
                 eps: float, mode: str, weighting: str, rotary: Rotary | None = None, null_first_only: bool = False):
        super().__init__()
        self.rotary, self.null_first_only = rotary, null_first_only
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, d_model // n_head
        self.q = Linear(d_model, d_model, bias=bias)
        self.kv = Linear(d_concept, 2 * n_kv_head * self.head_dim, bias=bias)
        self.q_norm, self.k_norm = nn.RMSNorm(self.head_dim, eps=eps), nn.RMSNorm(self.head_dim, eps=eps)
        self.proj = Linear(d_model, d_model, bias=bias)
        self.dropout, self.mode, self.weighting = dropout, mode, weighting

    def forward(self, x: torch.Tensor, z: torch.Tensor, seg: torch.Tensor) -> torch.Tensor:
        """x (B, T, d_token) token states, z (B, R, d_concept) rows [null, concept 0, ...], seg (B, T)."""
        b, t, d = x.shape
        q = self.q_norm(self.q(x).view(b, t, self.n_head, self.head_dim)).transpose(1, 2)
        k, v = self.kv(z).view(b, z.shape[1], 2, self.n_kv_head, self.head_dim).unbind(2)
        k, v = self.k_norm(k).transpose(1, 2), v.transpose(1, 2)             # (B, kv heads, R, head dim)
        dropout, gqa = self.dropout if self.training else 0.0, self.n_kv_head != self.n_head
        if self.mode == "replicate":  # position i holds row seg(i): the concept before its own segment
            index = seg[:, None, :, None].expand(b, self.n_kv_head, t, self.head_dim)
            k = k.gather(2, index)
            if self.rotary is not None:  # the query at its token position, each copy of a key at its own
                q, k = self.rotary(q), self.rotary(k)
            y = F.scaled_dot_product_attention(q, k, v.gather(2, index), is_causal=True,
                                               dropout_p=dropout, enable_gqa=gqa)
        else:
            counts = visible_counts(seg, z.shape[1]).to(q.dtype)
            if self.null_first_only:  # the null for the first segment's tokens only (model.null_concept)
                counts[..., 0] *= seg == 0
            bias = counts.log() if self.weighting == "count" else torch.zeros_like(counts).masked_fill(
                counts == 0, float("-inf"))
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias[:, None], dropout_p=dropout, enable_gqa=gqa)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class CrossBlock(nn.Module):
    """x + gate * Psi(norm(x), Z~) then x + MLP(norm(x)) (the paper's Psi with its "+ H"; Table 3's cross MLP). With
    ``skip`` (``decoder_skip: zero_proj``, first block only) the "+ x" is W_r x, W_r zero-initialised (H-Net
    hnet.py:106-109's residual_proj): at init the decoder reads the concepts alone, the token skip opens as
    W_r learns."""

    def __init__(self, cfg, skip: bool = False):
        super().__init__()
        self.skip = Linear(cfg.d_model, cfg.d_model, bias=False) if skip else None
        self.ln1 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
        self.attn = ConceptCrossAttention(cfg.d_model, cfg.concept_width, cfg.n_head, cfg.n_kv_head or cfg.n_head,
                                          cfg.bias, cfg.dropout, cfg.norm_eps, cfg.decoder_attention,
                                          cfg.concept_weighting,
                                          Rotary(cfg.d_model // cfg.n_head, 1.0, cfg.rotary_base, cfg.seq_len)
                                          if cfg.cross_positions == "rotary" else None,
                                          cfg.null_concept == "first_segment")
        self.ln2 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
        self.mlp = MLP(cfg.d_model, cfg.mlp_hidden or cfg.mlp_ratio * cfg.d_model, cfg.bias, cfg.activation)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, z, seg, gate=None):
        y = self.drop(self.attn(self.ln1(x), z, seg))
        x = (x if self.skip is None else self.skip(x)) + (y if gate is None else gate * y)
        return x + self.drop(self.mlp(self.ln2(x)))


def ema_smooth(z: torch.Tensor, p_start: torch.Tensor) -> torch.Tensor:
    """H-Net's dechunk EMA over concepts: z~_j = p_j z_j + (1 - p_j) z~_{j-1}, z~_0 = p_0 z_0, computed as
    z~_j = sum_{i<=j} p_i prod_{i<k<=j} (1 - p_k) z_i (one batched product; p clamped as H-Net)."""
    p = p_start.clamp(EMA_CLAMP, 1 - EMA_CLAMP)
    a = torch.log1p(-p).cumsum(1)                                        # (B, M)
    diff = a[:, :, None] - a[:, None, :]                                 # A_j - A_i
    lower = torch.ones(z.shape[1], z.shape[1], dtype=torch.bool, device=z.device).tril()
    weights = diff.masked_fill(~lower, float("-inf")).exp() * p[:, None, :]
    return weights.to(z.dtype) @ z


# --- the model ---------------------------------------------------------------------------------------------
class DLCM(TokenLM):
    """Encoder (``blocks[:n_encoder]``), router, concept backbone, cross-attention decoder
    (``cross_blocks`` + ``blocks[n_encoder:]``), final norm and head (``TokenLM``'s embedding and head)."""

    # Mechanism checks (``evals.mechanisms``; the decoder's cross-attention, Eq. 16-17): a callable (z, seg,
    # gate) -> what every cross block reads in their place (the concept rows, the segment ids that pick the
    # visible rows, the factor on the cross-attention output); None, the default, leaves ``run`` as it is.
    intervention = None

    def __init__(self, cfg):
        super().__init__(cfg)  # embeddings, the n_layer token blocks (encoder + decoder), ln_f, lm_head
        dc, heads = cfg.concept_width, cfg.concept_n_head
        self.n_encoder = cfg.n_layer - cfg.n_decoder
        self.router = BoundaryRouter(cfg.d_model, cfg.scan_width, cfg.boundary_predictor == "learned")
        self.up = Linear(cfg.d_model, dc, bias=cfg.bias)                             # W_up (Eq. 7)
        rotary = (Rotary(dc // heads, cfg.rotary_pct, cfg.rotary_base, cfg.seq_len, cfg.rope_scaling)
                  if cfg.positional == "rotary" else None)  # concept index positions; GPT-2: none (pooled wpe)
        self.concept_blocks = nn.ModuleList(
            Block(dc, heads, cfg.concept_hidden, bias=cfg.bias, dropout=cfg.dropout, activation=cfg.activation,
                  norm_eps=cfg.norm_eps, parallel_residual=cfg.parallel_residual, rotary=rotary, norm=cfg.norm,
                  n_kv_head=cfg.concept_n_kv_head) for _ in range(cfg.concept_depth))
        self.concept_norm = make_norm(cfg.norm, dc, cfg.norm_eps, cfg.bias)
        self.null_concept = nn.Parameter(torch.zeros(1, dc))   # what segment 0 attends to (ours, the shift's row 0)
        self.cross_blocks = nn.ModuleList(CrossBlock(cfg, skip=i == 0 and cfg.decoder_skip == "zero_proj")
                                          for i in range(cfg.n_cross))
        self.parser_stats = ParserStats()
        if cfg.boundary_calibration == "quantile":  # checkpointed with the weights; used as is at inference
            self.register_buffer("tau", torch.tensor(float(cfg.boundary_threshold)))
            self.register_buffer("tau_updates", torch.tensor(0, dtype=torch.long))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The backbone's init (N(0, init_std), residual projections by each stream's depth when
        ``scale_residual_init``: token stream n_layer + cross blocks, concept stream concept_layers; ours),
        the router at the identity, and under muP every hidden matrix's std divided by sqrt(s) of its group."""
        cfg = self.cfg
        init_weights(self, cfg.init_std, cfg.n_layer + cfg.n_cross if cfg.scale_residual_init else None)
        init_weights(self.concept_blocks, cfg.init_std, cfg.concept_depth if cfg.scale_residual_init else None,
                     root=self)
        self.router.reset_parameters()
        if cfg.mup_base_width:
            with torch.no_grad():
                for name, p in self.named_parameters():
                    group = self.mup_group(name, p)
                    if group in ("token", "concept") and not name.startswith("router."):
                        p.mul_(1 / math.sqrt(cfg.s_token if group == "token" else cfg.s_concept))
        if self.cross_blocks[0].skip is not None:  # H-Net's residual_proj: zero at init (hnet.py:106-109)
            nn.init.zeros_(self.cross_blocks[0].skip.weight)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight

    # --- stages ----------------------------------------------------------------------------------------
    def token_mask(self, t: int, device) -> torch.Tensor | None:
        """The token blocks' attention mask: None (causal over the window, the paper), or with
        ``token_window`` w the band where query i sees keys i - w + 1 .. i."""
        w = self.cfg.token_window
        if w is None or w >= t:
            return None
        i = torch.arange(t, device=device)
        return (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < w)

    def encode(self, idx: torch.Tensor) -> torch.Tensor:
        """H = E(x): embeddings through the encoder blocks, (B, T, d_model)."""
        x, mask = self.embed(idx), self.token_mask(idx.shape[1], idx.device)
        for block in self.blocks[:self.n_encoder]:
            x = block(x, mask)
        return x

    def threshold(self) -> torch.Tensor | float:
        """tau: ``boundary_threshold``, or the calibrated running quantile (``boundary_calibration: quantile``)."""
        return self.tau if self.cfg.boundary_calibration == "quantile" else self.cfg.boundary_threshold

    @torch.no_grad()
    def calibrate(self, p: torch.Tensor) -> None:
        """One training update of the calibrated tau: the quantile of p (positions >= 1) above which a
        window of T tokens opens T / R segments (p_0 = 1 always opens one), blended into the running value
        with ``calibration_momentum`` (the first update takes it whole). Under DDP the trainer's buffer
        broadcast keeps rank 0's value on every rank."""
        t = p.shape[1]
        share = min(max((t / self.cfg.target_ratio - 1) / max(t - 1, 1), 0.0), 1.0)  # boundaries among t >= 1
        q = torch.quantile(p[:, 1:].detach().float().flatten(), 1.0 - share)
        m = 1.0 if int(self.tau_updates) == 0 else self.cfg.calibration_momentum
        self.tau.mul_(1 - m).add_(m * q.to(self.tau.dtype))
        self.tau_updates.add_(1)

    def samples(self) -> bool:
        """Whether training draws b from the sharpened Bernoulli (learned router, temperature > 0)."""
        return self.cfg.boundary_predictor == "learned" and self.cfg.boundary_temperature > 0

    def decide(self, p: torch.Tensor, forced: torch.Tensor | None = None,
               sample: bool | None = None,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(b, c): boundaries (bool, b_0 = 1) and the probability of each decision taken (for the STE).
        Training with the learned router samples from the sharpened p~ (``sharpen``); otherwise b = [p >=
        tau]. ``sample`` overrides the mode's choice (the boundaries evaluation's training rule, drawn with
        ``generator``); ``forced`` (bool (B, T)) replaces the decisions (analysis and tests)."""
        cfg = self.cfg
        tau = self.threshold()
        if sample if sample is not None else (self.training and self.samples()):
            p_s = sharpen(p, tau, cfg.boundary_temperature)
            b = torch.rand(p_s.shape, generator=generator, device=p_s.device, dtype=p_s.dtype) < p_s
        else:
            p_s, b = p, p >= tau
        if forced is not None:
            b = forced.to(torch.bool)
        b = torch.cat([torch.ones_like(b[:, :1]), b[:, 1:]], dim=1)
        return b, torch.where(b, p_s, 1 - p_s)

    def concepts(self, h: torch.Tensor, p: torch.Tensor, b: torch.Tensor, seg: torch.Tensor, m: int) -> torch.Tensor:
        """Rows [null, z~_0, ..., z~_{m-1}] (B, m + 1, d_concept): mean-pooled segments, W_up, the concept
        blocks, the concept norm and the smoothing. Rows past a sequence's last concept are padding
        (zero means; never visible)."""
        bsz, _, d = h.shape
        index = seg[..., None].expand(-1, -1, d)
        sums = h.new_zeros(bsz, m, d).scatter_add(1, index, h)
        counts = h.new_zeros(bsz, m).scatter_add(1, seg, torch.ones_like(p, dtype=h.dtype))
        z = self.up(sums / counts.clamp_min(1)[..., None])
        for block in self.concept_blocks:
            z = block(z)
        z = self.concept_norm(z)
        if self.cfg.smoothing == "ema":
            z = ema_smooth(z, p.new_zeros(bsz, m).scatter_add(1, seg, p * b.to(p.dtype)))
        return torch.cat([self.null_concept.to(z.dtype).expand(bsz, 1, -1), z], dim=1)

    def run(self, idx: torch.Tensor, boundaries: torch.Tensor | None = None) -> dict:
        """Every stage: {"h" final normalised states (before the muP logit scale), "p", "b", "seg"}."""
        cfg = self.cfg
        h = self.encode(idx)
        p = self.router(h)
        if self.training and cfg.boundary_calibration == "quantile":
            self.calibrate(p)
        p_lm = p if cfg.router_lm_gradient else p.detach()  # p as the LM loss sees it (STE gate, EMA)
        b, chosen = self.decide(p_lm, boundaries)
        seg = segment_ids(b)
        # eval: pad the concept axis to the input length (shapes independent of later tokens: bit-exact
        # causality); training: to the batch's largest concept count
        m = idx.shape[1] if not self.training else int(seg[:, -1].max()) + 1
        z = self.concepts(h, p_lm, b, seg, m)
        gate = ((chosen - chosen.detach()) + 1)[..., None].to(h.dtype) if self.training else None  # STE: exactly 1
        read = (z, seg, gate) if self.intervention is None else self.intervention(z, seg, gate)
        x, mask = h, self.token_mask(idx.shape[1], idx.device)
        decoder = list(self.blocks[self.n_encoder:])
        if cfg.cross_layers == "first":
            x = self.cross_blocks[0](x, *read)
            for block in decoder:
                x = block(x, mask)
        else:
            for i, cross in enumerate(self.cross_blocks):
                x = cross(x, *read)
                if i < len(decoder):
                    x = decoder[i](x, mask)
        return {"h": self.ln_f(x), "p": p, "b": b, "seg": seg}

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        return self.run(idx)["h"]

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None,
                boundaries: torch.Tensor | None = None) -> dict:
        """As ``TokenLM.forward`` (targets < 0 are not scored), with ``aux`` = lambda L_aux and the boundary
        metrics; ``boundaries`` (bool (B, T)) forces the segmentation (b_0 is always 1)."""
        cfg = self.cfg
        out = self.run(idx, boundaries)
        h, p, b = out["h"], out["p"], out["b"]
        if cfg.s_token != 1.0:
            h = h / cfg.s_token  # muP: logits = h W_unemb^T / s_token
        if targets is None:
            return {"logits": self.lm_head(h)}
        h, flat = h.flatten(0, 1), targets.flatten()
        if bool((flat < 0).any()):
            keep = flat >= 0
            h, flat = h[keep], flat[keep]
        sync = (lambda s: self.parser_stats.add(all_reduce_parser_stats(s))) if self.training else None
        aux = compression_loss(p, b, cfg.target_ratio, cfg.parser, sync)
        return {"losses": {"ntp": linear_cross_entropy(h, self.lm_head.weight, flat), "aux": cfg.aux_weight * aux},
                "metrics": boundary_metrics(p, b, aux)}

    # --- decoupled muP -------------------------------------------------------------------------------
    def mup_group(self, name: str, p: torch.Tensor) -> str:
        """``embeddings`` (wte, wpe, head, null concept), ``vectors`` (biases, gains), ``token`` or ``concept``."""
        if name.split(".")[0] in ("wte", "wpe", "lm_head", "null_concept"):
            return "embeddings"
        if p.dim() < 2:
            return "vectors"
        if name.startswith(("concept_blocks.", "concept_norm.")):
            return "concept"
        bridge = self.cfg.mup_bridge == "fan_in"
        if name.startswith("up."):
            return "token" if bridge else "concept"
        if name.startswith("cross_blocks.") and ".attn.kv." in name:
            return "concept" if bridge else "token"
        return "token"

    def param_groups(self, base_lr: float, weight_decay: float, eps: float | None = None) -> list[dict]:
        """AdamW parameter groups of decoupled muP (module docstring): ``token`` lr base_lr / s_token,
        ``concept`` lr mup_concept_lr_ratio x base_lr / s_concept, ``embeddings`` and ``vectors`` base_lr;
        weight decay on matrices (embeddings included, as ``trainer.train.make_optimizer``), none on
        vectors. Each group carries ``name``, ``lr_mult`` (lr / base_lr, for a scheduler that sets
        lr = schedule x lr_mult) and ``width_mult``; with ``eps``, the scaled groups get eps / s."""
        cfg = self.cfg
        mult = {"token": (1 / cfg.s_token, cfg.s_token), "embeddings": (1.0, 1.0), "vectors": (1.0, 1.0),
                "concept": (cfg.mup_concept_lr_ratio / cfg.s_concept if cfg.mup_base_width else 1.0, cfg.s_concept)}
        members: dict[str, list] = {name: [] for name in mult}
        seen = set()
        for name, p in self.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                members[self.mup_group(name, p)].append(p)
        groups = []
        for name, params in members.items():
            if params:
                lr_mult, width = mult[name]
                group = {"name": name, "params": params, "lr": base_lr * lr_mult, "lr_mult": lr_mult,
                         "width_mult": width, "weight_decay": 0.0 if name == "vectors" else weight_decay}
                if eps is not None:
                    group["eps"] = eps / width
                groups.append(group)
        return groups


def boundary_metrics(p: torch.Tensor, b: torch.Tensor, aux: torch.Tensor) -> dict[str, float]:
    """Realised compression and boundary statistics of one forward (floats, one device sync)."""
    bf = b.to(p.dtype).detach()
    pd = p.detach()
    inner = pd[:, 1:] if pd.shape[1] > 1 else pd
    values = torch.stack([bf.numel() / bf.sum(), bf.mean(), pd.mean(), inner.std(unbiased=False),
                          ((inner >= 0.4) & (inner <= 0.6)).to(pd.dtype).mean(), aux.detach()]).tolist()
    return dict(zip(("ratio", "boundary_rate", "boundary_prob", "boundary_prob_std", "boundary_prob_mid",
                     "aux_raw"), values))


def dlcm_flops_per_token(cfg) -> float:
    """Training FLOPs per token (``token_lm_flops_per_token``'s convention, 6 N_matmul + 12 L d T) at the
    target ratio R: the n_layer token blocks and the head; the router (learned only); each cross block
    per token (its token-width matrices, 12 d T for attention over the T replicated keys) and per concept
    (its K/V on d_concept); per concept, W_up and the concept blocks (6 x weights + 12 d_concept T / R
    each). Pooling, norms, the EMA and the loss's softmax are left out."""
    d, t, r, m = cfg.d_model, cfg.seq_len, cfg.target_ratio, matrix_params(cfg)
    cross = 6.0 * m["cross_token"] + cfg.n_cross * 12.0 * d * t + 6.0 * m["cross_kv"] / r
    concept = (6.0 * (m["up"] + m["concept"]) + cfg.concept_depth * 12.0 * cfg.concept_width * t / r) / r
    return token_lm_flops_per_token(cfg) + 6.0 * m["router"] + cross + concept
