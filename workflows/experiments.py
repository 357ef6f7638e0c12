"""Profiles and experiments: load, validate, resolve. Used by the Snakefile and by the tests.

An experiment is a named entry ``{id, base, overrides, seeds}``. Its settings are the profile's
``defaults`` (model / train / eval), then its base's overrides (recursively), then its own
``overrides`` (dotted keys such as ``model.n_layer: 6``). A new size or ablation is therefore one
entry in a profile, never new code. Everything is checked before the DAG is built, in two layers:
the JSON schema (``config/schemas/config.schema.yaml``: unknown keys, types, ranges) and semantic
checks (known model, heads dividing width, batch divisible by micro-batch, chunk size dividing the
sequence length, synthetic-world fields). Every error is one line naming the key and the fix.
"""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import jsonschema
import yaml

from common.errors import ReproError

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schemas" / "config.schema.yaml"
SECTIONS = ("model", "train", "eval")


class ConfigError(ReproError, ValueError):
    """A profile is invalid; the message names the key and the fix."""


def load_profile(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such profile; see config/ for the available ones")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from e
    return validate(config, str(path))


def _schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _where(config, path) -> str:
    """``experiments[pm_s].overrides`` for a jsonschema path (list items named by their id)."""
    parts, node = [], config
    for p in path:
        if isinstance(p, int):
            item = node[p] if isinstance(node, list) and p < len(node) else None
            parts[-1] += f"[{item.get('id', p) if isinstance(item, dict) else p}]"
        else:
            parts.append(str(p))
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            node = None
    return ".".join(parts) or "(top level)"


def _schema_error(error: jsonschema.ValidationError, config: dict, source: str) -> ConfigError:
    where = _where(config, error.absolute_path)
    if error.validator == "additionalProperties":
        known = ", ".join(sorted(error.schema.get("properties", {})))
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return ConfigError(f"{source}: {where}: unknown key {unknown[0]!r}; known keys: {known}")
    hint = error.schema.get("description", "")
    return ConfigError(f"{source}: {where}: {error.message}" + (f" ({hint})" if hint else ""))


def _check_schema(instance: dict, schema: dict, config: dict, source: str) -> None:
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    if errors:
        raise _schema_error(jsonschema.exceptions.best_match(errors), config, source)


def validate(config, source: str = "config") -> dict:
    """Check a whole profile; return it unchanged. Raises ConfigError on the first problem."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: a profile is a mapping with profile, corpus, tokenizer, defaults, experiments")
    schema = _schema()
    _check_schema(config, schema, config, source)
    experiments = resolve(config, source)
    section_schema = {"$defs": schema["$defs"], "type": "object",
                      "properties": {s: {"$ref": f"#/$defs/{s}"} for s in SECTIONS}}
    for exp_id, exp in experiments.items():
        settings = {s: exp[s] for s in SECTIONS}
        try:
            _check_schema(settings, section_schema, settings, f"{source}: experiments[{exp_id}]")
            _check_semantics(config, exp)
        except ConfigError as e:
            raise ConfigError(str(e) if str(e).startswith(source) else f"{source}: experiments[{exp_id}]: {e}") from None
    _check_corpus(config["corpus"], source)
    return config


def _set_dotted(settings: dict, key: str, value) -> None:
    section, field = key.split(".", 1)
    settings[section][field] = copy.deepcopy(value)


def resolve(config: dict, source: str = "config") -> dict[str, dict]:
    """``{id: {"id", "model", "train", "eval", "seeds"}}`` with bases and overrides applied."""
    entries: dict[str, dict] = {}
    for entry in config["experiments"]:
        if entry["id"] in entries:
            raise ConfigError(f"{source}: experiments: id {entry['id']!r} appears twice; ids must be unique")
        entries[entry["id"]] = entry

    def chain(exp_id: str) -> list[dict]:
        seen, out = [], []
        while exp_id is not None:
            if exp_id not in entries:
                raise ConfigError(f"{source}: experiments[{out[-1]['id']}]: base {exp_id!r} is not an experiment id")
            if exp_id in seen:
                raise ConfigError(f"{source}: experiments[{seen[0]}]: base chain {' -> '.join(seen + [exp_id])} is a cycle")
            seen.append(exp_id)
            out.append(entries[exp_id])
            exp_id = entries[exp_id].get("base")
        return out[::-1]

    resolved = {}
    for exp_id in entries:
        lineage = chain(exp_id)
        settings = {s: copy.deepcopy(config["defaults"][s]) for s in SECTIONS}
        seeds = [0]
        for entry in lineage:
            for key, value in entry.get("overrides", {}).items():
                _set_dotted(settings, key, value)
            seeds = entry.get("seeds", seeds)
        resolved[exp_id] = {"id": exp_id, **settings, "seeds": list(seeds)}
    return resolved


def _check_semantics(config: dict, exp: dict) -> None:
    from models.registry import model_config

    model, train = exp["model"], exp["train"]
    if "arch" not in model or "seq_len" not in model:
        raise ConfigError("model.arch and model.seq_len are required (set them in defaults.model)")
    fields = {k: v for k, v in model.items() if k != "seq_len"}
    try:
        _, typed = model_config(fields, vocab_size=config["tokenizer"].get("vocab_size", 50257),
                                seq_len=model["seq_len"])
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e)) from None
    chunk = getattr(typed, "chunk_size", None)
    if chunk is not None and model["seq_len"] % chunk:
        raise ConfigError(f"model.chunk_size={chunk} does not divide model.seq_len={model['seq_len']}; "
                          "choose a chunk size that divides the sequence length")
    if train["batch_size"] % train["micro_batch_size"]:
        raise ConfigError(f"train.batch_size={train['batch_size']} is not a multiple of train.micro_batch_size="
                          f"{train['micro_batch_size']}; make the micro-batch divide the batch")


def _check_corpus(corpus: dict, source: str) -> None:
    if corpus["source"] == "synthetic":
        from corpora.synthetic import WorldConfig

        try:
            WorldConfig(**corpus.get("synthetic", {}))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: corpus.synthetic: {e}") from None
    elif corpus["source"] == "hf":
        from corpora.sources import HF_CORPORA

        if corpus["hf"]["name"] not in HF_CORPORA:
            raise ConfigError(f"{source}: corpus.hf.name={corpus['hf']['name']!r} is not a known corpus; "
                              f"choose one of {sorted(HF_CORPORA)} or use source: local")
    else:
        for split in ("train", "valid", "test"):
            path = Path(corpus["local"][split]).expanduser()
            if not path.is_file():
                raise ConfigError(f"{source}: corpus.local.{split}={corpus['local'][split]}: no such file; "
                                  "fix the path (relative paths start at the repository root)")


def explicit_model(model: dict) -> dict:
    """The model settings with every default of the registry's config written out, so that a
    default changed in code changes the run's config hash (and Snakemake re-runs it)."""
    from models.registry import model_config

    fields = {k: v for k, v in model.items() if k != "seq_len"}
    _, typed = model_config(fields, vocab_size=257, seq_len=model["seq_len"])  # vocab comes from the data
    return {"arch": model["arch"], **{f.name: getattr(typed, f.name) for f in dataclasses.fields(typed)
                                      if f.name != "vocab_size"}}


def run_config(config: dict, exp_id: str, seed: int) -> dict:
    """The full settings of one training run: what its config hash covers."""
    experiments = resolve(config)
    if exp_id not in experiments:
        raise ConfigError(f"unknown experiment {exp_id!r}; the profile defines {sorted(experiments)}")
    exp = experiments[exp_id]
    return {"id": exp_id, "seed": seed, "corpus": config["corpus"], "tokenizer": config["tokenizer"],
            **{s: exp[s] for s in SECTIONS}, "model": explicit_model(exp["model"])}
