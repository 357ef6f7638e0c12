"""The base of every error the suite raises on bad input (config, files, checkpoints, numbers), and the
one convention of its command lines (``entry_point``):

=====  ==========================================================================================
exit   meaning
=====  ==========================================================================================
0      done (or skipped, saying so on stdout)
2      bad input: a ``ReproError``, one line ``error: <what is wrong and the fix>`` on stderr; or a
       bad command line (argparse: usage and one error line)
1      a bug: any other exception, with its traceback
=====  ==========================================================================================
"""
from __future__ import annotations

import functools
import sys
from typing import Callable

USER_ERROR = 2  # the exit status of bad input (argparse's too); 1, Python's for an uncaught exception, is a bug


class ReproError(Exception):
    """An error whose message names the file or key at fault and what to do."""


class ConfigError(ReproError, ValueError):
    """A profile is invalid; the message names the key and the fix (raised by every layer that checks a
    profile's settings: ``workflows.check``, and an entry kind's resolver in ``evals/``)."""


class CheckpointError(ReproError, RuntimeError):
    """A checkpoint is truncated, corrupted or belongs to another configuration."""


def entry_point(command: Callable) -> Callable[[list[str] | None], int]:
    """``command(argv)`` as a command line's ``main(argv=None) -> int``: the status it returns (0 unless an
    int), or ``USER_ERROR`` with its ``ReproError`` as one line on stderr; any other exception propagates."""

    @functools.wraps(command)
    def main(argv: list[str] | None = None) -> int:
        try:
            status = command(argv)
        except ReproError as error:
            print("error: " + " ".join(str(error).splitlines()), file=sys.stderr)
            return USER_ERROR
        return status if isinstance(status, int) else 0

    return main
