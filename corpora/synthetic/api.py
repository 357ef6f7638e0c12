"""The three entry points: generate a split, score a text, enumerate a tiny world.

All three run the same process (:func:`corpora.synthetic.doctypes.write_document`) with a
different chooser. Document ``i`` of a split is drawn from its own stream, seeded by
``(seed, split, i)``, so a document does not depend on how many documents come before it and the
splits are independent; the world is seeded by ``seed`` alone, so all splits speak one language.
"""
from __future__ import annotations

import math
from typing import Iterator

import numpy as np

from corpora.synthetic.chooser import Sampler, Scorer, enumerate_paths
from corpora.synthetic.config import WorldConfig
from corpora.synthetic.doctypes import write_document
from corpora.synthetic.render import MARK
from corpora.synthetic.world import world

SPLIT_STREAMS = {"train": 1, "valid": 2, "test": 3}


def concept_spans(marked: str) -> list[list[int]]:
    """Half-open character spans of the units of a marked text (they tile the plain text)."""
    spans, start, pos = [], 0, 0
    for piece in marked.split(MARK):
        if piece:
            if pos > start:
                spans.append([start, pos])
            start = pos
            pos += len(piece)
    spans.append([start, pos])
    return spans


def generate_split(cfg: WorldConfig, split: str, seed: int) -> Iterator[dict]:
    """The documents of one split, each with its exact log-probability, concept spans and records.

    With a latent topic (``cfg.n_topics``) the topic is drawn first (uniformly, from the document's
    own stream) and ``logprob`` is the marginal over the topics, not the probability given the topic.
    """
    n, w = cfg.docs(split), world(cfg, seed)
    for i in range(n):
        sampler = Sampler(np.random.default_rng([seed, SPLIT_STREAMS[split], i]))
        topic = int(sampler.rng.integers(cfg.n_topics)) if cfg.n_topics else None
        doc_type, records = write_document(w, sampler, topic)
        marked = sampler.marked()
        text = marked.replace(MARK, "")
        logprob = sampler.logprob if topic is None else _marginal(cfg, seed, text, {topic: sampler.logprob})
        yield {"id": f"{split}-{i}", "type": doc_type, "text": text,
               "logprob": logprob, "concepts": concept_spans(marked), "semantics": records}


def _marginal(cfg: WorldConfig, seed: int, text: str, known: dict[int, float]) -> float:
    """log sum_topic P(topic) P(text | topic), topics uniform; ``known`` holds already scored topics."""
    logps = []
    for topic in range(cfg.n_topics):
        if topic not in known:
            scorer = Scorer(text)
            write_document(world(cfg, seed), scorer, topic)
            known[topic] = scorer.finish()
        logps.append(known[topic])
    top = max(logps)
    return top + math.log(math.fsum(math.exp(lp - top) for lp in logps)) - math.log(cfg.n_topics)


def score_document(cfg: WorldConfig, seed: int, text: str) -> float:
    """Exact natural-log probability of a document (type choice and end of document included)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    if cfg.n_topics:  # a topic tilts probabilities only, so a text is in the language under all or none
        return _marginal(cfg, seed, text, {})
    scorer = Scorer(text)
    write_document(world(cfg, seed), scorer)
    return scorer.finish()


def enumerate_documents(cfg: WorldConfig, seed: int, limit: int = 200_000) -> Iterator[tuple[str, float]]:
    """Every (text, logprob) of a tiny world; ValueError (before yielding) if there are more than ``limit``."""
    w = world(cfg, seed)
    by_text: dict[str, list[float]] = {}
    for topic in (range(cfg.n_topics) if cfg.n_topics else [None]):
        prior = 0.0 if topic is None else -math.log(cfg.n_topics)
        for run in enumerate_paths(lambda chooser: write_document(w, chooser, topic), limit):  # noqa: B023 (used here)
            by_text.setdefault(run.marked().replace(MARK, ""), []).append(run.logprob + prior)
    for text, logps in by_text.items():
        top = max(logps)
        yield text, top + math.log(math.fsum(math.exp(lp - top) for lp in logps))
