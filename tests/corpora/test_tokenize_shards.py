"""Sharded, resumable tokenisation: the bytes never depend on the shard size or the worker count, a
killed job keeps its finished shards and redoes only the rest, and a shard made from another tokenizer
or a damaged one is redone."""
from __future__ import annotations

import json

import pytest

import corpora.tokenization as tokenization
from corpora.tokenization import PARTS, load_tokenizer, tokenize_corpus


def _bins(folder) -> dict[str, bytes]:
    return {s: (folder / f"{s}.bin").read_bytes() for s in ("train", "valid", "test")}


def test_shards_and_workers_give_the_serial_bytes(tiny_data, tmp_path):
    tok = load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"])
    one = tokenize_corpus(tiny_data["corpus"], tok, tmp_path / "one", shard_docs=10**9)
    many = tokenize_corpus(tiny_data["corpus"], tok, tmp_path / "many", shard_docs=37, workers=2)
    assert _bins(tmp_path / "one") == _bins(tmp_path / "many") == _bins(tiny_data["tokens"])
    assert one["splits"] == many["splits"]
    assert not (tmp_path / "many" / PARTS).exists()  # assembled splits leave no parts behind


def test_a_killed_job_resumes_from_its_finished_shards(tiny_data, tmp_path, monkeypatch):
    tok = load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"])
    real, calls = tokenization._tokenize_shard, []

    def dies_on_the_fourth(job):
        calls.append(job[3])
        if len(calls) == 4:
            raise KeyboardInterrupt  # as a kill: the job stops mid-way
        real(job)

    monkeypatch.setattr(tokenization, "_tokenize_shard", dies_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        tokenize_corpus(tiny_data["corpus"], tok, tmp_path / "t", shard_docs=37)
    kept = sorted(p.name for p in (tmp_path / "t" / PARTS).glob("*.bin"))
    assert len(kept) == 3 and not (tmp_path / "t" / "train.bin").exists()
    # a finished shard from another tokenizer, and a damaged one, are redone; the others are kept
    record = tmp_path / "t" / PARTS / "train-00000.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "tokenizer_sha256": "another"}))
    (tmp_path / "t" / PARTS / "train-00001.bin").write_bytes(b"damaged")
    calls.clear()
    monkeypatch.setattr(tokenization, "_tokenize_shard", lambda job: (calls.append(job[3]), real(job)))
    tokenize_corpus(tiny_data["corpus"], tok, tmp_path / "t", shard_docs=37)
    redone = {p.split("/")[-1] for p in calls}
    n_train = -(-400 // 37)  # 11 shards of the 400 training documents
    assert "train-00002.bin" not in redone and {"train-00000.bin", "train-00001.bin"} <= redone
    assert len(redone) == n_train - 1 + 2 + 2  # all but the one kept train shard, and valid / test (two each)
    assert _bins(tmp_path / "t") == _bins(tiny_data["tokens"])
