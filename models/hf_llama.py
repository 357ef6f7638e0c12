"""``transformers`` ``LlamaForCausalLM`` weights into our Llama-style models (``models.llama``).

``from_hf_llama`` gives the token LM with identical logits; ``pm_from_hf_llama`` the PM-8B baseline
(two more token layers initialised the same way); ``conceptlm_from_hf_llama`` gives
ConceptLM-Llama for continual pre-training (arXiv 2602.08984 §4.3, Table 3): every backbone weight
copied, and the new concept layers initialised from the backbone's first layers ("the new layers are
initialised from the base's first two layers", §4.3; the released code does not do it, CODE_NOTES
item 14). The codebook transform and the coefficient heads start fresh.

HF keeps q, k, v and gate, up as separate matrices; ours are fused ``[q | k | v]`` and
``[gate | up]`` along the output dimension, so those are concatenated. Both use the "rotate half"
rotary convention on the whole head, and Llama 3.1's rotary scaling is reproduced
(``blocks.llama3_scaled``).
"""
from __future__ import annotations

import torch

from models.conceptlm import ConceptLM
from models.llama import LlamaConfig
from models.registry import get_spec
from models.token_lm import TokenLM

_BLOCK_MAP = {  # ours -> HF parts concatenated along dim 0, per block (same '.weight' / '.bias' suffix)
    "ln1": ["input_layernorm"], "ln2": ["post_attention_layernorm"],
    "attn.qkv": ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "attn.proj": ["self_attn.o_proj"],
    "mlp.fc": ["mlp.gate_proj", "mlp.up_proj"], "mlp.proj": ["mlp.down_proj"],
}


def config_fields(hf_config, seq_len: int | None = None) -> dict:
    """Our Llama config fields (without ``arch``) from a ``transformers`` ``LlamaConfig``."""
    c = hf_config
    if c.hidden_act != "silu" or c.head_dim != c.hidden_size // c.num_attention_heads or c.attention_bias != c.mlp_bias:
        raise ValueError("only Llama models with SiLU, head_dim = hidden_size / heads and attention_bias == "
                         "mlp_bias are supported")
    rope = dict(c.rope_parameters)
    if rope["rope_type"] not in ("default", "llama3"):
        raise ValueError(f"Llama rope_type {rope['rope_type']!r} is not supported (default and llama3 only)")
    scaling = None if rope["rope_type"] == "default" else {k: v for k, v in rope.items() if k != "rope_theta"}
    return dict(vocab_size=c.vocab_size, seq_len=seq_len or c.max_position_embeddings, d_model=c.hidden_size,
                n_layer=c.num_hidden_layers, n_head=c.num_attention_heads, n_kv_head=c.num_key_value_heads,
                mlp_hidden=c.intermediate_size, bias=c.attention_bias, norm_eps=c.rms_norm_eps,
                rotary_base=rope["rope_theta"], rope_scaling=scaling, tie_embeddings=c.tie_word_embeddings,
                dropout=0.0)


@torch.no_grad()
def _copy_backbone(model: TokenLM, hf_model, sources: list[int] | None = None) -> None:
    """Copy embeddings, final norm, head, and block i from HF layer ``sources[i]`` (default i)."""
    hf = hf_model.state_dict()
    for i, block in zip(sources or range(len(model.blocks)), model.blocks):
        for name, param in block.named_parameters():
            ours, suffix = name.rsplit(".", 1)
            param.copy_(torch.cat([hf[f"model.layers.{i}.{part}.{suffix}"] for part in _BLOCK_MAP[ours]]))
    model.wte.weight.copy_(hf["model.embed_tokens.weight"])
    model.ln_f.weight.copy_(hf["model.norm.weight"])
    if not model.cfg.tie_embeddings:
        model.lm_head.weight.copy_(hf["lm_head.weight"])


def from_hf_llama(hf_model, seq_len: int | None = None) -> TokenLM:
    """Our Llama TokenLM holding the weights of a ``LlamaForCausalLM``."""
    model = TokenLM(LlamaConfig(**config_fields(hf_model.config, seq_len)))
    _copy_backbone(model, hf_model)
    return model


def pm_from_hf_llama(hf_model, seq_len: int | None = None, extra_layers: int = 2, insert_at: int = 1) -> TokenLM:
    """PM-8B of Table 3 (§4.3): the backbone plus ``extra_layers`` token layers initialised from its
    first layers, like ConceptLM-8B's concept layers. The paper does not say where they go; we put them
    after the first ``insert_at`` layers, where ConceptLM-Llama inserts its concept module (default L1),
    so the two models differ only in what the new layers run on (tokens vs concepts)."""
    fields = config_fields(hf_model.config, seq_len)
    if not 0 <= insert_at <= fields["n_layer"] or not 0 < extra_layers <= fields["n_layer"]:
        raise ValueError(f"insert_at={insert_at} and extra_layers={extra_layers} must lie within the "
                         f"{fields['n_layer']} backbone layers")
    model = TokenLM(LlamaConfig(**{**fields, "n_layer": fields["n_layer"] + extra_layers}))
    layers = list(range(fields["n_layer"]))
    _copy_backbone(model, hf_model, layers[:insert_at] + layers[:extra_layers] + layers[insert_at:])
    return model


@torch.no_grad()
def conceptlm_from_hf_llama(hf_model, seq_len: int | None = None, **options) -> ConceptLM:
    """ConceptLM-Llama (``conceptlm_llama`` options as keywords) on a ``LlamaForCausalLM``'s weights,
    concept layer i initialised from backbone layer i."""
    spec = get_spec("conceptlm_llama")
    cfg = spec.config_cls(**config_fields(hf_model.config, seq_len), **options)
    if cfg.concept_layers > cfg.n_layer:
        raise ValueError(f"model.concept_layers={cfg.concept_layers} exceeds the {cfg.n_layer} backbone layers "
                         "to initialise them from")
    model = spec.build(cfg)
    _copy_backbone(model, hf_model)
    for concept_block, block in zip(model.concept_blocks, model.blocks):
        concept_block.load_state_dict(block.state_dict())
    return model
