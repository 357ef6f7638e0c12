"""The settings stamp (workflows/stamps.py): newer than its settings file exactly when the two differ."""
from __future__ import annotations

import os
from pathlib import Path

from workflows.stamps import want


def test_the_stamp_is_newer_than_its_settings_file_exactly_when_their_contents_differ(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                          # Snakemake's working directory
    settings = Path("results/runs/x/seed0/config.json")
    stamp = want(settings, '{"lr": 1}')                 # a run not yet configured: the stamp alone
    assert (stamp == Path(".stamps/results/runs/x/seed0/config.json/want") and stamp.read_text() == '{"lr": 1}'
            and not settings.exists())
    settings.parent.mkdir(parents=True)
    settings.write_text('{"lr": 1}\n')                   # as the settings rule writes it
    os.utime(settings, (1000, 1000))
    assert want(settings, '{"lr": 1}').stat().st_mtime <= settings.stat().st_mtime     # agree: nothing to re-run
    assert want(settings, '{"lr": 2}').stat().st_mtime > settings.stat().st_mtime      # edited: re-write it
    assert want(settings, '{"lr": 2}').read_text() == '{"lr": 2}'
    assert want(settings, '{"lr": 1}').stat().st_mtime <= settings.stat().st_mtime     # edit undone: agree again
