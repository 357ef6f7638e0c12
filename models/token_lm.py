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
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from models.blocks import Block, Rotary, init_weights, make_norm
from models.losses import linear_cross_entropy


@dataclass(frozen=True)
class TokenLMConfig:
    """Hyper-parameters of a GPT-2-style token LM. Every default, with its source (HF = ``transformers``
    ``GPT2Config`` / ``GPT2PreTrainedModel._init_weights``; G = the ConceptLM authors' GPT-2 code,
    ``ConceptLM_GPT2model.py``, CODE_NOTES.md):

    * ``mlp_ratio`` 4: MLP width 4 d (HF ``n_inner=None``).
    * ``dropout`` 0.0: HF's GPT-2 has 0.1 on embeddings, residuals and attention, and G reads its dropout
      from the checkpoint config (``config.embd_pdrop``, G L184), which is not released; we use 0.0 as
      nanoGPT's pre-training recipe and Pythia do (switch ``dropout``).
    * ``bias`` True: biases in every projection and norm (HF ``Conv1D``, ``nn.LayerNorm``).
    * ``norm_eps`` 1e-5 (HF ``layer_norm_epsilon``); ``norm`` layernorm, pre-norm blocks, final norm
      ``ln_f`` before the head (HF ``GPT2Model.ln_f``).
    * ``activation`` gelu_tanh (HF ``gelu_new``); ``positional`` learned (``wpe``, HF).
    * ``tie_embeddings`` **False**: the head is a separate ``nn.Linear(d, V, bias=False)``. GPT-2 itself
      (HF ``GPT2LMHeadModel``, ``tie_word_embeddings=True``) ties it to ``wte``, but the ConceptLM
      authors' GPT-2 code keeps ``wte`` and ``lm_head`` apart (G L180-181; its ``tie_weights()`` does
      nothing, G L477), for ConceptLM and for its ``'baseline'`` branch alike. With the GPT-2 fusion
      ``ln_f(h) + ln_f(c_hat)`` at insertion depth 0 the decoder's residual stream starts from the
      unit-normalised input embedding, which a tied head maps back to the input token.
      Base and PM GPT-2 are untied too, so that every GPT-2 arm of a table has the same head. The switch
      (``tie_embeddings: true``) stays for diagnostic rows; an imported HF GPT-2 keeps its tie
      (``models.hf_gpt2``).
    * ``init_std`` 0.02: N(0, 0.02) for every matrix and embedding (``wte`` and ``wpe`` included),
      zero biases, unit norm gains (HF ``initializer_range``, ``_init_weights``; ``blocks.init_weights``).
    * ``scale_residual_init`` True: the attention and MLP output projections start at
      0.02 / sqrt(2 ``n_layer``), with the *model's* ``n_layer`` for every block it builds (HF
      ``GPT2PreTrainedModel._init_weights`` scales every ``GPT2Attention`` / ``GPT2MLP`` ``c_proj`` by
      ``config.n_layer``, the blocks of G's concept module included, since they are built from the same
      config); False leaves them at 0.02 (GPT-NeoX, Llama).
    * Attention: softmax scale 1/sqrt(head dim), causal (HF ``scale_attn_weights``).
    """
    vocab_size: int
    seq_len: int
    d_model: int
    n_layer: int
    n_head: int
    mlp_ratio: int = 4
    dropout: float = 0.0
    bias: bool = True
    norm_eps: float = 1e-5
    activation: str = "gelu_tanh"      # gelu_tanh (GPT-2) | gelu (GPT-NeoX) | swiglu (Llama)
    positional: str = "learned"        # learned (GPT-2) | rotary (GPT-NeoX, Llama)
    rotary_pct: float = 1.0
    rotary_base: float = 10000.0
    parallel_residual: bool = False
    tie_embeddings: bool = False       # untied, as the ConceptLM authors' GPT-2 code (see above); true = GPT-2's tie
    init_std: float = 0.02
    scale_residual_init: bool = True   # output projections x 1/sqrt(2 n_layer) at init (HF GPT-2) | none (NeoX, Llama)
    norm: str = "layernorm"            # layernorm | rmsnorm (Llama)
    n_kv_head: int | None = None       # key/value heads (grouped-query attention); None = n_head
    mlp_hidden: int | None = None      # MLP width; None = mlp_ratio * d_model
    rope_scaling: dict | None = None   # Llama 3.1 rotary scaling, transformers' rope_parameters layout

    def __post_init__(self):
        if self.d_model % self.n_head:
            raise ValueError(f"model.d_model={self.d_model} is not divisible by model.n_head={self.n_head}; "
                             "choose n_head dividing d_model")
        if self.positional not in ("learned", "rotary"):
            raise ValueError(f"model.positional={self.positional!r}: use 'learned' or 'rotary'")
        if self.activation not in ("gelu_tanh", "gelu", "swiglu"):
            raise ValueError(f"model.activation={self.activation!r}: use 'gelu_tanh', 'gelu' or 'swiglu'")
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"model.norm={self.norm!r}: use 'layernorm' or 'rmsnorm'")
        if self.n_kv_head is not None and (self.n_kv_head < 1 or self.n_head % self.n_kv_head):
            raise ValueError(f"model.n_kv_head={self.n_kv_head} does not divide model.n_head={self.n_head}; "
                             "choose a divisor of n_head (n_head itself = no grouping)")


@dataclass(frozen=True)
class PythiaConfig(TokenLMConfig):
    """GPT-NeoX conventions used by Pythia (HF = ``transformers`` ``GPTNeoXConfig`` / ``GPTNeoXPreTrainedModel``;
    P = the ConceptLM authors' Pythia code, ``ConceptLM_Pythiamodel.py``, CODE_NOTES.md):

    * ``activation`` gelu, exact (HF ``hidden_act``); ``parallel_residual`` True (HF ``use_parallel_residual``).
    * ``positional`` rotary on 25 % of each head (HF ``partial_rotary_factor`` 0.25), base 10000 (HF
      ``rope_theta``); no learned positions.
    * ``tie_embeddings`` False: separate ``embed_out`` (HF ``tie_word_embeddings=False``; P L227, its
      ``tie_weights()`` does nothing, P L616).
    * ``bias`` True (HF ``attention_bias``, dense biases); ``norm_eps`` 1e-5 (HF ``layer_norm_eps``), final
      ``final_layer_norm``; ``dropout`` 0.0 (HF ``hidden_dropout`` / ``attention_dropout``; P's
      ``emb_dropout`` is ``Dropout(0.)``).
    * ``init_std`` 0.02 and ``scale_residual_init`` **False**: every matrix and embedding N(0, 0.02), no
      depth scaling of the output projections (HF ``PreTrainedModel._init_weights``, which
      ``GPTNeoXPreTrainedModel`` inherits; the authors' bundled ``modeling_gpt_neox.py`` L70-82 is the
      same, and P builds every layer, concept layers included, under it). EleutherAI's own Pythia runs
      used gpt-neox's ``small_init`` / ``wang_init``, which we do not reproduce; ``scale_residual_init:
      true`` gives GPT-2's 1/sqrt(2 n_layer).
    """
    activation: str = "gelu"
    positional: str = "rotary"
    rotary_pct: float = 0.25
    parallel_residual: bool = True
    tie_embeddings: bool = False
    scale_residual_init: bool = False


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


class TokenLM(nn.Module):
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

    @staticmethod
    def loss_names(cfg) -> tuple[str, ...]:
        """The names of the losses ``forward`` returns for ``cfg`` (``train.loss_weights`` keys)."""
        return ("ntp",)

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        if idx.shape[1] > self.cfg.seq_len:
            raise ValueError(f"input length {idx.shape[1]} exceeds model.seq_len={self.cfg.seq_len}")
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe.weight[: idx.shape[1]]
        return self.drop(x)

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """Final normalised hidden states, (batch, time, d_model)."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> dict:
        """idx: (batch, time) token ids. Without targets: ``{"logits": (batch, time, vocab)}``.
        With targets (targets[t] is the token after idx[t]): ``{"losses": {"ntp": mean NLL}}``,
        computed by the fused head + cross-entropy without materialising the logits twice."""
        h = self.hidden(idx)
        if targets is None:
            return {"logits": self.lm_head(h)}
        return {"losses": {"ntp": linear_cross_entropy(h.flatten(0, 1), self.lm_head.weight, targets.flatten())}}

    def num_params(self, non_embedding: bool = True) -> int:
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wte.weight.numel()
            if self.wpe is not None:
                n -= self.wpe.weight.numel()
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
