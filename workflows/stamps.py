"""What a settings file should hold, as a file Snakemake can compare by time.

A settings file (a run's ``config.json``, a dataset's ``settings.json``, an entry's ``config.json``) is the
params' JSON, and Snakemake re-writes it when the params change -- but only from its metadata under
``.snakemake/``, which a copied results folder, ``rm -rf .snakemake`` (to clear a lock) or a Snakemake
upgrade leaves behind. Then a profile edit would re-run nothing and every result would silently stay that
of the old settings. The stamp makes the check by content: for each settings file, ``.stamps/<its path>/want``
holds the text the profile resolves to today, newer than the settings file exactly when the two differ, so
Snakemake's time rule re-writes the settings file and re-runs what reads it (with or without metadata),
and leaves it alone when they agree. The stamps are written while Snakemake builds its DAG (dry runs
included), outside the results (a refused profile leaves no results folder behind) and each alone in a
folder that holds no other stamp's folder: Snakemake lists every folder above the first file it checks
(``snakemake.io``'s inventory) and then takes a file missing from a listed folder as absent, so a stamp
written later into a listed folder would be missed. A stamp is a function of
the settings file and the profile, so deleting ``.stamps/`` loses nothing.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from common.io import atomic_write_text

ROOT = Path(".stamps")   # in Snakemake's working directory, beside .snakemake/


def want(settings: str | Path, text: str) -> Path:
    """The stamp of settings file ``settings`` for content ``text`` (written when it differs), dated older than the
    settings file when that file already holds ``text`` and newer otherwise."""
    settings = Path(settings)
    stamp = ROOT / (settings.relative_to(settings.anchor) if settings.is_absolute() else settings) / "want"
    if not stamp.is_file() or stamp.read_text() != text:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(stamp, text)
    if not settings.is_file():
        return stamp
    then, mine = settings.stat().st_mtime, stamp.stat().st_mtime
    if settings.read_text().rstrip("\n") == text:
        if mine > then:
            os.utime(stamp, (then, then))
    elif mine <= then:
        now = max(time.time(), then + 1)
        os.utime(stamp, (now, now))
    return stamp
