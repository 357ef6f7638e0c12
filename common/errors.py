"""The base of every error the suite raises on bad input (config, files, checkpoints, numbers).

Entry points print these as one line and exit non-zero; anything else is a bug and keeps its
traceback."""


class ReproError(Exception):
    """An error whose message names the file or key at fault and what to do."""
