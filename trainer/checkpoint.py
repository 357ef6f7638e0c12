"""Atomic, self-validating training checkpoints.

Layout of a run directory::

    ckpt/step-000200/model.safetensors      rolling checkpoints (never Snakemake outputs)
                     optimizer.safetensors  AdamW moments + RNG states, as tensors
                     state.json             step, data position, config hash, file hashes
                     COMPLETE               written last: a folder without it is ignored
    final/model.safetensors, final/manifest.json   the only declared outputs

A checkpoint is written into a hidden temporary folder and renamed into place (OLMo), and only a
folder holding the ``COMPLETE`` marker counts (torchtitan). Loading re-hashes the files, so a
truncated or edited checkpoint is a clear error, not a silent wrong resume.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from common.errors import ReproError
from common.io import WriteError, atomic_write_json, sha256_file

MARKER = "COMPLETE"


class CheckpointError(ReproError, RuntimeError):
    """A checkpoint is truncated, corrupted or belongs to another configuration."""


def weight_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """State dict with tied parameters stored once (safetensors refuses shared storage)."""
    seen, out = set(), {}
    for name, t in model.state_dict().items():
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        out[name] = t.detach().contiguous()
    return out


def save_weights(model: torch.nn.Module, path: Path) -> None:
    """Write the model's weights to ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        save_file(weight_tensors(model), str(tmp))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        hint = "the disk is full: free space and re-run" if e.errno == errno.ENOSPC else str(e)
        raise WriteError(e.errno, f"could not write {path}: {hint}") from e


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], list]:
    sd = opt.state_dict()
    tensors = {f"state.{i}.{k}": (v if torch.is_tensor(v) else torch.tensor(v)).contiguous()
               for i, s in sd["state"].items() for k, v in s.items()}
    return tensors, sd["param_groups"]


def load_optimizer(opt: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], param_groups: list) -> None:
    state: dict[int, dict] = {}
    for key, v in tensors.items():
        if key.startswith("state."):
            _, i, k = key.split(".", 2)
            state.setdefault(int(i), {})[k] = v
    opt.load_state_dict({"state": state, "param_groups": param_groups})


def load_model_weights(model: torch.nn.Module, path: Path) -> None:
    try:
        weights = load_file(str(path))
    except Exception as e:  # safetensors raises its own error types for truncated headers
        raise CheckpointError(f"{path}: unreadable weights ({e}); delete it and re-run the stage that wrote it") from e
    missing, unexpected = model.load_state_dict(weights, strict=False)
    current = model.state_dict()
    stored_ptrs = {current[n].data_ptr() for n in weights if n in current}
    missing = [n for n in missing if current[n].data_ptr() not in stored_ptrs]  # tied copies are not missing
    if missing or unexpected:
        raise CheckpointError(f"{path}: weights do not fit this model (missing {missing[:3]}, unexpected "
                              f"{unexpected[:3]}); the checkpoint belongs to another model config")


def save_checkpoint(ckpt_root: Path, step: int, model, opt, state: dict, keep: int = 2) -> Path:
    """Write ``ckpt_root/step-XXXXXX`` atomically and prune all but the newest ``keep``."""
    ckpt_root = Path(ckpt_root)
    final = ckpt_root / f"step-{step:06d}"
    tmp = ckpt_root / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        save_weights(model, tmp / "model.safetensors")
        opt_tensors, groups = optimizer_tensors(opt)
        opt_tensors["rng.torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            opt_tensors["rng.cuda"] = torch.cuda.get_rng_state()
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        files = {n: sha256_file(tmp / n) for n in ("model.safetensors", "optimizer.safetensors")}
        atomic_write_json(tmp / "state.json", {**state, "step": step, "param_groups": groups, "sha256": files})
        (tmp / MARKER).write_text("ok\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        hint = "the disk is full: free space and resume" if e.errno == errno.ENOSPC else str(e)
        raise WriteError(e.errno, f"could not write checkpoint {final}: {hint}; earlier checkpoints are intact") from e
    for old in valid_checkpoints(ckpt_root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def valid_checkpoints(ckpt_root: Path) -> list[Path]:
    """Complete checkpoint folders, oldest first (half-written ones have no marker)."""
    if not Path(ckpt_root).is_dir():
        return []
    return sorted(p for p in Path(ckpt_root).glob("step-*") if (p / MARKER).is_file())


def load_checkpoint(path: Path, model, opt, config_hash: str) -> dict:
    """Restore model, optimizer and RNG from ``path``; return its state.json."""
    state_path = path / "state.json"
    try:
        state = json.loads(state_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{state_path}: unreadable ({e}); delete {path} to resume from the previous checkpoint") from e
    if state.get("config_hash") != config_hash:
        raise CheckpointError(f"{path} was written by config {state.get('config_hash')}, this run is {config_hash}; "
                              f"delete {path.parent} to start afresh, or restore the original config")
    for name, digest in state["sha256"].items():
        if not (path / name).is_file() or sha256_file(path / name) != digest:
            raise CheckpointError(f"{path / name}: missing or corrupted (sha256 mismatch); delete {path} to resume "
                                  "from the previous checkpoint")
    load_model_weights(model, path / "model.safetensors")
    tensors = load_file(str(path / "optimizer.safetensors"))
    torch.set_rng_state(tensors.pop("rng.torch"))
    cuda_rng = tensors.pop("rng.cuda", None)
    if cuda_rng is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(cuda_rng)
    load_optimizer(opt, tensors, state["param_groups"])
    return state
