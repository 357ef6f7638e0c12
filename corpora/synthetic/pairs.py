"""Paired (conditional) tasks from the synthetic world, with exact references.

Analogues of the NCM paper's conditional tasks, derived from ``doc["semantics"]`` of
:func:`corpora.synthetic.generate_split` documents (in order). Every pair is
``{"id", "source", "target", "text", "task"}`` with ``text`` = ``target``.

**translate** (the WMT14 De->En analogue; id ``{doc id}.{record index}``): one record of a
document is one sentence (every record ends with ``.`` or ``?``). The target is the record
rendered in English (``Renderer()``) without its leading separator; it is checked to be exactly
the substring of the document's text at that record's offsets, so the reference is the world's own
text. The source is the same record rendered by
``Renderer(world(cfg, seed).invented_lexicon(), "SOV")`` (the second lexicon, verb-final order:
arguments and adverb before the verb, markers after their noun phrase), ``|`` marks stripped.
Names are not words of a lexicon and are the same on both sides, as is a dialogue's speaker label
(``Taga: ``), which is part of its record. Skipped: the ``Questions.`` heading of entries (not a
clause) and records whose English has more than ``TRANSLATE_MAX_WORDS`` (16) words (only long
ingredient lists, ``You need ...`` with four or more items: 0.4 % of the records). A document gives
all its remaining records in order, so ``n`` pairs come from the first ~n/16 documents.

**summary** (the XSum analogue; id = the doc id): one pair per document.

* Source: the document's text, or its longest prefix of whole records with at most
  ``SUMMARY_MAX_WORDS`` (100) whitespace words that does not end on an entry's ``Questions.``
  heading or on a question (whose answer follows); it keeps at least the records the summary needs
  (story: the opening; entry: the opening and one fact; recipe: the title and the list; dialogue:
  the opening), even beyond 100 words (never happens at the defaults). Truncation keeps the type
  mixture (filtering long documents would drop half of the stories and dialogues).
* Target: ONE English sentence, a new record rendered with ``Renderer().record`` from the
  records of the source only (so it is a deterministic function of the source: the text has one
  derivation). The key entity enters by its introduction (``a brave gardener named Tata``):

  - story — the opening's hero and where the hero is at the end of the source, tracked through
    the story's moves the way the generator does (``walked``/``ran``/``rode``/``visited``/
    ``carried`` move the subject; ``met`` brings the met person to the subject; a newcomer appears
    where the hero is): ``In the end, a brave gardener named Tata was in the temple.`` When the whole
    story fits, this is its closing sentence with the hero introduced; when truncated, the
    location has to be inferred (it is in no sentence of the source);
  - entry — the topic and the fact of the highest-priority relation in the source
    (``ENTRY_PRIORITY``: ruler, founder, region, water, goods, ...; facts come in random order, so
    this is content selection, not the lead): ``A village named Nota is ruled by a gardener named
    Rigava.``;
  - recipe — the dish of the title and the listed ingredients as bare nouns, in list order, as the
    list record with an opener made of the dish: ``For ashmoss soup, you need carrots, salt and
    milk.`` (the opener ``for <dish>`` is not a lexicon id: the English renderer's identity lexicon
    prints it; a ``<dish> has ...`` frame would break agreement with ``pancakes``, ``dumplings``);
  - dialogue — the first statement, in the third person, speaker, thing and place introduced,
    time adverb dropped: ``A kind barber named Taga hid a red cup in the kitchen.``; when the
    source has no statement (an early goodbye), the opening without ``In this talk,``.

Measured (default ``WorldConfig()``, seed 0, ``valid`` split unless said; whitespace words,
median / 95th percentile / max; one core of this machine, document generation included, which is
what bounds the rate):

* translate: 7991 pairs (16 per document); source 5 / 10 / 15 words, target 6 / 11 / 16;
  ~13 000 pairs/s; 96 % distinct targets.
* summary: 500 pairs (1 per document); source 84 / 100 / 100 words, target 11 / 13 / 16
  (story 11 / 12 / 12, entry 12 / 13 / 13, recipe 9 / 15 / 16, dialogue 11 / 12 / 12);
  ~830 pairs/s; 100 % distinct targets.

``test`` gives the same figures (7886 translation pairs; summary targets up to 18 words). On the
first 4000 ``train`` documents summary targets are 11 / 13 / 27 words, 0.6 % over 16: recipes with
long ingredient lists (the list is never cut, it is the reference). Byte-level BPE (4096,
min_frequency 2) trained on train sources and targets: translation 8 / 14 / 21 tokens (source) and
8 / 15 / 23 (target); summary targets 15 / 18 / 27 tokens (0.8 % over 24). Translation sources
have fewer words than their targets: multi-word ids (``once upon a time``, ``is ruled``) are one
invented word. Translation skips 0.4 % of the records as too long and 1.3 % as ``Questions.``
headings. Summary sources are truncated for 40 % of the documents (story 42 %, entry 36 %, recipe
24 %, dialogue 59 %), so for 42 % of the stories the source has no closing sentence and the
location must be tracked through the story. The tracked location equals the closing's on every
complete story checked (4000 train documents at seed 0, 300 valid at seeds 1 and 2).

Caveats: three invented words of the second lexicon are also English words of the world (``met``,
``ran``, ``ten`` at seed 0, each translating another id), and a name can be an English word
(``Rope``), so "no English word in the source" holds only up to these coincidences.
"""
from __future__ import annotations

from itertools import islice
from typing import Iterator

from corpora.synthetic.api import generate_split
from corpora.synthetic.config import WorldConfig
from corpora.synthetic.doctypes import STORY_VERBS
from corpora.synthetic.render import MARK, Renderer, entities
from corpora.synthetic.world import world

TASKS = ("translate", "summary")
TRANSLATE_MAX_WORDS = 16
SUMMARY_MAX_WORDS = 100
ENTRY_PRIORITY = ("is ruled", "was founded", "lies", "stands", "is known", "has", "honors", "sells", "trades",
                  "is near", "is older than")
MIN_RECORDS = {"story": 1, "entry": 2, "recipe": 2, "dialogue": 1}  # the records a summary needs
ENGLISH = Renderer()


def _check_task(task) -> None:
    if task not in TASKS:
        raise ValueError(f"corpus.pairs.task={task!r}: use one of {', '.join(TASKS)}")


def _plain(marked: str) -> str:
    return marked.replace(MARK, "")


def sentences(doc: dict) -> list[tuple[int, int]]:
    """Character offsets ``[start, end)`` in ``doc["text"]`` of each record, its separator excluded.

    Raises ``RuntimeError`` if the records' English rendering is not exactly the text.
    """
    records = doc["semantics"]
    ents, spans, pos, text = entities(records), [], 0, doc["text"]
    for rec in records:
        rendered = _plain(ENGLISH.record(rec, ents))
        start = pos + len(rec.get("sep", ""))
        if not text.startswith(rendered, pos):
            raise RuntimeError(f"{doc.get('id')}: record {len(spans)} does not render to its text")
        pos += len(rendered)
        spans.append((start, pos))
    if pos != len(text):
        raise RuntimeError(f"{doc.get('id')}: the records do not cover the text")
    return spans


def translation_pairs(doc: dict, foreign: Renderer) -> Iterator[dict]:
    """The sentence pairs of one document (``foreign`` = the second-lexicon SOV renderer)."""
    records, text = doc["semantics"], doc["text"]
    ents = entities(records)
    for k, (rec, (start, end)) in enumerate(zip(records, sentences(doc))):
        target = text[start:end]
        if rec["pred"] == "questions" or len(target.split()) > TRANSLATE_MAX_WORDS:
            continue
        source = _plain(foreign.record(rec, ents))[len(rec.get("sep", "")):]
        yield {"id": f"{doc['id']}.{k}", "source": source, "target": target, "text": target, "task": "translate"}


def summary_prefix(doc: dict) -> int:
    """How many records of the document the summary's source keeps (module docstring)."""
    records, text, spans = doc["semantics"], doc["text"], sentences(doc)
    allowed = [k for k in range(MIN_RECORDS[doc["type"]], len(records) + 1)
               if records[k - 1]["pred"] != "questions" and records[k - 1].get("mood") != "question"]
    fitting = [k for k in allowed if len(text[:spans[k - 1][1]].split()) <= SUMMARY_MAX_WORDS]
    return fitting[-1] if fitting else allowed[0]


def story_location(records: list[dict]) -> str:
    """Where the hero (the opening's subject) is after the story sentences among the records."""
    hero = records[0]["subj"]["id"]
    location = {hero: records[0]["args"][0]["id"]}
    for rec in records[1:]:
        if rec.get("pre") == "in the end":  # the closing restates the location
            break
        s = rec["subj"]["id"]
        location.setdefault(s, location[hero])
        effect = STORY_VERBS[rec["pred"]][1]
        if effect == "move":
            location[s] = rec["args"][-1]["id"]
        elif effect == "meet":
            location[rec["args"][0]["id"]] = location[s]
    return location[hero]


def summary_record(doc_type: str, records: list[dict]) -> dict:
    """The one record the summary renders, from the source's records only."""
    ents = entities(records)
    if doc_type == "story":
        here = story_location(records)
        place = {"id": here, "form": "name" if "name" in ents[here] else "desc"}
        return {"sep": "", "pre": "in the end", "subj": ents[records[0]["subj"]["id"]], "pred": "was",
                "args": [place]}
    if doc_type == "entry":
        topic = ents[records[0]["args"][0]["id"]]
        facts = [r for r in records[1:] if r["pred"] in ENTRY_PRIORITY and "mood" not in r]
        fact = min(facts, key=lambda r: ENTRY_PRIORITY.index(r["pred"]))
        return {"sep": "", "subj": topic, "pred": fact["pred"], "args": fact["args"]}
    if doc_type == "recipe":
        dish = ents[records[0]["args"][0]["id"]]
        items = records[1]["args"][0]["items"]
        return {"sep": "", "pre": f"for {ENGLISH.intro(dish)}", "subj": {"form": "you"}, "pred": "need",
                "args": [{"items": [{"words": [ents[i["id"]]["noun"]]} for i in items]}]}
    if doc_type == "dialogue":
        statements = [r for r in records if r.get("subj") == {"form": "I"}]
        if not statements:
            opening = records[0]
            return {"sep": "", "subj": ents[opening["subj"]["id"]], "pred": "meets",
                    "args": [ents[opening["args"][0]["id"]]]}
        rec = statements[0]
        return {"sep": "", "subj": ents[rec["speaker"]], "pred": rec["pred"],
                "args": [ents[a["id"]] for a in rec["args"]]}
    raise ValueError(f"unknown document type {doc_type!r}")


def summary_pair(doc: dict) -> dict:
    """The summary pair of one document: (prefix of its text, one-sentence summary of that prefix)."""
    k = summary_prefix(doc)
    records = doc["semantics"][:k]
    source = doc["text"][:sentences(doc)[k - 1][1]]
    target = _plain(ENGLISH.record(summary_record(doc["type"], records), entities(records)))
    return {"id": doc["id"], "source": source, "target": target, "text": target, "task": "summary"}


def pair_split(cfg: WorldConfig, split: str, seed: int, task: str, n: int | None = None) -> Iterator[dict]:
    """Pairs of one split, deterministic in (cfg, seed, split, task); ``n`` caps their number."""
    _check_task(task)
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        raise ValueError(f"corpus.pairs.n must be a non-negative integer or null, got {n!r}")
    cfg.docs(split)  # a bad split fails here, not at the first next()
    docs = generate_split(cfg, split, seed)
    if task == "summary":
        pairs = (summary_pair(doc) for doc in docs)
    else:
        foreign = Renderer(world(cfg, seed).invented_lexicon(), "SOV")
        pairs = (pair for doc in docs for pair in translation_pairs(doc, foreign))
    return islice(pairs, n)


def pair_documents(cfg_dict: dict, seed: int) -> dict[str, Iterator[dict]]:
    """``{split: pairs}`` for ``{"task", "synthetic": {WorldConfig kwargs}, "n": {split: count}}``."""
    _check_task(cfg_dict.get("task"))
    cfg = WorldConfig(**cfg_dict.get("synthetic", {}))
    n = cfg_dict.get("n") or {}
    return {s: pair_split(cfg, s, seed, cfg_dict["task"], n.get(s)) for s in ("train", "valid", "test")}
