"""The one error class of the harness: bad input found before (or instead of) an evaluation.

Kept free of heavy imports so that the CLI can validate suites, local data and checkpoints before
``lm_eval`` is imported.
"""
from __future__ import annotations

from common.errors import ReproError


class HarnessError(ReproError, ValueError):
    """Unknown task or suite, missing or malformed local data, a checkpoint that does not fit, a
    request the adapter cannot score. The message is one line naming the file, task or key."""
