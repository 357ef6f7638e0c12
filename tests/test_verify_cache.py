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
    (folder / "manifest.json").write_text(json.dumps({"splits": {"train": {"file": "train.bin",
                                                                          "sha256": sha256_file(folder / "train.bin")}}}))
    os.utime(folder / "manifest.json", ns=(1, 1))  # the listed file is newer: it is hashed, and cached

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(verify, "atomic_write_json", full)
    assert verify.damaged(tmp_path) == []
