"""Loading a safetensors file into a model, with the one-line errors of a checkpoint that does not fit. At the
models' level, so that a model that starts from another run's weights (NCM's generator on its tokenizer)
loads them without reaching up into the trainer; ``trainer.checkpoint`` uses it for every checkpoint."""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from common.errors import CheckpointError


def load_model_weights(model: torch.nn.Module, path: Path, allow_missing: tuple[str, ...] = ()) -> None:
    """Load ``path`` into ``model``; every parameter must be there and fit, except those whose names start
    with one of ``allow_missing`` (parts an earlier stage did not have: NCM's source prefix)."""
    try:
        weights = load_file(str(path))
    except Exception as e:  # safetensors raises its own error types for truncated headers
        raise CheckpointError(f"{path}: unreadable weights ({e}); delete it and re-run the stage that wrote it") from e
    missing, unexpected = model.load_state_dict(weights, strict=False)
    current = model.state_dict()
    stored_ptrs = {current[n].data_ptr() for n in weights if n in current}
    missing = [n for n in missing if current[n].data_ptr() not in stored_ptrs  # tied copies are not missing
               and not n.startswith(allow_missing or ("\0",))]
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not fit this model (missing {missing[:3]}, unexpected "
                              f"{unexpected[:3]}); the checkpoint belongs to another model config")
