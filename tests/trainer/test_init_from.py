"""``train.init_from`` (ConceptLM Table 3's continual pre-training): the trainer starts a Llama, PM or
ConceptLM-Llama run from a ``LlamaForCausalLM`` folder (here a small random one the test saves), binds its
checkpoints to those weights, and refuses a checkpoint of another shape or one it cannot load in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from common.errors import ReproError
from trainer.data import read_manifest
from trainer.train import Trainer

SHAPE = {"d_model": 64, "n_layer": 3, "n_head": 4, "n_kv_head": 2, "mlp_hidden": 96, "norm_eps": 1e-5}


@pytest.fixture(scope="module")
def checkpoint(tiny_data, tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=read_manifest(tiny_data["tokens"])["vocab_size"], hidden_size=64,
                      intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False)
    folder = tmp_path_factory.mktemp("llama")
    LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder, LlamaForCausalLM.from_pretrained(folder).eval()


def trainer(run_cfg, tiny_data, tmp_path, arch="llama", **model):
    run_cfg["model"] = {"arch": arch, "seq_len": 32, "dropout": 0.0, **SHAPE, **model}
    return lambda source: Trainer({**run_cfg, "train": {**run_cfg["train"], "init_from": str(source)}},
                                  tiny_data["tokens"], tmp_path / "run")


def test_a_llama_run_starts_from_the_checkpoint_and_is_bound_to_its_files(checkpoint, run_cfg, tiny_data, tmp_path):
    folder, hf = checkpoint
    t = trainer(run_cfg, tiny_data, tmp_path)(folder)
    x = torch.randint(0, hf.config.vocab_size, (2, 32))
    with torch.no_grad():
        torch.testing.assert_close(t.model(x)["logits"], hf(x).logits, atol=1e-5, rtol=1e-5)
    assert set(t.binding["init_from"]["sha256"]) == {"config.json", "model.safetensors"}
    t.run()
    manifest = json.loads((tmp_path / "run" / "final" / "manifest.json").read_text())
    assert manifest["init_from"] == t.binding["init_from"]  # the weights it started from, after training too


def test_pm_and_conceptlm_rows_start_as_section_4_3_says(checkpoint, run_cfg, tiny_data, tmp_path):
    folder, hf = checkpoint
    plain = trainer(run_cfg, tiny_data, tmp_path / "a")(folder).model
    pm = trainer(run_cfg, tiny_data, tmp_path / "b", n_layer=5)(folder).model
    for ours, source in zip(pm.blocks, [0, 0, 1, 1, 2], strict=True):  # L0 | copies of L0, L1 | L1, L2
        assert all(torch.equal(a, b)
                   for a, b in zip(ours.state_dict().values(), plain.blocks[source].state_dict().values()))
    concept = trainer(run_cfg, tiny_data, tmp_path / "c", arch="conceptlm_llama", concept_layers=2,
                      chunk_size=4)(folder).model
    for concept_block, block in zip(concept.concept_blocks, plain.blocks[:2], strict=True):
        assert all(torch.equal(a, b) for a, b in zip(concept_block.state_dict().values(), block.state_dict().values()))
    assert torch.equal(concept.lm_head.weight, plain.lm_head.weight)


def test_another_shape_or_an_unloadable_source_is_one_line_naming_the_key(checkpoint, run_cfg, tiny_data, tmp_path,
                                                                         monkeypatch):
    folder, _ = checkpoint
    with pytest.raises(ReproError, match=r"train.init_from=.*: model.d_model is 32, "
                                         r"the checkpoint's 64; set it to the"):
        trainer(run_cfg, tiny_data, tmp_path / "a", d_model=32, n_head=2, n_kv_head=1)(folder)
    with pytest.raises(ReproError, match=r"model.n_kv_head is 4, the checkpoint's 2"):
        trainer(run_cfg, tiny_data, tmp_path / "b", n_kv_head=None)(folder)
    with pytest.raises(ReproError, match="ConceptLM keeps the checkpoint's 3 token layers"):
        trainer(run_cfg, tiny_data, tmp_path / "c", arch="conceptlm_llama", n_layer=5, chunk_size=4)(folder)
    with pytest.raises(ReproError, match=r"model.n_layer is 2, below the checkpoint's 3 layers; set it to 3"):
        trainer(run_cfg, tiny_data, tmp_path / "e", n_layer=2)(folder)
    with pytest.raises(ReproError, match="no such folder; fix the path"):
        trainer(run_cfg, tiny_data, tmp_path / "f")(tmp_path / "nowhere")
    offline(monkeypatch)
    with pytest.raises(ReproError) as error:  # a hub name that is not in the cache
        trainer(run_cfg, tiny_data, tmp_path / "d")("nobody/no-such-llama")
    assert "cannot fetch it from the hub" in str(error.value) and "\n" not in str(error.value)


def offline(monkeypatch, cache: Path | None = None) -> None:
    import huggingface_hub.constants as hub

    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    if cache is not None:
        monkeypatch.setattr(hub, "HF_HUB_CACHE", str(cache))


def test_a_hub_name_is_bound_to_its_snapshots_commit(checkpoint, run_cfg, tiny_data, tmp_path, monkeypatch):
    """A hub name loads from the HF cache (here one the test lays out: refs/main -> snapshots/<commit>/), and
    the run is bound to that commit, so a new revision of the weights never resumes an old checkpoint."""
    import shutil

    folder, _ = checkpoint
    repo = tmp_path / "hub" / "models--nobody--tiny-llama"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    offline(monkeypatch, tmp_path / "hub")
    t = trainer(run_cfg, tiny_data, tmp_path)("nobody/tiny-llama")
    assert t.binding["init_from"] == {"source": "nobody/tiny-llama", "commit": commit}


def test_a_foreign_or_broken_checkpoint_is_refused_before_its_weights_load(checkpoint, run_cfg, tiny_data, tmp_path):
    import shutil

    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=50)).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(ReproError, match="a gpt2 checkpoint, not a Llama one"):
        trainer(run_cfg, tiny_data, tmp_path / "a")(tmp_path / "gpt2")
    folder, _ = checkpoint
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ReproError) as error:
        trainer(run_cfg, tiny_data, tmp_path / "b")(broken)
    assert "cannot read its weights" in str(error.value) and "\n" not in str(error.value)


def test_init_from_a_family_that_cannot_load_llama_is_refused_by_the_profile():
    import yaml

    from tests.workflows.test_workflow import ROOT
    from workflows.experiments import ConfigError, resolve, validate

    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    config.pop("scaling_laws")
    config["experiments"] = [{"id": "g", "overrides": {"train.init_from": "meta-llama/Llama-3.1-8B"}}]
    with pytest.raises(ConfigError, match="train.init_from: a LlamaForCausalLM loads into llama and conceptlm_llama "
                                          "only, not model.arch=gpt2"):
        resolve(validate(config))
