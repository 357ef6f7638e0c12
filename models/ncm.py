"""NCM stage 2: the per-scale parallel generator of Next-Concept Modeling (Kumbong et al., arXiv 2610.14162).

The tokenizer of stage 1 (``models.ncm_tokenizer``, arch ``ncm_tokenizer``) turns a window of L tokens
into K scales of codes r_1..r_K (l_k codes each). The generator models
p(r_1..r_K) = prod_k prod_i p(r_k^i | zhat^(k-1)): every code of scale k is predicted in one forward
pass from the cumulative reconstruction of the coarser scales, the codes of one scale independent
given it (Sec. 3.2, Eqs. 3-5). Sources as in ``models.ncm_tokenizer`` (the paper's sections as summarised in
docs/sources.md, "NCM: what the paper specifies"; VAR = FoundationVision/VAR, docs/sources.md, "VAR's
quantiser (FoundationVision/VAR quant.py)"; *ours* where both are silent).

* The tokenizer: built inside from ``model.tokenizer`` (the upstream ``ncm_tokenizer`` experiment's
  model config, arch and fields; its L must be this model's ``seq_len``), frozen (``requires_grad_(False)``,
  eval mode whatever the generator's mode) and loaded from that run by ``load_upstream(final_dir)``
  before training (Sec. 3.4: the tokenizer is frozen in stage 2). Its weights are part of this
  model's checkpoint, so sampling needs only this run's ``final/``.
* Input of block k (teacher forcing, VAR ``idxBl_to_var_input``): block 1 a learned start embedding
  over its l_1 positions (VAR's SOS, without a class); block k > 1 Down_k(zhat^(k-1)) -- the
  reconstruction so far at scale k's length, with the tokenizer's own Down and R -- through a linear map
  d_code -> d_model (VAR ``word_embed``); plus a level embedding (VAR ``lvl_embed``) and a learned
  position embedding over the concatenated N = sum_k l_k positions (VAR ``pos_1LC``).
* ``attention`` block_diagonal: a position attends to its own block only (NCM App. F.2 / Table 9,
  unconditional: the input already carries zhat^(k-1); 15.41 vs 19.63 PPL) | block_causal: to its own
  block and every coarser one (VAR's mask, Table 9's alternative). All scales are trained in one
  forward pass (Sec. 3.4); the masks are ``models.blocks.Segments``, which attend block by block
  and never compute the masked-out pairs (equal to the explicit bool mask, ``attention_mask``).
* ``perturb_rate`` p (Sec. 3.4, App. F.3): in training each conditioning code (scales 1..K-1, the
  ones the inputs are built from) is replaced with probability p by another code of the same
  codebook, uniform over the other |V| - 1; the labels stay the clean codes. The paper's rate is
  UNKNOWN (moderate best, ~19 vs ~49 PPL without); 0.1 is *ours*.
* Loss ``gen`` (Sec. 3.4, Eq. 10): -sum_k w_k sum_i log p(r_k^i | ztilde^(k-1)) with
  w_k = l_k^(-alpha) / sum_j l_j^(1-alpha); alpha 0 weighs every code alike (VAR's 1/L per token),
  alpha 1 every scale alike. NCM's alpha is UNKNOWN (alpha <= 1 all ~19 PPL, App. F.2): 0 is *ours*,
  VAR's. Metrics per scale: ``ce_s<k>`` and ``acc_s<k>`` (VAR's eval logs CE and accuracy).
* Transformer: pre-norm blocks as the suite's backbones (``NCMTransformerFields``), a final norm and
  ``head`` shared: one head over the codebook (VAR has one head; with per-scale codebooks the level
  embedding tells the scales apart; with per-scale sizes ``codebook_sizes`` scale k reads its first
  |V_k| rows) | per_scale (*ours*; NCM's head is UNKNOWN): a head per scale, so the K codebooks' code
  ids -- unrelated across scales when each scale has its own codebook -- do not share output rows.
  VAR's AdaLN (class conditioning) has nothing to condition on here and is left out.

Sampling (``sample``, Sec. 3.4, Algorithm 2): zhat = 0; for k = 1..K one generator call on
block k's input, sample scale k's codes (temperature, top-k, top-p; VAR ``sample_with_top_k_top_p_``),
zhat += R_k(e_k(r_k)); then the frozen decoder's argmax tokens. NFE = K, and each call runs only the
l_k positions of the current scale: block-diagonal attention needs nothing else (NCM App. F.2);
block-causal attends to the coarser scales' keys and values through a KV cache (VAR
``autoregressive_infer_cfg``; ``models.blocks.KVCache``).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
from torch import nn

from common.errors import CheckpointError
from models.blocks import KVCache, Segments, init_weights, make_norm
from models.configs import NCMConfig
from models.losses import weighted_linear_cross_entropy
from models.ncm_tokenizer import (NCMTokenizer, block_flops,
                                  make_ncm_block)
from models.token_lm import filter_logits as token_filter_logits
from models.token_lm import sample_next
from models.weights import load_model_weights


def attention_mask(lengths: tuple[int, ...], kind: str) -> torch.Tensor:
    """Bool (N, N) mask over the concatenated blocks, True = may attend: ``block_diagonal`` a position
    sees its own block; ``block_causal`` its own block and every coarser one."""
    return Segments(lengths, prefix=kind == "block_causal").mask()


def loss_weights(lengths: tuple[int, ...], alpha: float) -> torch.Tensor:
    """w_k = l_k^(-alpha) / sum_j l_j^(1-alpha) (Eq. 10), float64 (K,); sum_k w_k l_k = 1."""
    ls = torch.tensor(lengths, dtype=torch.float64)
    return ls.pow(-alpha) / ls.pow(1 - alpha).sum()


class NCM(nn.Module):
    """The generator with its frozen tokenizer (module docstring)."""

    def __init__(self, cfg: NCMConfig):
        super().__init__()
        self.cfg = cfg
        tcfg = cfg.tokenizer_config
        self.lengths = tcfg.lengths
        self.K, self.N = len(self.lengths), sum(self.lengths)
        self.offsets = [sum(self.lengths[:k]) for k in range(self.K + 1)]
        d = cfg.d_model
        self.sos = nn.Parameter(torch.zeros(d))
        self.word_embed = nn.Linear(tcfg.d_code, d, bias=cfg.bias)
        self.lvl_embed = nn.Embedding(self.K, d)
        self.pos = nn.Embedding(self.N, d)
        self.blocks = nn.ModuleList(make_ncm_block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = make_norm(cfg.norm, d, cfg.norm_eps, cfg.bias)
        self.sizes = tcfg.sizes
        self.head = nn.Linear(d, max(self.sizes), bias=False) if cfg.head == "shared" else \
            nn.ModuleList(nn.Linear(d, v, bias=False) for v in self.sizes)
        for part in (self.word_embed, self.lvl_embed, self.pos, self.blocks, self.ln_f, self.head):
            init_weights(part, cfg.init_std, cfg.n_layer, root=self)
        nn.init.normal_(self.sos, std=cfg.init_std)
        self.P = cfg.prefix_len
        if self.P:  # the source prefix: its own token and position embeddings, and the null condition
            self.src_embed = nn.Embedding(cfg.vocab_size, d)
            self.src_pos = nn.Embedding(self.P, d)
            self.null = nn.Parameter(torch.zeros(d))
            init_weights(self.src_embed, cfg.init_std, cfg.n_layer, root=self)
            init_weights(self.src_pos, cfg.init_std, cfg.n_layer, root=self)
            nn.init.normal_(self.null, std=cfg.init_std)
        self.mask = Segments(self.lengths, prefix=cfg.attention == "block_causal", source=self.P)
        self.register_buffer("weights", loss_weights(self.lengths, cfg.alpha).float(), persistent=False)
        self.register_buffer("levels", torch.repeat_interleave(torch.arange(self.K), torch.tensor(self.lengths)),
                             persistent=False)  # the scale of each of the N positions
        self.tokenizer = NCMTokenizer(tcfg).requires_grad_(False).eval()
        self.calls = 0  # generator (transformer) calls, read by sampling and its tests

    def train(self, mode: bool = True):
        """As ``nn.Module.train``; the frozen tokenizer stays in eval mode (no nested dropout)."""
        super().train(mode)
        self.tokenizer.eval()
        return self

    def load_upstream(self, final_dir: Path) -> None:
        """Load the tokenizer's trained weights from ``final_dir/model.safetensors`` (the upstream
        ``ncm_tokenizer`` run's ``final/``). With a ``manifest.json`` beside them, a run of another
        configuration (L, K, lengths, widths...) is refused naming the key.

        An upstream ``ncm`` run (two-stage training, NCM Sec. 3.4: the generator first trained on
        unpaired target-side text, then on pairs): its whole generator, its tokenizer included, is the
        starting point; the source prefix's parameters, which it has not, keep their initialisation."""
        final_dir = Path(final_dir)
        manifest_path = final_dir / "manifest.json"
        upstream = (json.loads(manifest_path.read_text()).get("config", {}).get("model", {})
                    if manifest_path.is_file() else {})
        if upstream.get("arch") == "ncm":
            if upstream.get("tokenizer") != self.cfg.tokenizer:
                raise CheckpointError(f"{final_dir}: the generator run was trained on another tokenizer than "
                                      "this one's model.tokenizer; build on a generator of the same tokenizer run")
            weights = final_dir / "model.safetensors"
            if not weights.is_file():
                raise CheckpointError(f"{weights}: no generator weights; run the upstream ncm experiment first")
            load_model_weights(self, weights, allow_missing=("src_embed.", "src_pos.", "null"))
            self.tokenizer.requires_grad_(False).eval()
            return
        self._load_tokenizer(final_dir)

    def _load_tokenizer(self, final_dir: Path) -> None:
        final_dir = Path(final_dir)
        manifest_path = final_dir / "manifest.json"
        if manifest_path.is_file():
            manifest = json.loads(manifest_path.read_text())
            upstream = manifest.get("config", {}).get("model", {})
            tcfg = self.tokenizer.cfg
            ours = {"arch": "ncm_tokenizer", **{f.name: getattr(tcfg, f.name) for f in dataclasses.fields(tcfg)}}
            if manifest.get("vocab_size") is not None:
                upstream = {**upstream, "vocab_size": manifest["vocab_size"]}
            for key in sorted(set(upstream) & set(ours)):
                a, b = upstream[key], ours[key]
                if (list(a) if isinstance(a, tuple) else a) != (list(b) if isinstance(b, tuple) else b):
                    raise CheckpointError(f"{final_dir}: the tokenizer run has model.{key}={a!r}, this generator's "
                                          f"model.tokenizer.{key}={b!r}; point model.tokenizer at that run's "
                                          "model config")
        weights = final_dir / "model.safetensors"
        if not weights.is_file():
            raise CheckpointError(f"{weights}: no tokenizer weights; run the upstream ncm_tokenizer experiment first")
        load_model_weights(self.tokenizer, weights)
        self.tokenizer.requires_grad_(False).eval()

    # --- the pieces -----------------------------------------------------------------------------
    def block_input(self, zhat: torch.Tensor, k: int) -> torch.Tensor:
        """Input (B, l_k, d_model) of 0-based block k from the reconstruction of the coarser scales
        zhat (B, L, d_code): the start embedding (k = 0) or word_embed(Down_k(zhat)), plus level and
        position embeddings."""
        lo, hi = self.offsets[k], self.offsets[k + 1]
        if k == 0:
            x = self.sos.expand(zhat.shape[0], hi - lo, -1)
        else:
            x = self.word_embed(self.tokenizer.down(zhat, k))
        return x + self.lvl_embed.weight[k] + self.pos.weight[lo:hi]

    def inputs(self, codes: list[torch.Tensor]) -> torch.Tensor:
        """Teacher-forced input (B, N, d_model) of every block from the codes of the scales."""
        with torch.no_grad():
            zhat = self.tokenizer.cumulative(codes, 0)
            prefixes = [zhat]
            for k in range(self.K - 1):
                zhat = zhat + self.tokenizer.embed_codes(codes[k], k)
                prefixes.append(zhat)
        return torch.cat([self.block_input(prefixes[k], k) for k in range(self.K)], 1)

    def source_input(self, source: torch.Tensor, null: torch.Tensor | None = None) -> torch.Tensor:
        """Input (B, P, d_model) of the source prefix (B, P): token + position embeddings; rows where
        ``null`` (B,) bool is True get the null condition in every position instead of the tokens."""
        x = self.src_embed(source)
        if null is not None:
            x = torch.where(null[:, None, None], self.null.to(x.dtype), x)
        return x + self.src_pos.weight

    def backbone(self, x: torch.Tensor, attn_mask: torch.Tensor | Segments | None,
                 caches: list[KVCache] | None = None, calls: int = 1) -> torch.Tensor:
        """One generator call (``calls``: what it counts as; a guided call on the conditional and the
        null batch together counts 2, as the paper counts NFE): the blocks and the final norm.
        ``attn_mask`` None = full attention over x and, with ``caches`` (one per block), over every
        position cached before (``models.blocks.KVCache``)."""
        self.calls += calls
        for block, cache in zip(self.blocks, caches or [None] * len(self.blocks)):
            x = block(x, attn_mask=attn_mask, causal=False, cache=cache)
        return self.ln_f(x)

    def hidden(self, codes: list[torch.Tensor], source: torch.Tensor | None = None,
               null: torch.Tensor | None = None) -> torch.Tensor:
        """Teacher-forced final states (B, N, d_model) of every scale, all blocks in one call; with a
        source prefix (B, P) in front, which every block sees and which sees no block."""
        x = self.inputs(codes)
        if self.P:
            x = torch.cat([self.source_input(source, null), x], 1)
        return self.backbone(x, self.mask)[:, self.P:]

    def head_weight(self, k: int) -> torch.Tensor:
        """The (|V_k|, d_model) output weights of 0-based scale k: its own head (``head: per_scale``) or the
        first |V_k| rows of the shared head (all of it when every scale has the same codebook size)."""
        if self.cfg.head == "per_scale":
            return self.head[k].weight
        return self.head.weight[:self.sizes[k]]

    def scale_logits(self, h: torch.Tensor, k: int) -> torch.Tensor:
        """Code logits (..., |V_k|) of scale k's final states h (..., d_model)."""
        if self.cfg.head == "shared" and len(set(self.sizes)) == 1:
            return self.head(h)
        return h @ self.head_weight(k).T

    def all_logits(self, h: torch.Tensor) -> torch.Tensor:
        """Logits (B, N, max_k |V_k|) of every block's states h (B, N, d_model); a scale's columns beyond its
        |V_k| are -inf."""
        out = h.new_full((*h.shape[:2], max(self.sizes)), float("-inf"))
        for k, (lo, hi) in enumerate(zip(self.offsets, self.offsets[1:])):
            out[:, lo:hi, :self.sizes[k]] = self.scale_logits(h[:, lo:hi], k)
        return out

    def logits(self, codes: list[torch.Tensor]) -> torch.Tensor:
        """Teacher-forced code logits (B, N, |V|): block k's rows predict scale k from ``codes[:k]``."""
        return self.all_logits(self.hidden(codes))

    def perturb(self, codes: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each conditioning code (scales 1..K-1) replaced with probability ``perturb_rate`` by another
        code of its codebook, uniform over the other |V| - 1 (Sec. 3.4)."""
        out = []
        for r, V in zip(codes[:-1], self.sizes):
            hit = torch.rand(r.shape, device=r.device) < self.cfg.perturb_rate
            out.append(torch.where(hit, (r + torch.randint(1, V, r.shape, device=r.device)) % V, r))
        return out + [codes[-1]]

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        """idx: (B, P + L) windows, the P = ``prefix_len`` source tokens (none unconditionally) and the
        L target tokens the frozen tokenizer encodes. Without targets: ``{"logits"}`` (B, N, |V|) of
        every scale's codes, teacher-forced, and ``{"codes"}``. With targets (ignored: the labels are the
        codes): the ``gen`` loss and per-scale ``ce_s<k>`` / ``acc_s<k>`` metrics. In training each
        source is replaced by the null condition with probability ``cond_dropout`` (for guidance)."""
        source, idx = idx[:, :self.P], idx[:, self.P:]
        codes = self.tokenizer.encode(idx)
        cond = self.perturb(codes) if self.training and self.cfg.perturb_rate > 0 else codes
        null = None
        if self.P and self.training and self.cfg.cond_dropout > 0:
            null = torch.rand(idx.shape[0], device=idx.device) < self.cfg.cond_dropout
        h = self.hidden(cond, source, null)
        if targets is None:
            return {"logits": self.all_logits(h), "codes": codes}
        # row weight w_k / B on scale k's B l_k rows, so that gen = sum_k w_k l_k ce_k with ce_k the mean
        # over scale k's rows (Eq. 10): one pass over every row when all scales share one head of one
        # size, else one pass per scale over its own head
        B = h.shape[0]
        if self.cfg.head == "shared" and len(set(self.sizes)) == 1:
            row_weights = (self.weights[self.levels] / B).expand(B, -1).flatten()
            gen, nll, hits = weighted_linear_cross_entropy(h.flatten(0, 1), self.head.weight,
                                                           torch.cat(codes, 1).flatten(), row_weights)
            nll, hits = nll.view(B, -1), hits.view(B, -1)
            per_scale = [(nll[:, lo:hi].mean(), hits[:, lo:hi].float().mean())
                         for lo, hi in zip(self.offsets, self.offsets[1:])]
        else:
            gen, per_scale = 0.0, []
            for k, (lo, hi) in enumerate(zip(self.offsets, self.offsets[1:])):
                rows = h[:, lo:hi].flatten(0, 1)
                weight = (self.weights[k] / B).expand(len(rows))
                loss, nll, hits = weighted_linear_cross_entropy(rows, self.head_weight(k), codes[k].flatten(), weight)
                gen = gen + loss
                per_scale.append((nll.mean(), hits.float().mean()))
        values = torch.stack([torch.stack(pair) for pair in per_scale]).T.flatten().tolist()
        metrics = {**{f"ce_s{k + 1}": values[k] for k in range(self.K)},
                   **{f"acc_s{k + 1}": values[self.K + k] for k in range(self.K)}}
        return {"losses": {"gen": gen}, "metrics": metrics}

    def num_params(self, non_embedding: bool = True) -> int:
        """The generator's parameters, the frozen tokenizer left out (NCM reports generator sizes,
        App. B-C); ``non_embedding`` also leaves out the position embedding."""
        n = sum(p.numel() for name, p in self.named_parameters() if not name.startswith("tokenizer."))
        return n - self.pos.weight.numel() if non_embedding else n


def filter_logits(logits: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """Logits (..., V) with everything outside the top ``top_k`` and outside the nucleus ``top_p`` at -inf
    (top-k first, as VAR): the token samplers' filter (``models.token_lm.filter_logits``), in float64."""
    return token_filter_logits(logits, 1.0, top_k, top_p)


def sample_codes(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None,
                 generator: torch.Generator | None) -> torch.Tensor:
    """Codes (B, l) drawn from logits (B, l, V) as the token samplers draw (``models.token_lm.sample_next``:
    float64, temperature then top-k then top-p, a draw by inversion; temperature 0 = argmax), on the
    generator's device: the same codes on every device."""
    if generator is not None:
        return sample_next(logits.to(generator.device), temperature, top_k, top_p, generator).to(logits.device)
    return sample_next(logits, temperature, top_k, top_p, generator)


@torch.no_grad()
def sample(model: NCM, n: int, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           generator: torch.Generator | None = None, given: list[torch.Tensor] | None = None,
           source: torch.Tensor | None = None, guidance: float = 1.0) -> dict:
    """n samples in one batch: ``{"ids": LongTensor (n, L), "nfe": generator calls made (K; 2K guided),
    "codes": K LongTensors (n, l_k)}``; deterministic given ``generator`` (a CPU generator draws on the
    CPU whatever the model's device; None = the global RNG). The model is put in eval mode and restored.

    ``source`` (n, P): the prefix of a conditional model (``prefix_len`` P > 0), run once into every
    layer's KV cache; each scale's call attends to it and to itself (block-diagonal: the scale's keys are
    dropped after the call) or to it and every coarser scale (block-causal). ``guidance`` w != 1
    (classifier-free guidance, App. F.4; the scales are UNKNOWN): every call also runs the null
    condition, batched with the conditional rows, and samples from uncond + w (cond - uncond) logits
    (w = 1 + VAR's cfg t); it counts as two calls.

    ``given`` (a diagnostic): the codes (n, l_k) of the first j scales, taken instead of sampled -- the
    generator completes real coarse scales (j = K: the tokenizer's own reconstruction). Block-diagonal
    needs no call for a given scale; block-causal runs it once so the finer scales attend to its keys."""
    if (source is None) != (model.P == 0):
        raise ValueError(f"model.prefix_len={model.P}: give a source of that many tokens per sample exactly when "
                         "the model is conditional")
    if guidance != 1.0 and not model.P:
        raise ValueError("guidance needs a conditional model (model.prefix_len > 0)")
    was_training = model.training
    model.eval()
    tok = model.tokenizer
    calls = model.calls
    guided = guidance != 1.0
    rows = 2 * n if guided else n
    zhat = model.pos.weight.new_zeros(n, tok.cfg.seq_len, tok.cfg.d_code)
    # scale k attends to the source and to itself, or to the cached keys / values of scales < k as well
    # (block-causal, VAR's KV cache)
    keep = model.cfg.attention == "block_causal"
    caches = [KVCache(model.P + model.N) for _ in model.blocks] if keep or model.P else None
    if model.P:
        null = torch.arange(rows, device=source.device) >= n if guided else None
        model.backbone(model.source_input(source.repeat(2, 1) if guided else source, null), None, caches, calls=0)
    codes = []
    for k in range(model.K):
        x = model.block_input(zhat, k)
        x = x.repeat(2, 1, 1) if guided else x
        if given is not None and k < len(given):
            r = given[k]
            if keep:
                model.backbone(x, None, caches, calls=2 if guided else 1)
        else:
            logits = model.scale_logits(model.backbone(x, None, caches, calls=2 if guided else 1), k)
            if guided:
                cond, uncond = logits.float().chunk(2)
                logits = uncond + guidance * (cond - uncond)
            r = sample_codes(logits, temperature, top_k, top_p, generator)
        if caches is not None and not keep:
            for cache in caches:
                cache.truncate(model.P)
        codes.append(r)
        zhat = zhat + tok.embed_codes(r, k)
    ids = tok.tokens(tok.decode(zhat))
    model.train(was_training)
    return {"ids": ids, "nfe": model.calls - calls, "codes": codes}


def ncm_flops_per_token(cfg: NCMConfig) -> float:
    """Training FLOPs per text token: the generator over N = sum_k l_k positions per L tokens
    (blocks with the keys each position attends -- sum_k l_k^2 / N on average block-diagonal,
    sum_k l_k (l_1 + ... + l_k) / N block-causal --, the code head 6 |V| d and word_embed 6 d_code d),
    plus the frozen tokenizer's forward pass (encoder blocks and projection at 1/3 of their training
    FLOPs, nearest-code distances 2 sum_k l_k / L |V| d_code, the K - 1 phi convs 2 x 3 d_code^2)."""
    t = cfg.tokenizer_config
    ls, L = t.lengths, cfg.seq_len
    N = sum(ls)
    if cfg.attention == "block_diagonal":
        attended = sum(v * v for v in ls) / N
    else:
        attended = sum(v * sum(ls[:k + 1]) for k, v in enumerate(ls)) / N
    heads = sum(l * v for l, v in zip(ls, t.sizes)) / N  # the code head's mean width per position
    gen = cfg.n_layer * block_flops(cfg, attended) + 6.0 * heads * cfg.d_model + 6.0 * t.d_code * cfg.d_model
    tok = (t.n_layer * block_flops(t, L) + 6.0 * t.d_model * t.d_code) / 3
    tok += (2.0 * sum(l * v for l, v in zip(ls, t.sizes)) / L * t.d_code
            + (2.0 * 3 * t.d_code ** 2 * (t.K - 1) if t.phi_ratio > 0 else 0.0))
    return N / L * gen + tok
