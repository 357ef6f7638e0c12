"""What a Hugging Face model source (a hub name or a local folder) offers offline, read without loading it.

A run names such sources twice: a Gen. PPL judge (``genppl.judges``) and pretrained weights to start from
(``train.init_from``). Both load inside their jobs, so a wrong one used to fail only after the training
before them; ``config_problem`` reads the source's ``config.json`` (the folder's, or the Hugging Face
cache's) and says in one line what is wrong, so the workflow can refuse it before the first job.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

TRUE = ("1", "true", "yes", "on")


def offline() -> bool:
    """Whether downloads are off (``HF_HUB_OFFLINE``, set by ``make``): a hub name must then be cached."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in TRUE


def looks_like_folder(source: str) -> bool:
    """A path rather than a hub name (``org/name`` has one slash and no leading ``.``, ``/`` or ``~``)."""
    return Path(source).expanduser().exists() or source.startswith((".", "/", "~")) or source.count("/") > 1


def config_of(source: str) -> tuple[dict | None, str | None]:
    """(the source's config.json as a dict, None) or (None, why not); a hub name that is not cached while
    downloads are on is (None, None): its job downloads it."""
    if looks_like_folder(source):
        path = Path(source).expanduser() / "config.json"
        if not Path(source).expanduser().is_dir():
            return None, "no such folder; fix the path (relative paths start at the working directory)"
        if not path.is_file():
            return None, "a folder without config.json, not a transformers model folder"
    else:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(source, "config.json")
        if not isinstance(cached, str):
            if not offline():
                return None, None
            org = source.split("/")[0]
            folder = (f" ({org}/ is a folder here: if you meant a folder, {source} does not exist)"
                      if "/" in source and Path(org).expanduser().is_dir() else "")
            return None, ("not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 allows no download at run time; "
                          f"download it once with network (hf download {source}) or give a local folder{folder}")
        path = Path(cached)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return None, f"{path} is not readable JSON ({type(error).__name__}); download the model again"
    if not isinstance(config, dict):
        return None, f"{path} is not a model config (a JSON object)"
    return config, None


def causal_lm_problem(source: str, family: str | None = None) -> str | None:
    """Why ``source`` cannot serve as a causal LM (of ``model_type`` ``family`` when given), or None; read from
    its config alone, offline."""
    config, problem = config_of(source)
    if config is None:
        return problem
    if config.get("is_encoder_decoder"):
        return f"an encoder-decoder model ({config.get('model_type')}), not a causal LM"
    if family is not None and config.get("model_type") != family:
        return f"a {config.get('model_type')} model, not a {family} one"
    architectures = config.get("architectures") or []
    if architectures and not any(name.endswith(("ForCausalLM", "LMHeadModel")) for name in architectures):
        return f"its architectures {architectures} hold no causal LM head"
    return None
