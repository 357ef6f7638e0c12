"""NCM stage 1: the multi-scale residual tokenizer of Next-Concept Modeling (Kumbong et al., arXiv 2610.14162).

Text x of L tokens becomes K scales of discrete codes, coarse to fine: scale k holds l_k codes, with
l_1 < ... < l_K = L (Sec. 3.2). The paper was not reachable; every statement below comes from a reading
note of it, summarised with the paper's section, equation and appendix numbers (cited here) in
docs/sources.md, "NCM: what the paper specifies", and every operator it leaves open is a switch whose
default is VAR's (FoundationVision/VAR ``models/quant.py``, docs/sources.md, "VAR's quantiser
(FoundationVision/VAR quant.py)", cited "VAR", its item n "VAR n") or marked *ours* (docs/sources.md,
"NCM: what the paper leaves open", lists what is UNKNOWN).

1. encoder (Sec. 3.3: z = E_phi(x) in R^{L x d}): token + learned position embeddings, ``n_layer``
   bidirectional blocks (``models.blocks.Block`` with ``causal=False``), a final norm and a linear map
   down to the code width ``d_code`` (VAR's ``quant_conv``), then (``latent_norm``, *ours*) a LayerNorm
   without affine, so every position of z has unit RMS. Without it the straight-through gradient grows
   z far faster than the codebooks can follow (a 300-step toy: z RMS 2.4 against codes 0.1-0.2, VQ
   loss rising from 0.01 to ~8, 16 % of the codes used; VAR#132 reports the same rise); with it and
   codebooks drawn at ``code_init_std`` 0.3 (*ours*), codes follow and usage doubles.
2. residual quantiser (Sec. 3.3, Eqs. 6-8; VAR ``VectorQuantizer2.forward``): the residual starts as
   the *detached* z. For k = 1..K: u_k = Down_k(residual) (l_k vectors), r_k = the nearest code of
   codebook k (squared L2, no gradient), h_k = R_k(e_k(r_k)) (back to length L), zhat^(k) = zhat^(k-1) + h_k,
   residual -= sg[h_k]. Down_k, R_k are UNKNOWN in NCM; here
   * ``down`` area: average pooling to l_k (``F.interpolate(mode='area')``, VAR) | linear: linear
     interpolation (sampling, no pooling);
   * ``up`` linear: linear interpolation to L (VAR's bicubic has no 1-D form in torch, VAR 1) |
     nearest: each code repeated over its span;
   * then VAR's phi: phi(h) = (1 - ``phi_ratio``) h + ``phi_ratio`` Conv1d_k3(h) (VAR ``Phi``, 0.5), with
     ``phi_share`` convs: 0 one per scale, 1 one for all, n > 1 n convs, scale k taking the conv whose
     tick is nearest to (k-1)/(K-1) (VAR's ``PhiPartiallyShared``; default 4, VAR ``share_quant_resi``).
     ``phi_ratio`` 0 removes it.
   Every Down and R is the identity at length L (VAR: no interpolation at the last scale).
3. codebooks: ``codebook_size`` codes of width ``d_code`` per scale (``shared_codebook`` false: the
   paper's notation e_{k,j}, |V_k|, Sec. 3.2-3.3) or one for all scales (true: VAR, one
   ``nn.Embedding``). ``codebook_sizes`` gives each scale its own |V_k| (the notation allows it; the
   paper's sizes are UNKNOWN): scale k's codes can carry at most l_k ln |V_k| nats, so small coarse
   books force the coarse codes to a low entropy, and the generator's code NLL per window is bounded
   by sum_k l_k ln |V_k| (*ours*, measured in ``docs/ncm_embedded.md``). Learned by gradient, not EMA (VAR). Dead-code
   restarts (*ours*: NCM and VAR say
   nothing; the standard remedy of Jukebox's random restarts and SoundStream / EnCodec's
   ``threshold_ema_dead_code``): in training, an EMA (``dead_code_decay`` 0.99) counts each code's
   assignments per step, and before a scale is quantised every code used less than
   ``dead_code_threshold`` (0.1) x the uniform rate (positions per step / codebook size) takes the value
   of a random vector of that step's Down_k(residual). The counts start at zero, so the first step sets
   the codebook from the data. Without it the embedded tokenizers collapsed: on the L 24, K 6 world
   tokenizer (600 steps) the finest scale used 17 codes (usage perplexity; 9.6 % of 512) and full
   reconstruction stopped at 83 % of tokens.
4. nested dropout (Sec. 3.3: each step randomly truncates the later scales): in training, with
   probability ``nested_dropout`` a sequence is reconstructed from its first k scales only, k uniform in
   1..K, drawn per sequence (*ours*; the paper as read does not say per sequence or per batch). The decoder input
   and the VQ loss then use zhat^(k); codebooks of scales > k get no gradient from that sequence.
   Short runs pay for it: on the embedded world (L 128, K 12, d 64, 300 steps of 16 windows, lr 3e-3)
   exact reconstruction from all K scales reached 26 % with probability 1 and 60 % with 0.5.
5. decoder: zhat (through the straight-through estimator z + sg[zhat - z], VAR; ``straight_through``
   latent) -> linear up to
   ``d_model`` (VAR's ``post_quant_conv``), its own learned positions, ``dec_layers`` bidirectional
   blocks, final norm, a head over the token vocabulary, tied to the encoder's token embedding or not
   (``tie_embeddings``, *ours* untied as the suite's backbones).

   ``straight_through`` scale (*ours*): the estimator is applied per scale instead, to the pooled
   residual u_k = Down_k(z - zhat^(k-1)) whose nearest code is taken, R_k(phi(u_k + sg[e_k - u_k])):
   the decoder input has the same value, but the encoder's gradient passes through Down_k and R_k,
   so it learns what survives pooling to l_k vectors. ``anchored`` (*ours*): the truncated reconstruction
   through the per-scale estimator *and* the full one (all K scales) through the latent estimator, both
   decoded (one batch) and ``rec`` their mean: the truncated term rewards span means that carry the text,
   the full term keeps z informative (alone, the per-scale estimator made z smooth and empty). With the latent estimator
   the gradient of a sequence truncated to k scales lands on each position of z as if z were decoded whole, and the
   coarse scales of the embedded tokenizers carried almost no content (``docs/ncm_embedded.md``).

Losses (Sec. 3.3, Eq. 9, and VAR quant.py:95-97), weighted by ``train.loss_weights``:

* ``rec``: token reconstruction cross-entropy -(1/L) sum_i log p(x_i | zhat^(k)), mean over the batch;
* ``vq``: ``vq_beta`` * MSE(z, sg[zhat]) (commitment, to the encoder) + MSE(sg[z], zhat) (codebooks and
  phi), on the *cumulative* reconstruction. ``vq_scales`` all: averaged over every scale 1..k, as VAR
  sums over scales and divides by their number | last: on zhat^(k) only, Eq. 9 read
  literally. Whether NCM sums over scales is UNKNOWN (VAR 1). beta 0.25: VAR ``vqvae.py`` (NCM's
  beta is UNKNOWN).

Metrics per scale k (1-based): ``usage_pct_s<k>`` codes used in the batch (% of the codebook),
``usage_ppl_s<k>`` usage perplexity exp(H) of the assignments, ``vq_s<k>`` MSE(zhat^(k), z) of the
cumulative reconstruction (VAR logs per-scale usage, VAR#132 the VQ loss); ``rec_acc`` the exact
token accuracy of the reconstruction the decoder was given.

Scale lengths (``length_schedule``, App. F.1: exponential ~ quadratic >> sqrt, log; the
paper's lists are UNKNOWN) are defined by real targets t_k, k = 1..K, u = k / K:

* exponential: t_k = L^u (a constant ratio L^(1/K) between successive scales; VAR's patch sizes grow so);
* quadratic: t_k = L u^2;   * sqrt: t_k = L sqrt(u);   * linear: t_k = L u;
* log: t_k = L ln(1 + k) / ln(1 + K);

rounded to the nearest integer (halves up) and clamped, in order, to [l_{k-1} + 1, L - (K - k)] (l_0 = 0),
which keeps them strictly increasing and ends every schedule at l_K = L (exactly t_K = L). L 128, K 12
(NCM TinyStories / LM1B) exponential: 1 2 3 5 8 11 17 25 38 57 85 128. ``scale_lengths`` gives an
explicit list instead.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from models.blocks import Block, init_weights, make_norm
from models.configs import NCMTokenizerConfig, NCMTransformerFields
from models.losses import linear_cross_entropy


def make_ncm_block(cfg: NCMTransformerFields) -> Block:
    """One pre-norm block with the config's conventions (learned positions: no rotary)."""
    return Block(cfg.d_model, cfg.n_head, cfg.mlp_ratio * cfg.d_model, bias=cfg.bias, dropout=cfg.dropout,
                 activation=cfg.activation, norm_eps=cfg.norm_eps, parallel_residual=False, rotary=None,
                 norm=cfg.norm)


def resample(x: torch.Tensor, length: int, mode: str) -> torch.Tensor:
    """(B, T, d) -> (B, length, d) along the sequence: ``area`` (average pooling), ``linear`` or
    ``nearest``; the identity when T == length."""
    if x.shape[1] == length:
        return x
    kwargs = {"align_corners": False} if mode == "linear" else {}
    mode = "nearest-exact" if mode == "nearest" else mode
    return F.interpolate(x.transpose(1, 2), size=length, mode=mode, **kwargs).transpose(1, 2)


class Phi(nn.Module):
    """VAR's phi refinement, 1-D: (1 - r) h + r Conv1d_k3(h) on (B, L, d), zero padding. The
    convolution runs as one matmul over the concatenated neighbours [h_{t-1}, h_t, h_{t+1}] (the same
    numbers as ``self.conv``; 5x faster than oneDNN's conv1d at d_code 16 on CPU)."""

    def __init__(self, d: int, ratio: float):
        super().__init__()
        self.ratio = ratio
        self.conv = nn.Conv1d(d, d, kernel_size=3, padding=1)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        p = F.pad(h, (0, 0, 1, 1))
        window = torch.cat([p[:, :-2], p[:, 1:-1], p[:, 2:]], -1)
        w = self.conv.weight.permute(0, 2, 1).flatten(1)  # (out, 3 in): tap-major, as window
        return (1 - self.ratio) * h + self.ratio * F.linear(window, w, self.conv.bias)


def phi_assignment(n_scales: int, share: int) -> list[int]:
    """Index of the phi conv each scale uses: ``share`` 0 one per scale, 1 one for all, n > 1 the conv
    whose tick is nearest to k / (K - 1) for 0-based scale k (VAR ``PhiPartiallyShared``: ticks
    linspace(1/(3n), 1 - 1/(3n), n) for n = 4, else linspace(1/(2n), 1 - 1/(2n), n))."""
    if share == 0:
        return list(range(n_scales))
    if share == 1:
        return [0] * n_scales
    n = share
    edge = 1 / (3 * n) if n == 4 else 1 / (2 * n)
    ticks = torch.linspace(edge, 1 - edge, n)
    return [int((ticks - (k / (n_scales - 1) if n_scales > 1 else 0.0)).abs().argmin()) for k in range(n_scales)]


class NCMTokenizer(nn.Module):
    """Encoder, multi-scale residual quantiser and decoder (module docstring)."""

    def __init__(self, cfg: NCMTokenizerConfig):
        super().__init__()
        self.cfg = cfg
        self.lengths = cfg.lengths
        d, dc, V = cfg.d_model, cfg.d_code, cfg.vocab_size
        self.wte = nn.Embedding(V, d)
        self.wpe = nn.Embedding(cfg.seq_len, d)
        self.encoder = nn.ModuleList(make_ncm_block(cfg) for _ in range(cfg.n_layer))
        self.enc_norm = make_norm(cfg.norm, d, cfg.norm_eps, cfg.bias)
        self.to_code = nn.Linear(d, dc, bias=cfg.bias)
        self.codebooks = nn.ModuleList(nn.Embedding(v, dc)
                                       for v in (cfg.sizes[:1] if cfg.shared_codebook else cfg.sizes))
        self.phi_index = phi_assignment(cfg.K, cfg.phi_share)
        self.phis = nn.ModuleList(Phi(dc, cfg.phi_ratio) for _ in range(max(self.phi_index) + 1)) \
            if cfg.phi_ratio > 0 else nn.ModuleList()
        self.from_code = nn.Linear(dc, d, bias=cfg.bias)
        self.dec_wpe = nn.Embedding(cfg.seq_len, d)
        self.decoder = nn.ModuleList(make_ncm_block(cfg) for _ in range(cfg.decoder_layers))
        self.dec_norm = make_norm(cfg.norm, d, cfg.norm_eps, cfg.bias)
        self.lm_head = nn.Linear(d, V, bias=False)
        init_weights(self, cfg.init_std, None)  # then each stack's output projections by its own depth
        init_weights(self.encoder, cfg.init_std, cfg.n_layer, root=self)
        init_weights(self.decoder, cfg.init_std, cfg.decoder_layers, root=self)
        for book in self.codebooks:
            nn.init.normal_(book.weight, std=cfg.code_init_std)
        # EMA of the assignments per step of every code (dead-code restarts, 3.); zero: the first training
        # step restarts every code from the data
        self.register_buffer("code_usage", torch.zeros(len(self.codebooks), max(cfg.sizes)))
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight

    # --- the pieces -----------------------------------------------------------------------------
    def codebook(self, k: int) -> nn.Embedding:
        """Codebook of 0-based scale k."""
        return self.codebooks[0 if self.cfg.shared_codebook else k]

    def embed_codes(self, codes: torch.Tensor, k: int) -> torch.Tensor:
        """R_k(e_k(r_k)): codes (B, l_k) of 0-based scale k -> their contribution (B, L, d_code)."""
        h = resample(self.codebook(k)(codes), self.cfg.seq_len, self.cfg.up)
        return self.phis[self.phi_index[k]](h) if len(self.phis) else h

    def down(self, x: torch.Tensor, k: int) -> torch.Tensor:
        """Down_k: (B, L, d) -> (B, l_k, d) for 0-based scale k."""
        return resample(x, self.lengths[k], self.cfg.down)

    def latent(self, idx: torch.Tensor) -> torch.Tensor:
        """z = E(x): (B, L) token ids -> (B, L, d_code)."""
        if idx.shape[1] != self.cfg.seq_len:
            raise ValueError(f"the NCM tokenizer encodes windows of exactly model.seq_len={self.cfg.seq_len} tokens, "
                             f"got {idx.shape[1]}")
        x = self.wte(idx) + self.wpe.weight
        for block in self.encoder:
            x = block(x, causal=False)
        z = self.to_code(self.enc_norm(x))
        return F.layer_norm(z, z.shape[-1:]) if self.cfg.latent_norm else z

    def nearest(self, u: torch.Tensor, k: int) -> torch.Tensor:
        """Index of the nearest code (squared L2) of scale k's codebook for every vector of u (B, l, d)."""
        e = self.codebook(k).weight.detach()
        # |u|^2 is the same for every code: argmin_j |e_j|^2 - 2 u.e_j, one fused product (3x faster at l 128)
        flat = u.reshape(-1, u.shape[-1])
        return torch.addmm(e.pow(2).sum(-1), flat, e.T, alpha=-2).argmin(-1).view(u.shape[:-1])

    def quantize(self, z: torch.Tensor, through: list | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The residual loop on detached z, in fp32: (codes, contributions): K code tensors (B, l_k) and
        the K contributions h_k = R_k(e_k(r_k)) (B, L, d_code), attached to codebooks and phi. ``through``
        (a list, filled in place): the same contributions with the straight-through estimator at each
        scale, R_k(phi(u_k + sg[e_k(r_k) - u_k])) with u_k = Down_k of the *attached* residual -- the same
        values, their gradient reaching z through Down_k and R_k (``straight_through: scale``)."""
        rest = z.detach().float()
        rest_st = z.float() if through is not None else None
        codes, parts = [], []
        with torch.autocast(z.device.type, enabled=False):  # nearest codes in fp32 under bf16 training (VAR)
            for k in range(self.cfg.K):
                u = self.down(rest, k)
                if self.training and self.cfg.dead_code_threshold > 0:
                    self.restart_dead_codes(u, k)
                r = self.nearest(u, k)
                if self.training and self.cfg.dead_code_threshold > 0:
                    self.count_usage(r, k)
                h = self.embed_codes(r, k)
                rest = rest - h.detach()
                codes.append(r)
                parts.append(h)
                if through is not None:
                    u_st = self.down(rest_st, k)
                    q = u_st + (self.codebook(k)(r) - u_st).detach()
                    h_st = resample(q, self.cfg.seq_len, self.cfg.up)
                    h_st = self.phis[self.phi_index[k]](h_st) if len(self.phis) else h_st
                    rest_st = rest_st - h_st
                    through.append(h_st)
        return codes, parts

    @torch.no_grad()
    def restart_dead_codes(self, u: torch.Tensor, k: int) -> None:
        """Codes of scale k's codebook whose usage EMA is below ``dead_code_threshold`` x the uniform rate
        take the values of vectors of this step's Down_k(residual) ``u`` drawn at random (module docstring,
        3.); their EMA restarts at the uniform rate. Under DDP rank 0's codebook is broadcast after."""
        V = self.cfg.sizes[k]
        book, usage = self.codebook(k).weight, self.code_usage[0 if self.cfg.shared_codebook else k, :V]
        uniform = u.shape[0] * u.shape[1] / V
        dead = (usage < self.cfg.dead_code_threshold * uniform).nonzero().squeeze(1)
        if len(dead):
            flat = u.reshape(-1, u.shape[-1])
            book.data[dead] = flat[torch.randint(len(flat), (len(dead),), device=flat.device)].to(book.dtype)
            usage[dead] = uniform
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.broadcast(book.data, 0)

    @torch.no_grad()
    def count_usage(self, codes: torch.Tensor, k: int) -> None:
        """Fold this step's assignments of scale k into the usage EMA."""
        V = self.cfg.sizes[k]
        usage = self.code_usage[0 if self.cfg.shared_codebook else k, :V]
        counts = torch.bincount(codes.flatten(), minlength=V).to(usage.dtype)
        usage.mul_(self.cfg.dead_code_decay).add_(counts, alpha=1 - self.cfg.dead_code_decay)

    def decode(self, zhat: torch.Tensor) -> torch.Tensor:
        """Decoder hidden states (B, L, d_model) of a reconstruction zhat (B, L, d_code)."""
        x = self.from_code(zhat) + self.dec_wpe.weight
        for block in self.decoder:
            x = block(x, causal=False)
        return self.dec_norm(x)

    # --- the public API -------------------------------------------------------------------------
    @torch.no_grad()
    def encode(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """K code tensors (B, l_k), coarse to fine."""
        return self.quantize(self.latent(idx))[0]

    def cumulative(self, codes: list[torch.Tensor], k: int) -> torch.Tensor:
        """zhat^(k) = sum_{j <= k} R_j(e_j(r_j)): the continuous reconstruction from the first k scales,
        (B, L, d_code); k = 0 gives zeros. ``codes`` may hold more than k scales."""
        if not 0 <= k <= len(codes):
            raise ValueError(f"k={k}: choose 0..{len(codes)} scales")
        B = codes[0].shape[0]
        zhat = codes[0].new_zeros((B, self.cfg.seq_len, self.cfg.d_code), dtype=self.to_code.weight.dtype)
        for j in range(k):
            zhat = zhat + self.embed_codes(codes[j], j)
        return zhat

    def tokens(self, h: torch.Tensor, rows: int = 4096) -> torch.Tensor:
        """Argmax tokens (B, L) of decoder states h (B, L, d_model), the head applied ``rows`` positions
        at a time (the (B, L, V) logits never exist at once)."""
        flat = h.flatten(0, 1)
        out = torch.cat([self.lm_head(flat[i:i + rows]).argmax(-1) for i in range(0, len(flat), rows)])
        return out.view(h.shape[:2])

    def reconstruct(self, codes: list[torch.Tensor], k: int | None = None) -> torch.Tensor:
        """Token logits (B, L, V) decoded from the first k scales (default all)."""
        return self.lm_head(self.decode(self.cumulative(codes, self.cfg.K if k is None else k)))

    def truncation(self, batch: int, device: torch.device) -> torch.Tensor:
        """Scales kept per sequence (B,) in 1..K: nested dropout in training, K otherwise."""
        K = self.cfg.K
        keep = torch.full((batch,), K, dtype=torch.long, device=device)
        if self.training and self.cfg.nested_dropout > 0:
            drop = torch.rand(batch, device=device) < self.cfg.nested_dropout
            keep = torch.where(drop, torch.randint(1, K + 1, (batch,), device=device), keep)
        return keep

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        """idx: (B, L) token windows. Without targets: ``{"logits"}`` of the full reconstruction. With
        targets (ignored: the target is idx itself): the ``rec`` and ``vq`` losses and the per-scale
        metrics (module docstring)."""
        cfg, K = self.cfg, self.cfg.K
        z = self.latent(idx)
        through = [] if cfg.straight_through in ("scale", "anchored") else None
        codes, parts = self.quantize(z, through)
        keep = self.truncation(idx.shape[0], idx.device)                  # (B,)
        levels = torch.arange(1, K + 1, device=idx.device)
        zhats = torch.stack(parts, 1).cumsum(1)                           # (B, K, L, dc): zhat^(1..K)
        pick = (keep - 1).view(-1, 1, 1, 1).expand(-1, 1, *zhats.shape[2:])
        if through is None:
            zhat = zhats.gather(1, pick).squeeze(1)
            h = self.decode(z + (zhat - z).detach())                      # straight-through at L (VAR)
        elif cfg.straight_through == "scale":                             # per scale, through Down_k / R_k
            h = self.decode(torch.stack(through, 1).cumsum(1).gather(1, pick).squeeze(1).to(z.dtype))
        else:  # anchored: the truncated input per scale and the full one at L, decoded as one batch
            truncated = torch.stack(through, 1).cumsum(1).gather(1, pick).squeeze(1).to(z.dtype)
            h, h_full = self.decode(torch.cat([truncated, z + (zhats[:, -1] - z).detach()])).chunk(2)
        if targets is None:
            return {"logits": self.lm_head(h)}
        rec = linear_cross_entropy(h.flatten(0, 1), self.lm_head.weight, idx.flatten())
        if cfg.straight_through == "anchored":
            rec = (rec + linear_cross_entropy(h_full.flatten(0, 1), self.lm_head.weight, idx.flatten())) / 2
        zt = z.unsqueeze(1)
        commit = (zt - zhats.detach()).pow(2).mean((2, 3))                # (B, K): MSE(z, sg[zhat^(j)])
        book = (zt.detach() - zhats).pow(2).mean((2, 3))                  # (B, K): MSE(sg[z], zhat^(j))
        per_scale = cfg.vq_beta * commit + book
        if cfg.vq_scales == "all":
            weight = (levels <= keep[:, None]).to(per_scale.dtype) / keep[:, None]
        else:
            weight = (levels == keep[:, None]).to(per_scale.dtype)
        vq = (weight * per_scale).sum(1).mean()
        with torch.no_grad():
            acc = (self.tokens(h) == idx).float().mean()
            stats = [acc, *book.mean(0)]
            for k, r in enumerate(codes):
                counts = torch.bincount(r.flatten(), minlength=cfg.sizes[k]).float()
                p = counts / counts.sum()
                stats += [100.0 * (counts > 0).float().mean(), torch.exp(-(p * p.clamp_min(1e-30).log()).sum())]
            values = torch.stack(stats).tolist()
        metrics = {"rec_acc": values[0], **{f"vq_s{k + 1}": values[1 + k] for k in range(K)}}
        for k in range(K):
            metrics[f"usage_pct_s{k + 1}"] = values[1 + K + 2 * k]
            metrics[f"usage_ppl_s{k + 1}"] = values[2 + K + 2 * k]
        return {"losses": {"rec": rec, "vq": vq}, "metrics": metrics}

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameters; ``non_embedding`` leaves out the token and both position embeddings (a tied head
        is counted once, as the embedding)."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wte.weight.numel() + self.wpe.weight.numel() + self.dec_wpe.weight.numel()
        return n


@torch.no_grad()
def reconstruction_accuracy(model: NCMTokenizer, token_windows: torch.Tensor, batch_size: int = 64) -> dict[int, float]:
    """Exact token accuracy of decoding from the first k scales, for every k = 1..K (NCM Table 1 at
    k = K; the curve over k is ours): ``{k: fraction of tokens whose argmax equals the
    input}`` over ``token_windows`` (N, L), in eval mode (no nested dropout)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    K = model.cfg.K
    correct = torch.zeros(K, dtype=torch.float64)
    total = 0
    for start in range(0, len(token_windows), batch_size):
        x = token_windows[start:start + batch_size].to(device)
        codes = model.encode(x)
        for k in range(1, K + 1):
            correct[k - 1] += (model.tokens(model.decode(model.cumulative(codes, k))) == x).sum().item()
        total += x.numel()
    model.train(was_training)
    return {k: correct[k - 1].item() / max(total, 1) for k in range(1, K + 1)}


def block_flops(cfg: NCMTransformerFields, attended: float) -> float:
    """Training FLOPs per position of one block (6 x matmul weights + 12 d x attended keys, the
    suite's nanoGPT convention, ``models.token_lm.token_lm_flops_per_token``)."""
    d = cfg.d_model
    hidden = cfg.mlp_ratio * d
    weights = 4 * d * d + (3 if cfg.activation == "swiglu" else 2) * d * hidden
    return 6.0 * weights + 12.0 * d * attended


def ncm_tokenizer_flops_per_token(cfg: NCMTokenizerConfig) -> float:
    """Training FLOPs per token: encoder and decoder blocks over all L positions, the token head
    (6 V d; both twice with ``straight_through: anchored``), the two code projections (6 x 2 d d_code), one phi conv per
    scale at full length
    (6 x 3 d_code^2 each) and the nearest-code distances (2 x sum_k l_k / L x |V| x d_code, forward only).
    Interpolation, pooling and the MSE terms are left out."""
    L, dc = cfg.seq_len, cfg.d_code
    decodes = 2 if cfg.straight_through == "anchored" else 1   # anchored decodes the truncated and the full input
    blocks = (cfg.n_layer + decodes * cfg.decoder_layers) * block_flops(cfg, L)
    phi = 6.0 * 3 * dc * dc * cfg.K if cfg.phi_ratio > 0 else 0.0
    distances = 2.0 * sum(l * v for l, v in zip(cfg.lengths, cfg.sizes)) / L * dc
    return blocks + decodes * 6.0 * cfg.vocab_size * cfg.d_model + 12.0 * cfg.d_model * dc + phi + distances
