"""Mechanism checks of DLCM (evals/mechanisms.py; the decoder's cross-attention, Eq. 16-17) and the boundary F1
reference levels (evals/boundaries.py): on a trained tiny run every intervention moves the NLL and the
realised ratio is the eval-mode boundaries'; with the cross-attention's output projection zeroed none does;
null_only and zero are what they say; the swap keeps the current segmentation; the default forward is
bit-identical afterwards; the shifted F1 keeps the predicted count and the word-start rule its definition."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch

from evals.boundaries import boundary_scores, evaluate_boundaries, f1_scores, shifted, true_boundaries
from evals.mechanisms import dlcm_checks, evaluate_mechanisms, intervening, mean_nll, select_windows, swapped_rows
from evals.perplexity import load_trained
from tests.conftest import TINY_RUN
from trainer.data import open_split
from trainer.train import Trainer

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "config" / "schemas" / "result.schema.json").read_text())
L = 32
CUT = 1e-6


@pytest.fixture(scope="module")
def dlcm_run(world, tmp_path_factory) -> Path:
    cfg = copy.deepcopy(TINY_RUN)
    cfg["model"] = {"arch": "dlcm_gpt2", "seq_len": L, "d_model": 32, "n_layer": 2, "n_head": 2, "d_concept": 32,
                    "concept_heads": 2, "concept_layers": 1, "boundary_threshold": 0.2}  # a few concepts per window
    cfg["train"].update(steps=4, log_interval=2, eval_interval=4, checkpoint_interval=4,
                        loss_weights={"ntp": 1.0, "aux": 1.0})
    run_dir = tmp_path_factory.mktemp("dlcm_run")
    Trainer(cfg, world["tokens"], run_dir, threads=1).run()
    return run_dir


def windows_of(world, n: int = 6) -> torch.Tensor:
    return select_windows(open_split(world["tokens"], "test"), L, n)[0]


def test_result_validates_every_intervention_moves_the_nll_and_the_ratio_is_eval_modes(dlcm_run, world, tmp_path):
    out = tmp_path / "eval" / "mechanisms.json"
    r = evaluate_mechanisms(dlcm_run / "final", world["tokens"], out, batch_size=4, max_windows=8)
    jsonschema.validate(json.loads(out.read_text()), SCHEMA)
    m, d = r["metrics"], r["details"]
    assert set(m) == {"mech/intact_nll", "mech/null_only", "mech/zero", "mech/swap",
                      "mech/tokens_per_concept_inference", "mech/target_ratio"}
    assert all(abs(m[f"mech/{k}"]) > CUT for k in ("null_only", "zero", "swap")) and m["mech/target_ratio"] == 4.0
    assert [(c["name"], c["kind"], c["gate"]) for c in d["checks"]] == [
        ("swap", "spread", True), ("null_only", "spread", True), ("zero", "spread", False)]
    model, _ = load_trained(dlcm_run / "final")
    windows = select_windows(open_split(world["tokens"], "test"), L, 8)[0]
    with torch.no_grad():
        b = model.run(windows[:, :-1])["b"]
    assert m["mech/tokens_per_concept_inference"] == pytest.approx(b.numel() / b.sum().item())
    assert d["concepts"] == b.sum().item() and d["windows"] == 8 and d["tokens"] == 8 * L


def test_a_cut_cross_attention_shows_no_effect_and_zero_is_that_cut(dlcm_run, world):
    model, _ = load_trained(dlcm_run / "final")
    windows = windows_of(world)
    intact, _ = dlcm_checks(model, windows, 4)
    with torch.no_grad():
        for block in model.cross_blocks:
            block.attn.proj.weight.zero_()
            block.attn.proj.bias.zero_()
    cut, _ = dlcm_checks(model, windows, 4)
    assert all(abs(cut[f"mech/{k}"]) < CUT for k in ("null_only", "zero", "swap"))
    assert cut["mech/intact_nll"] == pytest.approx(intact["mech/intact_nll"] + intact["mech/zero"], abs=1e-9)


def test_null_only_shows_the_null_concept_alone(dlcm_run, world):
    model, _ = load_trained(dlcm_run / "final")
    windows = windows_of(world)
    metrics, _ = dlcm_checks(model, windows, 4)
    nulls = mean_nll(model, windows, 4, lambda rows: lambda z, seg, gate: (z[:, :1].expand_as(z), seg, gate))
    assert metrics["mech/null_only"] == pytest.approx(nulls - metrics["mech/intact_nll"], abs=1e-6)


def test_swap_rows_are_the_next_windows_cut_or_continued_with_its_last_concept():
    concepts = [torch.full((3, 2), 0.0), torch.arange(4.0).repeat(2, 1).T, torch.full((6, 2), 2.0)]
    rows = swapped_rows(concepts, slice(0, 3), 5)
    assert rows.shape == (3, 5, 2)
    assert rows[0, :, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 3.0]    # window 1's four rows, its last repeated
    assert rows[1].eq(2.0).all() and rows[2].eq(0.0).all()       # window 2's cut to 5 rows; the last gets the first's


def test_interventions_leave_the_default_forward_bit_identical(dlcm_run, world):
    model, _ = load_trained(dlcm_run / "final")
    windows = windows_of(world)
    with torch.no_grad():
        before = model(windows[:, :-1])["logits"]
        with intervening(model, lambda z, seg, gate: (z, seg, gate)):
            identity = model(windows[:, :-1])["logits"]
    dlcm_checks(model, windows, 4)
    with torch.no_grad():
        after = model(windows[:, :-1])["logits"]
    assert "intervention" not in vars(model) and torch.equal(before, identity) and torch.equal(before, after)


def test_swap_is_causal_it_never_reads_the_windows_own_later_tokens(dlcm_run, world):
    """The swapped rows come from another window; the current window's segmentation (b_{<=t}) picks them:
    changing this window's tokens after t leaves the logits at <= t unchanged."""
    model, _ = load_trained(dlcm_run / "final")
    windows = windows_of(world, 2)
    other = [torch.randn(L + 1, 32)] * 2
    hook = lambda z, seg, gate: (swapped_rows(other, slice(0, 1), z.shape[1]).to(z), seg, gate)  # noqa: E731
    x = windows[:1, :-1].clone()
    y = x.clone()
    y[:, 20:] = (y[:, 20:] + 7) % 300
    with torch.no_grad(), intervening(model, hook):
        a, b = model(x)["logits"], model(y)["logits"]
    assert torch.equal(a[:, :20], b[:, :20])


def test_boundary_reference_levels_exist_and_shifting_keeps_the_predicted_count(dlcm_run, world, tmp_path):
    m = evaluate_boundaries(dlcm_run / "final", world["tokens"], tmp_path / "b.json", world["tokenizer"])["metrics"]
    keys = ("f1_tol0_shifted", "f1_tol1_shifted", "f1_tol0_wordstart", "f1_tol1_wordstart")
    assert all(0 <= m[f"test/{k}"] <= 1 for k in keys)
    assert m["test/f1_tol0_wordstart"] <= m["test/f1_tol1_wordstart"]
    tokens = open_split(world["tokens"], "test")
    n = min(64, (len(tokens) - 1) // L)
    truth = true_boundaries(world["corpus"], world["tokenizer"], tokens, n * L)
    rng = np.random.default_rng(0)
    b = rng.random((n, L)) < 0.3
    b[:, 0] = True
    scored = truth.scored[:n * L].reshape(n, L).copy()
    scored[:, 0] = False
    moved = shifted(b & scored, scored, L // 2)
    assert ((moved & ~scored).sum() == 0) and (moved.sum(1) == (b & scored).sum(1)).all()
    true = truth.opens[:n * L].reshape(n, L) & scored
    scores = boundary_scores(b, truth, L)
    assert scores["test/f1_tol0_shifted"] == f1_scores(moved, true, "_shifted")["test/f1_tol0_shifted"]
    # the shifted F1 divides by the same predicted count as the F1 itself: F1 = 2 hits / (n_pred + n_true)
    assert scores["test/f1_tol0_shifted"] * (moved.sum() + true.sum()) / 2 == pytest.approx(
        round(scores["test/f1_tol0_shifted"] * ((b & scored).sum() + true.sum()) / 2))


def test_word_start_rule_marks_the_first_token_of_every_word(world):
    from tokenizers import Tokenizer

    tokens = open_split(world["tokens"], "test")
    n = 8 * L
    truth = true_boundaries(world["corpus"], world["tokenizer"], tokens, n)
    tok = Tokenizer.from_file(str(world["tokenizer"]))
    texts = [tok.decode([int(t)]) for t in tokens[:n]]
    first = truth.scored & ~np.concatenate([[False], truth.scored[:-1]])
    expected = [bool(t.strip()) and (t[0].isspace() or (i > 0 and texts[i - 1][-1:].isspace()) or bool(first[i]))
                for i, t in enumerate(texts)]
    assert truth.word_starts.tolist() == expected and first[1] and truth.word_starts.sum() > first.sum()
    # every true concept of the world opens at a word start: the rule's recall is complete
    assert not (truth.opens & truth.scored & ~truth.word_starts).any()
