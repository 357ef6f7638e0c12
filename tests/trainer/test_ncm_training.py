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


def test_generator_resumes_exactly_on_its_upstream_and_never_on_another(tiny_data, run_cfg, tmp_path, capsys):
    """A generator run bound to its tokenizer run (``upstream``): interrupted and resumed on the same
    tokenizer weights it ends with the weights of an uninterrupted run; its checkpoint is set aside
    (ckpt.stale) once the tokenizer weights change; a run config with upstream needs --upstream."""
    import shutil

    from common.errors import ReproError
    from safetensors.torch import load_file, save_file

    tok_cfg = json.loads(json.dumps(run_cfg))
    tok_cfg["model"] = {**TOK, "seq_len": run_cfg["model"]["seq_len"]}
    tok_cfg["train"].update(steps=8, loss_weights={"rec": 1.0, "vq": 1.0})
    Trainer(tok_cfg, tiny_data["tokens"], tmp_path / "tok").run()
    gen_cfg = json.loads(json.dumps(run_cfg))
    gen_cfg["model"] = {"arch": "ncm", "seq_len": run_cfg["model"]["seq_len"], "d_model": 32, "n_layer": 1,
                        "n_head": 2, "tokenizer": tok_cfg["model"]}
    gen_cfg["upstream"] = {"experiment": "tok", "seed": 0}
    gen_cfg["train"].update(steps=8, checkpoint_interval=4, loss_weights={"gen": 1.0})
    upstream = tmp_path / "tok" / "final"

    def gen(name, up=upstream):
        return Trainer(gen_cfg, tiny_data["tokens"], tmp_path / name, upstream=up)

    with pytest.raises(ReproError, match="pass its final/ folder as --upstream"):
        gen("none", None)
    reference = gen("ref").run()
    assert gen("cut").run(stop_after=4) is None
    assert gen("cut").run()["model_sha256"] == reference["model_sha256"]  # resumed at step 4, exactly
    assert reference["upstream"]["model_sha256"] and reference["upstream"]["experiment"] == "tok"

    assert gen("moved").run(stop_after=4) is None
    other = tmp_path / "tok2" / "final"
    shutil.copytree(upstream, other)
    weights = load_file(str(other / "model.safetensors"))
    save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in weights.items()},
              str(other / "model.safetensors"))
    (other / "manifest.json").unlink()  # only the weights differ from the first tokenizer run
    capsys.readouterr()
    gen("moved", other).run()
    assert (tmp_path / "moved" / "ckpt.stale").is_dir()
    assert "belong to another run (upstream.model_sha256" in capsys.readouterr().out
