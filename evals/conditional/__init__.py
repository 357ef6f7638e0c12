"""Conditional generation of a trained run on its paired test split: the ``cond`` evaluations of the DAG.

NCM Tables 2 and 3 (docs/sources.md, "NCM: what the paper specifies", item 7): summaries (ROUGE),
translations (BLEU) and Sudoku boards (whole-board accuracy), each with its NFE and wall time. One job per
(run, eval name):

1. The first ``examples`` test examples: the sources exactly as the run was trained on them (the first
   ``source_len`` tokens of each record of ``test.bin``, ``corpora.tokenization.tokenize_pairs``), the
   references as text from the corpus (``corpus/test.jsonl``, checked to be the one the tokens were
   made from). A run trained on other token data is refused.
2. Targets generated in batches (``generate``): the autoregressive token LM continues the source with
   its KV cache (``TokenLM.generate``: one prefill call and one call per token; rows stop at
   ``<|endoftext|>``); NCM samples its K scales with the source as a prefix (``models.ncm.sample``: K
   calls, 2K with guidance); masked diffusion unmasks the target with the source given
   (``MDLM.sample(source=...)``, ``steps`` ancestral steps, temperature 1: its sampler has no other).
3. Each target is cut at its first ``<|endoftext|>`` and decoded with the run's tokenizer; the metric
   follows the dataset's task (``evals.conditional.metrics``): translation BLEU (and ROUGE beside it),
   summary ROUGE-1/2/L (and BLEU), Sudoku whole-board accuracy per tier; ``test/exact`` (prediction ==
   reference) for all. ``ceiling/*``: the same metrics of the references as tokenized (cut to
   ``target_len``), the best score the layout allows.

Eval names (``parse_eval``): ``cond`` (settings' temperature, default 0 = argmax at every step / scale),
``cond_k<j>`` (NCM only, a diagnostic as ``genppl_k<j>``: the first j scales are the tokenizer's codes of
the reference target, the generator completes the rest; j = K scores the tokenizer's own reconstruction,
so the list from ``cond`` to ``cond_k<K>`` shows whether the coarse or the fine scales lose the score),
``cond_mbr<n>`` (n candidates per source at ``mbr_temperature``, the MBR choice scored; NFE = n x one
sample's, as the paper counts; ``cond_mbr1`` is one such candidate, what MBR chooses among), ``cond_cfg<w>``
(NCM classifier-free guidance at scale w; 2 calls per
scale), combinable (``cond_mbr16_cfg1.5``). NFE is the number of network calls per generated target
(one batch's calls; a batch is generated together), wall time covers every generation call.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from common.errors import ReproError
from common.io import atomic_write_json, atomic_write_text, sha256_file
from evals.conditional.metrics import bleu, mbr_select, rouge
from evals.registry import BY_NAME
from evals.result import result_record

# The profile's ``conditional`` section: its defaults
SETTINGS_DEFAULTS = {"examples": 200, "batch_size": 50, "temperature": 0.0, "top_k": None, "top_p": None,
                     "mbr_temperature": 1.0, "mbr_utility": None, "steps": None, "seed": 0}
TASKS = {"translate": "translation", "wmt14_deen": "translation", "summary": "summary", "xsum": "summary"}
DEFAULT_UTILITY = {"translation": "bleu", "summary": "rougeL", "sudoku": "chars"}


class ConditionalEvalError(ReproError, ValueError):
    """The run or its data cannot be evaluated conditionally."""


def with_defaults(settings: dict) -> dict:
    return {**SETTINGS_DEFAULTS, **settings}


def parse_eval(name: str) -> dict:
    """``{"scales": j, "mbr": n, "guidance": w}`` (each may be absent) of a conditional eval name (the ``cond``
    family of ``evals.registry``)."""
    match = BY_NAME["cond"].match(name)
    if match is None:
        raise ConditionalEvalError(f"{name!r} is not a conditional evaluation: use cond, cond_k<j>, cond_mbr<n>, "
                                   "cond_cfg<w>")
    return {key: float(value) if key == "guidance" else int(value) for key, value in match.items()}


def task_of(run_cfg: dict) -> str:
    """translation, summary or sudoku: what the run's dataset asks for."""
    corpus = run_cfg["corpus"]
    if corpus["source"] == "sudoku":
        return "sudoku"
    if corpus["source"] == "pairs" and corpus["pairs"]["task"] in TASKS:
        return TASKS[corpus["pairs"]["task"]]
    raise ConditionalEvalError(f"run {run_cfg['id']}: corpus {corpus['id']} holds no paired task; conditional evals "
                               "apply to experiments with data: <a paired dataset>")


def test_examples(tokens_dir: Path, layout: dict, n: int) -> tuple[torch.Tensor, torch.Tensor, list[dict]]:
    """(sources (m, source_len), targets (m, target_len) as tokenized, corpus rows) of the first n test
    examples (fewer if the split is smaller); with tiers (Sudoku), the first ceil(n / tiers) of each
    tier, so every tier (an external file's too, appended after the generated ones) is scored."""
    from trainer.data import open_split, read_manifest

    tokens_dir = Path(tokens_dir)
    corpus_dir = tokens_dir.parent / "corpus"
    manifest = read_manifest(tokens_dir)
    if sha256_file(corpus_dir / "manifest.json") != manifest["corpus_sha256"]:
        raise ConditionalEvalError(f"{corpus_dir}: not the corpus {tokens_dir} was made from; "
                                   "re-run the 'tokenize' rule")
    P, R = layout["source_len"], layout["source_len"] + layout["target_len"]
    tokens = open_split(tokens_dir, "test")
    with open(corpus_dir / "test.jsonl") as f:
        rows = [json.loads(line) for line in f]
    if len(rows) != (len(tokens) - 1) // R:
        raise ConditionalEvalError(f"{corpus_dir / 'test.jsonl'} has {len(rows)} examples and {tokens_dir} "
                                   f"{(len(tokens) - 1) // R}; re-run the 'tokenize' rule")
    tiers = sorted({r["tier"] for r in rows if "tier" in r})
    if tiers:
        per_tier = -(-n // len(tiers))
        chosen = [i for tier in tiers for i in [j for j, r in enumerate(rows) if r.get("tier") == tier][:per_tier]]
        chosen.sort()
    else:
        chosen = list(range(min(n, len(rows))))
    records = np.asarray(tokens[:len(rows) * R], dtype=np.int64).reshape(len(rows), R)[chosen]
    return (torch.from_numpy(records[:, :P].copy()), torch.from_numpy(records[:, P:].copy()),
            [rows[i] for i in chosen])


def generate(model, kind: str, source: torch.Tensor, target_len: int, settings: dict, temperature: float,
             guidance: float, generator: torch.Generator, eot_id: int,
             given: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, int]:
    """(target ids (n, target_len), network calls) of one batch of sources; ``given``: NCM's first scales."""
    from models.ncm import sample as ncm_sample

    truncation = {"temperature": temperature, "top_k": settings["top_k"], "top_p": settings["top_p"]}
    if kind == "ncm":
        out = ncm_sample(model, len(source), generator=generator, source=source, guidance=guidance, given=given,
                         **truncation)
        return out["ids"], out["nfe"]
    if given is not None:
        raise ConditionalEvalError("cond_k<j> completes real coarse scales: an NCM run's diagnostic")
    if guidance != 1.0:
        raise ConditionalEvalError("classifier-free guidance (cond_cfg<w>) is NCM's; drop it for this run")
    if kind == "mdlm":
        out = model.sample(len(source), settings["steps"] or target_len, generator=generator, source=source)
        return out.ids[:, source.shape[1]:], out.nfe
    out = model.generate(source, target_len, generator=generator, eos_id=eot_id, **truncation)
    return out.ids[:, source.shape[1]:], out.nfe


def decode_targets(tok, ids: torch.Tensor) -> list[str]:
    """Each row cut at its first end-of-text token, decoded."""
    texts = []
    for row in ids.tolist():
        if tok.eot_id in row:
            row = row[:row.index(tok.eot_id)]
        texts.append(tok.decode(row))
    return texts


def score(task: str, predictions: list[str], rows: list[dict]) -> dict:
    """The task's metrics (module docstring) over the examples."""
    references = [r["target"] for r in rows]
    metrics = {"test/exact": sum(p == r for p, r in zip(predictions, references)) / len(rows), "samples/n": len(rows)}
    if task == "sudoku":
        from corpora.sudoku import board_correct

        hits: dict[str, list[bool]] = {}
        for pred, row in zip(predictions, rows):
            hits.setdefault(row.get("tier", "all"), []).append(board_correct(pred, row["source"], row["target"]))
        for tier, values in sorted(hits.items()):
            metrics[f"{tier}/board_acc"], metrics[f"{tier}/n"] = sum(values) / len(values), len(values)
        metrics["test/board_acc"] = sum(sum(v) for v in hits.values()) / len(rows)
        return metrics
    metrics.update({f"test/{k}": v for k, v in rouge(predictions, references).items()})
    scored = bleu(predictions, references)
    metrics["test/bleu"] = scored["bleu"]
    metrics["details/bleu_signature"] = scored["signature"]
    return metrics


@torch.no_grad()
def evaluate_conditional(final_dir: Path, tokenizer_path: Path, tokens_dir: Path, out_path: Path, settings: dict,
                         name: str = "cond", device: str | None = None) -> dict:
    """Generate targets for the first test examples and score them into ``out_path`` (module docstring)."""
    from corpora.tokenization import load_tokenizer
    from evals.genppl.sample import sampler_kind
    from evals.perplexity import load_trained
    from trainer.data import check_data

    started = time.perf_counter()
    final_dir, out_path = Path(final_dir), Path(out_path)
    variant, settings = parse_eval(name), with_defaults(settings)
    model, manifest = load_trained(final_dir, device)
    run_cfg = manifest["config"]
    layout = run_cfg.get("layout")
    if layout is None or run_cfg["model"]["seq_len"] != layout["source_len"] + layout["target_len"]:
        raise ConditionalEvalError(f"run {run_cfg['id']}: not trained on whole paired examples (source and target); "
                                   "conditional evals need data: <paired dataset> and model.seq_len = source + target")
    check_data(manifest.get("data"), Path(tokens_dir), final_dir)
    task, kind = task_of(run_cfg), sampler_kind(type(model))
    if kind is None:
        raise ConditionalEvalError(f"{type(model).__name__} does not generate; use a token LM, ncm or mdlm_* run")
    tok = load_tokenizer(run_cfg["tokenizer"], Path(tokenizer_path))
    trained_with = (manifest.get("data") or {}).get("tokenizer_sha256")
    if trained_with and tok.sha256 != trained_with:
        raise ConditionalEvalError(f"--tokenizer {tokenizer_path}: not the tokenizer the run in {final_dir} was "
                                   f"trained with ({tok.sha256[:16]} vs {trained_with[:16]}); pass its dataset's "
                                   "tokenizer.json")
    sources, targets, rows = test_examples(Path(tokens_dir), layout, settings["examples"])
    given = None
    if "scales" in variant:
        if kind != "ncm" or variant["scales"] > model.K:
            raise ConditionalEvalError(f"{name}: completes the first {variant['scales']} real scales; an ncm run "
                                       "with at least that many scales "
                                       f"(this is {kind}{f', K={model.K}' if kind == 'ncm' else ''})")
        with torch.no_grad():
            given = [c.cpu()
                     for c in model.tokenizer.encode(targets.to(next(model.parameters()).device))[:variant["scales"]]]
    n_cand = variant.get("mbr", 1)
    temperature = settings["mbr_temperature"] if "mbr" in variant else settings["temperature"]
    utility = settings["mbr_utility"] or DEFAULT_UTILITY[task]
    device = next(model.parameters()).device
    generator = torch.Generator(device).manual_seed(settings["seed"])
    per_batch = max(1, settings["batch_size"] // n_cand)
    predictions, candidates_out, nfe, elapsed = [], [], 0, 0.0
    for start in range(0, len(rows), per_batch):
        src = sources[start:start + per_batch].to(device).repeat_interleave(n_cand, 0)
        known = None if given is None else [c[start:start + per_batch].to(device).repeat_interleave(n_cand, 0)
                                            for c in given]
        t0 = time.perf_counter()
        ids, calls = generate(model, kind, src, layout["target_len"], settings, temperature,
                              variant.get("guidance", 1.0), generator, tok.eot_id, known)
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed += time.perf_counter() - t0
        nfe = max(nfe, calls)
        texts = decode_targets(tok, ids.cpu())
        for i in range(0, len(texts), n_cand):
            group = texts[i:i + n_cand]
            predictions.append(group[mbr_select(group, utility)] if n_cand > 1 else group[0])
            candidates_out.append(group)
    metrics = score(task, predictions, rows)
    signature = metrics.pop("details/bleu_signature", None)
    ceiling = score(task, decode_targets(tok, targets), rows)  # the references as tokenized: the layout's cut
    metrics.update({f"ceiling/{k.split('/', 1)[1]}": v for k, v in ceiling.items()
                    if k.split("/", 1)[1] in ("exact", "bleu", "rougeL", "board_acc")})
    metrics.update({"samples/nfe": nfe * n_cand, "samples/calls_per_sample": nfe, "samples/candidates": n_cand,
                    "samples/time_s": elapsed, "samples/time_per_sample_s": elapsed / len(rows),
                    "model/params": manifest["non_embedding_params"]})
    samples_path = out_path.with_name(f"{out_path.stem}.samples.jsonl")
    atomic_write_text(samples_path, "".join(
        json.dumps({"source": r["source"], "reference": r["target"], "prediction": p,
                    **({"candidates": c} if n_cand > 1 else {}), **({"tier": r["tier"]} if "tier" in r else {})}) + "\n"
        for r, p, c in zip(rows, predictions, candidates_out)))
    details = {"task": task, "kind": kind, "variant": variant, "utility": utility if n_cand > 1 else None,
               "temperature": temperature, "bleu_signature": signature,
               "rouge": "rouge-score F1 per example, mean; use_stemmer=False" if task != "sudoku" else None,
               "samples_file": samples_path.name, "device": str(device), "threads": torch.get_num_threads(),
               "settings": settings}
    result = result_record(manifest, out_path, metrics, details, started)
    atomic_write_json(out_path, result)
    return result
