"""ContextLM (Dai et al., arXiv 2510.20280): ConceptLM's strongest baseline (arXiv 2602.08984 §4.2,
Tables 1-2; note 000 §3.2: "high-level compression without the explicit discrete concept vocabulary
and NCP supervision").

Our reading, as a configuration of ``models.conceptlm.ConceptLM`` rather than a second model: the
same encoder, mean pooling over chunks of k and causal concept transformer, whose output goes
through one linear map to a *continuous* next-context embedding; that embedding takes the same
k - 1 shift and is added to the token states before the decoder. There is no codebook, no VQ loss
and no explicit NCP loss: the context path learns only from the next-token loss flowing back
through the fusion ("an inherent next-context prediction objective ... leveraging error signals
derived from future token chunks", 2510.20280 abstract). Not checked against the ContextLM code,
which we could not read: whether its predictor is linear or the identity, its insertion depth and
whether it normalises before fusing. We leave out the final norm of the concept layers, as the
authors' GPT-2 concept module does (CODE_NOTES item 2): a d x d map of unit-normalised states
starts at std 0.02 sqrt(d), four times the token states at d = 32, which stalls early training at
insertion depth 0; on the residual stream it starts below them. Setting ``ncp: true`` gives
ContextLM plus an explicit NCP loss (ConceptLM without its codebook).
"""
from __future__ import annotations

from dataclasses import dataclass

from models.conceptlm import ConceptOptions


@dataclass(frozen=True)
class ContextOptions(ConceptOptions):
    predictor: str = "linear"
    concept_norm: bool = False
    ncp: bool = False
    vq: bool = False
