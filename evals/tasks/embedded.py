"""Embedded downstream tasks, generated from the synthetic world: the accuracy columns at CPU scale.

Three lm-eval tasks (local YAML with ``metadata.version``; templates in ``evals/tasks/embedded/``),
built from the held-out ``test`` documents of the world (``corpora.synthetic.generate_split``) and
deterministic from (world config, seed):

* ``embedded_cloze`` (LAMBADA-style, ``loglikelihood``; ``acc`` = the target is the greedy
  continuation, ``perplexity`` of the target): the passage is a document up to the **last word of a
  sentence**; the target is that word (`` Taga``, `` attic``). Only words the language makes
  predictable from far away qualify: a name (or a noun or good) that appears earlier in the
  document but **not in the sentence itself nor in the ``min_gap`` sentences before it** —
  characters named again much later, the answer to an entry's question, where a thing was last put
  in a dialogue, the dish served at the end of a recipe.
* ``embedded_choice`` (HellaSwag-style 4-way ``multiple_choice``; ``acc``, ``acc_norm``): the same
  kind of sentence is the gold ending after the document so far; each distractor is that sentence
  with the long-range word replaced. Answers to questions get other words of the same category from
  the same document first (a real place, person or good, but the wrong one: it contradicts an
  earlier statement); every other item gets names or words used in other documents and never in this
  one (locally fluent, but no such entity was ever introduced). Distractors thus differ from the
  gold ending in one word and break only long-range consistency. Articles are fixed (a/an).
* ``embedded_ppl`` (``loglikelihood_rolling``; ``word_perplexity``, ``byte_perplexity``,
  ``bits_per_byte``): the first ``n_ppl_docs`` held-out documents, each conditioned on end-of-text.

Items are at most two per document; contexts longer than ``max_context_chars`` are skipped so that
an embedded model (256 tokens) sees the whole passage. Selection uses numpy streams seeded by
``(seed, 7, task)``; the same world and seed give byte-identical files.

    python -m workflows.cli world-tasks --settings results/data/world/settings.json --out results/data/world/tasks

writes ``{task}.jsonl``, ``{task}.yaml`` (absolute ``data_files``) and ``manifest.json`` (versions,
counts, sha256) into ``--out``; point the harness at it with ``--task-dir``.
"""
from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict
from pathlib import Path

import numpy as np
import yaml

from common.io import atomic_write_json, atomic_write_text, sha256_file
from evals.harness.errors import HarnessError

TEMPLATES = Path(__file__).resolve().parent / "embedded"
TASKS = ("embedded_cloze", "embedded_choice", "embedded_ppl")
BUILDER_VERSION = 1
_STREAMS = {"embedded_cloze": 1, "embedded_choice": 2, "embedded_ppl": 3}


def template(task: str) -> dict:
    return yaml.safe_load((TEMPLATES / f"{task}.yaml").read_text())


def task_versions() -> dict[str, float]:
    return {task: template(task)["metadata"]["version"] for task in TASKS}


# ---------------------------------------------------------------------------------------- blanks
def _last_ref(rec: dict):
    """The argument that renders as the last unit of a record, or None (adverb, verb, question)."""
    if "adv" in rec or rec.get("mood") == "question" or not rec.get("args"):
        return None
    ref = rec["args"][rec["focus"]] if rec.get("mood") == "answer" else rec["args"][-1]
    return ref["items"][-1] if "items" in ref else ref


def _category(rec: dict, ref: dict, ents: dict):
    """(last word, category, slot) of an argument; None when it is not a content word.

    ``category`` says which words can replace it in the same document (a name of a person of the
    same pronoun, a place noun, ...); ``slot`` adds the predicate, so that words from other documents
    are drawn from the same slot (``cut the ...`` gets ingredients, ``serve the ...`` dishes)."""
    if "words" in ref:
        return ref["words"][-1], ("words",), ("words", rec["pred"])
    if ref.get("form") in (None, "I", "you", "pron"):
        return None
    ent = ents[ref["id"]]
    named = ref["form"] == "name" or (ref["form"] in ("new", "repeat") and ent["style"] in ("named", "proper"))
    if named:
        category = ("name", ent["kind"], ent.get("pron"), ent["style"] == "proper")
        return ent["name"], category, category
    if ent["style"] == "proper":
        return None
    return ent["noun"], ("noun", ent["kind"]), ("noun", ent["kind"], rec["pred"])


def _must_refer_back(doc: dict, ref: dict, category: tuple, introduced_by: dict) -> bool:
    """Whether the language forces this (non-answer) word to repeat an earlier one: a name mention
    (names are introduced before they are used bare) or, in a recipe, a listed ingredient or the
    dish of the title (steps only use those). Other nouns could be a new entity ('the farm')."""
    if category[0] == "name":
        return ref.get("form") == "name"
    return (category[0] == "noun" and doc["type"] == "recipe"
            and introduced_by.get(ref.get("id")) in ("need", "how to make"))


def _arguments(rec: dict):
    for ref in [rec.get("subj")] + rec.get("args", []):
        for item in (ref.get("items", [ref]) if ref else []):
            if "words" in item or "id" in item:
                yield item


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z]+", text))


def document_blanks(doc: dict, min_gap: int, max_context_chars: int) -> list[dict]:
    """Every sentence of ``doc`` whose last word is a long-range word (see the module docstring)."""
    from corpora.synthetic.render import MARK, Renderer, entities

    records = doc["semantics"]
    ents = entities(records)
    renderer = Renderer()
    pieces = [renderer.record(rec, ents).replace(MARK, "") for rec in records]
    if "".join(pieces) != doc["text"]:
        raise HarnessError(f"document {doc['id']}: records do not render to its text; the synthetic world changed")
    starts = np.cumsum([0] + [len(p) for p in pieces]).tolist()
    introduced_by = {}
    for rec in records:
        for item in _arguments(rec):
            if item.get("form") == "new":
                introduced_by.setdefault(item["id"], rec["pred"])
    blanks = []
    for r, rec in enumerate(records):
        ref = _last_ref(rec)
        found = _category(rec, ref, ents) if ref is not None else None
        if found is None or not (rec.get("mood") == "answer" or _must_refer_back(doc, ref, found[1], introduced_by)):
            continue
        word, category, slot = found
        sentence = pieces[r]
        body = sentence.rstrip(".?")
        if not body.endswith(word) or body[:-len(word)][-1:].isalpha():
            continue
        word_start = starts[r] + len(body) - len(word)
        cut = word_start
        while cut > 0 and doc["text"][cut - 1] in " \n":
            cut -= 1
        context, target = doc["text"][:cut], doc["text"][cut:word_start + len(word)]
        recent = doc["text"][starts[max(0, r - min_gap)]:word_start]
        if len(context) > max_context_chars or word in _words(recent) or word not in _words(context):
            continue
        blanks.append({"record": r, "word": word, "category": category, "slot": slot, "context": context,
                       "target": target,
                       "sentence_start": starts[r], "sentence": sentence, "answer": rec.get("mood") == "answer"})
    return blanks


# ---------------------------------------------------------------------------------------- builders
def _pools(docs: list[dict]) -> dict[tuple, list[str]]:
    """Every content word of the split by slot (the out-of-document distractor pools)."""
    from corpora.synthetic.render import entities

    pools: dict[tuple, set] = {}
    for doc in docs:
        ents = entities(doc["semantics"])
        for rec in doc["semantics"]:
            for item in _arguments(rec):
                found = _category(rec, item, ents)
                if found:
                    pools.setdefault(found[2], set()).add(found[0])
    return {k: sorted(v) for k, v in pools.items()}


def _fix_article(prefix: str, word: str) -> str:
    match = re.search(r"(?:^|\s)(a|an|A|An)\s$", prefix)
    if not match:
        return prefix
    article = match.group(1)
    want = "an" if word[:1].lower() in "aeiou" else "a"
    want = want.capitalize() if article[0].isupper() else want
    return prefix[:match.start(1)] + want + prefix[match.end(1):]


def _distractors(blank: dict, doc: dict, pools: dict, rng) -> list[str] | None:
    """Three endings: the gold sentence with its long-range word replaced (see the module docstring)."""
    word = blank["word"]
    in_doc = _in_doc_alternatives(blank, doc) if blank["answer"] else []
    in_doc = [in_doc[i] for i in rng.permutation(len(in_doc))]
    present = _words(doc["text"])
    outside = [w for w in pools.get(blank["slot"], []) if w != word and w not in present]
    picks = in_doc[:3]
    if len(picks) < 3 and len(outside) >= 3 - len(picks):
        picks += [outside[i] for i in sorted(rng.choice(len(outside), 3 - len(picks), replace=False))]
    if len(picks) < 3:
        return None
    sentence, body_end = blank["sentence"], len(blank["sentence"].rstrip(".?"))
    return [_fix_article(sentence[:body_end - len(word)], alt) + alt + sentence[body_end:] for alt in picks]


def _in_doc_alternatives(blank: dict, doc: dict) -> list[str]:
    """Other words of the blank's category that the document introduced before the blank."""
    from corpora.synthetic.render import entities

    ents = entities(doc["semantics"])
    seen = _words(blank["context"])
    words = set()
    for rec in doc["semantics"][:blank["record"]]:
        for item in _arguments(rec):
            found = _category(rec, item, ents)
            if found and found[1] == blank["category"] and found[0] != blank["word"] and found[0] in seen:
                words.add(found[0])
    return sorted(words)


def _select(candidates: list[tuple[int, dict]], n_items: int, per_doc: int, rng) -> list[tuple[int, dict]]:
    by_doc: dict[int, list[dict]] = {}
    for d, blank in candidates:
        by_doc.setdefault(d, []).append(blank)
    pool = []
    for d in sorted(by_doc):
        items = by_doc[d]
        pool += [(d, items[i]) for i in sorted(rng.permutation(len(items))[:per_doc])]
    keep = sorted(rng.permutation(len(pool))[:n_items])
    return [pool[i] for i in keep]


def build_items(docs: list[dict], seed: int, n_items: int = 300, n_ppl_docs: int = 200, min_gap: int = 2,
                max_context_chars: int = 800, per_doc: int = 2) -> dict[str, list[dict]]:
    """The items of the three tasks (lists of JSON-able dicts) from held-out documents."""
    candidates = [(d, b) for d, doc in enumerate(docs) for b in document_blanks(doc, min_gap, max_context_chars)]
    pools = _pools(docs)
    rng = np.random.default_rng([seed, 7, _STREAMS["embedded_cloze"]])
    cloze = [{"id": f"{docs[d]['id']}#r{b['record']}", "doc_id": docs[d]["id"], "doc_type": docs[d]["type"],
              "kind": "answer" if b["answer"] else b["category"][0], "context": b["context"], "target": b["target"]}
             for d, b in _select(candidates, n_items, per_doc, rng)]
    rng = np.random.default_rng([seed, 7, _STREAMS["embedded_choice"]])
    choice = []
    for d, b in _select(candidates, 10 * n_items, per_doc, rng):
        if len(choice) == n_items:
            break
        endings = _distractors(b, docs[d], pools, rng)
        if endings is None:
            continue
        label = int(rng.integers(4))
        endings.insert(label, b["sentence"])
        choice.append({"id": f"{docs[d]['id']}#r{b['record']}", "doc_id": docs[d]["id"],
                       "doc_type": docs[d]["type"], "kind": "answer" if b["answer"] else b["category"][0],
                       "context": docs[d]["text"][:b["sentence_start"]], "endings": endings, "label": label})
    ppl = [{"id": doc["id"], "doc_type": doc["type"], "text": doc["text"]} for doc in docs[:n_ppl_docs]]
    return {"embedded_cloze": cloze, "embedded_choice": choice, "embedded_ppl": ppl}


def build_embedded_tasks(world: dict, seed: int, out_dir: str | Path, *, split: str = "test", n_items: int = 300,
                         n_ppl_docs: int = 200, min_gap: int = 2, max_context_chars: int = 800) -> dict:
    """Write the three tasks (jsonl + YAML with absolute paths) and a manifest into ``out_dir``."""
    from corpora.synthetic import WorldConfig, generate_split

    try:
        cfg = world if isinstance(world, WorldConfig) else WorldConfig(**(world or {}))
    except (TypeError, ValueError) as e:
        raise HarnessError(f"corpus.synthetic: {e}") from e
    docs = list(generate_split(cfg, split, seed))
    items = build_items(docs, seed, n_items, n_ppl_docs, min_gap, max_context_chars)
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    tasks = {}
    for task in TASKS:
        rows = items[task]
        if not rows:
            raise HarnessError(f"{task}: no items in the {split} split of this world; use more {split}_docs")
        data = out_dir / f"{task}.jsonl"
        atomic_write_text(data, "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
        cfg_yaml = template(task)
        cfg_yaml["dataset_kwargs"] = {"data_files": {"test": str(data)}}
        header = (f"# Generated by evals/tasks/embedded.py from evals/tasks/embedded/{task}.yaml; do not edit.\n"
                  f"# World seed {seed}, split {split}, {len(rows)} items.\n")
        atomic_write_text(out_dir / f"{task}.yaml", header + yaml.safe_dump(cfg_yaml, sort_keys=False, width=1000))
        tasks[task] = {"version": cfg_yaml["metadata"]["version"], "file": data.name, "n_items": len(rows),
                       "sha256": sha256_file(data)}
    manifest = {"builder_version": BUILDER_VERSION, "seed": seed, "split": split, "world": asdict(cfg),
                "params": {"n_items": n_items, "n_ppl_docs": n_ppl_docs, "min_gap": min_gap,
                           "max_context_chars": max_context_chars},
                "tasks": tasks}
    atomic_write_json(out_dir / "manifest.json", manifest)
    return manifest


def arguments(p: argparse.ArgumentParser) -> None:
    """``python -m workflows.cli world-tasks``'s options."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--settings",
                     help="data settings JSON with corpus.source=synthetic, corpus.seed, corpus.synthetic")
    src.add_argument("--world", help="WorldConfig fields as JSON (with --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--n-items", type=int, default=300)
    p.add_argument("--n-ppl-docs", type=int, default=200)


def run(a: argparse.Namespace) -> int:
    if a.settings:
        try:
            corpus = json.loads(Path(a.settings).read_text())["corpus"]
        except (OSError, json.JSONDecodeError, KeyError) as e:
            raise HarnessError(f"{a.settings}: cannot read corpus settings ({e!r})") from e
        if corpus.get("source") != "synthetic":
            raise HarnessError(f"{a.settings}: corpus.source={corpus.get('source')!r}; embedded tasks need the "
                               "synthetic world (real corpora use the real tasks)")
        world, seed = corpus.get("synthetic", {}), int(corpus.get("seed", 0))
    else:
        try:
            world, seed = json.loads(a.world), a.seed
        except json.JSONDecodeError as e:
            raise HarnessError(f"--world: not JSON ({e}); give the WorldConfig fields as a JSON object") from e
    m = build_embedded_tasks(world, seed, a.out, n_items=a.n_items, n_ppl_docs=a.n_ppl_docs)
    print("embedded tasks: " + ", ".join(f"{t} {v['n_items']}" for t, v in m["tasks"].items()))
    return 0
