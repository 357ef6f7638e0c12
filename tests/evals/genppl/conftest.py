"""Fixtures of the Gen. PPL tests: a tiny word-level judge built with ``transformers`` (so that a
hand computation can follow every token), its tokenizer as the samples' model tokenizer, and a tiny
GPT-2 run of this suite to export. Offline from the first import."""
from __future__ import annotations

import copy
import json
import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

from tests.conftest import TINY_RUN  # noqa: E402

WORDS = ["<eos>", "[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "big", "red"]
EOS = 0


def write_word_tokenizer(path) -> None:
    """A whitespace word-level tokenizer over WORDS: id = position in WORDS, '<eos>' special, '[UNK]' unknown."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens(["<eos>"])
    tok.save(str(path))


@pytest.fixture(scope="session")
def word_judge(tmp_path_factory) -> dict:
    """{'dir': a GPT2LMHeadModel folder (random weights, 2 layers, d 16) with the word tokenizer,
    'tokenizer': that tokenizer.json (also the samples' model tokenizer)}."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("word_judge")
    write_word_tokenizer(root / "tokenizer.json")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(WORDS), n_positions=32, n_embd=16, n_layer=2, n_head=2,
                                       bos_token_id=EOS, eos_token_id=EOS))
    with torch.no_grad():  # larger logits than the default init, so that mistakes show
        for p in model.parameters():
            p.mul_(8.0) if p.dim() > 1 else None
    model.save_pretrained(root / "judge")
    PreTrainedTokenizerFast(tokenizer_file=str(root / "tokenizer.json"), eos_token="<eos>",
                            unk_token="[UNK]").save_pretrained(root / "judge")
    return {"dir": root / "judge", "tokenizer": root / "tokenizer.json", "root": root}


def write_samples(path, rows) -> None:
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


@pytest.fixture(scope="session")
def judge_run(tiny_data, tmp_path_factory) -> dict:
    """{'run_dir', 'final', 'tokenizer'}: TINY_RUN (GPT-2, d 32, seq_len 32) trained for 4 steps."""
    from trainer.train import Trainer

    cfg = copy.deepcopy(TINY_RUN)
    cfg.update(id="judge_tiny")
    cfg["train"].update(steps=4, checkpoint_interval=4, eval_interval=4, log_interval=2)
    run_dir = tmp_path_factory.mktemp("judge_run")
    Trainer(cfg, tiny_data["tokens"], run_dir).run()
    return {"run_dir": run_dir, "final": run_dir / "final", "tokenizer": tiny_data["tokenizer"]}
