"""The synthetic world's config contract and determinism."""
from __future__ import annotations

import json
from itertools import islice

import pytest

from corpora.synthetic import WorldConfig, generate_split, score_document

SMALL = {"train_docs": 6, "valid_docs": 3, "test_docs": 2}


def _dump(docs):
    return [json.dumps(d, sort_keys=True) for d in docs]


def test_same_inputs_give_identical_documents():
    cfg = WorldConfig(**SMALL)
    assert _dump(generate_split(cfg, "train", 7)) == _dump(generate_split(WorldConfig(**SMALL), "train", 7))
    assert [len(list(generate_split(cfg, s, 7))) for s in ("train", "valid", "test")] == [6, 3, 2]


def test_document_i_does_not_depend_on_the_split_size():
    few = _dump(generate_split(WorldConfig(train_docs=3), "train", 7))
    assert few == _dump(islice(generate_split(WorldConfig(**SMALL), "train", 7), 3))


def test_splits_differ_but_share_one_world():
    cfg = WorldConfig(**SMALL)
    train, valid = list(generate_split(cfg, "train", 7)), list(generate_split(cfg, "valid", 7))
    assert not {d["text"] for d in train} & {d["text"] for d in valid}
    assert [d["id"] for d in valid] == ["valid-0", "valid-1", "valid-2"]
    for doc in valid:  # the valid documents are in the language of seed 7
        assert score_document(cfg, 7, doc["text"]) == pytest.approx(doc["logprob"], abs=1e-9)


def test_another_seed_is_another_world():
    cfg = WorldConfig(**SMALL)
    texts = [d["text"] for d in generate_split(cfg, "train", 7)]
    assert texts != [d["text"] for d in generate_split(cfg, "train", 8)]
    scores = []
    for text in texts:
        try:
            scores.append(score_document(cfg, 8, text))
        except ValueError:
            scores.append(None)
    assert scores != [d["logprob"] for d in generate_split(cfg, "train", 7)]


def test_unknown_key_is_a_type_error_naming_it():
    with pytest.raises(TypeError, match="n_dragons"):
        WorldConfig(n_dragons=3)


@pytest.mark.parametrize("field, value, hint", [
    ("train_docs", 0, "positive integer"),
    ("n_things", 2.5, "positive integer"),
    ("n_things", 10_000, "at most"),
    ("story_end_prob", 1.0, "strictly between 0 and 1"),
    ("pronoun_prob", 0.0, "strictly between 0 and 1"),
    ("lexicon_zipf", -1.0, ">= 0"),
    ("story_weight", "a lot", "must be a number"),
    ("name_min_syllables", 5, "name_max_syllables"),
    ("n_vowels", 1, ">= 2"),
    ("n_professions", 1, ">= 2"),
    ("pronoun_prob", 0.8, "description_prob"),
])
def test_bad_values_name_the_field_and_the_fix(field, value, hint):
    with pytest.raises(ValueError, match=f"WorldConfig.{field} .*{hint}"):
        WorldConfig(**{field: value})


def test_all_type_weights_zero_is_rejected():
    with pytest.raises(ValueError, match="weight"):
        WorldConfig(story_weight=0, entry_weight=0, recipe_weight=0, dialogue_weight=0)


def test_unknown_split_is_rejected():
    with pytest.raises(ValueError, match="split"):
        next(generate_split(WorldConfig(**SMALL), "dev", 0))
