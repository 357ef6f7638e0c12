"""Where a DLCM run puts its concept boundaries: the realised compression, per document type, against the
synthetic world's true concepts (DLCM Tables 4 and 5 analogues, Sec. 8.1's ratio drift; arXiv 2512.24617).

The test stream is read in the disjoint full ``seq_len`` windows the perplexity evaluation scores (the
first ``max_windows``); the model runs in eval mode, so b_t = [p_t >= tau] (``models.dlcm``). Position 0
of a window always opens a segment (p_1 = 1), an artefact of the cut: it counts for the realised ratio
(as the model's own ``ratio`` metric) but is not scored against the truth, and neither is an end-of-text
token (no document owns it).

**Truth.** The synthetic world writes every document's concept spans (``corpora.synthetic``: one per
phrase, tiling the text, the whitespace before a phrase belonging to it). The test documents are
re-tokenised with character offsets, checked token for token against the stream (a changed corpus or
tokenizer is refused), and token t *opens* a true concept when its first non-space character is the
first non-space character of a span (so both offset conventions of byte-level BPE agree). A span whose
start falls inside a token cannot be hit; their number is recorded (``details.anchors_inside_token``).

Metrics (``test/`` over every scored position, ``<type>/`` over the tokens of one document type):

* ``tokens_per_concept``: tokens / predicted boundaries (Table 5's realised ratio; for ``test/`` the
  window starts count, as in training); ``true_tokens_per_concept``: the world's own ratio;
* ``test/tokens_per_concept_train_rule``: the same windows' ratio under training's decision rule applied
  to the same p (a seeded draw from the sharpened Bernoulli when ``boundary_temperature`` > 0 with the
  learned router; else the threshold, equal to ``test/tokens_per_concept``): the compression loss pulls
  training's rule to R, and the gap between the two is what inference's threshold changes;
* ``precision_tol{k}``, ``recall_tol{k}``, ``f1_tol{k}`` for k = 0 and 1: predicted against true
  boundaries, matched one to one within k tokens (greedy in order, per window);
* two reference levels of ``test/f1_tol{k}``, chance and a rule with no parameters:
  ``test/f1_tol{k}_shifted``, the same predictions moved by a fixed offset within each window (rolled by
  half a window, seq_len // 2, over its scored positions: the same count per window, so the F1 of
  boundaries placed at the model's rate but unrelated to the text), and ``test/f1_tol{k}_wordstart``, a
  boundary at every token that starts a word (it holds a non-space character and its text begins with
  whitespace, follows a token ending in whitespace, or opens a document: ``word_starts``) and at each
  window's position 0 (not scored, as the model's);
* ``params/non_embedding`` (N of the scaling law, Eq. 22: without embeddings and LM head) and
  ``params/concept_share`` (P: the concept blocks' and concept norm's share of N), ``model/target_ratio`` (R);
* ``train/ratio_<i>``, ``train/tokens_<i>`` (i = 1..n): the compression realised by training's sampled
  boundaries at each logged step of ``train/metrics.jsonl`` (the drift of Sec. 8.1, Fig. 8);
* ``over/tokens_<i>``, ``over/tokens_per_concept_<i>``, ``over/f1_tol0_<i>``, ``over/f1_tol1_<i>`` (i =
  1..n): the same test windows scored with the weights of each snapshot the run's manifest lists
  (``train.snapshot_interval``, sha256-checked) and, last, the final weights: boundaries over training.

Corpora without concept spans (real text) get the ratios and no precision / recall / F1.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from common.errors import ReproError
from common.io import atomic_write_json
from evals.perplexity import load_trained
from evals.result import result_record
from models.dlcm import DLCM
from trainer.checkpoint import load_snapshot
from trainer.data import check_data, gather_windows, open_split, read_manifest
from trainer.metrics import read_rows

TOLERANCES = (0, 1)


class BoundaryEvalError(ReproError, ValueError):
    """Not a DLCM run, or a test stream that the corpus and tokenizer do not reproduce."""


@dataclass
class Truth:
    """Per position of the stream's first ``n`` tokens: a true concept opens here, the position is scored
    (inside a document), the document's type index (-1: none)."""
    opens: np.ndarray
    scored: np.ndarray
    doc_type: np.ndarray
    types: list[str]
    has_concepts: bool
    anchors_inside_token: int
    word_starts: np.ndarray | None = None  # the token starts a word: its text begins with whitespace, or a document


def _first_non_space(text: str, start: int, end: int) -> int | None:
    for i in range(start, end):
        if not text[i].isspace():
            return i
    return None


def true_boundaries(corpus_dir: Path, tokenizer_path: Path, tokens: np.ndarray, n: int) -> Truth:
    """The truth of the module docstring for the first ``n`` tokens of the test stream ``tokens`` (an
    end-of-text token, then each document's tokens and an end-of-text token)."""
    from corpora.tokenization import backend_tokenizer

    tok = backend_tokenizer(tokenizer_path)
    opens, scored = np.zeros(n, bool), np.zeros(n, bool)
    doc_type, types = np.full(n, -1, np.int16), []
    has_concepts, inside, pos = True, 0, 1
    with open(Path(corpus_dir) / "test.jsonl") as f:
        for line in f:
            if pos >= n:
                break
            doc = json.loads(line)
            enc = tok.encode(doc["text"], add_special_tokens=False)
            stream = tokens[pos:pos + len(enc.ids)]
            if list(map(int, stream)) != enc.ids[:len(stream)]:
                raise BoundaryEvalError(f"{corpus_dir}/test.jsonl document {doc.get('id')!r} does not re-tokenise to "
                                        "the test stream at its position: the corpus or tokenizer changed since "
                                        "'tokenize'; re-run snakemake")
            k = min(len(enc.ids), n - pos)
            if doc.get("type") not in types:
                types.append(doc.get("type"))
            doc_type[pos:pos + k], scored[pos:pos + k] = types.index(doc.get("type")), True
            if "concepts" not in doc:
                has_concepts = False
            else:
                text = doc["text"]
                anchors = {_first_non_space(text, a, b) for a, b in doc["concepts"]} - {None}
                starts = [_first_non_space(text, a, b) for a, b in enc.offsets]
                opens[pos:pos + k] = [s in anchors for s in starts[:k]]
                inside += len(anchors - set(starts))
            pos += len(enc.ids) + 1  # the end-of-text token after the document
    return Truth(opens, scored, doc_type, [str(t) for t in types], has_concepts, inside,
                 word_starts(tok, tokens[:n], scored) if has_concepts else None)


def word_starts(tok, tokens: np.ndarray, scored: np.ndarray) -> np.ndarray:
    """Per position: the token starts a word, i.e. holds a non-space character and its text begins with
    whitespace, the previous token's text ends with whitespace (a space the tokenizer kept apart), or it is
    a document's first token (a scored position after an unscored one, the end-of-text token). Its first
    non-space character is then a word's first, the convention of the truth."""
    ids = np.asarray(tokens, dtype=np.int64)
    vocab = np.unique(ids)
    texts = [tok.decode([int(i)], skip_special_tokens=False) for i in vocab]
    lead, word, trail = (np.array(flags)[np.searchsorted(vocab, ids)] for flags in zip(
        *((t[:1].isspace(), bool(t.strip()), t[-1:].isspace()) for t in texts)))
    before = np.concatenate([[False], trail[:-1]])
    opens_doc = scored & ~np.concatenate([[False], scored[:-1]])
    return word & (lead | before | opens_doc)


def match(pred: np.ndarray, true: np.ndarray, tol: int) -> int:
    """Predicted positions matched one to one to true positions at most ``tol`` apart (both sorted)."""
    i = j = hits = 0
    while i < len(pred) and j < len(true):
        if abs(int(pred[i]) - int(true[j])) <= tol:
            hits, i, j = hits + 1, i + 1, j + 1
        elif pred[i] < true[j]:
            i += 1
        else:
            j += 1
    return hits


def prf(hits: int, n_pred: int, n_true: int) -> dict[str, float | None]:
    precision = hits / n_pred if n_pred else None
    recall = hits / n_true if n_true else None
    f1 = 2 * hits / (n_pred + n_true) if n_pred + n_true else None
    return {"precision": precision, "recall": recall, "f1": f1}


@torch.no_grad()
def predicted_boundaries(model: DLCM, windows: torch.Tensor, batch_size: int) -> np.ndarray:
    """b (N, T) bool of every window in eval mode (b_0 = 1)."""
    return both_rules(model, windows, batch_size)[0]


@torch.no_grad()
def both_rules(model: DLCM, windows: torch.Tensor, batch_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """b (N, T) of every window under inference's rule (eval mode: [p >= tau]) and under training's rule
    applied to the same p: a draw from the sharpened Bernoulli (seeded ``seed``) when training samples,
    else the same threshold (then the two are equal)."""
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    infer, train = [], []
    for i in range(0, len(windows), batch_size):
        out = model.run(windows[i:i + batch_size].to(device))
        infer.append(out["b"].cpu().numpy())
        train.append(model.decide(out["p"], sample=model.samples(), generator=generator)[0].cpu().numpy())
    return np.concatenate(infer), np.concatenate(train)


def shifted(pred: np.ndarray, mask: np.ndarray, offset: int) -> np.ndarray:
    """``pred`` (N, T) moved within each window: its values at the window's scored positions (``mask``) rolled
    by ``offset`` of those positions (modulo their number), so each window keeps its count of predictions."""
    out = np.zeros_like(pred)
    for row, (p, m) in enumerate(zip(pred, mask)):
        where = np.flatnonzero(m)
        if len(where):
            out[row, where] = np.roll(p[where], offset % len(where))
    return out


def f1_scores(pred: np.ndarray, true: np.ndarray, suffix: str) -> dict[str, float | None]:
    """``test/f1_tol{k}<suffix>`` of predicted against true boundaries (both (N, T), scored positions only)."""
    out = {}
    for tol in TOLERANCES:
        hits = sum(match(np.flatnonzero(p), np.flatnonzero(t), tol) for p, t in zip(pred, true))
        out[f"test/f1_tol{tol}{suffix}"] = prf(hits, int(pred.sum()), int(true.sum()))["f1"]
    return out


def reference_scores(b: np.ndarray, truth: Truth, scored: np.ndarray, opens: np.ndarray) -> dict[str, float | None]:
    """The two reference levels of the module docstring: shifted predictions and word starts."""
    true = opens & scored
    out = f1_scores(shifted(b & scored, scored, b.shape[1] // 2), true, "_shifted")
    if truth.word_starts is not None:
        rule = truth.word_starts[:b.size].reshape(b.shape)  # position 0, a boundary too, is not scored
        out.update(f1_scores(rule & scored, true, "_wordstart"))
    return out


def boundary_scores(b: np.ndarray, truth: Truth, seq_len: int) -> dict[str, float | None]:
    """Ratios and precision / recall / F1 (module docstring) of boundaries ``b`` (N, T) of the first N
    windows of the stream."""
    n = b.size
    scored = truth.scored[:n].reshape(b.shape).copy()
    scored[:, 0] = False                                   # the window's forced first boundary
    opens = truth.opens[:n].reshape(b.shape)
    metrics: dict[str, float | None] = {"test/tokens_per_concept": n / max(int(b.sum()), 1)}
    groups = {"test": scored, **{name: scored & (truth.doc_type[:n].reshape(b.shape) == i)
                                 for i, name in enumerate(truth.types)}}
    for name, mask in groups.items():
        pred, true = b & mask, opens & mask
        if name != "test":
            metrics[f"{name}/tokens_per_concept"] = int(mask.sum()) / int(pred.sum()) if pred.sum() else None
        if not truth.has_concepts:
            continue
        metrics[f"{name}/true_tokens_per_concept"] = int(mask.sum()) / int(true.sum()) if true.sum() else None
        for tol in TOLERANCES:
            hits = sum(match(np.flatnonzero(p), np.flatnonzero(t), tol) for p, t in zip(pred, true))
            for key, value in prf(hits, int(pred.sum()), int(true.sum())).items():
                metrics[f"{name}/{key}_tol{tol}"] = value
    if truth.has_concepts:
        metrics.update(reference_scores(b, truth, scored, opens))
    return metrics


def training_ratio(run_dir: Path) -> dict[str, float]:
    """``train/ratio_<i>`` and ``train/tokens_<i>`` of the logged training rows that carry ``metric/ratio``."""
    rows = [r for r in read_rows(Path(run_dir) / "train" / "metrics.jsonl") if "metric/ratio" in r]
    out = {}
    for i, row in enumerate(rows, 1):
        out[f"train/ratio_{i}"], out[f"train/tokens_{i}"] = float(row["metric/ratio"]), float(row["tokens"])
    return out


def parameter_share(model: DLCM) -> dict[str, float]:
    """N and P of the scaling law (Eq. 22): the non-embedding parameters without the LM head (a vocabulary
    matrix like the embedding: at full scale it alone would be a quarter of N), and the concept blocks'
    and concept norm's share of them, the quantity ``model.concept_share`` sets from the weight matrices
    (``models.configs.matrix_params``; biases and norms aside, the two agree)."""
    concept = sum(p.numel() for name, p in model.named_parameters()
                  if name.startswith(("concept_blocks.", "concept_norm.")))
    head = model.lm_head.weight.numel() if model.lm_head.weight is not model.wte.weight else 0
    total = model.num_params() - head
    return {"params/non_embedding": total, "params/concept_share": concept / total}


def decision_rules(model: DLCM) -> str:
    """The two rules in words, with the tau in force (the calibrated one when ``boundary_calibration``)."""
    cfg, tau = model.cfg, float(model.threshold())
    train = (f"b ~ Bernoulli(sigmoid((logit p - logit tau) / {cfg.boundary_temperature:g}))" if model.samples()
             else "the same threshold")
    return (f"inference (test/tokens_per_concept): b = [p >= {tau:.4g}] ({cfg.boundary_predictor} predictor, "
            f"tau {cfg.boundary_calibration}); training's rule (test/tokens_per_concept_train_rule): {train}")


OVER = ("tokens_per_concept", "f1_tol0", "f1_tol1")


def over_training(model: DLCM, manifest: dict, run_dir: Path, windows: torch.Tensor, truth: Truth,
                  final: dict, batch_size: int) -> dict[str, float | None]:
    """``over/<metric>_<i>`` and ``over/tokens_<i>`` for each snapshot of ``manifest`` (loaded into
    ``model``, which is left with the last one's weights) and then the final weights (``final``)."""
    out, seq_len = {}, model.cfg.seq_len
    snapshots = manifest.get("snapshots") or []
    for i, entry in enumerate(snapshots, 1):
        load_snapshot(model, run_dir / "train" / "snapshots", entry)
        scores = boundary_scores(predicted_boundaries(model, windows, batch_size), truth, seq_len)
        out[f"over/tokens_{i}"] = float(entry["tokens"])
        out.update({f"over/{k}_{i}": scores.get(f"test/{k}") for k in OVER})
    i = len(snapshots) + 1
    out[f"over/tokens_{i}"] = float(manifest["tokens"])
    out.update({f"over/{k}_{i}": final.get(f"test/{k}") for k in OVER})
    return out


def evaluate_boundaries(final_dir: Path, tokens_dir: Path, out_path: Path, tokenizer_path: Path,
                        batch_size: int = 16, max_windows: int = 64) -> dict:
    """Boundaries of the first ``max_windows`` full test windows against the truth (module docstring);
    writes and returns the result."""
    t0 = time.perf_counter()
    model, manifest = load_trained(final_dir)
    check_data(manifest.get("data"), tokens_dir, final_dir)
    if not isinstance(model, DLCM):
        raise BoundaryEvalError(f"{final_dir}: model.arch={manifest['config']['model']['arch']!r} has no concept "
                                "boundaries; the boundaries evaluation applies to dlcm_* runs only")
    if read_manifest(tokens_dir).get("layout"):
        raise BoundaryEvalError(f"{tokens_dir}: paired examples; the boundaries evaluation reads a document stream")
    seq_len = model.cfg.seq_len
    tokens = open_split(tokens_dir, "test")
    n_windows = min(max_windows, (len(tokens) - 1) // seq_len)
    if n_windows < 1:
        raise BoundaryEvalError(f"{tokens_dir}: the test split has {len(tokens)} tokens, not one window of "
                                f"{seq_len} (+1)")
    windows = gather_windows(tokens, np.arange(n_windows) * seq_len, seq_len)[0]
    truth = true_boundaries(Path(tokens_dir).parent / "corpus", tokenizer_path, tokens, n_windows * seq_len)
    b, b_train = both_rules(model, windows, batch_size)
    metrics = {**boundary_scores(b, truth, seq_len), **parameter_share(model),
               "test/tokens_per_concept_train_rule": b_train.size / max(int(b_train.sum()), 1),
               "model/target_ratio": model.cfg.target_ratio, "model/seq_len": seq_len,
               **training_ratio(Path(final_dir).parent)}
    metrics.update(over_training(model, manifest, Path(final_dir).parent, windows, truth, metrics, batch_size))
    details = {"windows": n_windows, "tokens": int(b.size), "types": truth.types,
               "true_concepts": truth.has_concepts, "anchors_inside_token": truth.anchors_inside_token,
               "decisions": decision_rules(model),
               "tolerances": list(TOLERANCES), "matching": "one to one, greedy in order, per window",
               "training_ratio": "metric/ratio of train/metrics.jsonl: training's sampled boundaries"}
    result = result_record(manifest, out_path, metrics, details, t0)
    atomic_write_json(out_path, result)
    return result
