"""Llama-style token LM: the backbone of ConceptLM's 8B continual pre-training (arXiv 2602.08984 §4.3).

ConceptLM-8B starts from Llama-3.1-8B (Table 3). The backbone is ``models.token_lm.TokenLM`` with
Llama's conventions, which the shared blocks take as configuration: RMSNorm, a SwiGLU MLP of width
``mlp_hidden`` (Llama's ``intermediate_size``), rotary positions on every head dimension (with Llama
3.1's frequency scaling when ``rope_scaling`` is set), grouped-query attention with ``n_kv_head``
key/value heads, no biases, an untied head. ``models.hf_llama`` converts ``transformers``
``LlamaForCausalLM`` weights into it and builds ConceptLM-Llama from them.
"""
from __future__ import annotations

from dataclasses import dataclass

from models.token_lm import TokenLMConfig


@dataclass(frozen=True)
class LlamaConfig(TokenLMConfig):
    """Llama conventions; ``n_kv_head=None`` means no grouping, ``mlp_hidden=None`` means 4 d."""
    bias: bool = False
    activation: str = "swiglu"
    positional: str = "rotary"
    rotary_pct: float = 1.0
    norm: str = "rmsnorm"
    tie_embeddings: bool = False
