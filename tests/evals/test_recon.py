"""Reconstruction accuracy of an NCM tokenizer from its first k scales (evals/recon.py): per-k metrics of
a tokenizer trained through the trainer rise with k and equal an independent computation on the first
full test windows; the scale index, the windows and the exact-window count are wired as documented
(a tokenizer whose decoder is replaced by a known rule); an ncm run is measured through its frozen
tokenizer; the result does not depend on the batch size; a run without a tokenizer and foreign tokens
are refused."""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch

from evals.perplexity import load_trained
from evals.recon import ReconEvalError, evaluate_recon
from models.ncm_tokenizer import NCMTokenizer
from tests.conftest import TINY_RUN
from trainer.data import DataError, open_split
from trainer.train import Trainer

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "config" / "schemas" / "result.schema.json").read_text())
TOK = {"arch": "ncm_tokenizer", "seq_len": 32, "d_model": 32, "n_layer": 1, "n_head": 2, "codebook_size": 32,
       "d_code": 8, "n_scales": 4, "nested_dropout": 0.5}
K, L = 4, 32


def run(tokens: Path, run_dir: Path, model: dict, steps: int, upstream: Path | None = None, **train) -> Path:
    """``run_dir`` after training ``model`` for ``steps`` steps through the trainer (its ``final/`` as the
    pipeline writes it); an ncm generator first loads its tokenizer from ``upstream``."""
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"] = copy.deepcopy(model)
    cfg["train"].update(steps=steps, log_interval=steps, eval_interval=steps, checkpoint_interval=steps, **train)
    trainer = Trainer(cfg, tokens, run_dir, threads=1)
    if upstream is not None:
        trainer.model.load_upstream(upstream / "final")
    trainer.run()
    return run_dir


@pytest.fixture(scope="module")
def tok_run(tiny_data, tmp_path_factory) -> Path:
    """A tiny tokenizer trained 300 steps (exact reconstruction from all K scales ~0.8, from one ~0.1)."""
    return run(tiny_data["tokens"], tmp_path_factory.mktemp("ncm_tok"), TOK, 300, batch_size=16,
               micro_batch_size=16, lr=3e-3, loss_weights={"rec": 1.0, "vq": 1.0})


@pytest.fixture(scope="module")
def ncm_run(tiny_data, tok_run, tmp_path_factory) -> Path:
    gen = {"arch": "ncm", "seq_len": L, "d_model": 32, "n_layer": 1, "n_head": 2, "tokenizer": TOK}
    return run(tiny_data["tokens"], tmp_path_factory.mktemp("ncm_gen"), gen, 2, upstream=tok_run,
               loss_weights={"gen": 1.0})


def reference(model: NCMTokenizer, tokens: np.ndarray, n: int) -> dict[int, float]:
    """Per-k token accuracy computed apart from the evaluation: the first n windows tokens[i L:(i + 1) L],
    the full logits of ``reconstruct`` one window at a time."""
    hits = dict.fromkeys(range(1, K + 1), 0)
    with torch.no_grad():
        for i in range(n):
            x = torch.from_numpy(np.asarray(tokens[i * L:(i + 1) * L], dtype=np.int64))[None]
            codes = model.encode(x)
            for k in hits:
                hits[k] += (model.reconstruct(codes, k).argmax(-1) == x).sum().item()
    return {k: h / (n * L) for k, h in hits.items()}


@pytest.mark.slow
def test_metrics_for_every_k_rise_with_k_and_match_an_independent_count(tok_run, tiny_data, tmp_path):
    r = evaluate_recon(tok_run / "final", tiny_data["tokens"], tmp_path / "recon.json", batch_size=5, max_windows=40)
    jsonschema.validate(r, SCHEMA)
    assert json.loads((tmp_path / "recon.json").read_text()) == r and r["eval"] == "recon"
    m, d = r["metrics"], r["details"]
    assert set(m) == {"test/token_acc", *(f"test/token_acc_k{k}" for k in range(1, K + 1)), "test/seq_exact",
                      "model/K", "model/params", "model/seq_len"}
    assert m["model/K"] == K and m["model/seq_len"] == L and d["scale_lengths"] == [2, 6, 13, 32]
    assert d["windows"] == 40 and d["tokens"] == 40 * L and d["windows_available"] > 40
    manifest = json.loads((tok_run / "final" / "manifest.json").read_text())
    assert m["model/params"] == manifest["non_embedding_params"]
    acc = [m[f"test/token_acc_k{k}"] for k in range(1, K + 1)]
    assert m["test/token_acc"] == acc[-1] and all(0 <= a <= 1 for a in acc) and 0 <= m["test/seq_exact"] <= 1
    assert all(b >= a - 0.02 for a, b in zip(acc, acc[1:])), acc
    assert acc[-1] > acc[0] + 0.3, acc  # the trained tokenizer needs its finer scales
    model, _ = load_trained(tok_run / "final", device="cpu")
    expected = reference(model, open_split(tiny_data["tokens"], "test"), 40)
    assert acc == pytest.approx([expected[k] for k in range(1, K + 1)], abs=1e-12)


def test_scales_windows_and_exact_windows_are_wired_as_documented(tok_run, tiny_data, tmp_path, monkeypatch):
    """The decoder replaced by a rule: from k scales exactly the first l_k positions come back, and
    position 0 never does in a window whose first token is odd. Every metric then follows in closed form
    from the windows' contents; a wrong k, window or exact-window count would not."""
    encode, cumulative = NCMTokenizer.encode, NCMTokenizer.cumulative

    def spy_encode(self, idx):
        self.seen = idx
        return encode(self, idx)

    def spy_cumulative(self, codes, k):
        self.k_used = k
        return cumulative(self, codes, k)

    def rule_tokens(self, h, rows=4096):
        x = self.seen
        pred = x.clone()
        pred[:, self.lengths[self.k_used - 1]:] = -1
        pred[x[:, 0] % 2 == 1, 0] = -1
        return pred

    monkeypatch.setattr(NCMTokenizer, "encode", spy_encode)
    monkeypatch.setattr(NCMTokenizer, "cumulative", spy_cumulative)
    monkeypatch.setattr(NCMTokenizer, "tokens", rule_tokens)
    n = 30
    m = evaluate_recon(tok_run / "final", tiny_data["tokens"], tmp_path / "recon.json", batch_size=7,
                       max_windows=n)["metrics"]
    tokens = open_split(tiny_data["tokens"], "test")
    odd = sum(int(tokens[i * L]) % 2 for i in range(n))
    lengths = [2, 6, 13, 32]
    for k in range(1, K + 1):
        assert m[f"test/token_acc_k{k}"] == pytest.approx((n * lengths[k - 1] - odd) / (n * L), abs=1e-12), k
    assert m["test/token_acc"] == pytest.approx((n * L - odd) / (n * L), abs=1e-12)
    assert 0 < odd < n and m["test/seq_exact"] == pytest.approx((n - odd) / n, abs=1e-12)


def test_batch_size_invariant_and_all_windows_with_none(tok_run, tiny_data, tmp_path):
    a = evaluate_recon(tok_run / "final", tiny_data["tokens"], tmp_path / "a" / "recon.json", batch_size=3,
                       max_windows=None)
    b = evaluate_recon(tok_run / "final", tiny_data["tokens"], tmp_path / "b" / "recon.json", batch_size=64,
                       max_windows=None)
    assert a["metrics"] == b["metrics"]
    assert {k: v for k, v in a["details"].items() if k != "batch_size"} == \
        {k: v for k, v in b["details"].items() if k != "batch_size"}
    n_tokens = len(open_split(tiny_data["tokens"], "test"))
    assert a["details"]["windows"] == a["details"]["windows_available"] == (n_tokens - 1) // L


def test_ncm_run_is_measured_through_its_frozen_tokenizer(tok_run, ncm_run, tiny_data, tmp_path):
    tok = evaluate_recon(tok_run / "final", tiny_data["tokens"], tmp_path / "tok" / "recon.json", max_windows=20)
    gen = evaluate_recon(ncm_run / "final", tiny_data["tokens"], tmp_path / "gen" / "recon.json", max_windows=20)
    jsonschema.validate(gen, SCHEMA)
    manifest = json.loads((ncm_run / "final" / "manifest.json").read_text())
    assert gen["metrics"] == tok["metrics"]  # the same weights, so the same numbers, and the tokenizer's params
    assert gen["metrics"]["model/params"] != manifest["non_embedding_params"]
    assert "frozen tokenizer" in gen["details"]["tokenizer"] and tok["details"]["tokenizer"] == "the run's own model"


def test_run_without_tokenizer_is_refused_in_one_line(tiny_data, tmp_path):
    gpt2 = run(tiny_data["tokens"], tmp_path / "gpt2", TINY_RUN["model"], 2)
    with pytest.raises(ReconEvalError, match="'gpt2'.*ncm_tokenizer and ncm runs only") as e:
        evaluate_recon(gpt2 / "final", tiny_data["tokens"], tmp_path / "recon.json")
    assert "\n" not in str(e.value) and not (tmp_path / "recon.json").exists()


def test_bad_max_windows_is_refused_in_one_line(tok_run, tiny_data, tmp_path):
    with pytest.raises(ReconEvalError, match="max_windows=0") as e:
        evaluate_recon(tok_run / "final", tiny_data["tokens"], tmp_path / "recon.json", max_windows=0)
    assert "\n" not in str(e.value) and not (tmp_path / "recon.json").exists()


def test_foreign_tokens_are_refused(tok_run, tiny_data, tmp_path):
    from corpora.tokenization import load_tokenizer, tokenize_corpus

    corpus = tmp_path / "corpus"
    shutil.copytree(tiny_data["corpus"], corpus)
    test = corpus / "test.jsonl"
    test.write_text(test.read_text().replace("cat", "dog"))
    tokenize_corpus(corpus, load_tokenizer({"kind": "bpe"}, tiny_data["tokenizer"]), tmp_path / "tokens")
    with pytest.raises(DataError, match="splits .*differs from .*that .*was trained on"):
        evaluate_recon(tok_run / "final", tmp_path / "tokens", tmp_path / "recon.json")
    assert not (tmp_path / "recon.json").exists()
