"""Load a trained checkpoint and its tokenizer for evaluation, refusing what does not fit.

Every refusal is a one-line ``HarnessError`` raised before any evaluation starts: a checkpoint
folder that is not one of ours (no manifest), weights whose sha256 differs from the manifest, a
model family missing from ``models.registry`` or different from the one the caller expects, a
tokenizer other than the one the run was trained with (sha256 recorded in the manifest).
"""
from __future__ import annotations

import json
from pathlib import Path

from common.errors import ReproError
from evals.harness.errors import HarnessError


def read_final_manifest(final_dir: Path) -> dict:
    path = Path(final_dir) / "manifest.json"
    if not path.is_file():
        hint = (" (it looks like a transformers checkpoint: evaluate it with lm-eval's hf backend)"
                if (Path(final_dir) / "config.json").is_file() else "")
        raise HarnessError(f"{path}: no manifest; {final_dir} is not a checkpoint of this suite{hint}; "
                           "pass a run folder (results/.../runs/<experiment>/seed<k>) or its final/ folder, "
                           "written by the 'pretrain' rule")
    try:
        manifest = json.loads(path.read_text())
        manifest["config"]["model"]["arch"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise HarnessError(f"{path}: unreadable or incomplete manifest ({e!r}); re-run the 'pretrain' rule") from e
    return manifest


def load_for_eval(final_dir: Path, tokenizer_path: Path, expect_arch: str | None = None):
    """(model in eval mode, LoadedTokenizer, info dict) for the checkpoint in ``final_dir``."""
    from corpora.tokenization import load_tokenizer
    from evals.perplexity import load_trained
    from models.registry import REGISTRY

    final_dir = Path(final_dir)
    manifest = read_final_manifest(final_dir)
    arch = manifest["config"]["model"]["arch"]
    if arch not in REGISTRY:
        raise HarnessError(f"{final_dir}: checkpoint of model family {arch!r}, which is not registered in "
                           f"models/registry.py (known: {sorted(REGISTRY)}); update the code or pick another run")
    if expect_arch is not None and arch != expect_arch:
        raise HarnessError(f"{final_dir}: checkpoint of model family {arch!r}, expected {expect_arch!r}; "
                           "the run folder belongs to another experiment")
    tok_cfg = manifest["config"].get("tokenizer", {"kind": "bpe"})
    try:
        tok = load_tokenizer(tok_cfg, Path(tokenizer_path))
    except ReproError as e:
        raise HarnessError(str(e)) from e
    trained_with = (manifest.get("data") or {}).get("tokenizer_sha256")
    if trained_with is None:
        raise HarnessError(f"{final_dir}/manifest.json records no tokenizer (written by an older version); delete "
                           f"{final_dir} and re-run the 'pretrain' rule")
    if tok.sha256 != trained_with:
        raise HarnessError(f"{tokenizer_path}: tokenizer {tok.sha256[:16]} is not the one the checkpoint in "
                           f"{final_dir} was trained with ({trained_with[:16]}); pass the tokenizer of the "
                           "run's corpus")
    if tok.vocab_size != manifest["vocab_size"]:
        raise HarnessError(f"{tokenizer_path}: tokenizer has {tok.vocab_size} tokens, the checkpoint in {final_dir} "
                           f"was trained with {manifest['vocab_size']}; pass the tokenizer of the run's corpus")
    try:
        model, manifest = load_trained(final_dir)
    except (ReproError, ValueError, TypeError) as e:
        raise HarnessError(str(e).splitlines()[0]) from e
    info = {"arch": arch, "experiment": manifest.get("experiment"), "seed": manifest.get("seed"),
            "checkpoint_sha256": manifest["model_sha256"], "tokenizer_sha256": tok.sha256,
            "max_length": int(manifest["config"]["model"]["seq_len"]), "manifest": manifest}
    return model, tok, info


def run_tokenizer(final_dir: Path) -> Path:
    """The tokenizer a run was trained with, found beside it: the ``data/<dataset>/tokenizer.json`` of its
    results folder (``<results>/runs/<experiment>/seed<k>/final``) whose sha256 the manifest records."""
    from corpora.tokenization import load_tokenizer

    final_dir = Path(final_dir).resolve()
    manifest = read_final_manifest(final_dir)
    trained_with = (manifest.get("data") or {}).get("tokenizer_sha256")
    tok_cfg = manifest["config"].get("tokenizer", {"kind": "bpe"})
    data = final_dir.parents[3] / "data" if len(final_dir.parents) > 3 else final_dir / "data"
    failed = None  # why a candidate could not be loaded (a pretrained tokenizer's folder, relative to the CWD)
    for path in sorted(data.glob("*/tokenizer.json")):
        try:
            if load_tokenizer(tok_cfg, path).sha256 == trained_with:
                return path
        except ReproError as error:
            failed = failed or str(error).splitlines()[0]
    raise HarnessError(f"{final_dir}: no tokenizer.json under {data} is the one this run was trained with "
                       f"({str(trained_with)[:16]})" + (f"; loading one failed: {failed} (run from the folder the "
                                                         "workflow ran in)" if failed else "; pass --tokenizer"))

