"""Weight conversion between our GPT-2 (``models.token_lm.TokenLM``) and ``transformers``'
``GPT2LMHeadModel``, both directions, through one name map.

HF GPT-2 stores its projections as ``Conv1D`` with weights laid out (in, out); ours are
``nn.Linear`` (out, in), so those matrices are transposed. The fused ``c_attn`` layout
``[q | k | v]`` is the same as ours.

Tying: HF GPT-2 ties ``lm_head`` to ``wte`` (``tie_word_embeddings=True``), our GPT-2 default is untied
(the ConceptLM authors' GPT-2 code, ``models.token_lm``). An import keeps the checkpoint's choice
(tied for ``from_pretrained("gpt2")``, the head copied when a checkpoint is untied); an export writes
ours (``tie_word_embeddings`` = ``tie_embeddings``, the head copied when untied).
"""
from __future__ import annotations

import torch

from models.configs import GPT2_CONVENTIONS, TokenLMConfig, gpt2_mismatch
from models.token_lm import TokenLM

_BLOCK_MAP = {  # ours -> HF, per block; True = Conv1D weight, transposed
    "ln1.weight": ("ln_1.weight", False), "ln1.bias": ("ln_1.bias", False),
    "attn.qkv.weight": ("attn.c_attn.weight", True), "attn.qkv.bias": ("attn.c_attn.bias", False),
    "attn.proj.weight": ("attn.c_proj.weight", True), "attn.proj.bias": ("attn.c_proj.bias", False),
    "ln2.weight": ("ln_2.weight", False), "ln2.bias": ("ln_2.bias", False),
    "mlp.fc.weight": ("mlp.c_fc.weight", True), "mlp.fc.bias": ("mlp.c_fc.bias", False),
    "mlp.proj.weight": ("mlp.c_proj.weight", True), "mlp.proj.bias": ("mlp.c_proj.bias", False),
}
_TOP_MAP = {"wte.weight": ("transformer.wte.weight", False), "wpe.weight": ("transformer.wpe.weight", False),
            "ln_f.weight": ("transformer.ln_f.weight", False), "ln_f.bias": ("transformer.ln_f.bias", False)}


def _name_map(n_layer: int) -> dict[str, tuple[str, bool]]:
    names = dict(_TOP_MAP)
    for i in range(n_layer):
        names.update({f"blocks.{i}.{ours}": (f"transformer.h.{i}.{hf}", t) for ours, (hf, t) in _BLOCK_MAP.items()})
    return names


def config_from_hf(hf_config, seq_len: int | None = None) -> TokenLMConfig:
    if hf_config.activation_function not in ("gelu_new", "gelu_pytorch_tanh"):
        raise ValueError(f"GPT-2 activation {hf_config.activation_function!r} is not supported (gelu_new only)")
    return TokenLMConfig(vocab_size=hf_config.vocab_size, seq_len=seq_len or hf_config.n_positions,
                         d_model=hf_config.n_embd, n_layer=hf_config.n_layer, n_head=hf_config.n_head,
                         norm_eps=hf_config.layer_norm_epsilon, dropout=0.0,
                         tie_embeddings=getattr(hf_config, "tie_word_embeddings", True))


@torch.no_grad()
def from_hf_gpt2(hf_model, seq_len: int | None = None) -> TokenLM:
    """Our TokenLM holding the weights of a ``GPT2LMHeadModel`` (e.g. ``from_pretrained("gpt2")``)."""
    cfg = config_from_hf(hf_model.config, seq_len)
    model = TokenLM(cfg)
    hf_state = hf_model.state_dict()
    for ours, (hf, transpose) in _name_map(cfg.n_layer).items():
        w = hf_state[hf]
        if ours == "wpe.weight":
            w = w[: cfg.seq_len]
        model.get_parameter(ours).copy_(w.T if transpose else w)
    if not cfg.tie_embeddings:
        model.lm_head.weight.copy_(hf_state["lm_head.weight"])
    return model


@torch.no_grad()
def to_hf_gpt2(model: TokenLM, **config_kwargs):
    """A ``GPT2LMHeadModel`` with our weights (for lm-eval's ``hf`` backend and parity checks)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = model.cfg
    if type(model) is not TokenLM:  # a concept family's extra modules have no place in GPT2LMHeadModel
        raise ValueError(f"only token LMs export to GPT-2, not {type(model).__name__}: its extra modules would be lost")
    mismatch = gpt2_mismatch(cfg)
    if mismatch is not None:
        raise ValueError(f"GPT2LMHeadModel has {', '.join(f'{k} {v}' for k, v in GPT2_CONVENTIONS.items())} and one "
                         f"key/value head per head; this model has model.{mismatch[0]}={mismatch[1]}: it does not "
                         "export to GPT-2")
    hf_cfg = GPT2Config(vocab_size=cfg.vocab_size, n_positions=cfg.seq_len, n_embd=cfg.d_model,
                        n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=cfg.mlp_hidden or cfg.mlp_ratio * cfg.d_model,
                        layer_norm_epsilon=cfg.norm_eps, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        tie_word_embeddings=cfg.tie_embeddings, **config_kwargs)
    hf_model = GPT2LMHeadModel(hf_cfg)
    state = hf_model.state_dict()
    for ours, (hf, transpose) in _name_map(cfg.n_layer).items():
        w = model.get_parameter(ours)
        state[hf].copy_(w.T if transpose else w)
    if not cfg.tie_embeddings:
        state["lm_head.weight"].copy_(model.lm_head.weight)
    hf_model.load_state_dict(state)
    return hf_model.eval()
