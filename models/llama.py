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

from models.fields import Activation, Norm, Positional
from models.configs import TokenLMConfig


@dataclass(frozen=True)
class LlamaConfig(TokenLMConfig):
    """Llama conventions, each with its source (HF = ``transformers`` ``LlamaConfig`` /
    ``LlamaPreTrainedModel``; 3.1 = Llama-3.1-8B's ``config.json``, the backbone of §4.3; L = the
    ConceptLM authors' Llama code, ``ConceptLM_Llama3model.py``, docs/sources.md, "ConceptLM: the authors'
    code"):

    * ``bias`` False (HF ``attention_bias`` / ``mlp_bias``); ``activation`` swiglu (HF ``silu`` gate);
      ``norm`` rmsnorm, pre-norm, final ``norm`` before the head (HF).
    * ``norm_eps`` 1e-5: 3.1's ``rms_norm_eps`` (HF's default is 1e-6); imports take the checkpoint's.
    * ``positional`` rotary on the whole head (``rotary_pct`` 1.0), base 10000 (HF ``rope_theta``
      default; 3.1 uses 500000 with ``rope_scaling``, set by ``models.hf_llama`` on import).
    * ``tie_embeddings`` False (HF and 3.1 ``tie_word_embeddings=False``; L copies the base's separate
      ``lm_head``, L L985-987).
    * ``n_kv_head=None``: no grouping (HF ``num_key_value_heads`` defaults to the heads; 3.1 has 8 of 32).
    * ``mlp_hidden=None``: 4 d, a placeholder for from-scratch runs (HF's default 11008 at d 4096 and
      3.1's 14336 are ~2.7 d and 3.5 d); imports set it.
    * ``dropout`` 0.0 (HF ``attention_dropout``; Llama has no residual dropout).
    * ``init_std`` 0.02, ``scale_residual_init`` **False**: every matrix and embedding N(0, 0.02), unit
      RMSNorm gains, no depth scaling (HF ``LlamaPreTrainedModel._init_weights``; L L439-448 is the same).
      Only new parts (concept path, PM layers) ever start from it in §4.3; the rest is imported.
    """
    bias: bool = False
    activation: Activation = "swiglu"
    positional: Positional = "rotary"
    rotary_pct: float = 1.0
    norm: Norm = "rmsnorm"
    tie_embeddings: bool = False
    scale_residual_init: bool = False
