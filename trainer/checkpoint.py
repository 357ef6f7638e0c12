"""Atomic, self-validating training checkpoints.

Layout of a run directory::

    ckpt/step-000200/model.safetensors      rolling checkpoints (never Snakemake outputs)
                     optimizer.safetensors  AdamW moments + RNG states, as tensors
                     (sharded, train.parallel fsdp: shards/ of torch.distributed.checkpoint and
                      rng-<rank>.safetensors instead of the two files above)
                     metrics.jsonl          the training log up to this step
                     state.json             step, data position, binding, file hashes
                     COMPLETE               written last: a folder without it is ignored
    final/model.safetensors, final/manifest.json, train/metrics.jsonl   the declared outputs
    train/snapshots/step-000040.safetensors  weights only, every ``train.snapshot_interval`` steps,
                                             listed with their sha256 in final/manifest.json

A checkpoint is written into a hidden temporary folder and renamed into place (OLMo), and only a
folder holding the ``COMPLETE`` marker counts (torchtitan). Loading re-hashes the files, so a
truncated or edited checkpoint is a clear error, not a silent wrong resume.

A checkpoint is *bound* to everything that determines its training: the run config's hash (which
covers every model default, ``workflows.resolve.explicit_model``) and the token data (the
tokenizer's hash and every split's sha256, ``trainer.data.data_binding``). A resume happens only
when the binding matches; a stale ``ckpt/`` is set aside as ``ckpt.stale/`` (``set_aside``) and the
run starts afresh, so no edit of a setting, the tokenizer or the tokens can resurrect old weights.
Debris of killed writes (``.tmp-step-*`` folders, folders without the marker) is removed on start.

Snapshots (``train.snapshot_interval``) are the weights at fixed steps for evaluations over training
(DLCM's boundary F1). They follow the checkpoints: a run that starts afresh deletes them all, a resume
at step s deletes those after s (``prune_snapshots``), and ``final/manifest.json`` lists the survivors
with their sha256 (``snapshot_index``), so an evaluation reads only the snapshots of the run it scores.
"""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from common.errors import CheckpointError
from common.io import WriteError, atomic_write, atomic_write_json, atomic_write_text, remove_debris, sha256_file
from models.weights import load_model_weights

MARKER = "COMPLETE"
METRICS = "metrics.jsonl"
SHARDS = "shards"  # a sharded checkpoint's folder of torch.distributed.checkpoint files


def weight_tensors(model: torch.nn.Module | dict) -> dict[str, torch.Tensor]:
    """State dict (of a model, or given) with tied parameters stored once (safetensors refuses shared storage)."""
    seen, out = set(), {}
    for name, t in (model if isinstance(model, dict) else model.state_dict()).items():
        if t.data_ptr() in seen:
            continue
        seen.add(t.data_ptr())
        out[name] = t.detach().contiguous()
    return out


def write_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Write ``tensors`` to the safetensors file ``path`` atomically (``common.io.atomic_write``). safetensors
    reports a failed write (a full disk) as its own error with the OS error number in the text; it is raised
    as that ``OSError``, which the writers turn into one line naming the file."""
    with atomic_write(path, "wb") as f:
        try:
            save_file(tensors, f.name)
        except SafetensorError as e:
            code = re.search(r"os error (\d+)", str(e))
            if code is None:
                raise
            raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), f.name) from e


def save_weights(model: torch.nn.Module | dict, path: Path) -> None:
    """Write the model's weights (or a state dict of them) to ``path`` atomically."""
    write_tensors(weight_tensors(model), path)


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


def save_checkpoint(ckpt_root: Path, step: int, model, opt, state: dict, keep: int = 2,
                    metrics: str = "") -> Path:
    """Write ``ckpt_root/step-XXXXXX`` atomically (with ``metrics``, the training log so far) and prune
    all but the newest ``keep``."""
    ckpt_root = Path(ckpt_root)
    tmp = ckpt_root / f".tmp-step-{step:06d}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        save_weights(model, tmp / "model.safetensors")
        opt_tensors, groups = optimizer_tensors(opt)
        write_tensors({**opt_tensors, **rng_tensors()}, tmp / "optimizer.safetensors")
    except OSError as e:
        raise _write_error(e, tmp, ckpt_root / f"step-{step:06d}") from e
    return _commit(tmp, ckpt_root, step, {**state, "param_groups": groups}, keep, metrics)


def save_sharded_checkpoint(ckpt_root: Path, step: int, write_shards, state: dict, keep: int, metrics: str,
                            rank: int, world: int, barrier) -> Path:
    """The checkpoint of a sharded model (``trainer.distributed``), a collective: every rank writes its
    shards (``write_shards(folder)``) and its RNG state into one temporary folder, then rank 0 hashes every
    file and commits the folder as ``save_checkpoint`` does. ``barrier()`` waits for every rank."""
    ckpt_root = Path(ckpt_root)
    tmp = ckpt_root / f".tmp-step-{step:06d}-sharded"
    try:
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
            (tmp / SHARDS).mkdir(parents=True)
        barrier()
        write_shards(tmp / SHARDS)
        write_tensors(rng_tensors(), tmp / f"rng-{rank}.safetensors")
    except OSError as e:  # the folder is shared: only rank 0 removes it (the next start clears debris too)
        raise _write_error(e, tmp if rank == 0 else None, ckpt_root / f"step-{step:06d}") from e
    barrier()
    final = (_commit(tmp, ckpt_root, step, {**state, "world": world}, keep, metrics) if rank == 0
             else ckpt_root / f"step-{step:06d}")
    barrier()
    return final


def rng_tensors() -> dict[str, torch.Tensor]:
    out = {"rng.torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["rng.cuda"] = torch.cuda.get_rng_state()
    return out


def _set_rng(tensors: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(tensors.pop("rng.torch"))
    cuda_rng = tensors.pop("rng.cuda", None)
    if cuda_rng is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(cuda_rng)


def _write_error(e: OSError, tmp: Path | None, final: Path) -> WriteError:
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    hint = "the disk is full: free space and resume" if e.errno == errno.ENOSPC else str(e)
    return WriteError(e.errno, f"could not write checkpoint {final}: {hint}; earlier checkpoints are intact")


def _commit(tmp: Path, ckpt_root: Path, step: int, state: dict, keep: int, metrics: str) -> Path:
    """Finish the checkpoint in ``tmp``: the training log, every file's sha256 in ``state.json``, the
    marker written last, the rename into ``step-XXXXXX``; then prune all but the newest ``keep``."""
    final = ckpt_root / f"step-{step:06d}"
    try:
        atomic_write_text(tmp / METRICS, metrics)
        files = {p.relative_to(tmp).as_posix(): sha256_file(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        atomic_write_json(tmp / "state.json", {**state, "step": step, "sha256": files})
        atomic_write_text(tmp / MARKER, "ok\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except OSError as e:
        raise _write_error(e, tmp, final) from e
    for old in valid_checkpoints(ckpt_root)[:-keep]:
        _remove(old)
    return final


def _remove(folder: Path) -> None:
    """Delete a checkpoint folder marker first, so a kill half-way leaves a folder that no longer counts."""
    (folder / MARKER).unlink(missing_ok=True)
    shutil.rmtree(folder, ignore_errors=True)


def clean_debris(ckpt_root: Path) -> list[Path]:
    """Remove what killed writes leave behind: hidden ``.tmp-step-*`` folders and step folders without
    the ``COMPLETE`` marker (half-written or half-pruned). Returns the removed paths."""
    ckpt_root = Path(ckpt_root)
    if not ckpt_root.is_dir():
        return []
    debris = [p for p in ckpt_root.glob(".tmp-step-*")] + [p for p in ckpt_root.glob("step-*")
                                                            if not (p / MARKER).is_file()]
    for path in debris:
        shutil.rmtree(path, ignore_errors=True)
    return debris


def set_aside(ckpt_root: Path) -> Path:
    """Move a stale ``ckpt/`` to ``ckpt.stale/`` (replacing an older one) and return the new path."""
    ckpt_root = Path(ckpt_root)
    stale = ckpt_root.with_name(ckpt_root.name + ".stale")
    shutil.rmtree(stale, ignore_errors=True)
    os.replace(ckpt_root, stale)
    return stale


def remove_checkpoints(ckpt_root: Path) -> None:
    """Delete ``ckpt/`` once ``final/`` is written: a completed run keeps no state a re-run could resume."""
    for ckpt in valid_checkpoints(ckpt_root):
        _remove(ckpt)
    shutil.rmtree(ckpt_root, ignore_errors=True)


def valid_checkpoints(ckpt_root: Path) -> list[Path]:
    """Complete checkpoint folders, oldest first (half-written ones have no marker)."""
    if not Path(ckpt_root).is_dir():
        return []
    return sorted(p for p in Path(ckpt_root).glob("step-*") if (p / MARKER).is_file())


def read_state(path: Path) -> dict:
    """The ``state.json`` of checkpoint folder ``path``."""
    state_path = Path(path) / "state.json"
    try:
        return json.loads(state_path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{state_path}: unreadable ({e}); "
                              f"delete {path} to resume from the previous checkpoint") from e


def binding_difference(state: dict, binding: dict) -> str | None:
    """What differs between the binding a checkpoint was written under and ``binding`` (None: same),
    e.g. ``data.splits.train 3f2a.. -> 91c0..``."""
    stored = state.get("binding")
    if not isinstance(stored, dict):
        return "it records no binding to its data (written by an older version)"
    old, new = _flatten(stored), _flatten(binding)
    changed = [key for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
    if not changed:
        return None
    return "; ".join(f"{key} {str(old.get(key))[:12]} -> {str(new.get(key))[:12]}" for key in changed)


def _flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def load_checkpoint(path: Path, model, opt, binding: dict, read_shards=None, rank: int = 0, world: int = 1) -> dict:
    """Restore model, optimizer and RNG from ``path``; return its state.json (with ``metrics``, the
    training log through its step). Refuses a checkpoint of another binding. A sharded checkpoint
    (``save_sharded_checkpoint``) is read by every rank with ``read_shards(folder)``, each taking its own
    RNG state; a model sharded now cannot take a single-file checkpoint, nor the reverse."""
    state = read_state(path)
    difference = binding_difference(state, binding)
    if difference:
        raise CheckpointError(f"{path} belongs to another run ({difference}); delete {path.parent} to start afresh")
    for name, digest in state["sha256"].items():
        if not (path / name).is_file() or sha256_file(path / name) != digest:
            raise CheckpointError(f"{path / name}: missing or corrupted (sha256 mismatch); delete {path} to resume "
                                  "from the previous checkpoint")
    written = state.get("world", 1) if (path / SHARDS).is_dir() else 1  # sharded across this many processes
    running = world if read_shards is not None else 1
    if written != running:
        how = lambda n: "unsharded" if n == 1 else f"sharded across {n} processes"
        raise CheckpointError(f"{path} holds the model {how(written)}, this run would hold it {how(running)}; resume "
                              f"with the pretrain rule's gpu={written}, or delete {path.parent} to start afresh")
    if read_shards is not None:
        read_shards(path / SHARDS)
        _set_rng(load_file(str(path / f"rng-{rank}.safetensors")))
    else:
        load_model_weights(model, path / "model.safetensors")
        tensors = load_file(str(path / "optimizer.safetensors"))
        _set_rng(tensors)
        load_optimizer(opt, tensors, state["param_groups"])
    return {**state, "metrics": (path / METRICS).read_text()}


SNAPSHOT_GLOB = "step-*.safetensors"


def save_snapshot(root: Path, step: int, model: torch.nn.Module | dict) -> Path:
    """The model's weights (or a state dict of them) at ``step`` as ``root/step-XXXXXX.safetensors`` (atomic)."""
    Path(root).mkdir(parents=True, exist_ok=True)
    path = Path(root) / f"step-{step:06d}.safetensors"
    save_weights(model, path)
    return path


def snapshot_step(path: Path) -> int:
    return int(Path(path).name.removeprefix("step-").removesuffix(".safetensors"))


def prune_snapshots(root: Path, after_step: int) -> None:
    """Delete the snapshots of steps after ``after_step`` (0: all of them) and debris of killed writes."""
    if not Path(root).is_dir():
        return
    remove_debris(root, "step-*")
    for path in Path(root).glob(SNAPSHOT_GLOB):
        if snapshot_step(path) > after_step:
            path.unlink(missing_ok=True)


def snapshot_index(root: Path, tokens_per_step: int) -> list[dict]:
    """``[{"step", "tokens", "file", "sha256"}]`` of the snapshots in ``root``, by step."""
    paths = sorted(Path(root).glob(SNAPSHOT_GLOB), key=snapshot_step) if Path(root).is_dir() else []
    return [{"step": snapshot_step(p), "tokens": snapshot_step(p) * tokens_per_step, "file": p.name,
             "sha256": sha256_file(p)} for p in paths]


def load_snapshot(model: torch.nn.Module, root: Path, entry: dict) -> None:
    """Load the snapshot ``entry`` of a manifest's ``snapshots`` into ``model``, checking its sha256."""
    path = Path(root) / entry["file"]
    if not path.is_file() or sha256_file(path) != entry["sha256"]:
        raise CheckpointError(f"{path}: missing or not the snapshot its run's final/manifest.json lists (sha256); "
                              f"delete {Path(root).parent.parent / 'final'} and re-run snakemake to re-train the run")
    load_model_weights(model, path)

