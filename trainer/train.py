"""One trainer for every model family of the suite.

A model's ``forward(idx, targets)`` returns ``{"losses": {name: scalar}}`` and optionally
``{"metrics": {name: float}}`` (monitored, not optimised, e.g. codebook usage); the trainer sums the
losses with ``train.loss_weights`` (default 1 each) and logs every term and metric, so ConceptLM's NTP + NCP + VQ or
DLCM's auxiliary losses need nothing here. AdamW with linear warm-up and cosine decay, gradient
clipping and accumulation, bf16 autocast (``train.precision``), optional ``torch.compile`` of each block, DDP under
``torchrun`` (or FSDP, ``train.parallel: fsdp``: ``trainer.distributed``). Data order comes from
``trainer.data.WindowOrder`` (seed + manifest hash);
checkpoints from ``trainer.checkpoint`` (atomic, resumed automatically); what a person reads of a run
(a line per log interval off a terminal, validation losses) from ``trainer.progress``.

A non-finite loss or gradient norm stops the run *before* the optimizer step, naming the step and
the loss term; the last good checkpoint stays on disk.
"""
from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from filelock import FileLock, Timeout
from tqdm import tqdm

from common.errors import ReproError
from common.io import atomic_write_json, atomic_write_text, config_hash, sha256_file
from common.provenance import host_fingerprint
from models.blocks import Block
from models.dlcm import CrossBlock
from models.losses import opaque_to_compile
from models.registry import build_model, flops_per_token, get_spec
from trainer.checkpoint import (binding_difference, clean_debris, load_checkpoint, prune_snapshots, read_state,
                                remove_checkpoints, save_checkpoint, save_sharded_checkpoint, save_snapshot,
                                save_weights, set_aside, snapshot_index, valid_checkpoints)
from trainer.config import TrainConfig, fsdp_problem, world_size_problem
from trainer.distributed import full_weights, load_shards, local, save_shards, shard
from trainer.data import (DataError, WindowOrder, data_binding, gather_windows, mask_source, open_split, order_key,
                          read_manifest, view)
from trainer.metrics import MetricsLog, is_validation_step
from trainer.progress import log_line, peak_flops, valid_line


class TrainingLockError(ReproError, RuntimeError):
    """Another process is training into the same run folder."""


class NonFiniteLossError(ReproError, RuntimeError):
    """A loss term or the gradient norm is NaN/inf; raised before the optimizer step."""


def learning_rate(step: int, t: dict) -> float:
    """Linear warm-up to ``lr`` over ``warmup_steps``, cosine decay to ``lr * min_lr_ratio`` at ``steps``."""
    if step < t["warmup_steps"]:
        return t["lr"] * (step + 1) / t["warmup_steps"]
    progress = (step - t["warmup_steps"]) / max(1, t["steps"] - t["warmup_steps"])
    floor = t["lr"] * t["min_lr_ratio"]
    return floor + 0.5 * (t["lr"] - floor) * (1 + math.cos(math.pi * min(1.0, progress)))


def make_optimizer(model: torch.nn.Module, t: dict) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices only (not on biases, norm gains). A model with its own parameter
    groups (``param_groups(lr, weight_decay, eps)``: DLCM's decoupled muP) sets them; each group's
    ``lr_mult`` scales the schedule (``Trainer.step``)."""
    if hasattr(model, "param_groups"):
        groups = model.param_groups(t["lr"], t["weight_decay"], t["eps"])
    else:
        params = [p for p in model.parameters() if p.requires_grad]
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": t["weight_decay"]},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t["lr"], betas=tuple(t["betas"]), eps=t["eps"], fused=True)


def read_json_if_any(path: Path) -> dict:
    """The JSON object in ``path``, or {} when there is no such file."""
    return json.loads(path.read_text()) if path.is_file() else {}


def step_scope(model: torch.nn.Module):
    """A model's per-optimizer-step context: DLCM's global parser accumulates its boundary statistics
    over the micro-batches of one step (``parser_stats.window()``); nothing for other models."""
    stats = getattr(model, "parser_stats", None)
    return stats.window() if stats is not None else nullcontext()


COMPILE_UNITS = (Block, CrossBlock)  # every model family's transformer blocks (token, concept, decoder)


def compile_blocks(model: torch.nn.Module) -> None:
    """``train.compile``: ``torch.compile`` each transformer block in place (regional compilation, as torchtitan
    does): blocks of one class and shape share one compiled graph, so compile time does not grow with depth,
    and the weights keep their names. The code between blocks (embeddings, quantisers, boundary routers,
    heads, the fused loss kernel) runs eagerly."""
    opaque_to_compile()
    for module in model.modules():
        if isinstance(module, COMPILE_UNITS):
            module.compile()


class Trainer:
    def __init__(self, run_cfg: dict, tokens_dir: Path, run_dir: Path, threads: int | None = None,
                 upstream: Path | None = None):
        try:  # the train section checked against its typed fields, the defaults it leaves out filled in
            self.cfg, self.t = run_cfg, TrainConfig.resolve(run_cfg["train"])
        except (ValueError, TypeError) as e:
            raise ReproError(f"{run_dir}/config.json: {e}") from None
        self.run_dir, self.tokens_dir = Path(run_dir), Path(tokens_dir)
        self.snapshots = self.run_dir / "train" / "snapshots"  # weights every train.snapshot_interval steps
        self.config_hash = config_hash(run_cfg)
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        if self.world > 1 and not dist.is_initialized():
            if "MASTER_ADDR" not in os.environ:
                raise ReproError(f"WORLD_SIZE={self.world} is set, but not by torchrun (MASTER_ADDR is missing): unset "
                                 "WORLD_SIZE for one process, or launch with torchrun --nproc-per-node N")
            # an hour, not NCCL's 10 minutes: rank 0 hashes a sharded checkpoint while the others wait
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo", timeout=timedelta(hours=1))
        self.device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available()
                                   else "cpu")
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)
            if threads:
                torch.set_num_threads(threads)
        self.micro = self.t["micro_batch_size"]
        problem = world_size_problem(self.t, self.world)
        if problem:
            raise ReproError(f"{run_cfg['id']}: {problem}")
        self.accum = self.t["batch_size"] // (self.micro * self.world)
        manifest = read_manifest(self.tokens_dir)
        self.seq_len = run_cfg["model"]["seq_len"]
        self.view = view(manifest, run_cfg, self.tokens_dir)  # paired examples: source then target, or targets only
        self.train_tokens = open_split(self.tokens_dir, "train")
        self.valid_tokens = open_split(self.tokens_dir, "valid")
        if self.view.count(len(self.valid_tokens)) < 1:
            raise DataError(f"{self.tokens_dir}: the valid split has {len(self.valid_tokens)} tokens, fewer than one "
                            f"window of model.seq_len+1={self.seq_len + 1}; give the corpus a larger validation split "
                            "or use a shorter model.seq_len")
        # what a checkpoint of this run is bound to (trainer.checkpoint): settings and token data
        self.binding = {"config_hash": self.config_hash, "data": data_binding(manifest)}
        self.order = WindowOrder(len(self.train_tokens), self.view.stride, run_cfg["seed"],
                                 order_key(manifest, "train"))
        self.model_kwargs = {k: v for k, v in run_cfg["model"].items() if k != "seq_len"}
        torch.manual_seed(run_cfg["seed"])
        self.model = build_model(self.model_kwargs, vocab_size=manifest["vocab_size"], seq_len=self.seq_len)
        self._load_upstream(upstream)
        self._init_pretrained()
        self.model.to(self.device)
        # train.parallel fsdp: sharded across the ranks (trainer.distributed); one process trains unsharded
        fsdp = self.t.get("parallel", "ddp") == "fsdp"
        problem = fsdp_problem(get_spec(self.model_kwargs["arch"]), self.model.cfg) if fsdp else None
        if problem:
            raise ReproError(f"{run_cfg['id']}: {problem}")
        self.sharded = fsdp and self.world > 1
        if self.t["compile"]:  # before sharding, as torchtitan orders them
            compile_blocks(self.model)
        if self.sharded:
            shard(self.model)
        self.primary = self.model.cfg.loss_names()[0]  # what valid/loss measures
        self._lock_handle = None  # the run folder's lock while run() trains (rank 0)
        self.alerted: set[str] = set()
        self.flops_per_token = flops_per_token(self.model_kwargs, vocab_size=manifest["vocab_size"],
                                               seq_len=self.seq_len)
        self._check_valid_size()
        self.opt = make_optimizer(self.model, self.t)
        self.ddp = (torch.nn.parallel.DistributedDataParallel(self.model) if self.world > 1 and not self.sharded
                    else None)
        self.forward = self.ddp or self.model
        # bf16 autocast: asked for (precision bf16, on CUDA or, as a smoke run does, on a CPU), or auto on CUDA
        use_bf16 = self.t["precision"] == "bf16" or (self.device.type == "cuda" and self.t["precision"] == "auto")
        device_type = self.device.type
        self.autocast = (lambda: torch.autocast(device_type, dtype=torch.bfloat16)) if use_bf16 else nullcontext
        self.peak, self.peak_source = peak_flops(self.device, use_bf16, self.world)  # for the log lines' MFU

    def _load_upstream(self, upstream: Path | None) -> None:
        """A run built on another (``run_cfg["upstream"]``, NCM's generator on its tokenizer run): load
        that run's ``final/`` into the model and bind checkpoints to its weights, so a re-trained
        upstream never lets a stale checkpoint of this run resume."""
        expected = self.cfg.get("upstream")
        if (expected is None) != (upstream is None):
            raise ReproError(f"{self.cfg['id']}: " + (f"builds on {expected['experiment']} seed {expected['seed']}; "
                                                      "pass its final/ folder as --upstream" if expected
                                                      else "builds on no other run; drop --upstream"))
        if upstream is None:
            return
        upstream = Path(upstream)
        theirs = read_json_if_any(upstream / "manifest.json").get("data", {}).get("tokenizer_sha256")
        if theirs is not None and theirs != self.binding["data"]["tokenizer_sha256"]:
            raise ReproError(f"{upstream}: that run read the ids of tokenizer {theirs[:12]}, this run's tokens are of "
                             f"{self.binding['data']['tokenizer_sha256'][:12]}; build on a run of the same tokenizer")
        self.model.load_upstream(upstream)
        self.binding["upstream"] = {**expected, "model_sha256": sha256_file(upstream / "model.safetensors")}

    def _init_pretrained(self) -> None:
        """``train.init_from``: start from a pretrained ``LlamaForCausalLM`` (ConceptLM Table 3's continual
        pre-training; ``models.hf_llama.init_from_pretrained``), and bind checkpoints to those weights (the
        hub commit or the files' sha256), so changed weights never let a stale checkpoint resume."""
        source = self.t.get("init_from")
        if source:
            from models.hf_llama import init_from_pretrained

            self.binding["init_from"] = init_from_pretrained(self.model, source)

    # --- one optimizer step -------------------------------------------------------------------
    def batch(self, step: int, micro_index: int) -> tuple[torch.Tensor, torch.Tensor]:
        first = step * self.t["batch_size"] + (micro_index * self.world + self.rank) * self.micro
        starts = self.order.window_starts(first, self.micro) + self.view.offset
        x, y = gather_windows(self.train_tokens, starts, self.seq_len)
        y = mask_source(y, self.view)
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def step(self, step: int) -> dict:
        weights = self.t["loss_weights"]
        totals: dict[str, float] = {}
        monitors: dict[str, float] = {}
        with step_scope(self.model):  # DLCM's global parser: statistics over this step's micro-batches
            for j in range(self.accum):
                x, y = self.batch(step, j)
                skip_sync = self.ddp is not None and j < self.accum - 1  # all-reduce once, on the last micro-batch
                if self.sharded:  # reduce-scatter once, on the last micro-batch
                    self.model.set_requires_gradient_sync(j == self.accum - 1)
                with (self.ddp.no_sync() if skip_sync else nullcontext()), self.autocast():
                    out = self.forward(x, y)
                    losses = out["losses"]
                    total = sum(weights.get(name, 1.0) * value for name, value in losses.items())
                for name, value in losses.items():
                    if not torch.isfinite(value):
                        raise NonFiniteLossError(self._nonfinite(step, f"loss '{name}' = {value.item()}"))
                    totals[name] = totals.get(name, 0.0) + value.item() / self.accum
                for name, value in out.get("metrics", {}).items():  # e.g. codebook usage; logged, not optimised
                    monitors[name] = monitors.get(name, 0.0) + float(value) / self.accum
                (total / self.accum).backward()
        grad_norm = local(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t["grad_clip"] or float("inf")))
        if not torch.isfinite(grad_norm):
            raise NonFiniteLossError(self._nonfinite(step, f"gradient norm = {grad_norm.item()}"))
        lr = learning_rate(step, self.t)
        for group in self.opt.param_groups:
            group["lr"] = lr * group.get("lr_mult", 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if self.world > 1:  # log the global mean, not rank 0's share
            values = torch.tensor(list(totals.values()), device=self.device)
            dist.all_reduce(values)
            totals = dict(zip(totals, (values / self.world).tolist()))
        loss = sum(weights.get(n, 1.0) * v for n, v in totals.items())
        return {"loss": loss, **{f"loss/{n}": v for n, v in totals.items()},
                **{f"metric/{n}": v for n, v in monitors.items()}, "lr": lr, "grad_norm": grad_norm.item()}

    def _alert(self, row: dict, step: int) -> None:
        """Print a model's ``ALERTS`` (e.g. ConceptLM's codebook collapse) when raised, once while they stay
        raised, and say so when a logged row shows the metric clear again (a warning is never left standing
        after the run recovered)."""
        if self.rank != 0:
            return
        for name, message in getattr(self.model, "ALERTS", {}).items():
            raised = bool(row.get(f"metric/{name}"))
            if raised and name not in self.alerted:
                self.alerted.add(name)
                self._say(f"warning at step {step}: {message}")
            elif not raised and name in self.alerted and f"metric/{name}" in row:
                self.alerted.discard(name)
                self._say(f"cleared at step {step}: {name} is no longer raised; the warning above no longer holds")

    def _nonfinite(self, step: int, what: str) -> str:
        last = valid_checkpoints(self.run_dir / "ckpt")
        kept = f"the last good checkpoint is {last[-1]}" if last else "no checkpoint was written yet"
        return (f"step {step}: {what}; stopped before the optimizer step, {kept}. "
                "Lower train.lr or raise train.warmup_steps, then re-run to resume")

    @torch.no_grad()
    def valid_loss(self) -> float:
        """Mean primary loss (the first of the config's ``loss_names``: NTP for token and concept LMs, the
        NELBO for masked diffusion) on the first ``eval_batches`` x micro-batch windows of the valid split."""
        self.model.eval()
        n = min(self.t["eval_batches"] * self.micro, self.view.count(len(self.valid_tokens)))
        starts = self.view.starts(np.arange(n))
        total = 0.0
        for i in range(0, n, self.micro):
            x, y = gather_windows(self.valid_tokens, starts[i:i + self.micro], self.seq_len)
            y = mask_source(y, self.view)
            with self.autocast():
                total += self.model(x.to(self.device), y.to(self.device))["losses"][self.primary].item() * len(x)
        self.model.train()
        return total / n

    # --- the loop -------------------------------------------------------------------------------
    def run(self, stop_after: int | None = None) -> dict | None:
        """Train to ``train.steps`` (resuming if a checkpoint of the same binding exists) and write
        ``final/``; a completed run removes its ``ckpt/``, so a forced re-run trains afresh.

        ``stop_after=k`` simulates an interruption: checkpoint after step k and return None.
        """
        self._lock()
        try:
            return self._train(stop_after)
        finally:
            if self._lock_handle is not None:  # the pid first: a refusal after this names no stale holder
                (self.run_dir / ".train.owner").unlink(missing_ok=True)
                self._lock_handle.release()
                self._lock_handle = None

    def _train(self, stop_after: int | None) -> dict | None:
        start, rows = self.resume()
        if self.rank == 0:
            prune_snapshots(self.snapshots, start)
        self.log = MetricsLog(self.run_dir / "train" / "metrics.jsonl", rows, enabled=self.rank == 0)
        steps, tokens_per_step = self.t["steps"], self.t["batch_size"] * self.seq_len
        self._say(f"{self.model.num_params() / 1e6:.2f}M non-embedding params | {tokens_per_step} tokens/step x "
                  f"{steps} steps = {tokens_per_step * steps / 1e6:.2f}M tokens | {self.flops_per_token / 1e6:.1f} "
                  f"MFLOP/token | epoch = {self.order.n_windows} windows"
                  + (f" | resuming at step {start}" if start else ""))
        self._say(f"MFU against {self.peak / 1e12:g} TFLOP/s ({self.peak_source})" if self.peak else self.peak_source)
        self.model.train()
        interactive = sys.stderr.isatty() and self.rank == 0  # a bar on a terminal, plain lines in a log file
        bar = tqdm(range(start, steps), initial=start, total=steps, disable=not interactive, mininterval=2,
                   unit="step", desc=self.cfg["id"])
        wall0 = t0 = time.perf_counter()
        logged = start  # step of the previous log line, for tokens/s
        for step in bar:
            row = self.step(step)
            done = step + 1
            if done % self.t["log_interval"] == 0 or done == steps:
                rate = (done - logged) * tokens_per_step / (time.perf_counter() - t0)
                row.update(step=done, tokens=done * tokens_per_step, tok_per_s=rate)
                if self.device.type == "cuda":  # this process's peak so far (GPU checks read it)
                    row["peak_mem_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
                self.log.append(row)
                self._alert(row, done)
                bar.set_postfix(loss=f"{row['loss']:.3f}", tok_s=f"{rate:.0f}")
                if not interactive:
                    self._say(log_line(row, steps, tokens_per_step, self.flops_per_token, self.peak))
                logged, t0 = done, time.perf_counter()
            if is_validation_step(done, self.t):
                loss = self.valid_loss()
                self.log.append({"split": "valid", "step": done, "tokens": done * tokens_per_step, "valid/loss": loss})
                self._say(valid_line(done, steps, loss, self.primary))
            if self.t.get("snapshot_interval") and done % self.t["snapshot_interval"] == 0 and done < steps:
                weights = self.weights()
                if self.rank == 0:
                    save_snapshot(self.snapshots, done, weights)
            if done % self.t["checkpoint_interval"] == 0 or done == stop_after:
                self.checkpoint(done)
            _fault_point(done)
            if done == stop_after:
                return None
        bar.close()
        return self.finish(time.perf_counter() - wall0)

    def _lock(self) -> None:
        """Hold an exclusive lock on the run folder for the life of this process (``filelock``: an OS lock, gone
        with its holder), so that a second trainer (e.g. a re-run while an orphaned job of a killed Snakemake
        still trains) cannot write beside it; the holder's pid is in ``.train.owner`` for the error."""
        if self.rank != 0:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lock, owner = FileLock(self.run_dir / ".train.lock", timeout=0), self.run_dir / ".train.owner"
        try:
            lock.acquire()
        except Timeout:
            pid = owner.read_text().strip() if owner.is_file() else ""
            raise TrainingLockError(f"{self.run_dir} is being trained by another process (pid {pid or 'unknown'}); "
                                    "wait for it to finish or kill it, then re-run") from None
        atomic_write_text(owner, f"{os.getpid()}\n")
        self._lock_handle = lock

    def _check_valid_size(self) -> None:
        """Say so when the valid split is smaller than what valid/loss is meant to average (``eval_batches``
        micro-batches): the loss is then measured on fewer windows, and noisier, than the profile asks."""
        windows, wanted = self.view.count(len(self.valid_tokens)), self.t["eval_batches"] * self.micro
        if windows < wanted:
            self._say(f"warning: the valid split has {len(self.valid_tokens)} tokens, {windows} window(s) of "
                      f"model.seq_len+1={self.seq_len + 1}, fewer than train.eval_batches x micro_batch_size = "
                      f"{wanted}: valid/loss averages only those; give the corpus a larger validation split")

    def _say(self, message: str) -> None:
        """Print ``message`` on stdout (rank 0), above the progress bar when there is one."""
        if self.rank == 0:
            tqdm.write(f"[{self.cfg['id']} seed {self.cfg['seed']}] {message}", file=sys.stdout)
            sys.stdout.flush()

    def resume(self) -> tuple[int, str]:
        """(step, training log through it) of the newest checkpoint bound to this run; (0, "") when
        there is none. Debris of killed writes is removed; a checkpoint of another binding (config,
        tokenizer or tokens changed) is set aside as ``ckpt.stale/``, never resumed."""
        root = self.run_dir / "ckpt"
        if self.rank == 0:  # the other ranks wait, then read what rank 0 left
            for path in clean_debris(root):
                self._say(f"removed {path.name}, left by an interrupted checkpoint write")
            ckpts = valid_checkpoints(root)
            difference = ckpts and binding_difference(read_state(ckpts[-1]), self.binding)
            if difference:
                self._say(f"checkpoints in {root} belong to another run ({difference}): moved to {set_aside(root)}; "
                          "training starts afresh")
        if self.world > 1:
            dist.barrier()
        ckpts = valid_checkpoints(root)
        if not ckpts:
            return 0, ""
        read_shards = (lambda folder: load_shards(folder, self.model, self.opt)) if self.sharded else None
        state = load_checkpoint(ckpts[-1], self.model, self.opt, self.binding, read_shards, self.rank, self.world)
        return state["step"], state["metrics"]

    def checkpoint(self, step: int) -> None:
        state = {"binding": self.binding, "examples_seen": step * self.t["batch_size"]}
        root, keep, metrics = self.run_dir / "ckpt", self.t["keep_checkpoints"], self.log.text()
        if self.sharded:  # every rank writes its shards
            save_sharded_checkpoint(root, step, lambda folder: save_shards(folder, self.model, self.opt), state, keep,
                                    metrics, self.rank, self.world, dist.barrier)
            return
        if self.rank == 0:
            save_checkpoint(root, step, self.model, self.opt, state, keep=keep, metrics=metrics)
        if self.world > 1:
            dist.barrier()

    def weights(self) -> torch.nn.Module | dict:
        """What ``save_weights`` writes: the model, or its gathered weights when sharded (a collective)."""
        return full_weights(self.model) if self.sharded else self.model

    def finish(self, wall: float) -> dict | None:
        weights = self.weights()
        if self.rank != 0:
            return None
        final = self.run_dir / "final"
        final.mkdir(parents=True, exist_ok=True)
        save_weights(weights, final / "model.safetensors")
        manifest = {"experiment": self.cfg["id"], "seed": self.cfg["seed"], "config": self.cfg,
                    "config_hash": self.config_hash, "data": self.binding["data"],
                    "upstream": self.binding.get("upstream"), "init_from": self.binding.get("init_from"),
                    "model_sha256": sha256_file(final / "model.safetensors"),
                    "vocab_size": self.model.cfg.vocab_size, "steps": self.t["steps"],
                    "tokens": self.t["steps"] * self.t["batch_size"] * self.seq_len,
                    "non_embedding_params": self.model.num_params(), "flops_per_token": self.flops_per_token,
                    "final_train_loss": self.log.last("loss"), "final_valid_loss": self.log.last("valid/loss"),
                    "train_wall_time_s": round(wall, 2),  # this process only (after a resume: the remainder)
                    "host": host_fingerprint(),  # the host that finished the run
                    "snapshots": snapshot_index(self.snapshots, self.t["batch_size"] * self.seq_len)}
        atomic_write_json(final / "manifest.json", manifest)
        remove_checkpoints(self.run_dir / "ckpt")
        return manifest


FAULT_ENV = "REPRO_SIGKILL_AFTER_STEP"


def _fault_point(step: int) -> None:
    """Test hook: ``REPRO_SIGKILL_AFTER_STEP=N`` kills this process with SIGKILL after step N (after its
    log rows and checkpoint), as a crash or an OOM killer would; tests/workflows/test_rerun.py uses it through
    Snakemake. Unset in every normal run."""
    if os.environ.get(FAULT_ENV) == str(step):
        os.kill(os.getpid(), signal.SIGKILL)
