"""The knobs of the synthetic world, with defaults sized for the embedded corpus.

One frozen dataclass holds every size and probability; ``WorldConfig(**dict)`` is how a YAML
profile reaches it, so unknown keys fail as ``TypeError`` (naming the key) and bad values as
``ValueError`` naming the field and what would fix it. The defaults give about 1.5 M words
(about 2.2 M byte-level BPE tokens) in train and ~3 % of that in each of valid and test.

Lexicon sizes pick the first ``n`` words of a seeded permutation of the word lists in
:mod:`corpora.synthetic.words`; words are then drawn with Zipf(``lexicon_zipf``) weights over that
order. The geometric ``*_end_prob`` knobs set document lengths (mean number of sentences is about
``1 / end_prob``), capped by ``max_sentences`` (the cap is what makes tiny worlds enumerable).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from corpora.synthetic import words


@dataclass(frozen=True)
class WorldConfig:
    # documents per split
    train_docs: int = 16000
    valid_docs: int = 500
    test_docs: int = 500
    # mixture of document types (relative weights; 0 disables a type)
    story_weight: float = 0.5
    entry_weight: float = 0.2
    recipe_weight: float = 0.2
    dialogue_weight: float = 0.1
    # names: strict CV syllables, a Zipf distribution over the syllables
    n_consonants: int = 14
    n_vowels: int = 5
    syllable_zipf: float = 0.7
    name_min_syllables: int = 2
    name_max_syllables: int = 4
    name_stop_prob: float = 0.5
    # lexicon sizes (each at most the length of its list in words.py)
    n_professions: int = 40
    n_person_adjectives: int = 16
    n_things: int = 60
    n_thing_adjectives: int = 24
    n_places: int = 25
    n_settlements: int = 6
    n_waters: int = 4
    n_place_adjectives: int = 12
    n_landmarks: int = 12
    n_emotions: int = 12
    n_adverbs: int = 14
    n_times: int = 6
    n_openers: int = 6
    n_regions: int = 16
    n_goods: int = 400
    n_ingredients: int = 25
    n_units: int = 5
    n_numbers: int = 6
    n_tools: int = 6
    n_dish_kinds: int = 8
    n_durations: int = 8
    n_story_verbs: int = 27
    n_recipe_verbs: int = 16
    n_dialogue_verbs: int = 8
    lexicon_zipf: float = 0.6
    # latent topic (0 = none): a per-document topic, never written, that favours its own share of
    # every content category (world.TOPIC_CATEGORIES); the likelihood sums over the topics
    n_topics: int = 0
    topic_prob: float = 0.8
    # discourse
    new_entity_prob: float = 0.3
    new_subject_prob: float = 0.1
    adjective_prob: float = 0.7
    adverb_prob: float = 0.5
    opener_prob: float = 0.5
    pronoun_prob: float = 0.35
    description_prob: float = 0.3
    dialogue_question_prob: float = 0.3
    unused_ingredient_weight: float = 4.0
    # lengths
    max_sentences: int = 40
    story_end_prob: float = 0.06
    fact_end_prob: float = 0.12
    question_end_prob: float = 0.2
    list_end_prob: float = 0.3
    step_end_prob: float = 0.12
    turn_end_prob: float = 0.07

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "n_topics":
                _check(isinstance(value, int) and not isinstance(value, bool) and value >= 0, f.name,
                       f"must be 0 (no topic) or a positive integer, got {value!r}")
            elif f.type == "int":
                _check(isinstance(value, int) and not isinstance(value, bool) and value >= 1, f.name,
                       f"must be a positive integer, got {value!r}")
            elif not isinstance(value, (int, float)) or isinstance(value, bool):
                _check(False, f.name, f"must be a number, got {value!r}")
            elif f.name.endswith("_prob"):
                _check(0.0 < value < 1.0, f.name,
                       f"is a probability: use a value strictly between 0 and 1, got {value}")
            else:
                _check(value >= 0.0, f.name, f"must be >= 0, got {value}")
        for name, available in words.SIZES.items():
            _check(getattr(self, name) <= available, name,
                   f"is at most {available} (the words in words.py), got {getattr(self, name)}")
        _check(sum(self.type_weights().values()) > 0, "story_weight",
               "and the other document-type weights are all 0: make one positive")
        _check(self.name_min_syllables <= self.name_max_syllables, "name_min_syllables",
               f"must be <= name_max_syllables ({self.name_max_syllables})")
        _check(self.n_consonants * self.n_vowels >= 2, "n_consonants",
               "times n_vowels must be >= 2 (a dialogue names two people, with different first syllables)")
        _check(self.n_vowels >= 2, "n_vowels", "must be >= 2 (names ending in a, e, i are 'she', in o, u 'he')")
        _check(self.n_professions >= 2, "n_professions", "must be >= 2 (a dialogue introduces two people)")
        _check(self.description_prob + self.pronoun_prob < 1, "pronoun_prob",
               "plus description_prob must be < 1 (the rest is the probability of a name)")
        _check(self.unused_ingredient_weight > 0, "unused_ingredient_weight", "must be > 0")

    def type_weights(self) -> dict[str, float]:
        """Relative weight of each document type, in the fixed order of the type choice."""
        return {"story": self.story_weight, "entry": self.entry_weight,
                "recipe": self.recipe_weight, "dialogue": self.dialogue_weight}

    def docs(self, split: str) -> int:
        if split not in ("train", "valid", "test"):
            raise ValueError(f"split must be train, valid or test, got {split!r}")
        return getattr(self, f"{split}_docs")


def _check(ok: bool, field: str, message: str) -> None:
    if not ok:
        raise ValueError(f"WorldConfig.{field} {message}")
