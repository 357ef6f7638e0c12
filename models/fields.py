"""The model section of a profile is the fields of the arch's config dataclass, and nothing else.

Every model family's config is a frozen dataclass (``models.registry``). Its fields are the only list
of the ``model`` keys: their names, types and defaults, and, for a field with a fixed set of values,
its choices (a ``Literal`` type). The profile schema leaves ``model`` to them. ``check_fields``, which
the root ``__post_init__`` of every config runs first, refuses a value of the wrong type or outside its
choices; ``check_keys`` (``models.registry.model_config``) a key that is no field, one the data sets and
a missing required one. Ranges and relations between fields follow in each config's ``__post_init__``;
``check_transformer`` holds those of the fields every family shares. Every error is one line naming the
key and what to give.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from typing import Literal, get_args, get_origin

Activation = Literal["gelu_tanh", "gelu", "swiglu"]  # GPT-2's tanh GELU, GPT-NeoX's exact GELU, Llama's SwiGLU
Norm = Literal["layernorm", "rmsnorm"]                # GPT-2 and GPT-NeoX, Llama
Positional = Literal["learned", "rotary"]             # GPT-2's learned table, GPT-NeoX's and Llama's rotary

# Field metadata: a diagnostic switch whose null means "absent" (the model as it was before the field
# existed). A run's config lists every field with its value (so a changed default changes its hash), except
# such a switch while it is null: adding one changes no existing run's hash.
OFF_WHEN_NULL = "off_when_null"


def off_switch():
    """A dataclass field for such a switch (default null: off)."""
    return dataclasses.field(default=None, metadata={OFF_WHEN_NULL: True})


def written_out(field: dataclasses.Field, value) -> bool:
    """Whether a run's config lists ``field`` with ``value``: always, except an off switch while null."""
    return not (field.metadata.get(OFF_WHEN_NULL) and value is None)


_WHAT = {int: "an integer", float: "a number", bool: "true or false", dict: "a mapping", tuple: "a list",
         type(None): "null"}


@functools.cache
def declared_types(cls: type) -> dict[str, object]:
    """Field name -> type of the config dataclass ``cls`` (a ``Literal`` for a field with fixed choices; a
    class that changes a field's default restates the field's type, ``tests/models/test_model_fields.py``)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def choices(kind) -> tuple | None:
    """The values a ``Literal`` type allows (None for any other type)."""
    return get_args(kind) if get_origin(kind) is Literal else None


def _fits(value, kind) -> bool:
    if choices(kind) is not None:
        return isinstance(value, str) and value in choices(kind)
    if get_origin(kind) in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in get_args(kind))
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is tuple:  # a YAML list
        return isinstance(value, (tuple, list))
    return isinstance(value, kind)


def _what(kind) -> str:
    if choices(kind) is not None:
        return f"one of {list(choices(kind))}"
    if get_origin(kind) in (typing.Union, types.UnionType):
        return " or ".join(_what(option) for option in get_args(kind))
    return _WHAT.get(kind, kind.__name__)


def check_keys(cls: type, keys, name: str, where: str = "model", fixed=()) -> None:
    """``keys`` are fields of the config class ``cls`` (of ``name`` models; ``name`` None: of the section
    ``where`` itself) that the data does not set (``fixed``), every field without a default among them; else
    one line naming the key (and the closest field and the others)."""
    known = sorted({f.name for f in dataclasses.fields(cls)} - set(fixed))
    required = [f.name for f in dataclasses.fields(cls) if f.default is f.default_factory is dataclasses.MISSING]
    missing = [key for key in required if key not in keys and key not in fixed]
    owner = f"{name} models have" if name is not None else f"the {where} section has"
    if missing:
        raise ValueError(f"{where}.{missing[0]} is required" + (f" by {name} models" if name else "") + "; set it")
    for key in sorted(keys):
        if key in fixed:
            raise ValueError(f"{where}.{key} is set by the data; drop it")
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ValueError(f"{where}.{key}: {owner} no field {key!r}; {hint}known keys: "
                             f"{', '.join(known)}")


def check_fields(cfg, where: str = "model") -> None:
    """Every field of the config ``cfg`` (the profile's section ``where``) holds a value of its declared type
    (within its choices)."""
    for name, kind in declared_types(type(cfg)).items():
        value = getattr(cfg, name)
        if not _fits(value, kind):
            raise ValueError(f"{where}.{name}={value!r}: use {_what(kind)}")


def check_transformer(cfg) -> None:
    """The ranges of the transformer fields every config shares (token LMs, NCM's two stages)."""
    for key in ("d_model", "n_layer", "n_head", "mlp_ratio", "seq_len"):
        if getattr(cfg, key, 1) < 1:
            raise ValueError(f"model.{key}={getattr(cfg, key)}: use a positive integer")
    for key in ("norm_eps", "init_std"):
        if getattr(cfg, key) <= 0:
            raise ValueError(f"model.{key}={getattr(cfg, key)}: use a number > 0")
    if not 0 <= cfg.dropout < 1:
        raise ValueError(f"model.dropout={cfg.dropout}: use a probability in [0, 1)")
    if cfg.d_model % cfg.n_head:
        raise ValueError(f"model.d_model={cfg.d_model} is not divisible by model.n_head={cfg.n_head}; "
                         "choose n_head dividing d_model")
