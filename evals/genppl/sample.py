"""Samples of a trained generator, then their Gen. PPL: the ``genppl`` evaluation of the DAG.

One job per (run, eval name): draw ``samples`` sequences of the run's length L in batches, write
them (ids and text) beside the result as ``<name>.samples.jsonl``, then score them
(``evals.genppl.score.score_samples``: Gen. PPL under every judge, entropy, the synthetic world's
acceptance and exact NLL), with the sampler's own figures in the same result:

* ``samples/nfe``: network calls per batch -- NCM K (one generator call per scale, ``models.ncm.sample``),
  the autoregressive baseline L - 1 after a one-token prompt (``TokenLM.generate``, KV cache where exact:
  one prefill call and one call per further token), masked diffusion the calls its cached ancestral
  sampler made for ``steps`` steps (``MDLM.sample``; its cache is shared by the batch, so the calls
  saved depend on the batch size; a final denoising call can make it ``steps`` + 1);
* ``samples/time_s``: wall time of all sampling calls (tokenizer decode of NCM included), and
  ``samples/time_per_sample_s``, ``samples/batch_size``, ``samples/steps``.

Diagnostic variants (eval names, ``parse_eval``), which isolate where a sampler's quality is lost:
``genppl_data`` scores the first ``samples`` disjoint test windows themselves (NCM Table 8's data row:
the judge's and the entropy's reference; NFE 0); ``genppl_k<j>`` lets an NCM generator complete the
first j scales of those real windows (``models.ncm.sample(given=...)``): j = 0 is ``genppl``, j = K
the tokenizer's own reconstruction, the curve between shows whether the coarse scales or their
completion lose it. ``genppl_s<N>``: masked diffusion with N steps.

Every sample has L tokens. The autoregressive one starts with ``<|endoftext|>``, the start of a
document in the training stream (the judge never scores a sample's first token, protocol step 5);
NCM and masked diffusion generate all L. Sampling is deterministic given ``seed`` (one
``torch.Generator`` for the job). Masked diffusion samples at temperature 1 without truncation (MDLM
and DUO's protocol); other settings are refused for it rather than ignored.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from common.io import atomic_write_text
from evals.genppl.protocol import GenPPLError, load_judge
from evals.registry import truncates, with_defaults


def sampler_kind(model_cls: type) -> str | None:
    """``ncm``, ``mdlm``, ``ar`` (a causal token LM) or None: how a model of this class samples."""
    from models.mdlm import MDLM
    from models.ncm import NCM
    from models.token_lm import TokenLM

    for cls, kind in ((NCM, "ncm"), (MDLM, "mdlm"), (TokenLM, "ar")):
        if isinstance(model_cls, type) and issubclass(model_cls, cls):
            return kind
    return None


def _batch(model, kind: str, n: int, steps: int | None, settings: dict, generator: torch.Generator,
           eot_id: int, given: list[torch.Tensor] | None) -> tuple[torch.Tensor, int]:
    """(ids (n, L), network calls) of one batch."""
    from models.ncm import sample as ncm_sample

    truncation = {"temperature": settings["temperature"], "top_k": settings["top_k"], "top_p": settings["top_p"]}
    if kind == "ncm":
        out = ncm_sample(model, n, generator=generator, given=given, **truncation)
        return out["ids"], out["nfe"]
    if kind == "mdlm":
        out = model.sample(n, steps, generator=generator)
        return out.ids, out.nfe
    prompt = torch.full((n, 1), eot_id, dtype=torch.long, device=next(model.parameters()).device)
    out = model.generate(prompt, model.cfg.seq_len - 1, generator=generator, **truncation)
    return out.ids, out.nfe


@torch.no_grad()
def draw_samples(model, n: int, settings: dict, eot_id: int, steps: int | None = None,
                 given: list[torch.Tensor] | None = None) -> dict:
    """``n`` samples of the model's L tokens: ``{"ids": LongTensor (n, L), "nfe", "time_s"}``.
    ``settings``: the profile's ``genppl`` section (batch_size, temperature, top_k, top_p, seed);
    ``given``: NCM only, the codes (n, l_k) of the first scales (``models.ncm.sample``)."""
    kind = sampler_kind(type(model))
    if kind is None:
        raise GenPPLError(f"{type(model).__name__} has no sampler; Gen. PPL applies to ncm, mdlm_* and token LMs")
    if kind == "mdlm" and truncates(settings):
        raise GenPPLError("genppl: masked diffusion samples at temperature 1 without top-k / top-p (MDLM / DUO); "
                          "set genppl.temperature: 1.0, top_k: null, top_p: null")
    if steps is not None and kind != "mdlm":
        raise GenPPLError(f"genppl_s{steps}: sampling steps are masked diffusion's; a {kind} model samples in a fixed "
                          "number of calls: use genppl")
    if kind == "mdlm" and steps is None:
        steps = model.cfg.seq_len
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(settings["seed"])
    model.eval()
    ids, nfe, elapsed = [], 0, 0.0
    for start in range(0, n, settings["batch_size"]):
        t0 = time.perf_counter()
        rows = slice(start, min(start + settings["batch_size"], n))
        batch, calls = _batch(model, kind, rows.stop - rows.start, steps, settings, generator, eot_id,
                              None if given is None else [c[rows].to(device) for c in given])
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed += time.perf_counter() - t0
        ids.append(batch.cpu())
        nfe = max(nfe, calls)
    return {"ids": torch.cat(ids), "nfe": nfe, "time_s": elapsed, "kind": kind, "steps": steps}


def test_windows(tokens_dir: Path, seq_len: int, n: int) -> torch.Tensor:
    """The first ``n`` disjoint windows (n, seq_len) of the test split."""
    import numpy as np

    from trainer.data import open_split

    tokens = open_split(Path(tokens_dir), "test")
    if len(tokens) < n * seq_len:
        raise GenPPLError(f"{tokens_dir}: the test split has {len(tokens)} tokens, fewer than {n} windows of "
                          f"{seq_len}; lower genppl.samples")
    return torch.from_numpy(np.asarray(tokens[:n * seq_len], dtype=np.int64).reshape(n, seq_len))


def _diagnostic(model, variant: dict, tokens_dir: Path | None, manifest: dict, final_dir: Path, n: int):
    """(fixed ids or None, given codes or None) of a diagnostic variant (``genppl_data``, ``genppl_k<j>``)."""
    if not ("data" in variant or "scales" in variant):
        return None, None
    from trainer.data import check_data

    if tokens_dir is None:
        raise GenPPLError(f"{variant}: the diagnostic variants read the test split; pass --tokens")
    check_data(manifest.get("data"), Path(tokens_dir), final_dir)
    windows = test_windows(tokens_dir, manifest["config"]["model"]["seq_len"], n)
    if "data" in variant:
        return windows, None
    K = getattr(model, "K", None)
    if sampler_kind(type(model)) != "ncm" or variant["scales"] > K:
        raise GenPPLError(f"genppl_k{variant['scales']}: completes the first scales of real windows, for an ncm run "
                          f"with at least that many scales (this run: {type(model).__name__}, K={K})")
    with torch.no_grad():
        codes = model.tokenizer.encode(windows.to(next(model.parameters()).device))
    return None, [c.cpu() for c in codes[:variant["scales"]]]


def evaluate_genppl(final_dir: Path, tokenizer_path: Path, judges: list[str], out_path: Path, settings: dict,
                    variant: dict | None = None, tokens_dir: Path | None = None, device: str | None = None) -> dict:
    """Sample from the run in ``final_dir`` (or the run folder above it), write ``<out stem>.samples.jsonl`` and
    score them into ``out_path``."""
    from evals.genppl.score import run_and_tokenizer, score_samples
    from evals.perplexity import load_trained

    out_path = Path(out_path)
    final_dir, manifest, tok = run_and_tokenizer(final_dir, tokenizer_path)
    eot = tok.encode_batch([tok.eos_text])[0] if tok.eos_text else []
    if len(eot) != 1:
        raise GenPPLError(f"{tokenizer_path}: no single end-of-text token; the samplers start documents with it")
    settings = with_defaults(settings)
    model, _ = load_trained(final_dir, device)
    device = next(model.parameters()).device
    loaded = [load_judge(j, str(device), "float32") for j in judges]  # a missing judge fails before any sampling
    if not loaded:
        raise GenPPLError("no judge given; pass --judge NAME_OR_FOLDER at least once (the profile's genppl.judges)")
    variant = variant or {}
    fixed, given = _diagnostic(model, variant, tokens_dir, manifest, final_dir, settings["samples"])
    if fixed is not None:  # the data row: the test windows themselves
        drawn = {"ids": fixed, "nfe": 0, "time_s": 0.0, "kind": "data", "steps": 0}
    else:
        drawn = draw_samples(model, settings["samples"], settings, eot[0], variant.get("steps"), given)
    ids = drawn["ids"].tolist()
    samples_path = out_path.with_name(f"{out_path.stem}.samples.jsonl")
    atomic_write_text(samples_path, "".join(json.dumps({"ids": row, "text": text}) + "\n"
                                            for row, text in zip(ids, tok.decode_batch(ids))))
    n = len(ids)
    sampler = {"metrics": {"model/params": manifest["non_embedding_params"], "samples/nfe": drawn["nfe"],
                           "samples/time_s": drawn["time_s"], "samples/time_per_sample_s": drawn["time_s"] / n,
                           "samples/batch_size": settings["batch_size"],
                           "samples/steps": drawn["steps"] or drawn["nfe"]},
               "details": {"kind": drawn["kind"], "variant": variant, "samples_file": samples_path.name,
                           "device": str(device),
                           "threads": torch.get_num_threads(), **{k: settings[k] for k in sorted(settings)}}}
    return score_samples(samples_path, judges, tokenizer_path, final_dir, out_path,
                         batch_size=settings["judge_batch_size"],
                         device=str(device), sampler=sampler, loaded_judges=loaded)
