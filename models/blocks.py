"""Shared transformer blocks: causal self-attention (SDPA), MLP, one residual block.

One block serves every backbone of the suite; what differs between GPT-2, Pythia/GPT-NeoX and Llama
is configuration, not code:

* GPT-2 (Radford et al. 2019): learned absolute positions, sequential residual
  ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, tanh-approximated GELU.
* GPT-NeoX / Pythia (Black et al. 2022, Biderman et al. 2023): rotary positions on a fraction
  ``rotary_pct`` of every head's dimensions, *parallel* residual ``x + attn(ln1(x)) + mlp(ln2(x))``,
  exact GELU.
* Llama (Touvron et al. 2023; Llama 3, Grattafiori et al. 2024): RMSNorm, SwiGLU MLP, rotary on every
  dimension (optionally with Llama 3.1's frequency scaling), grouped-query attention (``n_kv_head``
  key/value heads shared by ``n_head / n_kv_head`` query heads each), no biases.

The attention projection is one fused ``qkv`` matmul laid out ``[q | k | v]`` along the output
dimension (k and v have ``n_kv_head`` heads), followed by
``F.scaled_dot_product_attention(is_causal=True)``. A SwiGLU MLP fuses its gate and up projections
the same way, ``fc`` laid out ``[gate | up]``. The projections are ``models.kernels.Linear`` (``nn.Linear``
computed through oneDNN on CPU in fp32) and a GELU MLP's first product has the GELU fused into it
(``linear_gelu``); elsewhere both are ``F.linear`` / ``F.gelu``.

Incremental decoding: ``Block.forward(x, cache=KVCache(max_len))`` appends the keys and values of
``x`` to the layer's cache and lets every new position attend to all cached positions and causally
to the new ones. The new positions are ``cache.length .. cache.length + t - 1``: rotary rotates
q and k at those offsets (the cache stores rotated keys), so a token decoded at position p sees the
same rotations as in the full forward. Learned positions are the caller's (``TokenLM.embed(idx,
offset)``). Every row of the batch is at the same position (equal-length prompts).
"""
from __future__ import annotations

import math
import zlib

import torch
import torch.nn.functional as F
from torch import nn

from models.kernels import Linear, linear_gelu


class Rotary(nn.Module):
    """Rotary position embedding (Su et al. 2021) on the first ``rot_dim`` dims of each head.

    Uses the GPT-NeoX "rotate half" convention (also Llama's): dimension i is paired with i + rot_dim/2.
    ``scaling`` is Llama 3.1's frequency scaling (``{"rope_type": "llama3", "factor", "low_freq_factor",
    "high_freq_factor", "original_max_position_embeddings"}``, as in ``transformers``). ``stride`` places
    the i-th row at position ``i * stride``: a sequence of chunk summaries keeps the position of each
    chunk's first token (ConceptLM's concept layers, Pythia and Llama code).
    """

    def __init__(self, head_dim: int, rotary_pct: float, base: float, max_len: int,
                 scaling: dict | None = None, stride: int = 1):
        super().__init__()
        rot_dim = int(head_dim * rotary_pct)
        self.rot_dim = rot_dim - rot_dim % 2
        inv_freq = 1.0 / (base ** (torch.arange(0, self.rot_dim, 2, dtype=torch.float32) / self.rot_dim))
        if scaling is not None:
            inv_freq = llama3_scaled(inv_freq, scaling)
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32) * stride, inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """x: (batch, heads, time, head_dim) -> same shape, positions offset..offset+time-1."""
        t = x.shape[-2]
        cos = self.cos[offset:offset + t].to(x.dtype)
        sin = self.sin[offset:offset + t].to(x.dtype)
        rot, keep = x[..., :self.rot_dim], x[..., self.rot_dim:]
        x1, x2 = rot.chunk(2, dim=-1)
        rotated = rot * cos + torch.cat([-x2, x1], dim=-1) * sin
        return torch.cat([rotated, keep], dim=-1)


def llama3_scaled(inv_freq: torch.Tensor, scaling: dict) -> torch.Tensor:
    """Llama 3.1 rotary frequencies: wavelengths beyond ``original / low_freq_factor`` are divided by
    ``factor``, those below ``original / high_freq_factor`` kept, the band between interpolated (the
    config checks the keys: ``models.configs.ROPE_SCALING``)."""
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > original / low, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    medium = (wavelen >= original / high) & (wavelen <= original / low)
    return torch.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


class KVCache:
    """Keys and values of one attention layer, for incremental decoding.

    Preallocated on the first ``append`` to (batch, kv heads, ``max_len``, head dim) in the keys'
    dtype and device (no re-allocation per token); ``length`` positions are filled. Keys are stored
    after rotary, values as projected. GQA layers store ``n_kv_head`` heads, not ``n_head``.
    """

    def __init__(self, max_len: int):
        self.max_len, self.length = max_len, 0
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (batch, kv heads, t, head dim) at positions length..length+t-1; return the keys
        and values of every position so far (views into the buffers)."""
        b, h, t, d = k.shape
        end = self.length + t
        if end > self.max_len:
            raise ValueError(f"KV cache holds {self.max_len} positions (model.seq_len) and {end} were fed; "
                             "shorten the prompt or max_new_tokens")
        if self.k is None:
            self.k = k.new_empty(b, h, self.max_len, d)
            self.v = v.new_empty(b, h, self.max_len, v.shape[-1])
        elif self.k.shape[0] != b:
            raise ValueError(f"KV cache was built for batch {self.k.shape[0]}, got batch {b}; "
                             "start a new cache (init_state) for another batch")
        self.k[:, :, self.length:end] = k
        self.v[:, :, self.length:end] = v
        self.length = end
        return self.k[:, :, :end], self.v[:, :, :end]

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (NCM's block-diagonal sampling keeps only the source)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a KV cache of {self.length} positions to {length}")
        self.length = length


class Segments:
    """Attention structured by consecutive segments of the sequence (lengths ``lengths``, summing to its
    length), given to ``CausalSelfAttention`` in place of a bool mask: ``prefix`` False, each segment
    attends to itself only (block-diagonal); True, to itself and every earlier segment (block-causal).
    ``source`` > 0: the sequence starts with a source of that many positions (NCM's conditioning prefix,
    NCM Sec. 3.4) that attends to itself only and that every segment also sees; the segments
    follow it. Equal to the explicit mask (``mask()``), computed segment by segment: one SDPA call on
    the segment's queries and the keys it sees, so the masked-out work is never done (NCM's 12 scales of
    L 128: 29,440 of the 144,400 query-key pairs block-diagonal)."""

    def __init__(self, lengths: tuple[int, ...], prefix: bool, source: int = 0):
        self.lengths, self.prefix, self.source = tuple(lengths), prefix, source
        ends = (torch.tensor(self.lengths).cumsum(0) + source).tolist()
        self.spans = list(zip([source] + ends[:-1], ends))

    def mask(self) -> torch.Tensor:
        """The bool (N, N) mask these segments stand for (True = may attend), N = source + sum(lengths)."""
        levels = torch.repeat_interleave(torch.arange(len(self.lengths) + 1),
                                         torch.tensor((self.source,) + self.lengths))
        q, k = levels[:, None], levels[None, :]
        return (q >= k if self.prefix else q == k) | (k == 0)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float, gqa: bool) -> torch.Tensor:
        if q.shape[2] != self.spans[-1][1]:
            raise ValueError(f"Segments of total length {self.spans[-1][1]} given for a sequence of {q.shape[2]}")
        # split, not sliced: the backward of one split is one concatenation, where each slice's backward
        # would fill and add a full-size zero gradient (1.6x the attention's time at NCM's 12 scales)
        sizes = ((self.source,) if self.source else ()) + self.lengths
        qs, ks, vs = (t.split(sizes, dim=2) for t in (q, k, v))
        out = []
        for i, q_i in enumerate(qs):
            if i == 0 and self.source:  # the source sees itself only
                seen = [0]
            elif self.prefix:           # block-causal: the source and every segment up to this one
                seen = list(range(i + 1))
            else:                       # block-diagonal: the source and this segment
                seen = ([0] if self.source else []) + [i]
            keys, values = (parts[seen[0]] if len(seen) == 1 else torch.cat([parts[j] for j in seen], 2)
                            for parts in (ks, vs))
            out.append(F.scaled_dot_product_attention(q_i, keys, values, dropout_p=dropout, enable_gqa=gqa))
        return torch.cat(out, dim=2)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool, dropout: float, rotary: Rotary | None,
                 n_kv_head: int | None = None):
        super().__init__()
        self.n_head, self.n_kv_head = n_head, n_kv_head or n_head
        self.head_dim = d_model // n_head
        self.qkv = Linear(d_model, (n_head + 2 * self.n_kv_head) * self.head_dim, bias=bias)
        self.proj = Linear(d_model, d_model, bias=bias)
        self.dropout = dropout
        self.rotary = rotary

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, causal: bool = True,
                cache: KVCache | None = None) -> torch.Tensor:
        """Causal attention by default; ``attn_mask`` (bool, True = may attend, broadcastable to
        (batch, heads, query, key)) replaces the causal mask, and so do ``Segments`` (NCM's block-diagonal
        and block-causal masks, computed segment by segment); ``causal=False`` without a mask attends
        everywhere (the masked-diffusion baseline).

        ``cache``: x holds positions ``cache.length ..`` of a sequence whose earlier keys/values are
        in the cache; they are appended, and the queries attend to every cached key and causally
        among themselves (a mask given with a cache must cover (t, cache.length + t))."""
        b, t, d = x.shape
        kv = self.n_kv_head * self.head_dim
        q, k, v = (z.view(b, t, -1, self.head_dim).transpose(1, 2) for z in self.qkv(x).split([d, kv, kv], dim=-1))
        offset = cache.length if cache is not None else 0
        if self.rotary is not None:
            q, k = self.rotary(q, offset), self.rotary(k, offset)
        if isinstance(attn_mask, Segments):
            if cache is not None:
                raise ValueError("Segments attention takes no KV cache; pass the segments' bool mask (Segments.mask())")
            y = attn_mask.attend(q, k, v, self.dropout if self.training else 0.0, self.n_kv_head != self.n_head)
            return self.proj(y.transpose(1, 2).reshape(b, t, d))
        if cache is not None:
            k, v = cache.append(k, v)
            if causal and attn_mask is None and offset > 0:
                causal = False  # is_causal aligns the mask top-left; with a prefix it must be bottom-right
                if t > 1:  # query i (position offset + i) sees keys 0..offset + i
                    attn_mask = torch.ones(t, offset + t, dtype=torch.bool, device=x.device).tril(offset)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=causal and attn_mask is None,
                                           dropout_p=self.dropout if self.training else 0.0,
                                           enable_gqa=self.n_kv_head != self.n_head)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    """GELU MLP, or SwiGLU (``activation='swiglu'``, Shazeer 2020): ``proj(silu(gate) * up)``."""

    def __init__(self, d_model: int, hidden: int, bias: bool, activation: str):
        super().__init__()
        self.gated = activation == "swiglu"
        self.fc = Linear(d_model, (2 if self.gated else 1) * hidden, bias=bias)
        self.proj = Linear(hidden, d_model, bias=bias)
        self.approximate = {"gelu_tanh": "tanh", "gelu": "none", "swiglu": None}[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            gate, up = self.fc(x).chunk(2, dim=-1)
            return self.proj(F.silu(gate) * up)
        return self.proj(linear_gelu(x, self.fc.weight, self.fc.bias, self.approximate))


def make_norm(kind: str, d_model: int, eps: float, bias: bool) -> nn.Module:
    """``layernorm`` (GPT-2, GPT-NeoX) or ``rmsnorm`` (Llama; Zhang & Sennrich 2019, no bias)."""
    return nn.RMSNorm(d_model, eps=eps) if kind == "rmsnorm" else nn.LayerNorm(d_model, eps=eps, bias=bias)


class Block(nn.Module):
    """Pre-norm transformer block; ``parallel_residual`` selects the GPT-NeoX form."""

    def __init__(self, d_model: int, n_head: int, mlp_hidden: int, *, bias: bool, dropout: float,
                 activation: str, norm_eps: float, parallel_residual: bool, rotary: Rotary | None,
                 norm: str = "layernorm", n_kv_head: int | None = None):
        super().__init__()
        self.ln1 = make_norm(norm, d_model, norm_eps, bias)
        self.attn = CausalSelfAttention(d_model, n_head, bias, dropout, rotary, n_kv_head)
        self.ln2 = make_norm(norm, d_model, norm_eps, bias)
        self.mlp = MLP(d_model, mlp_hidden, bias, activation)
        self.parallel_residual = parallel_residual
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None, causal: bool = True,
                cache: KVCache | None = None) -> torch.Tensor:
        """``attn_mask`` / ``causal`` / ``cache``: as ``CausalSelfAttention.forward`` (default: causal, no cache)."""
        if self.parallel_residual:
            return x + self.drop(self.attn(self.ln1(x), attn_mask, causal, cache)) + self.drop(self.mlp(self.ln2(x)))
        x = x + self.drop(self.attn(self.ln1(x), attn_mask, causal, cache))
        return x + self.drop(self.mlp(self.ln2(x)))


def init_weights(module: nn.Module, std: float, n_layer: int | None, root: nn.Module | None = None) -> None:
    """GPT-2 initialisation: N(0, std) for matrices and embeddings, zero biases, and the residual
    output projections scaled by 1/sqrt(2 * n_layer) (Radford et al. 2019, §2.3); ``n_layer=None``
    leaves them at N(0, std) (GPT-NeoX and Llama in ``transformers``: no depth scaling).

    Every tensor is drawn from its own generator, seeded by the run's seed (``torch.initial_seed()``,
    which the trainer sets) and the parameter's name in ``root`` (the whole model; default ``module``):
    two models of one seed start with the same weights wherever they share a parameter of the same
    name and shape -- Base, PM and ConceptLM their embeddings and token blocks -- whatever else they
    build and in whatever order (common random numbers for the paired comparisons of the tables; the
    distribution is unchanged). A caller initialising a part of a model passes the model as ``root``.

    PyTorch's default N(0, 1) embedding init with a tied head blows the logits up and drives CPU
    arithmetic into denormals (4-5x slower steps), so every model of the suite uses this.
    """
    names = {id(p): name for name, p in (root or module).named_parameters()}
    seed = torch.initial_seed()
    for name, p in module.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif p.dim() == 1:  # norm gains
            nn.init.ones_(p)
        else:
            scale = 1 / math.sqrt(2 * n_layer) if name.endswith("proj.weight") and n_layer is not None else 1.0
            nn.init.normal_(p, mean=0.0, std=std * scale, generator=param_generator(seed, names[id(p)], p.device))


def param_generator(seed: int, name: str, device: torch.device) -> torch.Generator:
    """A generator for one named tensor of a run: a function of the run's seed and the name alone."""
    return torch.Generator(device=device).manual_seed((seed * 1_000_003 + zlib.crc32(name.encode())) % 2**63)
