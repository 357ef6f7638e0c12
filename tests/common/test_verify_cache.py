"""common.verify.damaged: its cache is an optimisation, never a reason to refuse a plan."""
import errno
import json
import os

import common.verify as verify
from common.io import sha256_file


def test_full_disk_while_writing_the_cache_does_not_refuse_planning(tmp_path, monkeypatch):
    folder = tmp_path / "data" / "w" / "tokens"
    folder.mkdir(parents=True)
    (folder / "train.bin").write_bytes(b"tokens")
    (folder / "manifest.json").write_text(json.dumps({"splits": {
        "train": {"file": "train.bin", "sha256": sha256_file(folder / "train.bin")}}}))
    os.utime(folder / "manifest.json", ns=(1, 1))  # the listed file is newer: it is hashed, and cached

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(verify, "atomic_write_json", full)
    assert verify.damaged(tmp_path) == []


def test_only_the_profiles_run_folders_are_read(tmp_path):
    """A damaged run folder the profile no longer lists is not the plan's business; a listed one is named."""
    for run in ("kept/seed0", "dropped/seed0"):
        final = tmp_path / "runs" / run / "final"
        final.mkdir(parents=True)
        (final / "model.safetensors").write_bytes(b"weights")
        (final / "manifest.json").write_text(json.dumps({"model_sha256": "0" * 64}))  # not the file's hash
        os.utime(final / "manifest.json", ns=(1, 1))
    assert verify.damaged(tmp_path, runs=["elsewhere/seed0"]) == []
    problems = verify.damaged(tmp_path, runs=["kept/seed0"])
    assert len(problems) == 1 and "runs/kept/seed0/final/model.safetensors: its content differs" in problems[0]
    assert len(verify.damaged(tmp_path)) == 2
