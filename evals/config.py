"""A run's evaluation settings, the profile's ``eval`` section, as one typed and frozen dataclass.

Read by the evaluations only, outside every run's config hash: editing them re-runs the evaluations, never
the training. Its fields are the only list of the ``eval`` keys (the profile schema keeps their ranges, and
a test holds its ``eval`` properties equal to these fields); ``EvalConfig.of`` refuses an unknown key or a
wrong type in one line. The lm-eval command line takes its default batch from here.
"""
from __future__ import annotations

from dataclasses import dataclass

from models.fields import check_fields, check_keys, off_switch


@dataclass(frozen=True)
class EvalConfig:
    batch_size: int = 16                     # lm-eval's batch (the harness evaluations)
    limit: int | None = off_switch()         # lm-eval tasks: at most this many documents per task

    def __post_init__(self):
        check_fields(self, "eval")

    @classmethod
    def of(cls, section: dict) -> EvalConfig:
        """The settings of a profile's ``eval`` section; ValueError in one line."""
        check_keys(cls, section, None, where="eval")
        return cls(**section)
