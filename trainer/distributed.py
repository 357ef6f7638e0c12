"""Fully sharded data parallel training (PyTorch's FSDP2, ``fully_shard``) for the models too large for DDP:
ConceptLM Table 3's continual pre-training of Llama-3.1-8B (``train.parallel: fsdp``).

* What shards: each transformer block is one FSDP unit (its parameters gathered for its forward and
  backward, resharded after), then the root (embeddings, final norm, head): the model class's
  ``fsdp_units()``. Which families shard is their registry entry's (``ModelSpec.shardable``: token LMs
  and ConceptLM); the others, and tied embeddings, are refused before training
  (``trainer.config.fsdp_problem``).
* Accumulation: gradients are reduce-scattered on the last micro-batch of a step only
  (``set_requires_gradient_sync``), as DDP's ``no_sync``.
* Checkpoints are sharded (``torch.distributed.checkpoint``): every rank writes its shard of the model
  and optimizer state; ``trainer.checkpoint`` commits the folder atomically and hashes every file, as for
  single-file checkpoints. The final weights are gathered (``full_weights``) and written by rank 0 as the
  same ``final/model.safetensors`` a single process writes.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def shard(model: nn.Module) -> nn.Module:
    """Wrap ``model`` in place: each of its ``fsdp_units()`` and then the root, with ``fully_shard``."""
    from torch.distributed.fsdp import fully_shard

    for unit in model.fsdp_units():
        fully_shard(unit)
    fully_shard(model)
    return model


def local(value: torch.Tensor) -> torch.Tensor:
    """A plain tensor of ``value`` (a DTensor's full value, e.g. the gradient norm)."""
    return value.full_tensor() if hasattr(value, "full_tensor") else value


def full_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's weights on the CPU (a collective: every rank calls it; all get them)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_shards(folder: Path, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Every rank writes its shards of the model and optimizer state into ``folder`` (a collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optim_state = get_state_dict(model, opt)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(folder))


def load_shards(folder: Path, model: nn.Module, opt: torch.optim.Optimizer) -> None:
    """Read the shards of ``save_shards`` back into the sharded model and optimizer (a collective)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optim_state = get_state_dict(model, opt)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
