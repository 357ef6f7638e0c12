"""Token-level causal language model: the Base and PM baselines of every paper table.

ConceptLM (arXiv 2602.08984) §4.1 compares against two token baselines on each backbone:
*Base*, the plain GPT-2 / Pythia model, and *PM* (parameter-matched), the same model with two
extra token layers so that its parameter count matches ConceptLM's two concept layers. Both are
this module; PM is a configuration entry (``n_layer`` + 2), not a separate class. The concept
models (``models.conceptlm``, ``models.mtp``) subclass ``TokenLM`` and reuse its embedding, blocks,
final norm and head; ``make_block`` / ``make_rotary`` build their extra layers with the backbone's
conventions.

The model returns a dict: ``logits`` and ``losses`` (named scalar losses). The trainer sums the
losses with configured weights, so every model family plugs into the same trainer.

Generation (NCM's autoregressive baseline): ``generate`` prefills the prompt once and then
decodes one token per call with a KV cache (``models.blocks.KVCache``, one per block), for every
backbone (learned positions by offset, rotary at the cached offset, GQA caches ``n_kv_head`` heads).
Batched prompts must have equal length (the adapter groups them so; no left padding, so no position
shift or padding mask can differ between rows). The cache is exact only for a forward that is this
class's; a subclass whose forward adds a path (ConceptLM's concepts) does not inherit it
(``INCREMENTAL_DECODE``) and generates by recomputing the full forward on the growing sequence.
Sampling: temperature, then top-k, then top-p (nucleus) on the float64 distribution, then one
draw by inversion (``draw``) with the caller's ``torch.Generator``; temperature 0 is greedy.
"""
from __future__ import annotations

from typing import ClassVar, NamedTuple

import torch
from torch import nn

from models.blocks import Block, KVCache, Rotary, init_weights, make_norm
from models.configs import TokenLMConfig
from models.losses import linear_cross_entropy


def make_rotary(cfg: TokenLMConfig, stride: int = 1) -> Rotary | None:
    """The backbone's rotary table (None with learned positions); row i at position ``i * stride``."""
    if cfg.positional != "rotary":
        return None
    return Rotary(cfg.d_model // cfg.n_head, cfg.rotary_pct, cfg.rotary_base, cfg.seq_len // stride,
                  cfg.rope_scaling, stride)


def residual_init_depth(cfg: TokenLMConfig) -> int | None:
    """The depth ``blocks.init_weights`` scales residual output projections by: the model's ``n_layer``
    for every block the model builds (concept and MTP blocks included), or None (no scaling)."""
    return cfg.n_layer if cfg.scale_residual_init else None


def make_block(cfg: TokenLMConfig, rotary: Rotary | None) -> Block:
    """One transformer block with the backbone's conventions."""
    return Block(cfg.d_model, cfg.n_head, cfg.mlp_hidden or cfg.mlp_ratio * cfg.d_model, bias=cfg.bias,
                 dropout=cfg.dropout, activation=cfg.activation, norm_eps=cfg.norm_eps,
                 parallel_residual=cfg.parallel_residual, rotary=rotary, norm=cfg.norm, n_kv_head=cfg.n_kv_head)


class Generation(NamedTuple):
    """What a sampler returns: ``ids`` (batch, length) and ``nfe``, the network calls it made."""
    ids: torch.Tensor
    nfe: int


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> torch.Tensor:
    """Float64 log-weights of the next-token distribution of ``logits`` (..., V): divided by
    ``temperature``, then all but the ``top_k`` largest set to -inf, then all outside the nucleus
    (the smallest set of most likely tokens whose probability reaches ``top_p``; the most likely
    token always stays) set to -inf. Ties at the k-th value are kept."""
    if temperature <= 0:
        raise ValueError(f"temperature={temperature}: use a positive temperature, or 0 for greedy decoding")
    x = logits.double() / temperature
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k={top_k}: keep at least 1 token (None = no top-k)")
        kth = x.topk(min(top_k, x.shape[-1]), dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        if top_p <= 0:
            raise ValueError(f"top_p={top_p}: use 0 < top_p <= 1 (None or 1 = no nucleus)")
        sorted_x, order = x.sort(dim=-1, descending=True)
        p = sorted_x.softmax(-1)
        outside = p.cumsum(-1) - p >= top_p  # the more likely tokens already reach top_p
        x = x.masked_fill(torch.zeros_like(outside).scatter(-1, order, outside), float("-inf"))
    return x


def draw(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One index per row of ``probs`` (..., V), drawn from it by inversion: one uniform u per row and
    the first index whose cumulative probability exceeds u times the row's total. Exact for the
    categorical distribution (an index of probability 0 is never drawn) and one uniform per row, where
    CPU ``torch.multinomial`` spends one exponential per entry (49 ms against ~2 ms for NCM's 6,080
    rows of 512 codes). Deterministic given ``generator`` (on the probabilities' device)."""
    cdf = probs.cumsum(-1)
    u = torch.rand((*probs.shape[:-1], 1), dtype=cdf.dtype, device=cdf.device, generator=generator)
    return torch.searchsorted(cdf, u * cdf[..., -1:], right=True).clamp_max(probs.shape[-1] - 1).squeeze(-1)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of ``logits`` (batch, V): argmax at temperature 0, else a draw (``draw``)
    from ``filter_logits`` (float64) with ``generator``."""
    if temperature == 0:
        return logits.argmax(-1)
    return draw(filter_logits(logits, temperature, top_k, top_p).softmax(-1), generator)


class DecodeState:
    """The incremental-decoding state of a ``TokenLM``: one ``KVCache`` per block; ``length`` tokens fed."""

    def __init__(self, n_layer: int, max_len: int):
        self.caches = [KVCache(max_len) for _ in range(n_layer)]
        self.length = 0


class TokenLM(nn.Module):
    # decode_step / the KV cache are exact for this class's forward. Not inherited (``__init_subclass__``):
    # a subclass whose forward adds a path (ConceptLM) would decode wrongly from the token blocks' cache,
    # so it generates by recomputation unless it sets INCREMENTAL_DECODE = True in its own body.
    INCREMENTAL_DECODE: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.INCREMENTAL_DECODE = cls.__dict__.get("INCREMENTAL_DECODE", False)

    def fsdp_units(self) -> list[nn.Module]:
        """The modules FSDP wraps one by one before the root (``trainer.distributed.shard``; which families
        shard: ``ModelSpec.shardable``)."""
        return list(self.blocks)

    def __init__(self, cfg: TokenLMConfig):
        super().__init__()
        self.cfg = cfg
        rotary = make_rotary(cfg)
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.positional == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(make_block(cfg, rotary) for _ in range(cfg.n_layer))
        self.ln_f = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps, cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        init_weights(self, cfg.init_std, residual_init_depth(cfg))
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight

    def embed(self, idx: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Token (+ learned position) embeddings of idx (batch, time) at positions offset..offset+time-1."""
        if offset + idx.shape[1] > self.cfg.seq_len:
            raise ValueError(f"input length {offset + idx.shape[1]} exceeds model.seq_len={self.cfg.seq_len}")
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe.weight[offset:offset + idx.shape[1]]
        return self.drop(x)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """Final normalised hidden states, (batch, time, d_model)."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        """idx: (batch, time) token ids. Without targets: ``{"logits": (batch, time, vocab)}``.
        With targets (targets[t] is the token after idx[t]; a negative target is not scored: the source
        positions of a conditional layout): ``{"losses": {"ntp": mean NLL}}`` over the scored targets,
        computed by the fused head + cross-entropy without materialising the logits twice."""
        h = self.hidden(idx)
        if targets is None:
            return {"logits": self.lm_head(h)}
        h, targets = h.flatten(0, 1), targets.flatten()
        if bool((targets < 0).any()):
            keep = targets >= 0
            h, targets = h[keep], targets[keep]
        return {"losses": {"ntp": linear_cross_entropy(h, self.lm_head.weight, targets)}}

    # --- generation ----------------------------------------------------------------------------
    def _require_cache(self) -> None:
        """Refuse incremental decoding for a model whose forward is not the token blocks' alone (the
        concept models): caching the blocks would give other logits than its forward."""
        if not self.INCREMENTAL_DECODE:
            raise ValueError(f"{type(self).__name__} decodes by full recompute (its forward is not the token "
                             "blocks' alone), not with a KV cache; generate with use_cache=False")

    def init_state(self, batch_size: int) -> DecodeState:
        """Empty KV caches for ``batch_size`` sequences (the lm-eval adapter's incremental-decoding hook)."""
        self._require_cache()
        return DecodeState(len(self.blocks), self.cfg.seq_len)

    def decode_step(self, tokens: torch.Tensor, state: DecodeState, last_only: bool = False
                    ) -> tuple[torch.Tensor, DecodeState]:
        """Feed ``tokens`` (batch, t), the positions after the ``state.length`` already fed; return
        their logits (batch, t, V) -- equal to the full forward's at those positions -- and the state.
        ``last_only``: the logits of the last position only (batch, 1, V)."""
        self._require_cache()
        x = self.embed(tokens, state.length)
        for block, cache in zip(self.blocks, state.caches):
            x = block(x, cache=cache)
        state.length += tokens.shape[1]
        if last_only:
            x = x[:, -1:]
        return self.lm_head(self.ln_f(x)), state

    @torch.no_grad()
    def generate(self, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None, generator: torch.Generator | None = None, eos_id: int | None = None,
                 use_cache: bool | None = None) -> Generation:
        """Continue the equal-length prompts ``idx`` (batch, T) by ``max_new_tokens`` tokens each.

        With the cache (default where exact, ``INCREMENTAL_DECODE``): one prefill call on the prompts,
        then one call per new token on that token alone. ``use_cache=False`` recomputes the full forward
        on the growing sequence (the only path of concept models). Sampling: ``sample_next``
        (temperature 0 = greedy). ``eos_id``: a row that samples it is finished, and every later
        position of that row is ``eos_id``; decoding stops when every row is finished.
        Returns ``Generation(ids (batch, T + max_new_tokens), nfe = network calls made)``. Run it in
        eval mode (dropout is the caller's). T + max_new_tokens must fit in ``model.seq_len``.
        """
        if idx.dim() != 2 or idx.shape[1] < 1:
            raise ValueError(f"idx must be (batch, T >= 1) prompt ids of equal length, got shape {tuple(idx.shape)}")
        if max_new_tokens < 0 or idx.shape[1] + max_new_tokens > self.cfg.seq_len:
            raise ValueError(f"prompt length {idx.shape[1]} + max_new_tokens={max_new_tokens} must be within "
                             f"model.seq_len={self.cfg.seq_len}; shorten the prompt or the generation")
        use_cache = self.INCREMENTAL_DECODE if use_cache is None else use_cache
        if use_cache and not self.INCREMENTAL_DECODE:
            raise ValueError(f"{type(self).__name__} has no KV cache; generate with use_cache=False")
        out = torch.empty(idx.shape[0], idx.shape[1] + max_new_tokens, dtype=idx.dtype, device=idx.device)
        out[:, :idx.shape[1]] = idx
        done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
        state = self.init_state(idx.shape[0]) if use_cache else None
        nfe = 0
        for i in range(idx.shape[1], out.shape[1]):
            if use_cache:  # prefill: the whole prompt; then the one token decoded last
                logits = self.decode_step(out[:, state.length:i], state, last_only=True)[0][:, -1]
            else:
                logits = self(out[:, :i])["logits"][:, -1]
            nfe += 1
            token = sample_next(logits, temperature, top_k, top_p, generator)
            if eos_id is not None:
                token = token.masked_fill(done, eos_id)
                done |= token == eos_id
            out[:, i] = token
            if eos_id is not None and bool(done.all()):
                out[:, i + 1:] = eos_id
                break
        return Generation(out, nfe)

    def num_params(self, non_embedding: bool = True) -> int:
        return count_params(self, non_embedding)


def count_params(model: nn.Module, non_embedding: bool = True) -> int:
    """Parameters of a model with ``wte`` (and optionally ``wpe``), without the embeddings when
    ``non_embedding`` (an untied head counts)."""
    n = sum(p.numel() for p in model.parameters())
    if non_embedding:
        n -= model.wte.weight.numel()
        if model.wpe is not None:
            n -= model.wpe.weight.numel()
    return n


def block_matmul_params(cfg: TokenLMConfig) -> int:
    """Weights of one block that take part in a matmul: q, k, v (``n_kv_head`` heads), output
    projection, and the MLP (two matrices, three for SwiGLU). GPT-2: 4 d^2 + 2 * mlp_ratio * d^2."""
    d = cfg.d_model
    kv = (cfg.n_kv_head or cfg.n_head) * (d // cfg.n_head)
    hidden = cfg.mlp_hidden or cfg.mlp_ratio * d
    return 2 * d * d + 2 * d * kv + (3 if cfg.activation == "swiglu" else 2) * d * hidden


def token_lm_flops_per_token(cfg: TokenLMConfig) -> float:
    """Training FLOPs per token, nanoGPT/PaLM convention: 6 * N_matmul + 12 * L * d * T.

    N_matmul counts every weight that takes part in a matmul, the LM head included (vocab * d),
    and excludes embedding look-ups; the attention term is the full (non-causal-halved) 12 L d T.
    """
    d, L = cfg.d_model, cfg.n_layer
    n_matmul = L * block_matmul_params(cfg) + cfg.vocab_size * d
    return 6.0 * n_matmul + 12.0 * L * d * cfg.seq_len
