"""NCM mechanism checks (evals/mechanisms_ncm.py) on tiny runs trained through the trainer: the keys and
checks as documented; reconstruction from all scales at least that from one and entropies at most
ln |V|; a scale of constant codes has entropy 0; gen_ce is the training loss's per-scale term; a
generator forced uniform scores ln |V| everywhere and fails gen_beats_marginal; the most-frequent-token
floor on planted tokens."""
from __future__ import annotations

import copy
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from evals.mechanisms_ncm import (MechanismsNCMError, check_ncm, code_counts, entropy, marginal_ce,
                                  most_frequent_share, split_windows)
from evals.perplexity import load_trained
from models.ncm_tokenizer import NCMTokenizer
from tests.conftest import LAYOUT
from tests.conftest import TINY_RUN
from trainer.data import View, open_split
from trainer.train import Trainer

TOK = {"arch": "ncm_tokenizer", "seq_len": 32, "d_model": 32, "n_layer": 1, "n_head": 2, "codebook_size": 32,
       "d_code": 8, "n_scales": 4, "nested_dropout": 0.5}
K, L, V = 4, 32, 32
LENGTHS = (2, 6, 13, 32)


def train_run(tokens: Path, run_dir: Path, model: dict, steps: int, upstream: Path | None = None, **train) -> Path:
    """``run_dir/final`` after ``steps`` trainer steps of ``model`` (an ncm generator first loads its
    tokenizer from ``upstream``)."""
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"] = copy.deepcopy(model)
    cfg["train"].update(steps=steps, log_interval=steps, eval_interval=steps, checkpoint_interval=steps, **train)
    trainer = Trainer(cfg, tokens, run_dir, threads=1)
    if upstream is not None:
        trainer.model.load_upstream(upstream)
    trainer.run()
    return run_dir / "final"


@pytest.fixture(scope="module")
def tok_final(tiny_data, tmp_path_factory) -> Path:
    return train_run(tiny_data["tokens"], tmp_path_factory.mktemp("mech_tok"), TOK, 150, batch_size=16,
                     micro_batch_size=16, lr=3e-3, loss_weights={"rec": 1.0, "vq": 1.0})


@pytest.fixture(scope="module")
def gen_final(tiny_data, tok_final, tmp_path_factory) -> Path:
    gen = {"arch": "ncm", "seq_len": L, "d_model": 32, "n_layer": 1, "n_head": 2, "tokenizer": TOK}
    return train_run(tiny_data["tokens"], tmp_path_factory.mktemp("mech_gen"), gen, 30, upstream=tok_final,
                     batch_size=16, micro_batch_size=16, loss_weights={"gen": 1.0})


def measured(tokens_dir: Path, n: int) -> torch.Tensor:
    """The n test windows the checks read, computed apart: window i * available // n of the stream."""
    tokens = open_split(tokens_dir, "test")
    available = (len(tokens) - 1) // L
    return torch.stack([torch.from_numpy(np.asarray(tokens[s * L:(s + 1) * L], dtype=np.int64))
                        for s in (i * available // n for i in range(n))])


def check(final: Path, tokens: Path, **kw):
    model, manifest = load_trained(final, device="cpu")
    return (model, *check_ncm(model, manifest, final, tokens, **kw))


def test_tokenizer_metrics_keys_and_checks(tok_final, tiny_data):
    model, m, d = check(tok_final, tiny_data["tokens"], max_windows=20, batch_size=7)
    assert set(m) == {*(f"mech/recon_k{k}" for k in range(1, K + 1)), "mech/recon_half", "mech/mft_floor",
                      *(f"mech/code_entropy_s{k}" for k in range(1, K + 1)), "mech/code_entropy_max",
                      "mech/intact_nll"}
    assert all(isinstance(v, float) for v in m.values())
    assert m[f"mech/recon_k{K}"] >= m["mech/recon_k1"] and m["mech/recon_half"] == m["mech/recon_k2"]
    assert m["mech/code_entropy_max"] == pytest.approx(math.log(V))
    assert all(0.0 <= m[f"mech/code_entropy_s{k}"] <= math.log(V) + 1e-9 for k in range(1, K + 1))
    assert m["mech/intact_nll"] == pytest.approx(1 - m[f"mech/recon_k{K}"])
    assert d["windows"] == 20 and d["K"] == K and d["codebook_size"] == V and d["scale_lengths"] == list(LENGTHS)
    assert d["recon"] == [m[f"mech/recon_k{k}"] for k in range(1, K + 1)] and len(d["code_entropy"]) == K
    assert [c["name"] for c in d["checks"]] == ["recon_half_above_floor", "recon_full"]
    half, full = d["checks"]
    assert half == {"name": "recon_half_above_floor", "key": "mech/recon_half", "kind": "floor",
                    "floor": pytest.approx(m["mech/mft_floor"] + 0.05), "gate": True, "what": half["what"]}
    assert full["key"] == f"mech/recon_k{K}" and full["floor"] == 0.99 and full["gate"] is False
    # the floor and the accuracy on the evenly spaced disjoint windows
    windows = measured(tiny_data["tokens"], 20)
    assert m["mech/mft_floor"] == most_frequent_share(windows) and d["windows_available"] > 20
    with torch.no_grad():
        pred = model.reconstruct(model.encode(windows)).argmax(-1)
    assert m[f"mech/recon_k{K}"] == pytest.approx((pred == windows).sum().item() / windows.numel(), abs=1e-12)
    # batching changes nothing
    assert check(tok_final, tiny_data["tokens"], max_windows=20, batch_size=20)[1] == m


def test_a_scale_of_constant_codes_has_zero_entropy(tok_final, tiny_data, monkeypatch):
    encode = NCMTokenizer.encode

    def planted(self, idx):
        codes = encode(self, idx)
        return [torch.full_like(c, 3) if k == 1 else c for k, c in enumerate(codes)]

    monkeypatch.setattr(NCMTokenizer, "encode", planted)
    _, m, _ = check(tok_final, tiny_data["tokens"], max_windows=10)
    assert m["mech/code_entropy_s2"] == 0.0 and m["mech/code_entropy_s4"] > 0.0
    assert entropy(torch.tensor([[0, 5, 0, 0], [1, 1, 1, 1]])) == pytest.approx([0.0, math.log(4)])


def test_gen_ce_is_the_training_loss_per_scale_term(gen_final, tiny_data):
    model, m, d = check(gen_final, tiny_data["tokens"], max_windows=12, batch_size=5)
    generator = {*(f"mech/gen_ce_s{k}" for k in range(1, K + 1)), *(f"mech/marginal_ce_s{k}" for k in range(1, K + 1)),
                 "mech/gen_over_marginal_scales", "mech/gen_code_nll_window", "mech/tokens_per_window"}
    assert generator <= set(m) and "mech/recon_k4" in m and "mech/code_entropy_s1" in m
    assert [c["name"] for c in d["checks"]] == ["recon_half_above_floor", "recon_full", "gen_beats_marginal"]
    assert d["checks"][2]["floor"] == K - 1.5 and d["checks"][2]["gate"] is True  # unconditional: scales 2..K
    assert d["judged_scales"] == list(range(2, K + 1))
    assert d["marginal_split"] == "train" and d["marginal_windows"] > 12
    # independently: the clean teacher-forced logits' cross-entropy per scale on the same 12 windows
    x = measured(tiny_data["tokens"], 12)
    with torch.no_grad():
        codes = model.tokenizer.encode(x)
        logits = model.eval().logits(codes)
        loss_terms = model(x, x)["metrics"]
    o = model.offsets
    for k in range(K):
        ce = F.cross_entropy(logits[:, o[k]:o[k + 1]].flatten(0, 1), codes[k].flatten()).item()
        assert m[f"mech/gen_ce_s{k + 1}"] == pytest.approx(ce, abs=1e-5)
        assert m[f"mech/gen_ce_s{k + 1}"] == pytest.approx(loss_terms[f"ce_s{k + 1}"], abs=1e-5)
    nll = sum(l * m[f"mech/gen_ce_s{k + 1}"] for k, l in enumerate(LENGTHS))
    assert m["mech/gen_code_nll_window"] == pytest.approx(nll) and m["mech/tokens_per_window"] == L
    assert m["mech/intact_nll"] == pytest.approx(nll / sum(LENGTHS))
    below = [m[f"mech/gen_ce_s{k}"] < m[f"mech/marginal_ce_s{k}"] for k in range(1, K + 1)]
    assert m["mech/gen_over_marginal_scales"] == sum(below) and d["gen_below_marginal"] == below
    assert d["gen_ce"] == [m[f"mech/gen_ce_s{k}"] for k in range(1, K + 1)] and len(d["marginal_ce"]) == K


def test_a_uniform_generator_scores_ln_V_and_fails_the_marginal_check(gen_final, tiny_data):
    model, manifest = load_trained(gen_final, device="cpu")
    with torch.no_grad():
        model.head.weight.zero_()
    m, d = check_ncm(model, manifest, gen_final, tiny_data["tokens"], max_windows=16)
    for k in range(1, K + 1):
        assert m[f"mech/gen_ce_s{k}"] == pytest.approx(math.log(V), abs=1e-5)
    # the codes are far from uniform (entropy well under ln V), so their unigram beats ln V on every scale
    assert all(m[f"mech/code_entropy_s{k}"] < math.log(V) - 0.1 for k in range(1, K + 1))
    assert m["mech/gen_over_marginal_scales"] == 0.0
    gate = next(c for c in d["checks"] if c["name"] == "gen_beats_marginal")
    assert not m[gate["key"]] > gate["floor"]


def test_marginal_ce_on_test_windows_is_the_smoothed_plug_in(gen_final, tiny_data):
    _, m, d = check(gen_final, tiny_data["tokens"], max_windows=8, marginal_split="test")
    assert d["marginal_split"] == "test" and d["marginal_windows"] == 8
    # in-sample unigram: cross-entropy a little above the (unsmoothed) code entropy
    for k in range(1, K + 1):
        assert m[f"mech/marginal_ce_s{k}"] >= m[f"mech/code_entropy_s{k}"] - 1e-9


def test_marginal_ce_and_most_frequent_share_on_planted_arrays():
    counts = torch.tensor([[3, 1, 0, 0]])
    train = torch.tensor([[5, 1, 1, 1]])
    q = np.array([6, 2, 2, 2]) / 12  # add-one
    assert marginal_ce(counts, train) == pytest.approx([-(3 * math.log(q[0]) + math.log(q[1])) / 4])
    assert code_counts([torch.tensor([[0, 0], [3, 0]])], 4).tolist() == [[3, 0, 0, 1]]
    tokens = torch.tensor([[7, 7, 2, 7], [1, 7, 2, 0]])
    assert most_frequent_share(tokens) == 4 / 8
    assert most_frequent_share(torch.full((3, 5), 9)) == 1.0


def test_windows_follow_the_run_view():
    tokens = np.arange(100)
    w, available = split_windows(tokens, View(30, 10, 20, 0), 2)  # paired records of 30, targets at 10
    assert available == 3 and w.tolist() == [list(range(10, 30)), list(range(40, 60))]  # windows 0 and 3 // 2
    w, available = split_windows(tokens, View(10, 0, 10, 0), 3)  # a stream: 9 windows, 0, 3 and 6 measured
    assert available == 9 and w[:, 0].tolist() == [0, 30, 60]
    assert split_windows(tokens, View(40, 0, 40, 0), None)[0].shape == (2, 40)
    assert split_windows(tokens, View(40, 0, 40, 0), 5)[0].shape == (2, 40)


def test_a_conditional_generator_reads_whole_examples_and_encodes_their_targets(tiny_pairs, tmp_path):
    """Paired data: the tokenizer on the targets (seq_len = target_len), the generator on source + target
    (prefix_len = source_len); the tokenizer part sees the targets, gen_ce the forward with its source."""
    P, T = LAYOUT["source_len"], LAYOUT["target_len"]
    tok = {**TOK, "seq_len": T, "n_scales": 3}

    def paired(name, model, steps, **train):
        cfg = copy.deepcopy(TINY_RUN)
        cfg.update(id=name, corpus=tiny_pairs["corpus_cfg"], layout=dict(LAYOUT), model=model)
        cfg["train"].update(steps=steps, log_interval=steps, eval_interval=steps, checkpoint_interval=steps, **train)
        trainer = Trainer(cfg, tiny_pairs["tokens"], tmp_path / name, threads=1)
        if name == "gen":
            trainer.model.load_upstream(tmp_path / "tok" / "final")
        trainer.run()
        return tmp_path / name / "final"

    paired("tok", tok, 20, loss_weights={"rec": 1.0, "vq": 1.0})
    gen = paired("gen", {"arch": "ncm", "seq_len": P + T, "prefix_len": P, "d_model": 32, "n_layer": 1,
                         "n_head": 2, "tokenizer": tok}, 4, loss_weights={"gen": 1.0})
    model, m, d = check(gen, tiny_pairs["tokens"], max_windows=8)
    tokens = open_split(tiny_pairs["tokens"], "test")
    available = (len(tokens) - 1) // (P + T)
    x = torch.stack([torch.from_numpy(np.asarray(tokens[s * (P + T):(s + 1) * (P + T)], dtype=np.int64))
                     for s in (i * available // 8 for i in range(8))])
    assert d["windows"] == 8 and d["windows_available"] == available and d["tokens"] == 8 * T
    assert m["mech/tokens_per_window"] == T and m["mech/mft_floor"] == most_frequent_share(x[:, P:])
    with torch.no_grad():
        loss_terms = model.eval()(x, x)["metrics"]
    for k in range(1, 4):
        assert m[f"mech/gen_ce_s{k}"] == pytest.approx(loss_terms[f"ce_s{k}"], abs=1e-5)


def test_a_run_without_ncm_is_refused_in_one_line(tiny_data, tmp_path):
    final = train_run(tiny_data["tokens"], tmp_path / "gpt2", TINY_RUN["model"], 2)
    model, manifest = load_trained(final, device="cpu")
    with pytest.raises(MechanismsNCMError, match="'gpt2'.*ncm_tokenizer and ncm runs only") as e:
        check_ncm(model, manifest, final, tiny_data["tokens"])
    assert "\n" not in str(e.value)


def test_wall_time_is_small(gen_final, tiny_data):
    model, manifest = load_trained(gen_final, device="cpu")
    t0 = time.perf_counter()
    check_ncm(model, manifest, gen_final, tiny_data["tokens"])
    assert time.perf_counter() - t0 < 30
