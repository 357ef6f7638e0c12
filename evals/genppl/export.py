"""Export a trained GPT-2 run of this suite as a ``transformers`` judge folder (the embedded judge).

The embedded profile cannot download ``gpt2-large``; it trains a larger GPT-2 on the synthetic world
with the ordinary trainer and exports its ``final/`` checkpoint here, so that the Gen. PPL code loads
it exactly as it loads a hub judge: ``AutoModelForCausalLM.from_pretrained(folder)`` and
``AutoTokenizer.from_pretrained(folder)``, offline.

The folder holds ``config.json`` + ``model.safetensors`` (``models.hf_gpt2.to_hf_gpt2``: a
``GPT2LMHeadModel``; bos = eos = pad = ``<|endoftext|>``), the tokenizer files (our BPE
``tokenizer.json`` wrapped as a ``PreTrainedTokenizerFast``: eos = pad = ``<|endoftext|>``, no unknown
token — byte-level BPE encodes any text —, ``model_max_length`` = the run's ``seq_len``; a run on a
pretrained tokenizer (``tokenizer.kind: pretrained``, e.g. config/small.yaml's GPT-NeoX) exports that
tokenizer as it is, pad = its EOS) and
``judge_manifest.json`` (where it came from: experiment, seed, checkpoint and tokenizer sha256, and the
largest logit difference between the export and our model, measured before the folder is written).
It is written to a temporary folder and renamed into place.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch

from common.errors import ReproError
from common.io import atomic_write_json
from evals.genppl.protocol import EOT, GenPPLError

PARITY_TOL = 1e-4  # largest |logit difference| accepted between the export and our model (fp32)


def _judge_tokenizer(tok_cfg: dict, tokenizer_path: Path, max_length: int):
    """The judge's ``transformers`` tokenizer: our BPE ``tokenizer.json`` wrapped (eos = pad =
    ``<|endoftext|>``), or the run's pretrained tokenizer itself (by name or folder, as the run loaded
    it; pad = its EOS)."""
    from transformers import PreTrainedTokenizerFast

    if tok_cfg["kind"] == "bpe":
        return PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path), bos_token=EOT, eos_token=EOT, pad_token=EOT,
                                       model_max_length=max_length)
    from corpora.tokenization import pretrained_tokenizer

    hf_tok, _ = pretrained_tokenizer(tok_cfg["name"])
    if hf_tok.eos_token is None:
        raise GenPPLError(f"tokenizer {tok_cfg['name']!r} has no end-of-text token; a judge needs one (the EOS mask)")
    hf_tok.pad_token = hf_tok.pad_token or hf_tok.eos_token
    hf_tok.model_max_length = max_length
    return hf_tok


def _final_dir(run_dir: Path) -> Path:
    run_dir = Path(run_dir)
    return run_dir / "final" if (run_dir / "final" / "manifest.json").is_file() else run_dir


@torch.no_grad()
def export_judge(run_dir: str | Path, tokenizer_path: str | Path, out_dir: str | Path) -> Path:
    """Write the judge folder ``out_dir`` from the run in ``run_dir`` (or its ``final/``); returns ``out_dir``."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evals.harness.checkpoints import load_for_eval, read_final_manifest
    from models.hf_gpt2 import to_hf_gpt2

    final, out_dir = _final_dir(Path(run_dir)), Path(out_dir)
    try:
        arch = read_final_manifest(final)["config"]["model"]["arch"]
        if arch != "gpt2":
            raise GenPPLError(f"{final}: a {arch!r} run; only GPT-2 runs (model.arch: gpt2) export to a transformers "
                              "judge: train the judge experiment with arch gpt2")
        if not Path(tokenizer_path).is_file():
            raise GenPPLError(f"--tokenizer {tokenizer_path}: not a tokenizer.json file; "
                              "pass the BPE of the run's corpus")
        model, tok, info = load_for_eval(final, Path(tokenizer_path), expect_arch="gpt2")
        model = model.float().cpu()
        hf_model = to_hf_gpt2(model, bos_token_id=tok.eot_id, eos_token_id=tok.eot_id, pad_token_id=tok.eot_id)
    except GenPPLError:
        raise
    except (ReproError, ValueError) as e:
        raise GenPPLError(str(e).splitlines()[0]) from e
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
        try:
            hf_model.save_pretrained(tmp)
            hf_tok = _judge_tokenizer(info["manifest"]["config"].get("tokenizer", {"kind": "bpe"}), tokenizer_path,
                                      info["max_length"])
            hf_tok.save_pretrained(tmp)
            loaded = AutoModelForCausalLM.from_pretrained(tmp).eval()
            loaded_tok = AutoTokenizer.from_pretrained(tmp)
        finally:
            transformers.logging.set_verbosity(verbosity)
        probe = torch.randint(0, model.cfg.vocab_size, (2, min(16, model.cfg.seq_len)),
                              generator=torch.Generator().manual_seed(0))
        diff = float((loaded(probe).logits - model(probe)["logits"]).abs().max())
        text = "Once upon a time" + loaded_tok.eos_token
        if diff > PARITY_TOL or loaded_tok(text, add_special_tokens=False)["input_ids"] != tok.encode_batch([text])[0]:
            raise GenPPLError(f"{final}: the exported judge does not reproduce the run (max |logit difference| "
                              f"{diff:.3g}, tolerance {PARITY_TOL}, or the tokenizer encodes differently); "
                              "report a bug")
        atomic_write_json(tmp / "judge_manifest.json", {
            "experiment": info["experiment"], "seed": info["seed"], "source": str(final),
            "checkpoint_sha256": info["checkpoint_sha256"], "tokenizer_sha256": info["tokenizer_sha256"],
            "seq_len": info["max_length"], "params": sum(p.numel() for p in hf_model.parameters()),
            "parity_max_abs_logit_diff": diff, "transformers": transformers.__version__})
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir
