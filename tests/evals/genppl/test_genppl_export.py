"""The embedded judge: a trained GPT-2 run exported to a transformers folder loads offline with the
Auto classes and reproduces our logits and tokenizer; the score command runs end to end on it and
writes a schema-valid result."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def exported(judge_run, tmp_path_factory):
    from workflows.cli import main

    out = tmp_path_factory.mktemp("export") / "judge"
    assert main(["export-judge", "--run-dir", str(judge_run["run_dir"]), "--tokenizer", str(judge_run["tokenizer"]),
                 "--out", str(out)]) == 0
    return out


def test_exported_judge_loads_offline_and_reproduces_our_logits(judge_run, exported):
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evals.perplexity import load_trained

    assert {"config.json", "model.safetensors", "tokenizer.json", "judge_manifest.json"} <= {
        p.name for p in exported.iterdir()}
    ours, manifest = load_trained(judge_run["final"], device="cpu")
    hf = AutoModelForCausalLM.from_pretrained(exported, local_files_only=True).eval()
    hf_tok = AutoTokenizer.from_pretrained(exported, local_files_only=True)
    idx = torch.randint(0, manifest["vocab_size"], (3, 32), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        diff = (hf(idx).logits - ours(idx)["logits"]).abs().max().item()
    assert diff < 1e-4
    bpe = Tokenizer.from_file(str(judge_run["tokenizer"]))
    text = "the cat sees a red house.<|endoftext|>the dog runs"
    assert hf_tok(text)["input_ids"] == bpe.encode(text).ids
    eot = bpe.token_to_id("<|endoftext|>")
    assert hf_tok.eos_token_id == hf_tok.pad_token_id == eot == hf.config.eos_token_id
    record = json.loads((exported / "judge_manifest.json").read_text())
    assert record["checkpoint_sha256"] == manifest["model_sha256"] and record["parity_max_abs_logit_diff"] < 1e-4


def test_export_refuses_non_gpt2_runs_and_models(judge_run, tmp_path):
    from evals.genppl import GenPPLError, export_judge
    from models.configs import TokenLMConfig
    from models.hf_gpt2 import to_hf_gpt2
    from models.token_lm import TokenLM

    fake = tmp_path / "run"
    shutil.copytree(judge_run["final"], fake / "final")
    manifest = json.loads((fake / "final" / "manifest.json").read_text())
    manifest["config"]["model"]["arch"] = "pythia"
    (fake / "final" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(GenPPLError, match="only GPT-2 runs"):
        export_judge(fake, judge_run["tokenizer"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    rms = TokenLM(TokenLMConfig(vocab_size=16, seq_len=8, d_model=8, n_layer=1, n_head=2, norm="rmsnorm"))
    with pytest.raises(ValueError, match="does not export to GPT-2"):
        to_hf_gpt2(rms)


def test_score_end_to_end_with_the_exported_judge(judge_run, exported, tmp_path):
    """Samples = synthetic-world documents in the run's tokenizer: Gen PPL under the exported judge,
    entropy, world acceptance (all accepted, exact NLL); the result validates against the schema."""
    import jsonschema

    from corpora.synthetic import WorldConfig, generate_split
    from evals.genppl import load_model_tokenizer
    from workflows.cli import main
    from tests.evals.genppl.conftest import write_samples

    world = {"source": "synthetic", "seed": 2, "synthetic": {"train_docs": 1, "valid_docs": 1, "test_docs": 5}}
    docs = list(generate_split(WorldConfig(**world["synthetic"]), "test", 2))
    tok = load_model_tokenizer(judge_run["tokenizer"])
    ids = tok.encode_batch(["<|endoftext|>" + d["text"] + "<|endoftext|>" for d in docs])
    write_samples(tmp_path / "samples.jsonl", [{"ids": row} for row in ids])
    (tmp_path / "world.json").write_text(json.dumps({"corpus": world, "tokenizer": {"kind": "bpe"}}))  # data settings
    out = tmp_path / "eval" / "genppl.json"
    out.parent.mkdir()
    assert main(["score-samples", "--samples", str(tmp_path / "samples.jsonl"), "--judge", str(exported),
                 "--model-tokenizer", str(judge_run["tokenizer"]), "--run-dir", str(judge_run["run_dir"]),
                 "--world-settings", str(tmp_path / "world.json"), "--max-length", "32", "--batch-size", "3",
                 "--out", str(out)]) == 0
    r = json.loads(out.read_text())
    jsonschema.validate(r, json.loads((ROOT / "config/schemas/result.schema.json").read_text()))
    m = r["metrics"]
    assert r["eval"] == "genppl" and r["experiment"] == "judge_tiny"
    assert m["genppl/ppl"] == m["genppl/ppl/judge"] > 1 and m["samples/n"] == 5
    assert m["world/doc_accept_rate"] == 1.0 and m["world/accepted_docs"] == 5
    tokens = sum(len(row) - 1 for row in ids)  # each row: EOT doc EOT -> the doc's tokens + its closing EOT
    assert m["world/nll_per_token"] == pytest.approx(-math.fsum(d["logprob"] for d in docs) / tokens)
    assert r["details"]["judges"]["judge"]["exported_from"]["experiment"] == "judge_tiny"
    assert (r["details"]["protocol"]["max_length"] == 32
            and r["details"]["world"]["settings_from"].endswith("world.json"))
    # a real corpus has no grammar: the world is skipped and says why; the run's own corpus is not synthetic
    (tmp_path / "lm1b.json").write_text(json.dumps({"corpus": {"id": "lm1b", "source": "hf", "seed": 0}}))
    for extra in (["--world-settings", str(tmp_path / "lm1b.json")], []):
        assert main(["score-samples", "--samples", str(tmp_path / "samples.jsonl"), "--judge", str(exported),
                     "--model-tokenizer", str(judge_run["tokenizer"]), "--run-dir", str(judge_run["run_dir"]),
                     "--out", str(out), *extra]) == 0
        r = json.loads(out.read_text())
        assert "skipped" in r["details"]["world"] and not any(k.startswith("world/") for k in r["metrics"])
        assert r["details"]["protocol"]["max_length"] == 32  # the run's model.seq_len


def test_a_run_on_a_pretrained_tokenizer_exports_that_tokenizer(judge_run, tmp_path):
    """A judge trained on a pretrained tokenizer (config/small.yaml) exports the tokenizer the run loaded:
    here a local transformers folder holding the same BPE, named as tokenizer.name."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from corpora.tokenization import pretrained_tokenizer
    from evals.genppl.export import export_judge
    from evals.genppl.protocol import EOT

    folder = tmp_path / "local_tok"
    PreTrainedTokenizerFast(tokenizer_file=str(judge_run["tokenizer"]), eos_token=EOT).save_pretrained(folder)
    sha256 = pretrained_tokenizer(str(folder))[1]  # a local folder is hashed by its files
    final = tmp_path / "run" / "final"
    shutil.copytree(judge_run["final"], final)
    manifest = json.loads((final / "manifest.json").read_text())
    manifest["config"]["tokenizer"] = {"kind": "pretrained", "name": str(folder)}
    manifest["data"]["tokenizer_sha256"] = sha256
    (final / "manifest.json").write_text(json.dumps(manifest))
    stub = tmp_path / "tokenizer.json"  # what the tokenizer rule writes for a pretrained tokenizer
    stub.write_text(json.dumps({"pretrained": str(folder), "vocab_size": manifest["vocab_size"]}))
    out = export_judge(final.parent, stub, tmp_path / "judge")
    hf_tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert hf_tok.eos_token == EOT and hf_tok.pad_token == EOT and hf_tok.model_max_length == 32
    assert json.loads((out / "judge_manifest.json").read_text())["tokenizer_sha256"] == sha256 != f"pretrained:{folder}"
