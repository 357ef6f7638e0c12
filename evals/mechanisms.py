"""Mechanism checks of a concept model: is its concept path exercised at all, measured with a few forward
passes on the test split. Each check changes one thing the decoder reads and reports the change in next-token
NLL (nats per token, the mean over every target of the measured windows) against the model left intact.

**Windows.** The disjoint full ``seq_len`` windows the perplexity evaluation scores (``evals.perplexity``),
at most ``max_windows`` (64) of them, evenly spaced over the test split (window i * n_full // n, a
deterministic choice): spread out, so that the window whose concepts a window borrows (``swap``) is
unrelated text, not the continuation of the same document. Eval mode throughout (no dropout, DLCM's
boundaries b = [p >= tau]); every metric is over all of the windows' targets.

``mech/intact_nll``: the NLL with the model untouched, the number whose seed spread the checks are judged
against. Every other ``mech/<check>`` below is NLL(intervened) - intact, unless it says otherwise.

**ConceptLM and ContextLM** (arXiv 2602.08984 Sec. 2.3; ContextLM arXiv 2510.20280 as configured in
``models.contextlm``): the decoder adds the token-aligned prediction c_hat of each chunk (``ConceptLM.fuse``
after the k - 1 shift). The intervention replaces c_hat before the shift; the positions t < k - 1, which no
concept reaches, keep their zeros.

* ``zero`` (reliance): every c_hat set to zero, what the decoder sees before the first chunk completes;
  a large increase means the decoder depends on the concept input at all (content, scale or offset);
* ``mean`` (offset): every c_hat set to the mean c_hat over all measured chunks; it keeps the constant part
  and removes what varies, so a ``zero`` effect that ``mean`` does not share is the offset's alone;
* ``swap`` (content, gate): each window's c_hat replaced by the next measured window's (a roll by one of
  the windows: a derangement); the concepts keep their scale and statistics but describe other text, so
  a large increase means the decoder reads what the concepts say about *this* context;
* ``ncp_r2`` (next-concept prediction, gate, only when ``model.ncp`` is on; Sec. 3): 1 - MSE / variance of
  the prediction c_hat_j against the next chunk state c_{j+1}, the pairs of ``ConceptLM.ncp_loss`` (its own
  function computes both terms, so its reduction cancels), the variance about the mean next chunk state;
  above 0 the concept transformer predicts the next chunk better than its mean does.

**DLCM** (arXiv 2512.24617, the decoder's cross-attention Eq. 16-17, boundaries Sec. 3.3): every cross block
reads the concept rows [null, z~_0, ...], the segment ids that pick the rows a token sees, and a factor on
its attention output (``DLCM.intervention``).

* ``null_only`` (reliance, gate): every segment id set to 0, so each token sees the learned null concept
  alone (what the first segment sees); a large increase means the concepts carry what the decoder uses;
* ``zero``: the cross-attention output multiplied by 0 (the cross block's MLP still runs): the decoder with
  no concept path at all, null included;
* ``swap`` (content, gate): each window reads the next measured window's concept rows with its *own*
  segmentation, so the number of concepts each token sees and their replication weights stay those of the
  intact run and only the content changes. The other window's rows are read as far as this window's
  segmentation reaches (cut to its concept count); where the other window has fewer concepts, the rows past
  its last one repeat its last concept. Causal: token t reads rows <= its own segment id, a function of
  b_{<=t}, and they hold another window's concepts only.
* ``tokens_per_concept_inference``: tokens / concepts of the measured windows in eval mode (window starts
  open a segment, as in training's ratio), beside ``target_ratio`` R.

**NCM** (``ncm_tokenizer``, ``ncm``): ``evals.mechanisms_ncm.check_ncm`` (imported on use).

``details.checks`` lists one dict per check: ``name``, ``key`` (its metric), ``kind``, ``gate``, ``what`` and,
for kind ``floor``, ``floor``. A ``spread`` check passes when the mean effect over seeds exceeds 3 x the seed
standard deviation of ``mech/intact_nll`` and the profile's noise floor; a ``floor`` check when the value exceeds
``floor``. The tables judge them (``tables/mechanisms.py``); ``gate: true`` marks the checks that decide whether the
concept mechanism is exercised.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from common.errors import ReproError
from common.io import atomic_write_json
from evals.perplexity import load_trained
from evals.registry import NCM_ARCHS, mechanisms_apply  # NCM's checks: evals.mechanisms_ncm
from evals.result import result_record
from models.conceptlm import ConceptLM
from models.dlcm import DLCM
from trainer.data import check_data, open_split, read_manifest

MAX_WINDOWS = 64                                       # test windows measured


class MechanismsEvalError(ReproError, ValueError):
    """The run has no concept path, or its test split too few windows to swap."""


def spread_check(name: str, gate: bool, what: str) -> dict:
    """One ``details.checks`` entry judged against the seed spread of ``mech/intact_nll``."""
    return {"name": name, "key": f"mech/{name}", "kind": "spread", "gate": gate, "what": what}


def select_windows(tokens: np.ndarray, seq_len: int, max_windows: int, where: str = "the test split"
                   ) -> tuple[torch.Tensor, int]:
    """(n, seq_len + 1) int64 inputs and targets of n = min(max_windows, full windows) disjoint full windows,
    window i * n_full // n of the stream (module docstring), and n_full."""
    n_full = (len(tokens) - 1) // seq_len
    n = min(max_windows, n_full)
    if n < 2:
        raise MechanismsEvalError(f"{where}: {len(tokens)} tokens, {n_full} full window(s) of {seq_len} (+1); the "
                                  "swap check needs at least 2 (max_windows >= 2 and a longer test split)")
    starts = np.arange(n) * n_full // n * seq_len
    return torch.from_numpy(np.stack([np.asarray(tokens[s:s + seq_len + 1], dtype=np.int64) for s in starts])), n_full


@contextlib.contextmanager
def intervening(model: torch.nn.Module, hook: Callable | None):
    """``model.intervention = hook`` inside the block (nothing when None); the class default (None) after it."""
    if hook is None:
        yield
        return
    model.intervention = hook
    try:
        yield
    finally:
        del model.intervention


@torch.no_grad()
def mean_nll(model: torch.nn.Module, windows: torch.Tensor, batch_size: int,
             intervention: Callable[[slice], Callable] | None = None) -> float:
    """Mean next-token NLL (nats) over every target of ``windows`` (n, T + 1); ``intervention(rows)`` gives the
    model's hook for the windows ``rows`` of each batch (None: the model intact)."""
    device = next(model.parameters()).device
    total = 0.0
    for i in range(0, len(windows), batch_size):
        rows = slice(i, min(i + batch_size, len(windows)))
        block = windows[rows].to(device)
        with intervening(model, intervention(rows) if intervention is not None else None):
            logits = model(block[:, :-1])["logits"]
        total += F.cross_entropy(logits.flatten(0, 1).float(), block[:, 1:].flatten(),
                                 reduction="none").double().sum().item()
    return total / windows[:, 1:].numel()


# --- ConceptLM and ContextLM (arXiv 2602.08984 Sec. 2.3, 3) ----------------------------------------------
CONCEPT_WHAT = {
    "zero": "every predicted concept c_hat fused by the decoder set to zero (as before the first chunk "
            "completes); a large increase: the decoder relies on the concept input",
    "mean": "every c_hat set to the mean c_hat over the measured chunks; a large increase: the decoder uses "
            "what varies between concepts, beyond a constant offset",
    "swap": "each window's c_hat replaced by the next measured window's (roll by one); a large increase: the "
            "decoder reads the concepts' content about this context",
    "ncp_r2": "1 - MSE / variance of the NCP prediction c_hat_j against the next chunk state c_{j+1} (the pairs "
              "of the NCP loss); above 0: the concept transformer predicts the next chunk better than its mean",
}


def ncp_r2(model: ConceptLM, c: torch.Tensor, c_hat: torch.Tensor) -> float:
    """1 - MSE / variance (Sec. 3): ``model.ncp_loss`` of the predictions, over its value for a constant
    prediction, the mean next chunk state (both over all windows at once, in float64)."""
    c, c_hat = c.double(), c_hat.double()
    mean = c[:, 1:].mean((0, 1)).expand_as(c_hat)
    return 1.0 - (model.ncp_loss(c, c_hat) / model.ncp_loss(c, mean)).item()


def concept_checks(model: ConceptLM, windows: torch.Tensor, batch_size: int) -> tuple[dict, dict]:
    """(metrics, details) of ConceptLM / ContextLM (module docstring)."""
    recorded = []

    def record(c, c_hat):
        recorded.append((c.cpu(), c_hat.cpu()))
        return c_hat

    intact = mean_nll(model, windows, batch_size, lambda rows: record)
    c, c_hat = (torch.cat(part) for part in zip(*recorded))
    mean, other = c_hat.mean((0, 1)), c_hat.roll(-1, 0)    # other[i] = window i + 1's, the last gets the first's
    replace = {"zero": lambda rows: lambda c_, h: torch.zeros_like(h),
               "mean": lambda rows: lambda c_, h: mean.to(h).expand_as(h),
               "swap": lambda rows: lambda c_, h: other[rows].to(h)}
    metrics = {"mech/intact_nll": intact}
    metrics.update({f"mech/{name}": mean_nll(model, windows, batch_size, fn) - intact for name, fn in replace.items()})
    checks = [spread_check("swap", True, CONCEPT_WHAT["swap"])]
    if model.cfg.ncp:
        metrics["mech/ncp_r2"] = ncp_r2(model, c, c_hat)
        checks.append({"name": "ncp_r2", "key": "mech/ncp_r2", "kind": "floor", "floor": 0.0, "gate": True,
                       "what": CONCEPT_WHAT["ncp_r2"]})
    checks += [spread_check("zero", False, CONCEPT_WHAT["zero"]), spread_check("mean", False, CONCEPT_WHAT["mean"])]
    details = {"family": "conceptlm" if model.quantizer is not None else "contextlm", "checks": checks,
               "interventions": {name: CONCEPT_WHAT[name] for name in replace},
               "chunks": int(c.shape[0] * c.shape[1]), "chunk_size": model.cfg.chunk_size}
    return metrics, details


# --- DLCM (arXiv 2512.24617 Eq. 16-17, Sec. 3.3) ---------------------------------------------------------
DLCM_WHAT = {
    "null_only": "every token's cross-attention sees the null concept alone (segment ids set to 0); a large "
                 "increase: the decoder relies on the concepts",
    "zero": "the cross-attention output multiplied by 0 (its MLP still runs): no concept path, null included",
    "swap": "each window reads the next measured window's concepts with its own segmentation (the other "
            "sequence cut to this window's concept count, its last concept repeated where it has fewer); a large "
            "increase: the decoder reads the concepts' content",
}


def swapped_rows(concepts: list[torch.Tensor], rows: slice, length: int) -> torch.Tensor:
    """(len(rows), length, d) concept rows for the windows ``rows``: window i gets window i + 1's rows [null,
    its concepts] (the last gets the first's), cut to ``length`` or continued with its last concept."""
    n = len(concepts)
    out = []
    for i in range(*rows.indices(n)):
        other = concepts[(i + 1) % n]
        out.append(other[torch.arange(length).clamp_max(len(other) - 1)])
    return torch.stack(out)


def dlcm_checks(model: DLCM, windows: torch.Tensor, batch_size: int) -> tuple[dict, dict]:
    """(metrics, details) of DLCM (module docstring)."""
    concepts, counts = [], []

    def record(z, seg, gate):
        n_concepts = seg[:, -1] + 1
        counts.extend(n_concepts.tolist())
        concepts.extend(row[:k + 1].cpu() for row, k in zip(z, n_concepts.tolist()))  # null + its concepts
        return z, seg, gate

    intact = mean_nll(model, windows, batch_size, lambda rows: record)
    replace = {"null_only": lambda rows: lambda z, seg, gate: (z, torch.zeros_like(seg), gate),
               "zero": lambda rows: lambda z, seg, gate: (z, seg, 0.0),
               "swap": lambda rows: lambda z, seg, gate: (swapped_rows(concepts, rows, z.shape[1]).to(z), seg, gate)}
    metrics = {"mech/intact_nll": intact}
    metrics.update({f"mech/{name}": mean_nll(model, windows, batch_size, fn) - intact for name, fn in replace.items()})
    metrics["mech/tokens_per_concept_inference"] = windows[:, :-1].numel() / sum(counts)
    metrics["mech/target_ratio"] = float(model.cfg.target_ratio)
    checks = [spread_check("swap", True, DLCM_WHAT["swap"]), spread_check("null_only", True, DLCM_WHAT["null_only"]),
              spread_check("zero", False, DLCM_WHAT["zero"])]
    details = {"family": "dlcm", "checks": checks, "interventions": dict(DLCM_WHAT), "concepts": sum(counts),
               "decisions": f"eval mode: b = [p >= {float(model.threshold()):.4g}] ({model.cfg.boundary_predictor} "
                            f"predictor, tau {model.cfg.boundary_calibration})"}
    return metrics, details


def ncm_checks(model: torch.nn.Module, manifest: dict, final_dir: Path, tokens_dir: Path) -> tuple[dict, dict]:
    """NCM's checks (``evals.mechanisms_ncm``), imported here so that the concept models never load them."""
    from evals.mechanisms_ncm import check_ncm

    return check_ncm(model, manifest, Path(final_dir), Path(tokens_dir))


def evaluate_mechanisms(final_dir: Path, tokens_dir: Path, out_path: Path, batch_size: int = 16,
                        max_windows: int = MAX_WINDOWS) -> dict:
    """The mechanism checks (module docstring) of the run in ``final_dir``; writes and returns the result."""
    t0 = time.perf_counter()
    model, manifest = load_trained(final_dir)
    run_cfg = manifest["config"]
    arch = run_cfg["model"]["arch"]
    if not mechanisms_apply(arch):
        raise MechanismsEvalError(f"{final_dir}: run {run_cfg['id']} seed {run_cfg['seed']} has model.arch={arch!r}, "
                                  "no concept path; the mechanisms evaluation applies to concept models "
                                  "(conceptlm_*, contextlm_*, dlcm_*, ncm_tokenizer, ncm)")
    if arch in NCM_ARCHS:
        metrics, details = ncm_checks(model, manifest, final_dir, tokens_dir)
    else:
        check_data(manifest.get("data"), tokens_dir, final_dir)
        if read_manifest(tokens_dir).get("layout"):
            raise MechanismsEvalError(f"{tokens_dir}: paired examples; the mechanisms evaluation of {arch} reads a "
                                      "document stream")
        seq_len = run_cfg["model"]["seq_len"]
        windows, n_full = select_windows(open_split(tokens_dir, "test"), seq_len, max_windows,
                                         f"{tokens_dir} test split")
        checks = dlcm_checks if isinstance(model, DLCM) else concept_checks
        metrics, details = checks(model, windows, batch_size)
        details.update({"windows": len(windows), "windows_available": n_full, "tokens": windows[:, 1:].numel(),
                        "selection": f"window i * {n_full} // {len(windows)} of the disjoint {seq_len}-token windows "
                                     "of the test split", "loss": "mean next-token NLL, nats per token",
                        "batch_size": batch_size})
    result = result_record(manifest, out_path, metrics, details, t0)
    atomic_write_json(out_path, result)
    return result
