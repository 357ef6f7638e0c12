"""Reading a profile: the YAML read strictly (a duplicate key, a syntax error named with line and column)
and its ``extends:`` chain merged (``with_parents``). ``ConfigError`` is every profile error: one line
naming the key and the fix. Checked by ``workflows.check``, resolved into runs by ``workflows.resolve``."""
from __future__ import annotations

from pathlib import Path

import yaml

from common.errors import ConfigError
from common.strict_yaml import UniqueKeyLoader, yaml_problem


def read_profile(path: Path) -> dict:
    """A profile file read strictly (duplicate keys and YAML syntax named with line and column): the same
    reading for ``make``'s pre-check and the Snakefile, whose own YAML loader lets a duplicate key win."""
    return _read_yaml(Path(path))


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"{path}: no such profile; see config/ for the available ones")
    try:
        config = yaml.load(path.read_text(), Loader=UniqueKeyLoader)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML ({yaml_problem(e)}); fix the syntax there") from e
    if config is None or config == {}:
        raise ConfigError(f"{path}: the profile is empty; give profile, corpus, tokenizer, defaults and experiments "
                          "(see config/default.yaml)")
    return config




def with_parents(config: dict, folder: Path, source: str = "config", seen: tuple = ()) -> dict:
    """The profile with its ``extends: <file>`` chain applied (the file is relative to ``folder``). The
    child wins: mappings merge key by key, except ``corpus`` and ``tokenizer``, which are replaced whole;
    ``experiments`` merge by id (a known id is replaced by the child's entry, new ids are appended); any
    other value is replaced. The child must name itself (``profile``): its outputs go to results/<profile>/. A scale
    profile (config/small.yaml)
    thus reuses the embedded grid and restates only corpus, tokenizer, defaults and the sizes."""
    if not isinstance(config, dict) or "extends" not in config:
        return config
    if not isinstance(config["extends"], str):
        raise ConfigError(f"{source}: extends: give one profile file name, e.g. extends: default.yaml")
    if config.get("profile") in (None, "embedded"):
        raise ConfigError(f"{source}: profile: a profile that extends another needs its own name (not 'embedded'): "
                          "its outputs go to results/<profile>/")
    parent_path = _parent_path(config, folder)
    if parent_path in seen:
        raise ConfigError(f"{source}: extends chain returns to {parent_path.name}; remove the cycle")
    parent = with_parents(_read_yaml(parent_path), parent_path.parent, str(parent_path), seen + (parent_path,))
    return _merge(parent, {k: v for k, v in config.items() if k != "extends"})


def _parent_path(config: dict, folder: Path) -> Path:
    """The file a profile's ``extends:`` names, relative to the profile's folder."""
    return (folder / config["extends"]).resolve()


def profile_chain(path: str | Path) -> list[Path]:
    """The profile file and every file its ``extends:`` chain reads (validated profiles only: no cycle)."""
    chain = [Path(path).resolve()]
    while isinstance((config := _read_yaml(chain[-1]) or {}).get("extends"), str):
        chain.append(_parent_path(config, chain[-1].parent))
    return chain


_REPLACED_WHOLE = ("corpus", "tokenizer")  # a new corpus or tokenizer keeps nothing of the old one


def _merge(parent, child, path: tuple[str, ...] = ()):
    """``child`` over ``parent`` (see ``with_parents``); ``path``: the keys from the profile's top level.
    ``corpus`` and ``tokenizer`` are replaced whole wherever they are (a dataset's too); only the top-level
    ``experiments`` merge by id (a scaling law's ``experiments`` is a plain list)."""
    if isinstance(parent, dict) and isinstance(child, dict) and path[-1:] not in [(k,) for k in _REPLACED_WHOLE]:
        return {**parent, **{k: _merge(parent[k], v, path + (k,)) if k in parent else v for k, v in child.items()}}
    if path == ("experiments",) and isinstance(parent, list) and isinstance(child, list):
        patches = {entry.get("id"): entry for entry in child if isinstance(entry, dict)}
        known = {entry.get("id") for entry in parent if isinstance(entry, dict)}
        return ([patches.get(entry.get("id"), entry) for entry in parent]
                + [entry for entry in child if not isinstance(entry, dict) or entry.get("id") not in known])
    return child
