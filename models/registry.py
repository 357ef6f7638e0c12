"""Model registry: a name in the config maps to its config dataclass, builder and FLOPs formula.

A new model family registers here once (torchtitan's ModelSpec idea); a new size or ablation is a
config entry. ``build_model({"arch": "gpt2", "d_model": 128, ...}, vocab_size=..., seq_len=...)``.

Token LMs: ``gpt2``, ``pythia``, ``llama`` (the backbones). The concept-level families and their
token-space baseline sit on any backbone, named ``<family>_<backbone>`` (``conceptlm_gpt2``,
``contextlm_pythia``, ``mtp_llama``, ...): the config is the backbone's (same fields, same
conventions) plus the family's options, with the family's per-backbone defaults: the authors' code
for that backbone (``ConceptOptions.backbone_defaults``: on GPT-2 insertion depth 0, §4.1, and the GPT-2
code's fusion, concept norm, code transform and VQ reduction; table in ``models.conceptlm``). So an
experiment switches a Base model to ConceptLM by overriding ``model.arch`` alone. The masked-diffusion
baseline ``mdlm_<backbone>`` (``models.mdlm``) is the backbone's blocks run bidirectionally: it is
in ``NON_CAUSAL``, not ``REGISTRY`` (no next-token logits), and builds through the same functions.
So are NCM's two stages (``models.ncm_tokenizer``, ``models.ncm``): ``ncm_tokenizer``, the multi-scale
residual tokenizer, and ``ncm``, the per-scale generator that carries a frozen copy of it (its
``model.tokenizer`` is the upstream tokenizer run's model config).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass

from models.configs import (ConceptOptions, DLCMOptions, MDLMOptions, MTPOptions, NCMConfig, NCMTokenizerConfig,
                            PythiaConfig, TokenLMConfig)
from models.contextlm import ContextOptions
from models.fields import check_keys, declared_types
from models.llama import LlamaConfig


def load(path: str):
    """The object a ``"module:name"`` path names, its module imported now."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class ModelSpec:
    """A model family under one ``model.arch``: its config dataclass, the ``nn.Module`` it builds and its FLOPs
    formula. The module and the formula are named (``"module:name"``) and imported when first asked for
    (``build``, ``flops_per_token``), so that reading and checking a profile needs the configs alone
    (``models.configs``) and no torch. ``sampler``: how a model of the family samples text (``ar``: one token
    per call; ``ncm``: one scale per call; ``mdlm``: masked diffusion; None: it does not generate).
    ``upstream``: (model field, arch) of a model trained on top of another run (NCM's generator on its
    tokenizer run): the experiment's ``upstream:`` fills that field with the upstream run's model settings,
    and the trainer loads the upstream's ``final/`` (``model.load_upstream``). ``shardable``: FSDP
    (``train.parallel: fsdp``, ``trainer.distributed``) wraps the model's ``fsdp_units()`` one by one, then the
    root; offered where it is exact and tested (token LMs; ConceptLM, whose SimVQ learns a transform of a
    frozen code table: no EMA statistics), not for a model with state each rank updates from its own batch
    (DLCM's parser statistics) nor one not tested sharded yet (ContextLM, MTP, NCM, masked diffusion)."""
    name: str
    config_cls: type
    model: str
    flops: str
    sampler: str | None = "ar"
    upstream: tuple[str, str] | None = None
    shardable: bool = False

    @property
    def build(self) -> type:
        return load(self.model)

    @property
    def flops_per_token(self):
        return load(self.flops)


BACKBONES = {"gpt2": TokenLMConfig, "pythia": PythiaConfig, "llama": LlamaConfig}
FAMILIES = {  # family: (options mixed into the backbone config, model, FLOPs formula, shardable)
    "conceptlm": (ConceptOptions, "models.conceptlm:ConceptLM", "models.conceptlm:concept_lm_flops_per_token", True),
    "contextlm": (ContextOptions, "models.conceptlm:ConceptLM", "models.conceptlm:concept_lm_flops_per_token", False),
    "mtp": (MTPOptions, "models.mtp:MTPLM", "models.mtp:mtp_flops_per_token", False),
    # DLCM (arXiv 2512.24617): models/dlcm.py
    "dlcm": (DLCMOptions, "models.dlcm:DLCM", "models.dlcm:dlcm_flops_per_token", False),
}
TOKEN_LM = ("models.token_lm:TokenLM", "models.token_lm:token_lm_flops_per_token")


def family_config(options: type, backbone: str) -> type:
    """The frozen dataclass of ``options`` on ``backbone``: the backbone config's fields, then the
    options' fields, with the options' ``backbone_defaults[backbone]`` overriding their defaults."""
    defaults = getattr(options, "backbone_defaults", {}).get(backbone, {})
    name = f"{options.__name__.removesuffix('Options')}{backbone.capitalize()}Config"
    fields = [(key, declared_types(options)[key], dataclasses.field(default=value)) for key, value in defaults.items()]
    return dataclasses.make_dataclass(name, fields, bases=(options, BACKBONES[backbone]), frozen=True)


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec for spec in (
        *(ModelSpec(name, cfg, *TOKEN_LM, shardable=True) for name, cfg in BACKBONES.items()),
        *(ModelSpec(f"{family}_{backbone}", family_config(options, backbone), model, flops, shardable=shardable)
          for family, (options, model, flops, shardable) in FAMILIES.items() for backbone in BACKBONES),
    )
}


# Families that are not causal token LMs (no next-token logits), trained by the same trainer: REGISTRY
# stays the set the causality, harness and perplexity code iterates over. NCM (arXiv 2610.14162): the
# multi-scale residual tokenizer (stage 1) and the per-scale generator over its codes (stage 2).
NON_CAUSAL: dict[str, ModelSpec] = {
    spec.name: spec for spec in (
        ModelSpec("ncm_tokenizer", NCMTokenizerConfig, "models.ncm_tokenizer:NCMTokenizer",
                  "models.ncm_tokenizer:ncm_tokenizer_flops_per_token", sampler=None),
        ModelSpec("ncm", NCMConfig, "models.ncm:NCM", "models.ncm:ncm_flops_per_token", sampler="ncm",
                  upstream=("tokenizer", "ncm_tokenizer")),
        # NCM's masked-diffusion baseline on each backbone's blocks, run bidirectionally (models/mdlm.py)
        *(ModelSpec(f"mdlm_{backbone}", family_config(MDLMOptions, backbone), "models.mdlm:MDLM",
                    "models.mdlm:mdlm_flops_per_token", sampler="mdlm") for backbone in BACKBONES),
    )
}


def get_spec(arch: str) -> ModelSpec:
    spec = (REGISTRY.get(arch) or NON_CAUSAL.get(arch)) if isinstance(arch, str) else None
    if spec is None:
        raise ValueError(f"model.arch={arch!r} is not a registered model; choose one of "
                         f"{sorted(REGISTRY) + sorted(NON_CAUSAL)}")
    return spec


def model_config(model_cfg: dict, **fixed):
    """The typed config of ``model_cfg`` (a dict with ``arch``), plus fields fixed by the data
    (``vocab_size``, ``seq_len``). The config's fields are the model keys (``models.fields``): a key
    that is no field, or one the data fixes, raises naming it."""
    fields = dict(model_cfg)
    spec = get_spec(fields.pop("arch"))
    check_keys(spec.config_cls, fields, spec.name, fixed=fixed)
    return spec, spec.config_cls(**fields, **fixed)


def build_model(model_cfg: dict, **fixed):
    spec, cfg = model_config(model_cfg, **fixed)
    return spec.build(cfg)


def flops_per_token(model_cfg: dict, **fixed) -> float:
    spec, cfg = model_config(model_cfg, **fixed)
    return spec.flops_per_token(cfg)
