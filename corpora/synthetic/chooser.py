"""One generative process, three ways to run it: sample, score, enumerate.

The document generator never draws random numbers itself: it asks a :class:`Chooser` to pick
one of a list of options, each a piece of marked surface text with a log-probability, and the
chooser puts the picked option's text into the document. A :class:`Sampler` draws the pick from
a seeded generator; a :class:`Scorer` reads it back from a given text; a :class:`Replayer` follows
a given list of picks (which is how :func:`enumerate_paths` walks every derivation).

Why scoring is exact: at every choice the options are *distinguishable* — no text can start
with two of them — so at most one option matches the text at the cursor, every text has at most
one derivation, and its probability is the sum of the picked log-probabilities. Options are
compared as whole words: an option ending in a letter matches only where the text's next
character is not a letter ("the" does not match "then"). In a choice made *inside* a word
(``open_word``: the syllables of a name) options are bare prefixes, except the empty option,
which means "the word ends here". :func:`check_distinguishable` asserts this at every choice; the
sampler also asserts the other half of the contract, that a closed word is followed by a
non-letter.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, Sequence

from corpora.synthetic.render import MARK

END = "\x00"  # the end-of-document event's surface; never part of a returned text


class Menu:
    """The options of one choice: marked surfaces, log-probabilities, and what each option means.

    A menu remembers that it was checked for distinguishability, so menus built once per world
    are checked once; a subset of a checked menu needs no new check.
    """

    __slots__ = ("surfaces", "plains", "logps", "values", "checked")

    def __init__(self, surfaces=(), logps=(), values=None, plains=None, checked=False):
        self.surfaces = list(surfaces)
        self.plains = [s.replace(MARK, "") for s in self.surfaces] if plains is None else plains
        self.logps = list(logps)
        self.values = list(values) if values is not None else list(range(len(self.surfaces)))
        self.checked = checked

    def add(self, surface: str, logp: float, value: Any = None) -> None:
        self.surfaces.append(surface)
        self.plains.append(surface.replace(MARK, ""))
        self.logps.append(logp)
        self.values.append(value)
        self.checked = False

    def extend(self, other: "Menu", log_weight: float) -> None:
        self.surfaces += other.surfaces
        self.plains += other.plains
        self.logps += [lp + log_weight for lp in other.logps]
        self.values += other.values
        self.checked = False

    def subset(self, keep: Sequence[int], shifts: Sequence[float]) -> "Menu":
        """The options at ``keep``, their log-probabilities shifted (renormalised) by ``shifts``."""
        return Menu([self.surfaces[i] for i in keep], [self.logps[i] + d for i, d in zip(keep, shifts)],
                    [self.values[i] for i in keep], [self.plains[i] for i in keep], self.checked)

    @classmethod
    def mix(cls, parts: Sequence[tuple[float, "Menu"]]) -> "Menu":
        """One menu from weighted menus (weights sum to 1; zero-weight parts are left out)."""
        out = cls()
        for weight, menu in parts:
            if weight > 0:
                out.extend(menu, math.log(weight))
        return out


def ends_word(plain: str, open_word: bool) -> bool:
    """Whether an option, once picked, must be followed by a non-letter."""
    return plain == "" or (not open_word and plain[-1].isalpha())


def check_distinguishable(plains: Sequence[str], open_word: bool) -> None:
    """Raise AssertionError if some text could start with two of the options.

    In sorted order, the options that start with ``a`` directly follow ``a``; so when no option
    is a prefix of its successor (the usual case, checked first) no option is a prefix of another.
    """
    ordered = sorted(plains)
    if not any(map(str.startswith, ordered[1:], ordered[:-1])):
        return
    for k, a in enumerate(ordered):
        for b in ordered[k + 1:]:
            if not b.startswith(a):
                break
            if len(b) == len(a) or not (ends_word(a, open_word) and b[len(a)].isalpha()):
                raise AssertionError(f"ambiguous choice: {a!r} vs {b!r}")


class Chooser(ABC):
    """Base: accumulates the log-probability; subclasses decide which option is picked."""

    def __init__(self):
        self.logprob = 0.0

    def choose(self, surfaces: Sequence[str], logps: Sequence[float], open_word: bool = False) -> int:
        """Pick one of the options; returns its index."""
        return self._take(Menu(surfaces, logps), open_word)

    def pick(self, menu: Menu, open_word: bool = False) -> Any:
        """Pick one option of a menu; returns its value."""
        return menu.values[self._take(menu, open_word)]

    def _take(self, menu: Menu, open_word: bool) -> int:
        if not menu.surfaces:
            raise AssertionError("a choice with no options")
        if not menu.checked:
            check_distinguishable(menu.plains, open_word)
            menu.checked = True
        i = self._select(menu.plains, menu.logps, open_word)
        self.logprob += menu.logps[i]
        self._put(menu.surfaces[i], menu.plains[i], ends_word(menu.plains[i], open_word))
        return i

    def emit(self, surface: str) -> None:
        """Text that follows with probability one."""
        self._put(surface, surface.replace(MARK, ""), False)

    @abstractmethod
    def _select(self, plains, logps, open_word) -> int:
        """Index of the option taken: sampled, read back from the text, or fixed by enumeration."""

    @abstractmethod
    def _put(self, surface: str, plain: str, word_ends: bool) -> None:
        """Consume the taken option's text: write it, or check it against the text being scored."""


class Writer(Chooser):
    """A chooser that writes the picked text; the result is the marked document."""

    def __init__(self):
        super().__init__()
        self.pieces: list[str] = []
        self._closed_word = False

    def _put(self, surface, plain, word_ends):
        if plain:
            if self._closed_word and plain[0].isalpha():
                context = "".join(self.pieces)[-40:]
                raise AssertionError(f"a closed word is followed by a letter: {context!r} + {plain!r}")
            self._closed_word = word_ends
        elif word_ends:
            self._closed_word = True
        self.pieces.append(surface)

    def marked(self) -> str:
        """The marked document text, without the end-of-document event."""
        out = "".join(self.pieces)
        if not out.endswith(END):
            raise AssertionError("the document process ended without the end-of-document event")
        return out[:-1]


class Sampler(Writer):
    """Picks at random from a seeded numpy Generator."""

    def __init__(self, rng):
        super().__init__()
        self.rng = rng

    def _select(self, plains, logps, open_word):
        u, acc = self.rng.random(), 0.0
        for i, lp in enumerate(logps):
            acc += math.exp(lp)
            if u < acc:
                return i
        return len(logps) - 1  # u landed in the rounding gap of a sum that is 1 up to ~1e-15


class Replayer(Writer):
    """Follows a given list of picks (then always the first option), recording each choice's size."""

    def __init__(self, path: Sequence[int]):
        super().__init__()
        self.path = path
        self.trace: list[tuple[int, int]] = []

    def _select(self, plains, logps, open_word):
        _check_normalised(logps)
        k = len(self.trace)
        i = self.path[k] if k < len(self.path) else 0
        self.trace.append((i, len(plains)))
        return i


class Scorer(Chooser):
    """Reads the picks back from a text; raises ValueError where the text leaves the language."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text + END
        self.pos = 0

    def _matches(self, plain: str, open_word: bool) -> bool:
        if not self.text.startswith(plain, self.pos):
            return False
        after = self.pos + len(plain)
        return not ends_word(plain, open_word) or after == len(self.text) or not self.text[after].isalpha()

    def _select(self, plains, logps, open_word):
        _check_normalised(logps)
        for i, plain in enumerate(plains):
            if self._matches(plain, open_word):
                return i
        raise self._error("one of " + ", ".join(repr(p) for p in plains[:8]) + (" ..." if len(plains) > 8 else ""))

    def _put(self, surface, plain, word_ends):
        if not self.text.startswith(plain, self.pos):
            raise self._error(repr(plain))
        self.pos += len(plain)

    def finish(self) -> float:
        if self.pos != len(self.text):
            raise self._error("the end of the document")
        return self.logprob

    def _error(self, expected: str) -> ValueError:
        seen = self.text[self.pos:self.pos + 30].replace(END, "<end>")
        return ValueError(f"text is not in the synthetic language: at character {self.pos} ({seen!r}) "
                          f"the grammar expects {expected}")


def _check_normalised(logps: Sequence[float]) -> None:
    total = math.fsum(math.exp(lp) for lp in logps)
    if abs(total - 1.0) > 1e-9:
        raise AssertionError(f"option probabilities sum to {total}, not 1")


def enumerate_paths(process: Callable[[Chooser], Any], limit: int) -> Iterator[Replayer]:
    """Run ``process`` once per derivation (depth-first over the picks); at most ``limit`` runs."""
    path: list[int] = []
    for _ in range(limit):
        replayer = Replayer(path)
        process(replayer)
        yield replayer
        trace = replayer.trace
        while trace and trace[-1][0] + 1 >= trace[-1][1]:
            trace.pop()
        if not trace:
            return
        path = [i for i, _ in trace[:-1]] + [trace[-1][0] + 1]
    raise ValueError(f"more than {limit} documents: the config is too large to enumerate; shrink the lexicon "
                     "sizes, name syllables and max_sentences")
