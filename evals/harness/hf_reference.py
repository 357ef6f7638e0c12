"""The reference arm of the parity test and the throughput benchmark: our GPT-2 exported to a
``transformers`` folder (``models.hf_gpt2.to_hf_gpt2``: identical logits) with our tokenizer, loaded by
lm-eval's own ``hf`` backend (``HFLM``), as a user of the unforked harness would.
"""
from __future__ import annotations

from pathlib import Path

from corpora.tokenization import EOT


def export_hf(model, tokenizer_path: str | Path, out_dir: str | Path, eot_id: int) -> Path:
    """Write ``config.json``, ``model.safetensors`` and the tokenizer files of a GPT2LMHeadModel."""
    from transformers import PreTrainedTokenizerFast

    from models.hf_gpt2 import to_hf_gpt2

    out_dir = Path(out_dir)
    to_hf_gpt2(model, bos_token_id=eot_id, eos_token_id=eot_id).save_pretrained(out_dir)
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path), bos_token=EOT, eos_token=EOT, unk_token=EOT,
                                  pad_token=EOT)
    tok.save_pretrained(out_dir)
    return out_dir


def hf_lm(hf_dir: str | Path, batch_size: int, device: str = "cpu", max_length: int | None = None):
    """lm-eval's ``hf`` backend on an exported folder (fp32, as our adapter)."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(hf_dir), tokenizer=str(hf_dir), device=device, dtype="float32",
                batch_size=batch_size, max_length=max_length)
