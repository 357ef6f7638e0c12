"""The world's exact entropy split by level: the plan (which unit comes next) and its surface.

Every decision of the generator is one choice among options (``chooser.py``). Each option is
mapped to its *unit*, the higher-level decision it stands for (:func:`unit_of`):

* **plan units** — the document type; going on or ending (a story sentence, an entry fact, a recipe
  step, a list item, a question); the predicate (story / recipe verb, entry relation, dialogue move);
  and which entity a mention refers to (an old one, by its id, or a new one, by its category);
* **surface** — everything that only realises a unit: the form of a mention (name, description,
  pronoun), the words of a new entity (adjective, noun, quantity), the syllables of a fresh name, the
  adverb, the emotion, the goods, the duration, the step opener's wording.

A picked option of log-probability ``lp`` whose unit has probability ``P(unit)`` in its menu
contributes ``-log P(unit)`` nats to the plan and ``-lp + log P(unit)`` to the surface, so the
two parts add up exactly to the document's ``-logprob`` (:func:`decompose`). With a latent
topic (``WorldConfig.n_topics``) both are mixed over the topic's posterior after the previous
choices, which is again exact (the chain rule of the marginal likelihood).

How far back the plan depends is measured on the sequence of plan units of each document: the
held-out cross-entropy of the next unit given its last ``k`` units (interpolated Witten-Bell
n-grams fitted on other documents, :func:`unit_ngram_entropy`) against the exact
``H(unit | whole past)`` (the plan part above, per unit).
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from common.errors import ReproError
from corpora.synthetic.chooser import Scorer
from corpora.synthetic.config import WorldConfig
from corpora.synthetic.doctypes import (ENTRY_RELATIONS, OPENINGS, RECIPE_VERBS, STEP_OPENERS, STORY_VERBS,
                                        write_document)
from corpora.synthetic.render import MARK
from corpora.synthetic.world import world

LIST_SEPARATORS = (".", f"{MARK} and", ",")
VERBS = frozenset(STORY_VERBS) | frozenset(RECIPE_VERBS)
PLAN_STRINGS = frozenset(OPENINGS) | VERBS | frozenset(STEP_OPENERS) | frozenset(LIST_SEPARATORS)


def unit_of(value) -> tuple | None:
    """The plan unit an option's value stands for, or None for a surface-only option."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):  # a go-on / stop choice (chooser.choose)
        return ("go", "on" if value == 0 else "stop")
    if isinstance(value, str):
        if value in OPENINGS:
            return ("type", value)
        if value in STEP_OPENERS:
            return ("step",)
        if value in LIST_SEPARATORS:
            return ("list", value.replace(MARK, "").strip())
        return ("verb", value) if value in VERBS else None
    if not isinstance(value, tuple) or not value:
        raise ValueError(f"unknown option value {value!r}")
    head = value[0]
    if head == "old":
        return ("ref", value[1])
    if head == "new":
        return ("new", value[1].nouns)
    if head == "opener":
        return ("opener",)
    if head in ("say", "goodbye"):
        return value[:2]
    if head == "ask":
        return ("ask",) + unit_of(value[1])
    if isinstance(head, str) and head in ENTRY_RELATIONS:
        return ("fact", head)
    if isinstance(head, int):  # an entry question: (fact, argument, record)
        return ("question", head, value[1])
    if all(isinstance(v, str) for v in value):  # a duration's words
        return None
    raise ValueError(f"unknown option value {value!r}")


def menu_units(values: Sequence) -> list[tuple | None]:
    """Units of a menu's options.

    A menu with a word that is no plan word (a lexicon word, a syllable) is all surface; beside
    plan options, a None option means 'stop' (the recipe's 'Finally', the entry's last question).
    """
    if any(isinstance(v, str) and v not in PLAN_STRINGS for v in values):
        return [None] * len(values)
    units = [unit_of(v) for v in values]
    if any(u is not None for u in units):
        units = [("end",) if v is None else u for u, v in zip(units, values)]
    return units


class Recorder(Scorer):
    """A scorer that also keeps, per choice, the option's log-probability and its unit's log-probability."""

    def __init__(self, text: str):
        super().__init__(text)
        self.steps: list[tuple[float, float, tuple | None, str]] = []  # (log P(option), log P(unit), unit, kind)

    def _take(self, menu, open_word):
        i = super()._take(menu, open_word)
        units = menu_units(menu.values)
        unit = units[i]
        lp_unit = 0.0 if unit is None else math.log(math.fsum(
            math.exp(lp) for lp, u in zip(menu.logps, units) if u == unit))
        kind = unit[0] if unit is not None else ("name" if open_word else "word")
        self.steps.append((menu.logps[i], lp_unit, unit, kind))
        return i


def _runs(cfg: WorldConfig, seed: int, text: str) -> list[Recorder]:
    """One recorded derivation of the text per topic (a single one without topics)."""
    w, runs = world(cfg, seed), []
    for topic in (range(cfg.n_topics) if cfg.n_topics else [None]):
        rec = Recorder(text)
        write_document(w, rec, topic)
        rec.finish()
        runs.append(rec)
    return runs


def decompose(cfg: WorldConfig, seed: int, text: str) -> dict:
    """Exact plan / surface nats of one document and its sequence of plan units.

    Returns ``{"plan": nats, "surface": nats, "units": [unit, ...], "unit_nats": [nats, ...],
    "topic": nats, "by_kind": {kind: [plan nats, surface nats]}}``; ``plan + surface == -logprob``.
    A choice's kind is its unit's first field (``ref``, ``verb``, ``go``, ...), else ``name`` for a
    name's syllables and ``word`` for the other surface-only choices. ``topic`` is the information the latent topic
    carries about the text, ``log P(text | topic) - log P(text)`` averaged over the topic's posterior
    (0 without topics).
    """
    runs = _runs(cfg, seed, text)
    steps = [r.steps for r in runs]
    if any(len(s) != len(steps[0]) or [x[2] for x in s] != [x[2] for x in steps[0]] for s in steps):
        raise AssertionError("the topics give the text different derivations")
    log_post = np.full(len(runs), -math.log(len(runs)))  # log P(topic | choices so far)
    plan = surface = 0.0
    units, unit_nats, by_kind = [], [], defaultdict(lambda: [0.0, 0.0])
    for t in range(len(steps[0])):
        lp_opt = np.array([s[t][0] for s in steps])
        lp_unit = np.array([s[t][1] for s in steps])
        total = -_logsumexp(log_post + lp_opt)
        p = -_logsumexp(log_post + lp_unit)
        plan, surface = plan + p, surface + total - p
        unit, kind = steps[0][t][2:]
        by_kind[kind][0] += p
        by_kind[kind][1] += total - p
        if unit is not None:
            units.append(unit)
            unit_nats.append(p)
        log_post = log_post + lp_opt
        log_post -= _logsumexp(log_post)
    logprobs = np.array([r.logprob for r in runs])
    marginal = _logsumexp(logprobs) - math.log(len(runs))
    topic = float(np.exp(log_post) @ (logprobs - marginal))
    return {"plan": plan, "surface": surface, "units": units, "unit_nats": unit_nats, "topic": topic,
            "by_kind": dict(by_kind)}


def _logsumexp(x) -> float:
    m = float(np.max(x))
    return m + math.log(float(np.sum(np.exp(np.asarray(x) - m))))


# -- how far back the plan depends
def unit_ngram_entropy(train: Iterable[Sequence], test: Iterable[Sequence], orders: Sequence[int]) -> dict[int, float]:
    """Held-out cross-entropy (nats per unit) of the next unit given its last k units, for each k in ``orders``.

    Interpolated Witten-Bell estimates (Witten & Bell 1991) fitted on ``train``; each sequence is
    padded with a start symbol; the order-0 model backs off to uniform over the units seen plus one.
    """
    train, test = [list(map(_key, s)) for s in train], [list(map(_key, s)) for s in test]
    k_max = max(orders)
    counts = [defaultdict(lambda: defaultdict(int)) for _ in range(k_max + 1)]
    for seq in train:
        padded = ["<s>"] * k_max + seq
        for t in range(k_max, len(padded)):
            for k in range(k_max + 1):
                counts[k][tuple(padded[t - k:t])][padded[t]] += 1
    vocab = len({u for s in train for u in s}) + 1
    totals = [{c: (sum(d.values()), len(d)) for c, d in level.items()} for level in counts]

    def prob(k: int, ctx: tuple, u) -> float:
        lower = 1.0 / vocab if k == 0 else prob(k - 1, ctx[1:], u)
        n, types = totals[k].get(ctx, (0, 0))
        if n == 0:
            return lower
        return (counts[k][ctx].get(u, 0) + types * lower) / (n + types)

    out = {}
    for k in orders:
        nats, n = 0.0, 0
        for seq in test:
            padded = ["<s>"] * k_max + seq
            for t in range(k_max, len(padded)):
                nats -= math.log(prob(k, tuple(padded[t - k:t]), padded[t]))
                n += 1
        out[k] = nats / n
    return out


def _key(unit) -> str:
    return "|".join(map(str, unit))


# -- the figures for a world
def measure(cfg: WorldConfig, seed: int, encode, n_docs: int = 500, n_fit: int = 4000,
            orders: Sequence[int] = (0, 1, 2, 3, 4), window: int = 256) -> dict:
    """Per-token plan / surface / topic nats of the valid split, by kind, and the plan's reach.

    ``encode`` maps a list of texts to lists of token ids (the corpus tokenizer); per-token figures
    divide by tokens plus one end-of-text per document, as the oracle NLL of the token stream does.
    The unit n-grams are fitted on the first ``n_fit`` train documents and scored on the
    ``n_docs`` valid documents.
    """
    from corpora.synthetic.api import generate_split

    valid = list(itertools.islice(generate_split(cfg, "valid", seed), n_docs))
    lengths = [len(ids) + 1 for ids in encode([d["text"] for d in valid])]
    tokens = sum(lengths)
    parts = [decompose(cfg, seed, d["text"]) for d in valid]
    nll = -math.fsum(d["logprob"] for d in valid)
    plan, surface = math.fsum(p["plan"] for p in parts), math.fsum(p["surface"] for p in parts)
    kinds = sorted({k for p in parts for k in p["by_kind"]})
    by_kind = {k: {"plan": math.fsum(p["by_kind"].get(k, (0, 0))[0] for p in parts) / tokens,
                   "surface": math.fsum(p["by_kind"].get(k, (0, 0))[1] for p in parts) / tokens} for k in kinds}
    n_units = sum(len(p["units"]) for p in parts)
    fit = [decompose(cfg, seed, d["text"])["units"]
           for d in itertools.islice(generate_split(cfg, "train", seed), n_fit)]
    ngram = unit_ngram_entropy(fit, [p["units"] for p in parts], orders)
    return {
        "world": {k: v for k, v in vars(cfg).items()}, "seed": seed, "split": "valid", "documents": n_docs,
        "tokens": tokens, "tokens_per_document": tokens / n_docs,
        "documents_longer_than_window": sum(n > window for n in lengths) / n_docs, "window": window,
        "nats_per_token": {"total": nll / tokens, "plan": plan / tokens, "surface": surface / tokens,
                           "topic_information": math.fsum(p["topic"] for p in parts) / tokens},
        "by_kind": by_kind,
        "units": {"per_token": n_units / tokens, "per_document": n_units / n_docs,
                  "exact_nats_per_unit": plan / n_units,
                  "ngram_nats_per_unit": {str(k): v for k, v in ngram.items()},
                  "ngram_fit_documents": n_fit},
    }


def arguments(ap) -> None:
    """``python -m workflows.cli levels --tokenizer tokenizer.json --out levels.json [--settings
    settings.json | --world JSON --seed N]``: the data stage's settings give the world and its seed."""
    ap.add_argument("--settings", help="the data stage's settings.json (its corpus.synthetic and corpus.seed)")
    ap.add_argument("--world", default="{}", help="WorldConfig fields as JSON ({} = the embedded defaults)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", required=True, help="the corpus's tokenizer.json (the tokenizer rule's output)")
    ap.add_argument("--docs", type=int, default=500)
    ap.add_argument("--fit", type=int, default=4000)
    ap.add_argument("--out", required=True)


def run(args) -> None:
    """The world's entropy by level, measured and written to ``args.out`` with its provenance."""
    import json
    import platform

    from tokenizers import Tokenizer

    from common.io import atomic_write_json, sha256_file
    from common.provenance import git_state, host_fingerprint

    try:
        world, seed = json.loads(args.world), args.seed
        if args.settings:
            corpus = json.loads(Path(args.settings).read_text())["corpus"]
            world, seed = corpus.get("synthetic") or {}, int(corpus.get("seed", 0))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ReproError(f"levels: the world's settings are unreadable ({error}); give the data stage's "
                         "settings.json or --world as JSON (re-run snakemake to rewrite settings.json)") from None
    if not Path(args.tokenizer).is_file():
        raise ReproError(f"levels: --tokenizer {args.tokenizer}: no such file; give the corpus's tokenizer.json "
                         "(the tokenizer rule's output)")
    tok = Tokenizer.from_file(args.tokenizer)
    result = measure(WorldConfig(**world), seed, lambda texts: [e.ids for e in tok.encode_batch(texts)],
                     args.docs, args.fit)
    commit, dirty = git_state()
    result["provenance"] = {"git_commit": commit, "git_dirty": dirty, "world": world, "seed": seed,
                            "tokenizer_sha256": sha256_file(args.tokenizer), "host": platform.node(),
                            "host_fingerprint": host_fingerprint()}
    atomic_write_json(Path(args.out), result)
    print(json.dumps(result["nats_per_token"]), json.dumps(result["units"]))
