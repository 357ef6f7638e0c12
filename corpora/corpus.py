"""A profile's corpus written to disk: every source (``corpora.sources``: the synthetic world, a Hugging
Face corpus, local files; ``corpora.pairs``: paired tasks and Sudoku) ends as the same artifact,
``{train,valid,test}.jsonl`` and a ``manifest.json`` (``corpora.sources``' docstring)."""
from __future__ import annotations

import json
import math
from pathlib import Path

from common.io import atomic_write, atomic_write_json, remove_debris, sha256_file
from corpora.pairs import pair_documents, sudoku_documents
from corpora.sources import SPLITS, CorpusError, hf_documents, local_documents, synthetic_documents


def write_corpus(corpus_cfg: dict, out_dir: Path) -> dict:
    """Materialise the configured corpus as jsonl splits + manifest; returns the manifest."""
    source = corpus_cfg["source"]
    if source == "synthetic":
        docs = synthetic_documents(corpus_cfg.get("synthetic", {}), corpus_cfg["seed"])
    elif source == "hf":
        docs = hf_documents(corpus_cfg["hf"])
    elif source == "local":
        docs = local_documents(corpus_cfg["local"])
    elif source in ("pairs", "sudoku"):
        docs = (pair_documents if source == "pairs" else sudoku_documents)(corpus_cfg)
    else:
        raise CorpusError(f"corpus.source={source!r}: use synthetic, hf, local, pairs or sudoku")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split in SPLITS:
        path = out_dir / f"{split}.jsonl"
        remove_debris(out_dir, path.name)
        n_docs, logprobs = 0, []
        with atomic_write(path) as f:
            for doc in docs[split]:
                f.write(json.dumps(doc) + "\n")
                n_docs += 1
                logprobs.append(doc.get("logprob"))
            if n_docs == 0:
                raise CorpusError(f"corpus split {split!r} is empty; check the corpus size settings")
        oracle = None if None in logprobs else -math.fsum(logprobs)  # only the synthetic world knows it
        splits[split] = {"file": path.name, "n_docs": n_docs, "sha256": sha256_file(path), "oracle_nll": oracle}
    manifest = {"id": corpus_cfg["id"], "source": source, "splits": splits}
    atomic_write_json(out_dir / "manifest.json", manifest)
    return manifest
