"""Model registry: a name in the config maps to its config dataclass, builder and FLOPs formula.

A new model family registers here once (torchtitan's ModelSpec idea); a new size or ablation is a
config entry. ``build_model({"arch": "gpt2", "d_model": 128, ...}, vocab_size=..., seq_len=...)``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from torch import nn

from models.token_lm import PythiaConfig, TokenLM, TokenLMConfig, token_lm_flops_per_token


@dataclass(frozen=True)
class ModelSpec:
    name: str
    config_cls: type
    build: Callable[[object], nn.Module]
    flops_per_token: Callable[[object], float]


REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec for spec in (
        ModelSpec("gpt2", TokenLMConfig, TokenLM, token_lm_flops_per_token),
        ModelSpec("pythia", PythiaConfig, TokenLM, token_lm_flops_per_token),
    )
}


def get_spec(arch: str) -> ModelSpec:
    if arch not in REGISTRY:
        raise ValueError(f"model.arch={arch!r} is not a registered model; choose one of {sorted(REGISTRY)}")
    return REGISTRY[arch]


def model_config(model_cfg: dict, **fixed):
    """The typed config of ``model_cfg`` (a dict with ``arch``), plus fields fixed by the data
    (``vocab_size``, ``seq_len``). Unknown keys raise naming the key."""
    fields = dict(model_cfg)
    spec = get_spec(fields.pop("arch"))
    known = {f.name for f in dataclasses.fields(spec.config_cls)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"model.{unknown[0]} is not a field of {spec.name} models; known: {sorted(known)}")
    return spec, spec.config_cls(**fields, **fixed)


def build_model(model_cfg: dict, **fixed) -> nn.Module:
    spec, cfg = model_config(model_cfg, **fixed)
    return spec.build(cfg)


def flops_per_token(model_cfg: dict, **fixed) -> float:
    spec, cfg = model_config(model_cfg, **fixed)
    return spec.flops_per_token(cfg)
