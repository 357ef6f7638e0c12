"""Paired (conditional) corpora: (source, target) examples for NCM's conditional tasks (NCM Table 2, Sec. 4.4).

Every source ends as the corpus stage's artifact (``corpora.corpus.write_corpus``): ``{split}.jsonl``
rows ``{"source", "target", "text"}`` (``text`` = the target, so target-side text is at hand) and a
manifest. Sources (``corpus.source``):

* ``pairs`` with ``pairs.task``:
  - ``translate`` / ``summary``: generated from the synthetic world's semantics
    (``corpora.synthetic.pairs``): a sentence rendered in the second lexicon with verb-final order ->
    the same sentence in English (the WMT14 De-En analogue), a document -> a summary rendered from its
    key records (the XSum analogue). The references are exact; no pair is in two splits (``_disjoint``);
  - ``xsum`` (EdinburghNLP/xsum: document -> summary) and ``wmt14_deen`` (wmt/wmt14 de-en: German ->
    English, E2D2's set, docs/sources.md, "Evaluation notes" B), streamed through ``datasets`` by name,
    or read from ``pairs.local`` files for an offline machine: per split a jsonl (``source_field`` /
    ``target_field``) or ``.tsv`` (``source<TAB>target``) file, or ``{source: file, target: file}``,
    two line-aligned text files (WMT's ``newstest2014.de`` / ``.en``);
  ``pairs.n`` caps the pairs per split.
* ``sudoku``: puzzles -> solutions by difficulty tier (``corpora.sudoku``), with an optional external
  ``quizzes,solutions`` file as its own test tier.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

from corpora.sources import SPLITS, CorpusError, _stream, hub_source


@dataclass(frozen=True)
class HFPairs:
    path: str
    name: str | None
    source: str   # dotted field of a row
    target: str
    splits: dict  # our split -> the dataset's


HF_PAIRS = {
    "xsum": HFPairs("EdinburghNLP/xsum", None, "document", "summary",
                    {"train": "train", "valid": "validation", "test": "test"}),
    "wmt14_deen": HFPairs("wmt/wmt14", "de-en", "translation.de", "translation.en",
                          {"train": "train", "valid": "validation", "test": "test"}),
}
WORLD_TASKS = ("translate", "summary")


def _field(row: dict, dotted: str, where: str) -> str:
    value = row
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            raise CorpusError(f"{where}: rows have no field {dotted!r} (fields: {sorted(row)}); set "
                              "corpus.pairs.local.source_field / target_field")
        value = value[key]
    return value


def _pair(source: str, target: str, where: str) -> dict:
    if not isinstance(source, str) or not isinstance(target, str) or not source.strip() or not target.strip():
        raise CorpusError(f"{where}: empty or non-text source / target; every example needs both (fix or drop the row)")
    return {"source": source, "target": target, "text": target}


def _local_rows(path: Path, source_field: str, target_field: str) -> Iterator[dict]:
    """Pairs of a local .jsonl (fields) or .tsv (source<TAB>target) file; errors name file:line."""
    if not path.is_file():
        raise CorpusError(f"{path}: no such file; fix corpus.pairs.local")
    with open(path) as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{i}"
            if path.suffix == ".tsv":
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 2:
                    raise CorpusError(f"{where}: {len(parts)} tab-separated fields; a .tsv line is source<TAB>target")
                yield _pair(parts[0], parts[1], where)
            elif path.suffix in (".jsonl", ".json"):
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CorpusError(f"{where}: not valid JSON ({e}); one object per line") from None
                yield _pair(_field(row, source_field, where), _field(row, target_field, where), where)
            else:
                raise CorpusError(f"{path}: unsupported extension {path.suffix!r}; use .jsonl or .tsv")


def _parallel_rows(source: Path, target: Path) -> Iterator[dict]:
    """Pairs of two line-aligned text files; files of different line counts are refused before any row."""
    for path in (source, target):
        if not path.is_file():
            raise CorpusError(f"{path}: no such file; fix corpus.pairs.local")
    counts = [sum(1 for _ in open(path)) for path in (source, target)]
    if counts[0] != counts[1]:
        raise CorpusError(f"{source} has {counts[0]} lines and {target} {counts[1]}; give line-aligned files "
                          "(line i of one translates line i of the other)")
    with open(source) as fs, open(target) as ft:
        for i, (a, b) in enumerate(zip(fs, ft), 1):
            yield _pair(a.rstrip("\n"), b.rstrip("\n"), f"{source}:{i} / {target}:{i}")


def _local_split(spec, source_field: str, target_field: str) -> Iterator[dict]:
    if isinstance(spec, dict):
        return _parallel_rows(Path(spec["source"]).expanduser(), Path(spec["target"]).expanduser())
    return _local_rows(Path(spec).expanduser(), source_field, target_field)


def pair_documents(corpus_cfg: dict) -> dict[str, Iterator[dict]]:
    """Rows per split of a ``source: pairs`` corpus (module docstring)."""
    cfg = corpus_cfg["pairs"]
    task, n = cfg["task"], cfg["n"]
    if task in WORLD_TASKS:
        from corpora.synthetic import WorldConfig
        from corpora.synthetic.pairs import pair_split

        world, seed = WorldConfig(**corpus_cfg.get("synthetic", {})), corpus_cfg.get("seed", 0)
        return _disjoint({s: pair_split(world, s, seed, task) for s in SPLITS}, n)
    if task not in HF_PAIRS:
        raise CorpusError(f"corpus.pairs.task={task!r}: use one of {sorted(WORLD_TASKS + tuple(HF_PAIRS))}")
    spec = HF_PAIRS[task]
    if "local" in cfg:
        local = cfg["local"]
        fields = local.get("source_field", spec.source), local.get("target_field", spec.target)
        return {s: islice(_local_split(local[s], *fields), n[s]) for s in SPLITS}
    path, name = hub_source(spec, cfg)
    return {s: islice((_pair(_field(r, spec.source, path), _field(r, spec.target, path), path)
                       for r in _stream(path, name, spec.splits[s], "corpus.pairs.local")), n[s])
            for s in SPLITS}


def _disjoint(rows: dict[str, Iterator[dict]], n: dict) -> dict[str, Iterator[dict]]:
    """The first ``n[split]`` pairs of each split with no (source, target) pair of an earlier split in
    precedence test, valid, train: the world repeats short sentences across documents (with the embedded
    sizes 16 of 200 test translation pairs also occur in train), so a test pair is never trained on."""
    seen: set[tuple[str, str]] = set()
    out = {}
    for split in ("test", "valid"):
        kept = []
        for row in rows[split]:
            if len(kept) == n[split]:
                break
            if (row["source"], row["target"]) not in seen:
                kept.append(row)
        seen |= {(r["source"], r["target"]) for r in kept}
        out[split] = iter(kept)
    out["train"] = islice((r for r in rows["train"] if (r["source"], r["target"]) not in seen), n["train"])
    return {split: out[split] for split in SPLITS}


def sudoku_documents(corpus_cfg: dict) -> dict[str, Iterator[dict]]:
    """Rows per split of a ``source: sudoku`` corpus: generated tiers, and the external file's puzzles
    appended to the test split as tier ``external``."""
    from corpora.sudoku import documents, read_csv

    cfg = corpus_cfg["sudoku"]
    docs = documents({"tiers": cfg["tiers"], "n": cfg["n"]}, corpus_cfg.get("seed", 0))
    if "external" in cfg:
        from itertools import chain

        external = islice(read_csv(Path(cfg["external"]).expanduser()), cfg.get("external_n"))
        docs["test"] = chain(docs["test"], external)
    return docs
