"""A run's training settings, the profile's ``train`` section, as one typed and frozen dataclass.

Its fields are the only list of the ``train`` keys, with their types and, where every profile agrees,
their defaults (AdamW's eps and the clipping norm of all three papers' recipes, a next-token loss weight
of 1, no compilation, bf16 autocast on CUDA only). ``TrainConfig.of`` refuses an unknown key (naming the
closest one), a missing required one and a value of the wrong type, in one line; ranges stay with the
profile schema (``config/schemas/config.schema.yaml``, whose ``train`` properties a test holds equal to
these fields) and relations with ``workflows.check``. A profile's resolution writes every field out
(``resolve``), so a run's config and its hash list the defaults too; the off switches (``snapshot_interval``,
``init_from``, ``parallel``) appear only when set, as the model fields' do (``models.fields.off_switch``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, get_args

from models.fields import check_fields, check_keys, declared_types, off_switch, written_out


@dataclass(frozen=True)
class TrainConfig:
    steps: int                      # optimizer steps
    batch_size: int                 # sequences per optimizer step, over every process
    micro_batch_size: int           # sequences per forward of one process (accumulation makes up the rest)
    lr: float                       # peak learning rate (linear warmup, then cosine to lr x min_lr_ratio)
    min_lr_ratio: float
    warmup_steps: int
    weight_decay: float             # on matrices only (trainer.train.build_optimizer)
    betas: tuple                    # AdamW's (beta1, beta2)
    log_interval: int
    eval_interval: int              # validation every N steps, and after the last
    eval_batches: int               # micro-batches of validation windows
    checkpoint_interval: int
    keep_checkpoints: int           # the newest N resumable checkpoints are kept
    eps: float = 1e-8
    grad_clip: float = 1.0          # 0 disables clipping
    compile: bool = False           # torch.compile the model before sharding
    precision: Literal["auto", "fp32", "bf16"] = "auto"   # auto: bf16 autocast on CUDA, fp32 elsewhere
    loss_weights: dict = field(default_factory=lambda: {"ntp": 1.0})
    snapshot_interval: int | None = off_switch()    # weights-only snapshots every N steps (train/snapshots/)
    init_from: str | None = off_switch()            # a transformers Llama the run starts from (hub or folder)
    parallel: Literal["ddp", "fsdp"] | None = off_switch()   # several processes: null = ddp

    def __post_init__(self):
        for name, kind in declared_types(type(self)).items():  # YAML's 600.0 is a float: range() wants an int
            value = getattr(self, name)
            if int in (kind, *get_args(kind)) and isinstance(value, float):
                whole = int(value) if value.is_integer() else "an integer"
                raise ValueError(f"train.{name}={value}: give a whole number without a decimal point ({whole})")
        check_fields(self, "train")

    @classmethod
    def of(cls, section: dict) -> TrainConfig:
        """The settings of a profile's (or a run config's) ``train`` section; ValueError in one line."""
        check_keys(cls, section, None, where="train")
        return cls(**{key: tuple(value) if key == "betas" and isinstance(value, list) else value
                      for key, value in section.items()})

    @classmethod
    def resolve(cls, section: dict) -> dict:
        """``section`` checked, with the defaults of the fields it leaves out (not the off switches): what a
        run's config lists. A key it gives stays as given (an off switch set to null included)."""
        typed = cls.of(section)
        return {**{f.name: getattr(typed, f.name) for f in dataclasses.fields(cls)
                   if f.name not in section and written_out(f, getattr(typed, f.name))}, **section}


def fsdp_problem(spec, cfg) -> str | None:
    """Why models of registry entry ``spec`` (``models.registry.ModelSpec``) with config ``cfg`` cannot train
    under FSDP (``trainer.distributed``), or None; from the entry and the config, no model built."""
    if not spec.shardable:
        return (f"train.parallel=fsdp: model.arch={spec.name} is not shardable (state every rank updates from its "
                "own batch, or not tested sharded; token LMs and ConceptLM are); use train.parallel=ddp")
    if getattr(cfg, "tie_embeddings", False):
        return "train.parallel=fsdp shards untied models only; set model.tie_embeddings=false (Llama's default)"
    return None


def world_size_problem(t: dict, world: int = 1) -> str | None:
    """Why ``world`` processes cannot run the global batch of ``train`` settings ``t`` (each process takes
    micro-batches of ``micro_batch_size``, accumulated to ``batch_size`` in all), or None."""
    if t["batch_size"] % (t["micro_batch_size"] * world) == 0:
        return None
    if t["batch_size"] % t["micro_batch_size"]:
        return (f"train.batch_size={t['batch_size']} is not a multiple of train.micro_batch_size="
                f"{t['micro_batch_size']}; make the micro-batch divide the batch")
    return (f"train.batch_size={t['batch_size']} is not a multiple of train.micro_batch_size="
            f"{t['micro_batch_size']} x {world} processes; choose a process count (the gpu resource) that "
            f"divides batch_size / micro_batch_size = {t['batch_size'] // t['micro_batch_size']}, or another "
            "micro_batch_size")
