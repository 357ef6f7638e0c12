"""Paired tasks from the synthetic world: translation (second lexicon, SOV) and one-sentence summaries."""
from __future__ import annotations

import copy
from itertools import islice, takewhile

import pytest

from corpora.synthetic import WorldConfig, generate_split
from corpora.synthetic.pairs import (SUMMARY_MAX_WORDS, TASKS, TRANSLATE_MAX_WORDS, pair_documents, pair_split,
                                     sentences, story_location, summary_pair, summary_prefix)
from corpora.synthetic.render import FUNCTION_WORDS, entities
from corpora.synthetic.world import world

CFG = WorldConfig()
N_DOCS = 200


@pytest.fixture(scope="module")
def docs():
    return list(islice(generate_split(CFG, "valid", 0), N_DOCS))


@pytest.fixture(scope="module")
def translations():
    in_docs = lambda p: int(p["id"].split("-")[1].split(".")[0]) < N_DOCS  # noqa: E731
    return list(takewhile(in_docs, pair_split(CFG, "valid", 0, "translate")))


@pytest.fixture(scope="module")
def summaries():
    return list(pair_split(CFG, "valid", 0, "summary", N_DOCS))


@pytest.fixture(scope="module")
def lexicon():
    return world(CFG, 0).invented_lexicon()


def words(text: str) -> list[str]:
    return [w.strip(".,?:").lower() for w in text.split()]


@pytest.mark.parametrize("task", TASKS)
def test_pairs_are_deterministic_and_well_formed(task):
    a = list(pair_split(CFG, "valid", 0, task, 60))
    b = list(pair_split(CFG, "valid", 0, task, 60))
    assert a == b and len(a) == 60
    assert len({p["id"] for p in a}) == 60
    for p in a:
        assert set(p) == {"id", "source", "target", "text", "task"} and p["task"] == task
        assert p["text"] == p["target"] and p["source"].strip() and p["target"].strip()
    assert a != list(pair_split(CFG, "valid", 1, task, 60))  # another world
    assert a[:10] == list(pair_split(CFG, "valid", 0, task, 10))  # n only caps


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"corpus\.pairs\.task='sumary': use one of translate, summary") as e:
        pair_split(CFG, "valid", 0, "sumary")
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="split"):
        pair_split(CFG, "dev", 0, "translate")
    with pytest.raises(ValueError, match="corpus.pairs.n"):
        pair_split(CFG, "valid", 0, "translate", -1)
    with pytest.raises(ValueError, match="corpus.pairs.task"):
        pair_documents({"task": "xsum"}, 0)


def test_pair_documents_gives_three_capped_splits():
    cfg = {"task": "summary", "synthetic": {"train_docs": 7, "valid_docs": 3, "test_docs": 3},
           "n": {"train": 5, "valid": 2, "test": 10}}
    out = {s: list(it) for s, it in pair_documents(cfg, 0).items()}
    assert {s: len(v) for s, v in out.items()} == {"train": 5, "valid": 2, "test": 3}
    assert out["test"][0]["id"] == "test-0"


def test_translation_target_is_the_documents_own_sentence(docs, translations):
    by_id = {d["id"]: d for d in docs}
    for p in translations:
        doc_id, k = p["id"].rsplit(".", 1)
        doc = by_id[doc_id]
        start, end = sentences(doc)[int(k)]
        assert doc["text"][start:end] == p["target"] and p["target"] in doc["text"]
        assert p["target"][-1] in ".?" and not p["target"][0].isspace()
    assert len({p["id"].rsplit(".", 1)[0] for p in translations}) == N_DOCS  # several sentences per document
    assert len(translations) > 5 * N_DOCS


def test_translation_source_is_in_the_second_lexicon(docs, translations, lexicon):
    english = {w.lower() for wid in world(CFG, 0).vocabulary() for w in wid.split()}
    doc_names = {d["id"]: {e["name"].lower() for e in entities(d["semantics"]).values() if "name" in e} for d in docs}
    invented = set(lexicon.values())
    collisions = english & invented  # invented words that happen to be English words too ('met', 'ran', 'ten')
    assert len(collisions) <= 5
    content_seen = 0
    for p in translations:
        target_words = words(p["target"])
        names = doc_names[p["id"].rsplit(".", 1)[0]] & set(target_words)  # a name can be an English word ('Rope')
        content = set(target_words) - set(FUNCTION_WORDS) - names
        content_seen += len(content)
        assert not (content & set(words(p["source"]))) - collisions, p
        assert all(w in invented or w in names for w in words(p["source"])), p  # every source word is translated
    assert content_seen > 3 * len(translations)


def test_translation_is_verb_final(docs, translations, lexicon):
    by_id = {d["id"]: d for d in docs}
    n = 0
    for p in translations:
        doc_id, k = p["id"].rsplit(".", 1)
        rec = by_id[doc_id]["semantics"][int(k)]
        if rec.get("mood") != "answer":
            assert words(p["source"])[-1] == lexicon[rec["pred"]], p
            n += 1
    assert n > len(translations) // 2
    # a hand-picked sentence: the first story sentence with a verb, an object and an adverb
    p = next(p for p in translations if p["target"] == "She made a little locket calmly.")
    assert p["source"] == " ".join([lexicon["she"].capitalize(), lexicon["a"], lexicon["little"], lexicon["locket"],
                                    lexicon["calmly"], lexicon["made"]]) + "."
    p = next(p for p in translations if p["target"] == "At noon, Tata walked to a grand port named Miduke softly.")
    lx = lexicon
    assert p["source"] == (f"{lx['at noon'].capitalize()}, Tata {lx['a']} {lx['grand']} {lx['port']} "
                           f"{lx['named']} Miduke {lx['to']} {lx['softly']} {lx['walked']}.")


def test_translation_lengths(translations):
    targets = [len(p["target"].split()) for p in translations]
    sources = [len(p["source"].split()) for p in translations]
    assert max(targets) <= TRANSLATE_MAX_WORDS and max(sources) <= TRANSLATE_MAX_WORDS
    assert sorted(targets)[len(targets) // 2] <= 8
    assert not any(p["target"] == "Questions." for p in translations)


def test_summary_source_is_a_prefix_of_the_document_within_bounds(docs, summaries):
    assert [p["id"] for p in summaries] == [d["id"] for d in docs]
    truncated = 0
    for doc, p in zip(docs, summaries):
        assert doc["text"].startswith(p["source"])
        assert len(p["source"].split()) <= SUMMARY_MAX_WORDS
        assert len(p["target"].split()) <= 20 and p["target"].count(".") == 1 and p["target"].endswith(".")
        truncated += p["source"] != doc["text"]
        assert not p["source"].endswith("?") and not p["source"].endswith("Questions.")
    assert 0.2 < truncated / len(docs) < 0.7
    assert sorted(len(p["target"].split()) for p in summaries)[len(summaries) // 2] <= 13


def test_summary_is_a_function_of_the_source_only(docs, summaries):
    for doc, p in zip(docs, summaries):
        k = summary_prefix(doc)
        cut = dict(copy.deepcopy(doc), text=p["source"], semantics=copy.deepcopy(doc["semantics"][:k]))
        assert summary_pair(cut) == p  # nothing after the source matters
        assert summary_pair(copy.deepcopy(doc)) == p
    assert len({p["target"] for p in summaries}) >= 0.95 * len(summaries)


def test_story_tracking_agrees_with_the_closing(docs):
    stories = [d for d in docs if d["type"] == "story"]
    assert len(stories) > 50
    for doc in stories:
        assert story_location(doc["semantics"]) == doc["semantics"][-1]["args"][0]["id"]


def test_summaries_by_type(docs, summaries):
    for doc, p in zip(docs, summaries):
        t, target, first = doc["type"], p["target"], doc["text"].split(".")[0]
        if t == "story":  # the hero's introduction from the opening
            hero = first.split(", ", 1)[1].split(" lived")[0]
            assert target.startswith(f"In the end, {hero} was in ")
            if p["source"] == doc["text"]:
                assert target.endswith(doc["text"].rsplit(" was in ", 1)[1])
        elif t == "entry":
            topic = first.removeprefix("This entry is about ")
            assert target.startswith(topic[0].upper() + topic[1:] + " ")
        elif t == "recipe":
            assert target.startswith(f"For {first.removeprefix('How to make ')}, you need ")
        else:
            assert " named " in target
