"""The world: everything shared by all documents of one (config, seed) — the language itself.

It fixes, from the seed alone: which words of each list are in the lexicon and their Zipf
weights, the syllable inventory of names and its weights, the region names (proper nouns that
recur across documents), and the compound goods (``honeyroot``, ``saltfish``: rare two-root
words that a small BPE splits). Splits share the world and differ only in their document streams.
"""
from __future__ import annotations

import copy
import functools
import math

import numpy as np

from corpora.synthetic import words
from corpora.synthetic.config import WorldConfig
from corpora.synthetic.render import FRAMES, FUNCTION_WORDS, Renderer

WORLD_STREAM = 0  # the splits use streams 1, 2, 3 (see api.py); the invented lexicon uses 4
LEXICON_STREAM = 4
TOPIC_STREAM = 5
# the content categories a latent topic tilts (names, numbers, units, durations, openers stay as they are)
TOPIC_CATEGORIES = ("professions", "person_adjectives", "things", "thing_adjectives", "places", "settlements",
                    "waters", "place_adjectives", "landmarks", "emotions", "adverbs", "times", "ingredients",
                    "tools", "dish_kinds", "goods")


class Category:
    """An ordered list of words with Zipf probabilities over the order (or the given weights)."""

    def __init__(self, items, zipf: float, weights=None):
        self.words = list(items)
        if weights is None:
            weights = np.arange(1, len(self.words) + 1, dtype=float) ** -zipf
        weights = np.asarray(weights, dtype=float)
        self.probs = list(weights / weights.sum())
        self.logps = [math.log(p) for p in self.probs]
        self.index = {w: i for i, w in enumerate(self.words)}


class World:
    def __init__(self, cfg: WorldConfig, seed: int):
        self.cfg, self.seed = cfg, seed
        rng = np.random.default_rng([seed, WORLD_STREAM])

        def take(items, n, zipf=cfg.lexicon_zipf):
            order = rng.permutation(len(items))[:n]
            return Category([items[i] for i in order], zipf)

        consonants = [words.CONSONANTS[i] for i in rng.permutation(len(words.CONSONANTS))[:cfg.n_consonants]]
        vowels = words.VOWELS[:cfg.n_vowels]
        self.syllables = take([c + v for c in consonants for v in vowels], None, cfg.syllable_zipf)
        self.professions = take(words.PROFESSIONS, cfg.n_professions)
        self.person_adjectives = take(words.PERSON_ADJECTIVES, cfg.n_person_adjectives)
        self.things = take(words.THINGS, cfg.n_things)
        self.thing_adjectives = take(words.THING_ADJECTIVES, cfg.n_thing_adjectives)
        self.places = take(words.PLACES, cfg.n_places)
        self.settlements = take(words.SETTLEMENTS, cfg.n_settlements)
        self.waters = take(words.WATERS, cfg.n_waters)
        self.place_adjectives = take(words.PLACE_ADJECTIVES, cfg.n_place_adjectives)
        self.landmarks = take(words.LANDMARKS, cfg.n_landmarks)
        self.emotions = take(words.EMOTIONS, cfg.n_emotions)
        self.openers = take(words.OPENERS, cfg.n_openers)
        self.adverbs = take(words.ADVERBS, cfg.n_adverbs)
        self.times = take(words.TIMES, cfg.n_times)
        self.ingredients = take(words.INGREDIENTS, cfg.n_ingredients)
        self.units = take(words.UNITS, cfg.n_units)
        self.numbers = take(words.NUMBERS, cfg.n_numbers)
        self.tools = take(words.TOOLS, cfg.n_tools)
        self.dish_kinds = take(words.DISH_KINDS, cfg.n_dish_kinds)
        self.durations = take(words.DURATIONS, cfg.n_durations)
        self.goods = take([a + b for a in words.ROOTS for b in words.ROOTS if a != b], cfg.n_goods)
        self.regions = Category(self._region_names(rng), cfg.lexicon_zipf)
        self.story_verbs = words.STORY_VERBS[:cfg.n_story_verbs]
        self.recipe_verbs = words.RECIPE_VERBS[:cfg.n_recipe_verbs]
        self.dialogue_verbs = words.DIALOGUE_VERBS[:cfg.n_dialogue_verbs]
        self.english = Renderer()
        self.memo: dict = {}  # menus that depend on the world only (see Discourse.memo)
        self.topic_shares = self._topic_shares() if cfg.n_topics else None
        self._views: dict[int, World] = {}

    def _topic_shares(self) -> dict[str, list[int]]:
        """Each content word's topic: a seeded uniform assignment, per category."""
        rng = np.random.default_rng([self.seed, TOPIC_STREAM])
        return {attr: [int(t) for t in rng.integers(self.cfg.n_topics, size=len(getattr(self, attr).words))]
                for attr in TOPIC_CATEGORIES}

    def topic_view(self, topic: int | None) -> "World":
        """The world as a document of ``topic`` sees it (itself for None).

        In each content category a word of the topic's share is drawn with probability ``topic_prob``
        (Zipf weights renormalised within the share), any word with the rest:
        ``p(w | topic) = (1 - topic_prob) p(w) + topic_prob p(w) [w in share] / p(share)``; a category
        with an empty share keeps ``p(w)``. Views have their own menus.
        """
        if topic is None:
            return self
        if not 0 <= topic < self.cfg.n_topics:
            raise ValueError(f"topic must be in [0, {self.cfg.n_topics}), got {topic}")
        view = self._views.get(topic)
        if view is None:
            view = copy.copy(self)
            view.memo, view._views = {}, {}
            q = self.cfg.topic_prob
            for attr in TOPIC_CATEGORIES:
                cat, share = getattr(self, attr), np.array(self.topic_shares[attr]) == topic
                p = np.array(cat.probs)
                if share.any():
                    p = (1 - q) * p + q * p * share / p[share].sum()
                setattr(view, attr, Category(cat.words, 0.0, p))
            self._views[topic] = view
        return view

    def _region_names(self, rng) -> list[str]:
        """Distinct names of three syllables drawn from the name syllables (uniformly)."""
        syllables, names = self.syllables.words, {}
        n = min(self.cfg.n_regions, len(syllables) ** 3)
        while len(names) < n:
            parts = [syllables[i] for i in rng.integers(len(syllables), size=3)]
            name = "".join(parts)
            names.setdefault(name[0].upper() + name[1:], None)
        return list(names)

    def vocabulary(self) -> list[str]:
        """Every lexicon id the English renderer can use (regions are names, not ids)."""
        ids = set(FRAMES) | set(FUNCTION_WORDS) | {m for ms in FRAMES.values() for m in ms if m}
        ids |= {"once upon a time", "in this talk", "first", "then", "next", "after that", "finally", "in the end"}
        for cat in (self.professions, self.person_adjectives, self.things, self.thing_adjectives, self.places,
                    self.settlements, self.waters, self.place_adjectives, self.landmarks, self.emotions,
                    self.openers, self.adverbs, self.times, self.ingredients, self.numbers, self.tools,
                    self.dish_kinds, self.goods):
            ids |= set(cat.words)
        for cat in (self.units, self.durations):
            ids |= {w for group in cat.words for w in group}
        return sorted(ids)

    def invented_lexicon(self) -> dict[str, str]:
        """A second lexicon (for translation): a distinct invented CVC word for every lexicon id."""
        rng = np.random.default_rng([self.seed, LEXICON_STREAM])
        onsets, vowels, codas = "bdgklmnprstvz", "aeiou", "klmnrst"
        lexicon, seen = {}, set()
        for wid in self.vocabulary():
            while True:
                n = 1 + int(rng.integers(3))
                word = "".join(onsets[rng.integers(13)] + vowels[rng.integers(5)] + codas[rng.integers(7)]
                               for _ in range(n))
                if word not in seen:
                    break
            seen.add(word)
            lexicon[wid] = word
        return lexicon


@functools.lru_cache(maxsize=4)
def world(cfg: WorldConfig, seed: int) -> World:
    return World(cfg, seed)
