"""NCM end to end through the unchanged trainer: a tokenizer run, then a generator run on its frozen
weights; both losses fall, the generator's checkpoint alone samples."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from models.ncm import sample
from models.ncm_tokenizer import reconstruction_accuracy
from models.registry import build_model
from trainer.checkpoint import load_model_weights
from trainer.data import gather_windows, open_split
from trainer.train import Trainer

TOK = {"arch": "ncm_tokenizer", "d_model": 32, "n_layer": 1, "n_head": 2, "codebook_size": 32, "d_code": 8,
       "n_scales": 4}


def train_rows(run_dir):
    return [r for r in map(json.loads, (run_dir / "train" / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


@pytest.mark.slow
def test_tokenizer_then_generator_through_the_trainer(tiny_data, run_cfg, tmp_path):
    tok_cfg = json.loads(json.dumps(run_cfg))
    tok_cfg["model"] = {**TOK, "seq_len": run_cfg["model"]["seq_len"]}
    tok_cfg["train"].update(steps=40, log_interval=4, loss_weights={"rec": 1.0, "vq": 1.0})
    tok_manifest = Trainer(tok_cfg, tiny_data["tokens"], tmp_path / "tok").run()
    rows = train_rows(tmp_path / "tok")
    assert {"loss/rec", "loss/vq", "metric/usage_pct_s1", "metric/usage_ppl_s4", "metric/vq_s4"} <= set(rows[0])
    assert rows[-1]["loss/rec"] < rows[0]["loss/rec"] - 1.0
    assert tok_manifest["flops_per_token"] > 0 and tok_manifest["final_valid_loss"] is not None  # valid/loss = rec

    gen_cfg = json.loads(json.dumps(run_cfg))
    gen_cfg["model"] = {"arch": "ncm", "seq_len": run_cfg["model"]["seq_len"], "d_model": 32, "n_layer": 2,
                        "n_head": 2, "tokenizer": tok_cfg["model"]}
    gen_cfg["train"].update(steps=40, log_interval=4, loss_weights={"gen": 1.0})
    trainer = Trainer(gen_cfg, tiny_data["tokens"], tmp_path / "gen")
    trainer.model.load_upstream(tmp_path / "tok" / "final")
    manifest = trainer.run()
    rows = train_rows(tmp_path / "gen")
    assert {"loss/gen", "metric/ce_s1", "metric/acc_s4"} <= set(rows[0])
    assert rows[-1]["loss/gen"] < rows[0]["loss/gen"] - 0.5
    assert manifest["non_embedding_params"] == trainer.model.num_params() and manifest["final_valid_loss"] is not None

    # the generator's final/ holds the frozen tokenizer too: it samples alone
    model = build_model({k: v for k, v in gen_cfg["model"].items() if k != "seq_len"},
                        vocab_size=manifest["vocab_size"], seq_len=gen_cfg["model"]["seq_len"])
    load_model_weights(model, tmp_path / "gen" / "final" / "model.safetensors")
    tokenizer = build_model(TOK, vocab_size=manifest["vocab_size"], seq_len=gen_cfg["model"]["seq_len"])
    load_model_weights(tokenizer, tmp_path / "tok" / "final" / "model.safetensors")
    pairs = zip(model.tokenizer.state_dict().values(), tokenizer.state_dict().values())
    assert all(torch.equal(a, b) for a, b in pairs)
    out = sample(model, 4, generator=torch.Generator().manual_seed(0))
    assert out["ids"].shape == (4, 32) and out["nfe"] == 4

    valid = open_split(tiny_data["tokens"], "valid")
    windows = gather_windows(valid, np.arange(16) * 32, 32)[0]
    acc = reconstruction_accuracy(tokenizer, windows)  # 40 steps: near the unigram; rising is test_ncm_tokenizer's
    assert sorted(acc) == [1, 2, 3, 4] and all(0 < a < 1 for a in acc.values())
