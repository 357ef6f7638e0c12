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
        calls.append(job.part)
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
    monkeypatch.setattr(tokenization, "_tokenize_shard", lambda job: (calls.append(job.part), real(job)))
    tokenize_corpus(tiny_data["corpus"], tok, tmp_path / "t", shard_docs=37)
    redone = {p.split("/")[-1] for p in calls}
    n_train = -(-400 // 37)  # 11 shards of the 400 training documents
    assert "train-00002.bin" not in redone and {"train-00000.bin", "train-00001.bin"} <= redone
    assert len(redone) == n_train - 1 + 2 + 2  # all but the one kept train shard, and valid / test (two each)
    assert _bins(tmp_path / "t") == _bins(tiny_data["tokens"])


def test_a_malformed_document_is_one_line_naming_file_and_line_in_any_shard(tiny_data, tmp_path):
    import shutil

    from corpora.sources import CorpusError

    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_data["corpus"], corpus)
    lines = (corpus / "train.jsonl").read_text().splitlines()
    lines[99] = "{not json"  # line 100: the third shard of 37 documents
    (corpus / "train.jsonl").write_text("\n".join(lines) + "\n")
    tok = load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"])
    with pytest.raises(CorpusError, match=r"train\.jsonl:100: not valid JSON .*re-run 'corpus'"):
        tokenize_corpus(corpus, tok, tmp_path / "tokens", shard_docs=37)
    shutil.copy(tiny_data["corpus"] / "train.jsonl", corpus / "train.jsonl")
    (corpus / "valid.jsonl").unlink()
    with pytest.raises(CorpusError, match=r"valid\.jsonl: corpus split missing"):
        tokenize_corpus(corpus, tok, tmp_path / "tokens2", shard_docs=10**9)
