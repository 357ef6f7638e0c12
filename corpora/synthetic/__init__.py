"""A synthetic world: a seeded language of multi-token concepts whose every document has an exact probability.

What the language looks like (default world, seed 0, ``test-4`` and ``test-22``)::

    Once upon a time, a busy barber named Taga lived in a small village named Rotanuti. She waited
    again. Later, a stern teacher named Gakokigi helped the barber happily. Taga slept. Later,
    Gakokigi visited the temple.

    In the end, Taga was in Rotanuti.

    This entry is about a bustling port named Gipa. The port has a bustling gate. The port is known
    for fishclay. Gipa is ruled by a wise jeweler named Nitibule. [...]

    Questions.
    Gipa is ruled by whom? By a wise jeweler named Nitibule.
    Gipa is known for what? For fishclay.

Four document types (``doctypes.py``): stories that follow a world state (who is where, who holds
what), encyclopedia entries whose questions are answered by repeating earlier facts, recipes whose
steps use the listed ingredients and end by serving the dish of the title, and dialogues where
people say where they put things and later ask. Names are fresh per document (strict CV
syllables, so a small BPE splits them) and are copied on every later mention; goods are rare
compounds (``fishclay``); the rest is an English lexicon drawn per world from ``words.py``.

Interface::

    WorldConfig(**cfg)                           # frozen; all knobs and defaults in config.py
    generate_split(cfg, split, seed)             # -> {"id", "type", "text", "logprob", "concepts", "semantics"}
    score_document(cfg, seed, text) -> float     # exact log-probability, ValueError outside the language
    enumerate_documents(cfg, seed)               # every (text, logprob) of a tiny world

``logprob`` (natural log) includes the choice of document type and the end of the document, so
the oracle NLL of a token stream with one end-of-text token after each document is
``-sum(logprob) / (tokens + documents)``. One process makes every random decision through a
chooser (``chooser.py``) that samples, reads back (scores) or enumerates; every choice's options
are distinguishable from the text, so each text has exactly one derivation. ``concepts`` are
half-open character spans tiling the text, one per phrase (opener, noun phrase with its name, verb,
prepositional phrase, list item); punctuation belongs to the phrase before it, the whitespace
before a phrase belongs to that phrase (as in byte-level BPE, which puts the space on the word).

Tasks are one function away, from ``doc["semantics"]`` (clause records, see ``render.py``; below,
``Renderer`` and ``entities`` come from ``render.py``, ``world`` from ``world.py``):

* **cloze / 4-way choice**: a record's ref with ``form == "name"`` (or an entry or dialogue
  answer) whose entity was introduced records earlier is the blank; render the records one by one
  with ``Renderer().record`` to find its span. Distractors: the other entities of the same kind in
  the document (valid names, wrong referent) or fresh names from ``world(cfg, seed).syllables``.
* **translation**: ``Renderer(world(cfg, seed).invented_lexicon(), "SOV").document(doc["semantics"])``
  renders the same records in a second lexicon with verb-final order (strip ``|`` for the text).
* **summary**: render the key records (the story's opening and closing, the entry's facts, the
  recipe's title and list) with ``Renderer().document(subset, entities(doc["semantics"]))``.
"""
from corpora.synthetic.api import enumerate_documents, generate_split, score_document
from corpora.synthetic.config import WorldConfig

__all__ = ["WorldConfig", "generate_split", "score_document", "enumerate_documents"]
