"""Read-only acceptance tests of the synthetic language: is a text a whole document, or the start of one?

Used to judge samples of generators (``evals.genppl.world``): a whole document is scored exactly by
:func:`corpora.synthetic.api.score_document`, which raises ``ValueError`` (naming the character
where the text leaves the language) for any text the grammar cannot produce. A sample cut by a
window ends inside a document; :func:`prefix_verdict` tells whether some document starts with it.

How the prefix test stays exact: it replays the same process as the scorer (:class:`PrefixScorer`
is a :class:`~corpora.synthetic.chooser.Scorer` without the end-of-document mark appended). At each
choice, if the rest of the text is a prefix of one of the options (the text ends inside it, or
exactly at its end), some document continues the text that way, and the text is accepted. Otherwise
at most one option matches the rest as a whole (the options of a choice are distinguishable, as for
the scorer), and the replay follows it; no option matching means the text has left the language.
Nothing here changes how documents are generated or scored.
"""
from __future__ import annotations

from corpora.synthetic.chooser import Scorer
from corpora.synthetic.config import WorldConfig
from corpora.synthetic.doctypes import write_document
from corpora.synthetic.world import world


class _PrefixAccepted(Exception):
    """The text ended where the grammar can still continue it."""


class PrefixScorer(Scorer):
    """A scorer that accepts as soon as the text runs out inside the derivation."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text  # no end-of-document mark: the text may stop anywhere

    def _select(self, plains, logps, open_word):
        rest = self.text[self.pos:]
        if any(plain.startswith(rest) for plain in plains):
            raise _PrefixAccepted
        return super()._select(plains, logps, open_word)

    def _put(self, surface, plain, word_ends):
        if plain.startswith(self.text[self.pos:]):
            raise _PrefixAccepted
        super()._put(surface, plain, word_ends)


def document_verdict(cfg: WorldConfig, seed: int, text: str) -> tuple[float | None, str | None]:
    """(exact log-probability, None) for a document of the language, (None, why not) otherwise."""
    from corpora.synthetic.api import score_document

    try:
        return score_document(cfg, seed, text), None
    except ValueError as e:
        return None, str(e)


def prefix_verdict(cfg: WorldConfig, seed: int, text: str) -> str | None:
    """None when some document of the language starts with ``text``; otherwise why not (one line)."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    scorer = PrefixScorer(text)
    try:
        write_document(world(cfg, seed), scorer)
    except _PrefixAccepted:
        return None
    except ValueError as e:
        return str(e)
    return "the text goes on after the end of the document"  # unreachable: the process ends with END
