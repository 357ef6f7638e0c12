"""The synthetic language: exact probabilities, unambiguous derivations, concept spans, rendering."""
from __future__ import annotations

import math
from itertools import islice

import pytest

from corpora.synthetic import WorldConfig, enumerate_documents, generate_split, score_document, words
from corpora.synthetic.chooser import check_distinguishable
from corpora.synthetic.render import MARK, Renderer
from corpora.synthetic.world import world

TINY = {**{size: 1 for size in words.SIZES}, "n_professions": 2, "n_vowels": 2,
        "name_min_syllables": 1, "name_max_syllables": 1, "max_sentences": 2}
ONLY = {t: {f"{o}_weight": 0.0 for o in ("story", "entry", "recipe", "dialogue") if o != t}
        for t in ("story", "recipe", "dialogue")}


@pytest.fixture(scope="module")
def sampled():
    return list(islice(generate_split(WorldConfig(), "train", 0), 300))


@pytest.mark.parametrize("overrides", [
    {},  # all four types, one sentence after the opening
    {**ONLY["story"], "max_sentences": 3, "n_story_verbs": 2},  # pronouns, openers, moves
    {**ONLY["recipe"], "max_sentences": 4, "n_ingredients": 2, "n_recipe_verbs": 2},  # lists, tools
    {**ONLY["dialogue"], "max_sentences": 5, "n_things": 2},  # statements, questions, answers
], ids=["mixed", "story", "recipe", "dialogue"])
def test_enumeration_is_a_distribution_over_distinct_texts(overrides):
    cfg = WorldConfig(**{**TINY, **overrides})
    docs = list(enumerate_documents(cfg, seed=3))
    texts = [text for text, _ in docs]
    assert len(set(texts)) == len(texts) > 4
    assert math.fsum(math.exp(lp) for _, lp in docs) == pytest.approx(1.0, abs=1e-9)
    for text, lp in docs[:: max(1, len(docs) // 50)]:
        assert score_document(cfg, 3, text) == pytest.approx(lp, abs=1e-9)


def test_enumeration_refuses_a_large_config():
    with pytest.raises(ValueError, match="too large to enumerate"):
        next(enumerate_documents(WorldConfig(**{**TINY, "max_sentences": 3}), 0, limit=50))


def test_scoring_rederives_the_generator_logprob(sampled):
    assert {d["type"] for d in sampled} == {"story", "entry", "recipe", "dialogue"}
    for doc in sampled:
        assert score_document(WorldConfig(), 0, doc["text"]) == pytest.approx(doc["logprob"], abs=1e-9)


def test_concepts_tile_the_text_with_whitespace_leading_and_punctuation_trailing(sampled):
    for doc in sampled:
        text, spans = doc["text"], doc["concepts"]
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(a < b for a, b in spans) and all(s[1] == t[0] for s, t in zip(spans, spans[1:]))
        assert all(text[a] in " \n" for a, _ in spans[1:])
        assert not any(text[a:b].strip()[0] in ".,?!:" for a, b in spans)


def test_texts_are_plain_ascii_without_the_end_of_text_token(sampled):
    for doc in sampled:
        assert doc["text"].isascii() and "<|endoftext|>" not in doc["text"] and MARK not in doc["text"]
        assert doc["id"].startswith("train-")


def test_semantics_render_back_to_the_text_and_translate(sampled):
    english, foreign = Renderer(), Renderer(world(WorldConfig(), 0).invented_lexicon(), "SOV")
    for doc in sampled:
        marked = english.document(doc["semantics"])
        assert marked.replace(MARK, "") == doc["text"]
        assert [[a, b] for a, b in _spans(marked)] == doc["concepts"]
        translated = foreign.document(doc["semantics"]).replace(MARK, "")
        assert translated.isascii() and translated != doc["text"]
        assert translated.count("\n") == doc["text"].count("\n")


def _spans(marked):
    starts, pos = [], 0
    for piece in marked.split(MARK):
        if piece:
            starts.append(pos)
            pos += len(piece)
    return zip(starts, starts[1:] + [pos])


@pytest.mark.parametrize("edit", [
    lambda t: "Hello world.",
    lambda t: t + " Then, she slept.",
    lambda t: t[:-1],
    lambda t: t.replace(".", "!", 1),
    lambda t: t + "<|endoftext|>",
    lambda t: t.replace(" ", "  ", 1),
    lambda t: "|" + t,
])
def test_text_outside_the_language_is_rejected(sampled, edit):
    with pytest.raises(ValueError, match="not in the synthetic language"):
        score_document(WorldConfig(), 0, edit(sampled[0]["text"]))


def test_a_renamed_later_mention_is_rejected(sampled):
    story = next(d for d in sampled if d["type"] == "story")
    name = story["semantics"][0]["subj"]["name"]
    head, tail = story["text"].split(".", 1)
    with pytest.raises(ValueError, match="not in the synthetic language"):
        score_document(WorldConfig(), 0, head + "." + tail.replace(name, name[::-1].capitalize() + "x"))


def test_ambiguous_options_are_caught():
    check_distinguishable(["the", "then", "them!"], open_word=False)  # whole words: no text starts with two
    check_distinguishable(["", "ka", "mo"], open_word=True)  # "name ends here" vs another syllable
    for options, open_word in ((["the", "the cat"], False), (["ka", "kam"], True), (["a", "a"], False)):
        with pytest.raises(AssertionError, match="ambiguous"):
            check_distinguishable(options, open_word)
