"""Quality metrics of conditional generation, computed with the field's libraries, and MBR selection.

* BLEU: ``sacrebleu`` corpus BLEU with its defaults -- 13a tokenisation, case-sensitive, exponential
  smoothing, one reference per example -- as E2D2's ``evaluate.load("sacrebleu")`` (the WMT14 baseline
  of NCM Table 2; docs/sources.md, "Evaluation notes" B); the signature string goes into the result.
* ROUGE-1 / 2 / L: ``rouge-score`` F1 per example, averaged over examples, **without stemming**
  (``use_stemmer=False``: the default of ``evaluate.load("rouge")`` E2D2 uses; NCM's own choice is
  UNKNOWN). HF ``evaluate`` reports the bootstrap median of the same per-example scores; the plain mean
  is deterministic and within the bootstrap's spread.
* Sudoku whole-board accuracy: ``corpora.sudoku.board_correct`` (every cell equal to the unique
  solution, hence a valid board that keeps the givens).
* MBR (minimum Bayes risk, NCM Table 2): among n candidates for one source, the one with the highest
  mean utility against the other n - 1 (ties: the first); utilities ``bleu`` (sacrebleu sentence BLEU),
  ``rougeL`` (ROUGE-L F1) and ``chars`` (the fraction of equal characters, for Sudoku boards). NCM does
  not say which similarity it uses (UNKNOWN: docs/sources.md, "NCM: what the paper leaves open").
"""
from __future__ import annotations

from functools import lru_cache

from common.errors import ReproError

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")
UTILITIES = ("bleu", "rougeL", "chars")


class MetricError(ReproError, ValueError):
    """References or predictions that cannot be scored."""


def _check(predictions: list[str], references: list[str]) -> None:
    if len(predictions) != len(references):
        raise MetricError(f"{len(predictions)} predictions for {len(references)} references; give one per example")
    for i, ref in enumerate(references):
        if not isinstance(ref, str) or not ref.strip():
            raise MetricError(f"reference {i} is empty; every example needs a reference (fix the test split)")


def bleu(predictions: list[str], references: list[str]) -> dict:
    """``{"bleu": corpus BLEU (0-100), "signature": sacrebleu's signature string}``."""
    from sacrebleu.metrics import BLEU

    _check(predictions, references)
    metric = BLEU()
    score = metric.corpus_score(predictions, [references])
    return {"bleu": score.score, "signature": str(metric.get_signature())}


@lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=False)


def rouge(predictions: list[str], references: list[str]) -> dict:
    """``{"rouge1", "rouge2", "rougeL"}``: mean F1 over examples (fractions, not x 100)."""
    _check(predictions, references)
    totals = dict.fromkeys(ROUGE_KEYS, 0.0)
    for pred, ref in zip(predictions, references):
        scores = _rouge_scorer().score(ref, pred)
        for key in ROUGE_KEYS:
            totals[key] += scores[key].fmeasure
    return {key: value / len(references) for key, value in totals.items()}


def utility(kind: str, a: str, b: str) -> float:
    """Similarity of candidate ``a`` to candidate ``b`` (used as the pseudo-reference)."""
    if kind == "bleu":
        from sacrebleu import sentence_bleu

        return sentence_bleu(a, [b]).score
    if kind == "rougeL":
        return _rouge_scorer().score(b, a)["rougeL"].fmeasure
    if kind == "chars":
        return sum(x == y for x, y in zip(a, b)) / max(len(a), len(b), 1)
    raise MetricError(f"MBR utility {kind!r}: use one of {list(UTILITIES)}")


def mbr_select(candidates: list[str], kind: str) -> int:
    """Index of the candidate with the highest mean utility against the others (the first on ties)."""
    if len(candidates) < 2:
        return 0
    means = [sum(utility(kind, c, o) for j, o in enumerate(candidates) if j != i) / (len(candidates) - 1)
             for i, c in enumerate(candidates)]
    return max(range(len(candidates)), key=lambda i: (means[i], -i))
