"""Corpus sources, tokenizer training and the token memmaps."""
from __future__ import annotations

import json

import pytest

from corpora.corpus import write_corpus
from corpora.sources import HF_CORPORA, CorpusError, HFCorpus, hf_documents, local_documents
from corpora.tokenization import TokenizerError, check_tokenizer, load_tokenizer
from trainer.data import open_split, read_manifest


def test_tokens_layout_and_manifest(tiny_data):
    manifest = read_manifest(tiny_data["tokens"])
    tok = load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"])
    assert manifest["vocab_size"] == tok.vocab_size == 300 and manifest["eot_id"] == 0
    assert manifest["tokenizer_sha256"] == tok.sha256
    valid = open_split(tiny_data["tokens"], "valid")
    docs = [json.loads(line)["text"] for line in (tiny_data["corpus"] / "valid.jsonl").read_text().splitlines()]
    expected = [0] + [i for ids in tok.encode_batch(docs) for i in ids + [0]]
    assert valid.tolist() == expected
    assert manifest["splits"]["valid"]["n_docs"] == len(docs) == 40
    assert tok.decode(valid[1:expected.index(0, 1)].tolist()) == docs[0]


def test_tokenizer_mismatch_is_an_error(tiny_data):
    with pytest.raises(TokenizerError, match="delete .* and re-run 'tokenize'"):
        check_tokenizer(read_manifest(tiny_data["tokens"]), "0" * 64, tiny_data["tokens"])


@pytest.mark.parametrize("fmt", ["txt", "jsonl", "parquet"])
def test_local_files_in_each_format(tmp_path, fmt):
    texts = ["first document here.", "second one, longer than the first.", "third."]
    paths = {}
    for split in ("train", "valid", "test"):
        path = tmp_path / f"{split}.{fmt}"
        if fmt == "txt":
            path.write_text("\n\n".join(texts) + "\n")
        elif fmt == "jsonl":
            path.write_text("".join(json.dumps({"body": t}) + "\n" for t in texts))
        else:
            import pandas as pd
            pd.DataFrame({"body": texts}).to_parquet(path)
        paths[split] = str(path)
    cfg = {**paths, "text_field": "text" if fmt == "txt" else "body"}
    docs = [d["text"].strip() for d in local_documents(cfg)["valid"]]
    assert docs == texts


def test_local_errors_name_the_problem(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"content": "x"}\n')
    (tmp_path / "a.csv").write_text("x\n")
    with pytest.raises(CorpusError, match="corpus.local.train=.*no such file"):
        local_documents({"train": str(tmp_path / "missing.jsonl"), "valid": "", "test": ""})
    with pytest.raises(CorpusError, match="unsupported extension '.csv'"):
        local_documents({s: str(tmp_path / "a.csv") for s in ("train", "valid", "test")})
    docs = local_documents({s: str(tmp_path / "a.jsonl") for s in ("train", "valid", "test")})
    with pytest.raises(CorpusError, match="no field 'text'.*corpus.text_field"):
        next(docs["train"])


def test_a_local_corpus_with_only_train_has_its_splits_carved(tmp_path):
    """valid / test not given: carved from the head of train (test first, then valid), as for named corpora;
    the profile accepts it (schema and the file check)."""
    from pathlib import Path

    import yaml

    from workflows.experiments import load_profile

    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(10)))
    docs = local_documents({"train": str(tmp_path / "train.jsonl"), "carve": {"valid": 2, "test": 3}})
    got = {s: [d["text"] for d in docs[s]] for s in ("test", "valid", "train")}
    assert got == {"test": ["doc 0", "doc 1", "doc 2"], "valid": ["doc 3", "doc 4"],
                   "train": [f"doc {i}" for i in range(5, 10)]}
    given = local_documents({"train": str(tmp_path / "train.jsonl"), "test": str(tmp_path / "train.jsonl"),
                             "carve": {"valid": 4}})
    assert len(list(given["valid"])) == 4 and len(list(given["test"])) == 10  # only the missing split is carved
    config = yaml.safe_load(Path("config/default.yaml").read_text())
    config["corpus"] = {"id": "mine", "source": "local", "local": {"train": str(tmp_path / "train.jsonl")}}
    config["experiments"] = [{"id": "base", "evals": ["ppl"]}]
    for section in ("scaling_laws", "datasets", "genppl"):
        config.pop(section, None)
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(config))
    assert load_profile(tmp_path / "mine.yaml")["corpus"]["local"] == {"train": str(tmp_path / "train.jsonl")}


def test_named_corpus_streams_and_carves_missing_splits(tmp_path, monkeypatch):
    """The HF loading path, run on a local dataset folder standing in for a hub repository."""
    folder = tmp_path / "fake_hub_corpus"
    folder.mkdir()
    (folder / "train.jsonl").write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(20)))
    monkeypatch.setitem(HF_CORPORA, "fake", HFCorpus(str(folder), None, "text", {"train": "train"}))
    docs = hf_documents({"name": "fake", "max_docs": {"train": 5, "valid": 2, "test": 3}})
    got = {s: [d["text"] for d in docs[s]] for s in ("test", "valid", "train")}
    assert got == {"test": ["doc 0", "doc 1", "doc 2"], "valid": ["doc 3", "doc 4"],
                   "train": ["doc 5", "doc 6", "doc 7", "doc 8", "doc 9"]}


def test_write_corpus_rejects_empty_input(tmp_path):
    for split in ("train", "valid", "test"):
        (tmp_path / f"{split}.jsonl").write_text('{"text": "a b"}\n' if split != "test" else "")
    (tmp_path / "blank.jsonl").write_text('{"text": "   "}\n')
    cfg = {"id": "x", "source": "local", "local": {s: str(tmp_path / f"{s}.jsonl") for s in ("train", "valid", "test")}}
    with pytest.raises(CorpusError, match="corpus.local.test=.*the file is empty"):
        write_corpus(cfg, tmp_path / "out")
    cfg["local"]["test"] = str(tmp_path / "blank.jsonl")
    with pytest.raises(CorpusError, match="split 'test' is empty"):
        write_corpus(cfg, tmp_path / "out")


def test_synthetic_oracle_survives_the_pipeline(tmp_path):
    """The oracle NLL in the tokens manifest is the exact score of the texts on disk."""
    import math

    from corpora.synthetic import WorldConfig, score_document
    from corpora.tokenization import tokenize_corpus, train_bpe
    from corpora.sources import read_documents

    corpus_cfg = {"id": "w", "source": "synthetic", "seed": 3,
                  "synthetic": {"train_docs": 60, "valid_docs": 8, "test_docs": 8}}
    write_corpus(corpus_cfg, tmp_path / "corpus")
    train_bpe(tmp_path / "corpus", 300, 2, tmp_path / "tok.json")
    manifest = tokenize_corpus(tmp_path / "corpus", load_tokenizer({"kind": "bpe"}, tmp_path / "tok.json"),
                               tmp_path / "tokens")
    world = WorldConfig(**corpus_cfg["synthetic"])
    rescored = -math.fsum(score_document(world, 3, d["text"]) for d in read_documents(tmp_path / "corpus", "test"))
    assert manifest["splits"]["test"]["oracle_nll"] == pytest.approx(rescored, rel=1e-12)
    assert manifest["splits"]["test"]["n_tokens"] > manifest["splits"]["test"]["n_docs"] * 10
