"""The entropy by level (corpora/synthetic/levels.py) and the latent-topic world setting."""
from __future__ import annotations

import hashlib
import json
import math
from itertools import islice

import pytest

from corpora.synthetic import WorldConfig, enumerate_documents, generate_split, score_document, words
from corpora.synthetic.levels import decompose, measure, unit_ngram_entropy, unit_of

TOPICS = WorldConfig(n_topics=4, topic_prob=0.9)
STORY = {"entry_weight": 0.0, "recipe_weight": 0.0, "dialogue_weight": 0.0}
TINY = {**{size: 1 for size in words.SIZES}, "n_professions": 2, "n_vowels": 2, "n_things": 2, "n_places": 2,
        "n_story_verbs": 6, "name_min_syllables": 1, "name_max_syllables": 1, "max_sentences": 2, **STORY}


@pytest.fixture(scope="module")
def sampled():
    return list(islice(generate_split(WorldConfig(), "valid", 0), 40))


@pytest.fixture(scope="module")
def topical():
    return list(islice(generate_split(TOPICS, "valid", 0), 15))


def test_the_default_world_is_unchanged(sampled):
    # the first 20 valid documents as they were before the topic setting existed
    text = "".join(d["text"] for d in sampled[:20])
    assert hashlib.sha256(text.encode()).hexdigest() == \
        "942499821be665ec90d35bd36c82b3e28e27a5682ef95b0fe146ed5aa796234e"
    assert math.fsum(d["logprob"] for d in sampled[:20]) == pytest.approx(-3157.3182142702117, abs=1e-9)


@pytest.mark.parametrize("world", ["default", "topics"])
def test_plan_and_surface_add_up_to_the_exact_nll(world, sampled, topical):
    cfg, docs = (WorldConfig(), sampled) if world == "default" else (TOPICS, topical)
    for doc in docs:
        parts = decompose(cfg, 0, doc["text"])
        assert parts["plan"] + parts["surface"] == pytest.approx(-doc["logprob"], abs=1e-8)
        assert math.fsum(p + s for p, s in parts["by_kind"].values()) == pytest.approx(-doc["logprob"], abs=1e-8)
        assert math.fsum(parts["unit_nats"]) == pytest.approx(parts["plan"], abs=1e-8)
        assert 0.0 <= parts["topic"] <= math.log(max(cfg.n_topics, 1)) + 1e-9


def test_the_type_is_plan_and_the_verbs_are_uniform(sampled):
    weights = WorldConfig().type_weights()
    for doc in sampled:
        parts = decompose(WorldConfig(), 0, doc["text"])
        assert parts["units"][0] == ("type", doc["type"])
        assert parts["by_kind"]["type"] == pytest.approx([-math.log(weights[doc["type"]] / sum(weights.values())), 0])
        assert parts["by_kind"].get("verb", [0, 0])[1] == 0.0  # a verb is its own unit
        assert parts["by_kind"].get("name", [0, 0])[0] == 0.0  # a name's syllables are surface
    assert {doc["type"] for doc in sampled} == {"story", "entry", "recipe", "dialogue"}


def test_unit_of_maps_option_values():
    assert unit_of(0) == ("go", "on") and unit_of(1) == ("go", "stop")
    assert unit_of("gave") == ("verb", "gave") and unit_of("then") == ("step",)
    assert unit_of(("old", "e2", "pron")) == ("ref", "e2")
    assert unit_of(("is known", "name")) == ("fact", "is known")
    assert unit_of(("say", "hid")) == ("say", "hid")
    assert unit_of(("ten", "minutes")) is None and unit_of("baker") is None
    with pytest.raises(ValueError, match="unknown option value"):
        unit_of(({},))


def test_witten_bell_ngram_of_units():
    # order 0 on one seen unit: (1 + 1 * 1/2) / (1 + 1) with the unseen unit making the vocabulary 2
    assert unit_ngram_entropy([["a"]], [["a"]], [0]) == {0: pytest.approx(-math.log(0.75))}
    alternating = [["a", "b"] * 20] * 5
    got = unit_ngram_entropy(alternating, alternating, [0, 1])
    assert got[1] < 0.1 < got[0]


def test_measure_reports_per_token_figures():
    got = measure(WorldConfig(), 0, lambda texts: [t.split() for t in texts], n_docs=6, n_fit=6, orders=(0, 1))
    per_token = got["nats_per_token"]
    assert per_token["plan"] + per_token["surface"] == pytest.approx(per_token["total"], abs=1e-9)
    assert per_token["topic_information"] == 0.0
    assert math.fsum(v["plan"] + v["surface"] for v in got["by_kind"].values()) == pytest.approx(per_token["total"])
    assert set(got["units"]["ngram_nats_per_unit"]) == {"0", "1"}


# -- the latent topic
def test_topic_worlds_score_their_own_documents(topical):
    for doc in topical:
        assert score_document(TOPICS, 0, doc["text"]) == pytest.approx(doc["logprob"], abs=1e-9)
    again = list(islice(generate_split(TOPICS, "valid", 0), 3))
    assert [d["text"] for d in again] == [d["text"] for d in topical[:3]]


def test_one_topic_is_no_topic(sampled):
    one = WorldConfig(n_topics=1)
    for doc in sampled[:10]:
        assert score_document(one, 0, doc["text"]) == pytest.approx(doc["logprob"], abs=1e-9)


def test_a_topic_world_enumerates_to_a_distribution_over_distinct_texts():
    cfg = WorldConfig(**TINY, n_topics=2, topic_prob=0.9)
    docs = list(enumerate_documents(cfg, seed=1))
    texts = [text for text, _ in docs]
    assert len(set(texts)) == len(texts) > 20
    assert math.fsum(math.exp(lp) for _, lp in docs) == pytest.approx(1.0, abs=1e-9)
    plain = dict(enumerate_documents(WorldConfig(**TINY), seed=1))
    assert set(plain) == set(texts)  # a topic tilts probabilities, never the language
    assert any(abs(lp - plain[t]) > 1e-3 for t, lp in docs)
    for text, lp in docs[:: max(1, len(docs) // 20)]:
        assert score_document(cfg, 1, text) == pytest.approx(lp, abs=1e-9)


def test_topics_make_content_words_predictable_given_the_topic(topical):
    info = [decompose(TOPICS, 0, d["text"])["topic"] for d in topical]
    assert sum(info) / len(info) > 0.3  # nats of the topic the text reveals (at most log 4 = 1.39)


@pytest.mark.parametrize("field, value, hint", [("n_topics", -1, "0 \\(no topic\\)"),
                                                ("topic_prob", 1.0, "strictly between 0 and 1")])
def test_topic_settings_are_validated(field, value, hint):
    with pytest.raises(ValueError, match=f"WorldConfig.{field} .*{hint}"):
        WorldConfig(**{field: value})


def test_the_cli_reads_the_data_stages_settings(tmp_path):
    """``--settings`` (the data stage's settings.json) gives the world and its seed, as the corpus rule reads
    them: the same figures as the same world and seed given directly; the JSON is written whole."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from workflows.cli import main

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "settings.json").write_text(json.dumps({"corpus": {"id": "w", "seed": 3, "source": "synthetic",
                                                                   "synthetic": {"max_sentences": 3}}}))
    common = ["--tokenizer", str(tmp_path / "tokenizer.json"), "--docs", "4", "--fit", "4"]
    main(["levels", "--settings", str(tmp_path / "settings.json"), *common, "--out", str(tmp_path / "a.json")])
    main(["levels", "--world", '{"max_sentences": 3}', "--seed", "3", *common, "--out", str(tmp_path / "b.json")])
    main(["levels", *common, "--out", str(tmp_path / "c.json")])
    a, b, c = (json.loads((tmp_path / f"{n}.json").read_text()) for n in "abc")
    assert a == b and a["seed"] == 3 and a != c
    made = a["provenance"]  # what made the figures: the world, its seed, the tokenizer file, code and host
    assert made["world"] == {"max_sentences": 3} and made["seed"] == 3 and len(made["tokenizer_sha256"]) == 64
    assert made["git_commit"] and made["host_fingerprint"]["cores"]
