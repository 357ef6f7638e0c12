"""Shared transformer blocks: causal self-attention (SDPA), MLP, one residual block.

One block serves every backbone of the suite; what differs between GPT-2 and Pythia/GPT-NeoX is
configuration, not code:

* GPT-2 (Radford et al. 2019): learned absolute positions, sequential residual
  ``x + attn(ln1(x))`` then ``x + mlp(ln2(x))``, tanh-approximated GELU.
* GPT-NeoX / Pythia (Black et al. 2022, Biderman et al. 2023): rotary positions on a fraction
  ``rotary_pct`` of every head's dimensions, *parallel* residual ``x + attn(ln1(x)) + mlp(ln2(x))``,
  exact GELU.

The attention projection is one fused ``qkv`` matmul laid out ``[q | k | v]`` along the output
dimension, followed by ``F.scaled_dot_product_attention(is_causal=True)``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Rotary(nn.Module):
    """Rotary position embedding (Su et al. 2021) on the first ``rot_dim`` dims of each head.

    Uses the GPT-NeoX "rotate half" convention: dimension i is paired with i + rot_dim/2.
    """

    def __init__(self, head_dim: int, rotary_pct: float, base: float, max_len: int):
        super().__init__()
        rot_dim = int(head_dim * rotary_pct)
        self.rot_dim = rot_dim - rot_dim % 2
        inv_freq = 1.0 / (base ** (torch.arange(0, self.rot_dim, 2, dtype=torch.float32) / self.rot_dim))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)
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


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_head: int, bias: bool, dropout: float, rotary: Rotary | None):
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = dropout
        self.rotary = rotary

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        if self.rotary is not None:
            q, k = self.rotary(q), self.rotary(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, d_model: int, hidden: int, bias: bool, activation: str):
        super().__init__()
        self.fc = nn.Linear(d_model, hidden, bias=bias)
        self.proj = nn.Linear(hidden, d_model, bias=bias)
        self.approximate = {"gelu_tanh": "tanh", "gelu": "none"}[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate))


class Block(nn.Module):
    """Pre-norm transformer block; ``parallel_residual`` selects the GPT-NeoX form."""

    def __init__(self, d_model: int, n_head: int, mlp_hidden: int, *, bias: bool, dropout: float,
                 activation: str, norm_eps: float, parallel_residual: bool, rotary: Rotary | None):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.attn = CausalSelfAttention(d_model, n_head, bias, dropout, rotary)
        self.ln2 = nn.LayerNorm(d_model, eps=norm_eps, bias=bias)
        self.mlp = MLP(d_model, mlp_hidden, bias, activation)
        self.parallel_residual = parallel_residual
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.parallel_residual:
            return x + self.drop(self.attn(self.ln1(x))) + self.drop(self.mlp(self.ln2(x)))
        x = x + self.drop(self.attn(self.ln1(x)))
        return x + self.drop(self.mlp(self.ln2(x)))


def init_weights(module: nn.Module, std: float, n_layer: int) -> None:
    """GPT-2 initialisation: N(0, std) for matrices and embeddings, zero biases, and the residual
    output projections scaled by 1/sqrt(2 * n_layer) (Radford et al. 2019, §2.3).

    PyTorch's default N(0, 1) embedding init with a tied head blows the logits up and drives CPU
    arithmetic into denormals (4-5x slower steps), so every model of the suite uses this.
    """
    for name, p in module.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(p)
        elif p.dim() == 1:  # norm gains
            nn.init.ones_(p)
        elif name.endswith("proj.weight"):
            nn.init.normal_(p, mean=0.0, std=std / math.sqrt(2 * n_layer))
        else:
            nn.init.normal_(p, mean=0.0, std=std)
