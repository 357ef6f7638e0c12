"""One evaluation of a generator's samples: Gen. PPL under every judge, entropy, and (for a model
trained on the synthetic world) grammar acceptance and exact NLL, written as one result JSON
(``config/schemas/result.schema.json``; the manifest is the generating run's ``final/manifest.json``).

Order of work: every bad input is a one-line ``GenPPLError`` (or the harness's ``HarnessError`` for a
run folder) before the first sample is scored — the run's manifest, the model tokenizer (it must be
the one the run was trained with), the samples file, the world settings, the protocol settings, every
judge (causal LM, tokenizer with EOS) and every judge's tokenizer on the samples' text.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from common.io import atomic_write_json
from evals.genppl.protocol import GenPPLError, Protocol, gen_ppl, load_judge, load_model_tokenizer, read_samples
from evals.genppl.world import world_config, world_quality
from evals.result import result_record

WORLD_METRICS = ("sample_accept_rate", "doc_accept_rate", "prefix_accept_rate", "nll_per_token", "ppl",
                 "judged_samples", "docs", "accepted_docs", "accepted_tokens")


def _world_settings(path: str | Path | None, manifest: dict, use_world: bool) -> tuple[dict | None, str | None]:
    """The corpus block of the world to judge against and where it came from (None: no world)."""
    if path is not None:
        try:
            settings = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise GenPPLError(f"--world-settings {path}: unreadable ({e}); pass the corpus's data settings.json or its "
                              "corpus block as JSON: "
                              "{\"source\": \"synthetic\", \"seed\": 0, \"synthetic\": {}}") from e
        corpus = settings.get("corpus", settings) if isinstance(settings, dict) else settings
        source = corpus.get("source") if isinstance(corpus, dict) else None
        if source is not None and source != "synthetic":  # a real corpus: there is no grammar to judge against
            return None, f"{path}: corpus source {source!r}, not the synthetic world; not judged"
        return settings, str(path)
    corpus = manifest["config"].get("corpus") or {}
    if use_world and corpus.get("source") == "synthetic":
        return corpus, "the generating run's manifest (config.corpus)"
    return None, "no --world-settings and the run's corpus is not the synthetic world" if use_world else "--no-world"


def run_and_tokenizer(run_dir: str | Path, model_tokenizer: str | Path):
    """(final folder, its manifest, the model tokenizer) of a generating run, given its folder or its
    ``final/``; a tokenizer other than the one the run was trained with is refused in one line."""
    from evals.harness.checkpoints import read_final_manifest

    run_dir = Path(run_dir)
    final = run_dir / "final" if (run_dir / "final" / "manifest.json").is_file() else run_dir
    manifest = read_final_manifest(final)
    tok = load_model_tokenizer(model_tokenizer)
    trained_with = (manifest.get("data") or {}).get("tokenizer_sha256")
    if trained_with and tok.sha256 != trained_with:
        raise GenPPLError(f"--model-tokenizer {model_tokenizer}: not the tokenizer the run in {final} was trained with "
                          f"({str(tok.sha256)[:16]} vs {trained_with[:16]}); pass the tokenizer of the run's corpus")
    return final, manifest, tok


def score_samples(samples_path: str | Path, judges: list[str], model_tokenizer: str | Path, run_dir: str | Path,
                  out_path: str | Path, *, world_settings: str | Path | None = None, use_world: bool = True,
                  boundaries: str = "eot", max_length: int | None = None, batch_size: int = 8,
                  pad_eos: str = "exclude", max_unknown_rate: float = 1e-3, device: str = "auto",
                  dtype: str = "float32", sampler: dict | None = None, loaded_judges: list | None = None) -> dict:
    """Score ``samples_path`` (see ``protocol.read_samples``) and write the result to ``out_path``.

    ``max_length`` defaults to the generating run's ``model.seq_len`` (D: ``model.length``). The world
    is judged when ``world_settings`` is given, or when the run was trained on the synthetic world
    (its manifest's corpus block) and ``use_world`` is true. ``sampler``: ``{"metrics", "details"}`` of
    the sampling that made the file (``evals.genppl.sample``), stored in the same result;
    ``loaded_judges``: the ``judges`` already loaded (``load_judge``), so a caller can check them first."""
    t0 = time.perf_counter()
    final, manifest, tok = run_and_tokenizer(run_dir, model_tokenizer)
    samples = read_samples(samples_path, tok)
    settings, settings_source = _world_settings(world_settings, manifest, use_world)
    world = world_config(settings) if settings is not None else None
    length_source = "--max-length" if max_length is not None else "the generating run's model.seq_len (D: model.length)"
    protocol = Protocol(max_length=int(max_length or manifest["config"]["model"]["seq_len"]), batch_size=batch_size,
                        pad_eos=pad_eos, max_unknown_rate=max_unknown_rate, dtype=dtype)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    loaded = loaded_judges if loaded_judges is not None else [load_judge(j, device, dtype) for j in judges]
    if not loaded:
        raise GenPPLError("no judge given; pass --judge NAME_OR_FOLDER at least once")
    r = gen_ppl(samples, loaded, protocol)  # checks every judge's tokenizer on the samples before scoring
    metrics, details = r["metrics"], r["details"]
    details["protocol"]["max_length_from"] = length_source
    details.update(device=str(device), model_tokenizer={"name": tok.name, "sha256": tok.sha256},
                   run=str(final))
    if world is not None:
        cfg, seed = world
        q = world_quality(samples.texts, cfg, seed, tok, boundaries=boundaries,
                          eos_text=tok.eos_text or "<|endoftext|>")
        metrics.update({f"world/{k}": q[k] for k in WORLD_METRICS})
        details["world"] = {**q, "settings_from": settings_source}
    else:
        details["world"] = {"skipped": settings_source}
    if sampler is not None:
        metrics.update(sampler["metrics"])
        details["sampler"] = sampler["details"]
    result = result_record(manifest, Path(out_path), metrics, details, t0)
    atomic_write_json(out_path, result)
    return result
