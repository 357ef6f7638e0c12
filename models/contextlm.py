"""ContextLM (Dai et al., arXiv 2510.20280): ConceptLM's strongest baseline (arXiv 2602.08984 §4.2,
Tables 1-2; docs/sources.md, "ConceptLM: what the paper leaves open", item 6: high-level compression
without the explicit discrete concept vocabulary and NCP supervision).

Our reading, as a configuration of ``models.conceptlm.ConceptLM`` rather than a second model: the
same encoder, mean pooling over chunks of k and causal concept transformer, whose output goes
through one linear map to a *continuous* next-context embedding; that embedding takes the same
k - 1 shift and is added to the token states before the decoder. There is no codebook, no VQ loss
and no explicit NCP loss: the context path learns only from the next-token loss flowing back
through the fusion ("an inherent next-context prediction objective ... leveraging error signals
derived from future token chunks", 2510.20280 abstract). Not checked against the ContextLM code,
which we could not read: whether its predictor is linear or the identity, its insertion depth and
whether it normalises before fusing.

Defaults (ours unless a source is named): no final norm after the concept layers (as the authors' GPT-2
concept module, docs/sources.md, "ConceptLM: the authors' code", item 2; a d x d map of unit-normalised
states would start at std 0.02 sqrt(d), four times the token states at d = 32, while the residual stream
starts below them);
the predictor one ``nn.Linear(d, d)`` with a bias, N(0, 0.02), zero bias; on GPT-2 the insertion depth
0 and the fusion ln_f(h) + ln_f(c) of ConceptLM-GPT-2 (``backbone_defaults``), elsewhere L1 and
h + c. Everything else (head tying, initialisation, dropout, norms) is the
backbone's and ConceptLM's (``models.token_lm``, ``models.conceptlm``). Setting ``ncp: true`` gives
ContextLM plus an explicit NCP loss (ConceptLM without its codebook).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.configs import ConceptOptions, Predictor


@dataclass(frozen=True)
class ContextOptions(ConceptOptions):
    # ConceptLM-GPT-2's insertion depth and fusion; the codebook fields of ConceptOptions are unused
    backbone_defaults: ClassVar[dict] = {"gpt2": {"insert_layer": 0, "fusion": "norm_add"}}

    predictor: Predictor = "linear"
    concept_norm: bool = False
    ncp: bool = False
    vq: bool = False
