"""DLCM (models/dlcm.py): causality with learned boundaries, the boundary predictor, concept replication
against its explicit-mask reference, the compression loss (global / per-sequence, all-reduce and
micro-batch hooks), decoupled muP, learning on a fixed batch, and config errors.

The causality tests perturb one token at a time and require every earlier logit to stay identical
while the perturbation moves boundaries after it; a mutated decoder that lets a token see its own
segment's concept (the "j <= j(t)" reading, docs/sources.md, "DLCM: what the paper leaves open", item 5)
must fail the same check.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from models import dlcm
from models.dlcm import (BoundaryRouter, ConceptCrossAttention, compression_loss, ratio_loss, segment_ids,
                         visible_counts)
from models.registry import REGISTRY, build_model, flops_per_token, get_spec

V, T = 37, 24
TINY = {"d_model": 16, "n_layer": 2, "n_head": 2}
VARIANTS = {
    "dlcm_gpt2": {},                                                   # learned router, EMA, replication
    "dlcm_pythia": {},                                                 # rotary concept positions, parallel blocks
    "dlcm_llama": {"n_kv_head": 1},                                    # GQA in the cross-attention and backbone
    "dlcm_gpt2-rule": {"boundary_predictor": "rule", "boundary_threshold": 0.5, "smoothing": "none",
                       "cross_layers": "every", "n_layer": 3, "decoder_layers": 2},
    "dlcm_gpt2-mask-uniform": {"decoder_attention": "mask", "concept_weighting": "uniform"},
    "dlcm_gpt2-null-first": {"decoder_attention": "mask", "null_concept": "first_segment"},
    "dlcm_gpt2-window": {"token_window": 4},                           # the token blocks see 4 tokens back
    "dlcm_gpt2-xrope": {"cross_positions": "rotary"},                  # RoPE in the cross-attention
    "dlcm_llama-xrope": {"n_kv_head": 1, "cross_positions": "rotary"},  # ... with GQA
}


def build(variant: str = "dlcm_gpt2", seq_len: int = T, *, seed: int = 0, **extra):
    arch = variant.split("-")[0]
    torch.manual_seed(seed)
    return build_model({"arch": arch, **TINY, **VARIANTS.get(variant, {}), **extra}, vocab_size=V, seq_len=seq_len)


def tokens(b: int = 1, n: int = T, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (b, n), generator=torch.Generator().manual_seed(seed))


# --- causality -----------------------------------------------------------------------------------------
def perturbation_sweep(model, x, seed=None, exact=True):
    """For every position p: change token p; return (first p whose earlier logits changed or None,
    number of p that moved a boundary after p). ``seed``: fixed sampling noise for each forward."""
    def forward(ids):
        if seed is not None:
            torch.manual_seed(seed)
        logits = model(ids)["logits"]
        if seed is not None:
            torch.manual_seed(seed)
        return logits, model.run(ids)["b"]

    with torch.no_grad():
        ref, ref_b = forward(x)
        leak, moved = None, 0
        for p in range(x.shape[1]):
            y = x.clone()
            y[0, p] = (y[0, p] + 1) % V
            out, b = forward(y)
            same = torch.equal(out[:, :p], ref[:, :p]) if exact else torch.allclose(out[:, :p], ref[:, :p], atol=1e-5)
            if not same and leak is None:
                leak = p
            assert torch.equal(b[:, :p], ref_b[:, :p]), f"a boundary before {p} depends on token {p}"
            moved += not torch.equal(b[:, p + 1:], ref_b[:, p + 1:])
            assert not torch.equal(out[:, p], ref[:, p])
    return leak, moved


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_eval_no_position_sees_a_later_token_even_when_it_moves_a_boundary(variant):
    model = build(variant, seed=5).eval()  # initial weights under which >= T // 3 perturbations move a boundary
    leak, moved = perturbation_sweep(model, tokens())
    assert leak is None, f"{variant}: a position before {leak} saw token {leak}"
    assert moved >= T // 3, f"only {moved} perturbations moved a later boundary: the test would not see a leak"


def test_training_mode_with_fixed_sampling_noise_is_causal():
    model = build(boundary_temperature=0.2, seed=5).train()  # sharp enough that one token moves later boundaries
    x = tokens()
    with torch.no_grad():
        torch.manual_seed(4)
        sampled = model.run(x)["b"]
        assert not torch.equal(sampled, model.eval().run(x)["b"])  # training really samples
    model.train()
    leak, moved = perturbation_sweep(model, x, seed=4, exact=False)  # the concept axis is the batch's max: ~1e-7
    assert leak is None and moved >= T // 3


@pytest.mark.parametrize("mode", ["replicate", "mask"])
def test_seeing_the_own_segments_concept_leaks(mode, monkeypatch):
    """The mutation the causality test must catch: token t sees concept j(t), its own segment's mean."""
    original = ConceptCrossAttention.forward

    def own_segment(self, x, z, seg):
        return original(self, x, z, (seg + 1).clamp_max(z.shape[1] - 1))

    monkeypatch.setattr(ConceptCrossAttention, "forward", own_segment)
    model = build("dlcm_gpt2", decoder_attention=mode).eval()
    leak, _ = perturbation_sweep(model, tokens())
    assert leak is not None


def test_a_token_window_leaves_the_concepts_as_the_only_way_further_back(monkeypatch):
    """With token_window w and n_layer token blocks, a token more than n_layer (w - 1) positions back reaches
    a logit through the concepts alone: with every concept row zeroed it changes nothing; with them it does."""
    model = build("dlcm_gpt2", token_window=3, seed=5).eval()   # 2 token blocks: 4 positions of reach
    x = tokens()
    t, far = T - 1, T - 1 - 5
    y = x.clone()
    y[0, far] = (y[0, far] + 1) % V
    with torch.no_grad():
        assert not torch.equal(model(x)["logits"][0, t], model(y)["logits"][0, t])
        monkeypatch.setattr(model, "intervention", lambda z, seg, gate: (torch.zeros_like(z), seg, gate))
        assert torch.equal(model(x)["logits"][0, t], model(y)["logits"][0, t])
        near = x.clone()
        near[0, t - 2] = (near[0, t - 2] + 1) % V
        assert not torch.equal(model(x)["logits"][0, t], model(near)["logits"][0, t])
    assert model.token_mask(T, x.device).sum(1).tolist() == [min(i + 1, 3) for i in range(T)]
    assert model.token_mask(3, x.device) is None  # a sequence no longer than w: plain causal
    with pytest.raises(ValueError, match=rf"token_window={T}: use 1 <= w < model.seq_len={T} "):
        build("dlcm_gpt2", token_window=T)  # the whole window: no diagnostic, refused


def test_rotary_cross_positions_need_replication_and_make_recency_visible():
    """cross_positions: rotary places each replicated key at its copy's token position, so the scores of a
    query depend on how far back each copy is; the explicit-mask reference has no such position: refused."""
    with pytest.raises(ValueError, match="cross_positions='rotary' places a concept's keys at the positions of "
                                         "its copies, which only replication has; "
                                         "set model.decoder_attention: replicate"):
        build("dlcm_gpt2", decoder_attention="mask", cross_positions="rotary")
    attn = build("dlcm_gpt2-xrope").cross_blocks[0].attn
    x, z = torch.randn(1, 6, 16), torch.randn(1, 3, 32)
    seg = torch.tensor([[0, 0, 1, 1, 2, 2]])
    h, d = attn.n_head, attn.head_dim
    q = attn.rotary(attn.q_norm(attn.q(x).view(1, 6, h, d)).transpose(1, 2))
    k, v = attn.kv(z).view(1, 3, 2, h, d).unbind(2)
    k, v = attn.k_norm(k)[:, seg[0]].transpose(1, 2), v[:, seg[0]].transpose(1, 2)  # copies at token positions
    scores = (q @ attn.rotary(k).transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(~torch.ones(6, 6, dtype=torch.bool).tril(), float("-inf"))
    expected = attn.proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(1, 6, 16))
    torch.testing.assert_close(attn(x, z, seg), expected)
    plain = build("dlcm_gpt2").cross_blocks[0].attn
    plain.load_state_dict(attn.state_dict())
    assert not torch.allclose(attn(x, z, seg), plain(x, z, seg))  # the positions change the scores


def test_visibility_rule_on_random_segmentations():
    """Token t sees concept j iff every token of segment j is <= t and the boundary closing it is <= t,
    i.e. j < seg(t); replication's count for a visible concept is its copies at or before t."""
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        b = torch.rand(1, 30, generator=g) < 0.35
        b[0, 0] = True
        seg = segment_ids(b)[0]
        m = int(seg[-1]) + 1
        counts = visible_counts(seg[None], m + 1)[0]
        starts = b[0].nonzero().flatten().tolist() + [30]
        for t in range(30):
            assert counts[t, 0] > 0  # the null row
            for j in range(m):
                closed = starts[j + 1] <= t  # segment j's last token and the boundary after it are <= t
                assert bool(counts[t, j + 1] > 0) == closed == (j < int(seg[t]))
                if closed:
                    assert counts[t, j + 1] == min(t + 1, starts[j + 2]) - starts[j + 1]


# --- boundary predictor ------------------------------------------------------------------------------------
def test_boundary_probability_formula_and_p1_on_hand_values():
    router = BoundaryRouter(2, 2, learned=True)
    assert torch.equal(router.q.weight, torch.eye(2)) and torch.equal(router.k.weight, torch.eye(2))
    h = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [1.0, 1.0]]])
    expected = torch.tensor([[1.0, 0.0, 0.5, 1.0, (1 + 1 / math.sqrt(2)) / 2]])
    torch.testing.assert_close(router(h), expected)
    with torch.no_grad():  # q_{t-1} against k_t, not q_t against k_{t-1}
        router.q.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, 1.0]]))
    p = router(torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]))
    torch.testing.assert_close(p, torch.tensor([[1.0, 0.5]]))  # cos([1, 0], [0, 1]) = 0; reversed: 0.146
    assert list(BoundaryRouter(2, 2, learned=False).parameters()) == []


def test_models_start_with_identity_router_and_threshold_at_inference():
    model = build()
    assert torch.equal(model.router.q.weight, torch.eye(16)) and torch.equal(model.router.k.weight, torch.eye(16))
    p = torch.tensor([[1.0, 0.5, 0.49, 0.51, 0.0]])
    b, _ = model.eval().decide(p)
    assert b.tolist() == [[True, True, False, True, False]]  # b_t = [p_t >= 0.5]
    rule = build(boundary_predictor="rule", boundary_threshold=0.3).train()
    assert rule.decide(p)[0].tolist() == [[True, True, True, True, False]]  # deterministic in training too


def test_training_samples_the_sharpened_probability_with_a_straight_through_gate():
    model = build(boundary_temperature=0.5).train()
    p = torch.full((1, 40001), 0.6, requires_grad=True)
    torch.manual_seed(0)
    b, chosen = model.decide(p)
    sharpened = 0.6 ** 2 / (0.6 ** 2 + 0.4 ** 2)  # sigmoid(logit(0.6) / 0.5)
    assert abs(b[0, 1:].float().mean().item() - sharpened) < 0.01
    torch.testing.assert_close(chosen[0, 1:][b[0, 1:]], torch.full((int(b[0, 1:].sum()),), sharpened))
    torch.testing.assert_close(chosen[0, 1:][~b[0, 1:]], torch.full((int((~b[0, 1:]).sum()),), 1 - sharpened))
    # the gate is 1 in value and passes d(chosen)/dp to the router
    model2 = build(boundary_temperature=0.5).train()
    x = tokens(2)
    torch.manual_seed(5)
    model2(x[:, :-1], x[:, 1:])["losses"]["ntp"].backward()
    assert model2.router.q.weight.grad.abs().sum() > 0
    decoupled = build(boundary_temperature=0.5, router_lm_gradient=False).train()  # p learns from L_aux alone
    torch.manual_seed(5)
    losses = decoupled(x[:, :-1], x[:, 1:])["losses"]
    losses["ntp"].backward(retain_graph=True)
    assert decoupled.router.q.weight.grad is None or decoupled.router.q.weight.grad.abs().sum() == 0
    losses["aux"].backward()
    assert decoupled.router.q.weight.grad.abs().sum() > 0


def test_calibrated_threshold_is_a_running_quantile_learned_in_training_and_kept_at_inference():
    """boundary_calibration: quantile. The first training forward sets tau to the quantile of p (t >= 1)
    that opens T / R segments per window; later ones blend with calibration_momentum; eval forwards read
    tau and never move it; tau is in the state dict (checkpointed)."""
    model = build("dlcm_gpt2-rule", boundary_calibration="quantile", calibration_momentum=0.5, target_ratio=4.0)
    assert float(model.tau) == 0.5 and int(model.tau_updates) == 0 and "tau" in model.state_dict()
    x = tokens(4, seed=3)
    model.train()
    p = model.router(model.encode(x))
    share = (T / 4.0 - 1) / (T - 1)                       # boundaries among positions >= 1
    first = torch.quantile(p[:, 1:].detach().flatten(), 1 - share)
    out = model.run(x)
    torch.testing.assert_close(model.tau, first)
    assert int(model.tau_updates) == 1
    assert out["b"].sum().item() == pytest.approx(4 * T / 4.0, abs=2)  # T / R boundaries per window, b_0 included
    y = tokens(4, seed=9)
    q2 = torch.quantile(model.router(model.encode(y))[:, 1:].detach().flatten(), 1 - share)
    model.run(y)
    torch.testing.assert_close(model.tau, 0.5 * first + 0.5 * q2)
    tau = model.tau.clone()
    model.eval().run(tokens(4, seed=11))
    assert torch.equal(model.tau, tau)                   # inference reads tau, never moves it
    fresh = build("dlcm_gpt2-rule", boundary_calibration="quantile")
    fresh.load_state_dict(model.state_dict())
    assert torch.equal(fresh.tau, tau) and int(fresh.tau_updates) == 2
    out = model.run(y)
    assert torch.equal(out["b"][:, 1:], out["p"][:, 1:] >= tau)


def test_the_training_rule_can_be_applied_in_eval_mode():
    """decide(sample=True) draws from the sharpened Bernoulli whatever the mode (the boundaries evaluation's
    training rule); with a generator the draw is reproducible."""
    model = build(boundary_temperature=0.5).eval()
    p = torch.full((1, 20001), 0.6)
    draw = lambda: model.decide(p, sample=True, generator=torch.Generator().manual_seed(3))[0]  # noqa: E731
    assert torch.equal(draw(), draw())
    assert abs(draw()[0, 1:].float().mean().item() - 0.6 ** 2 / (0.6 ** 2 + 0.4 ** 2)) < 0.01
    assert model.decide(p)[0][0, 1:].all()               # eval's own rule: the threshold


# --- realised ratio ------------------------------------------------------------------------------------------
def test_realised_ratio_and_boundary_statistics_on_forced_boundaries():
    model = build().eval()
    x = tokens(2)
    forced = torch.zeros(2, T, dtype=torch.bool)
    forced[0, ::4] = True                        # 6 concepts of 4 tokens
    forced[1, [3, 10, 11]] = True                # b_0 is forced to 1 anyway: 4 concepts
    with torch.no_grad():
        out = model(x, x, boundaries=forced)
        assert model.run(x, forced)["b"][1, 0]
    metrics = out["metrics"]
    assert metrics["ratio"] == pytest.approx(2 * T / 10)
    assert metrics["boundary_rate"] == pytest.approx(10 / (2 * T))
    every4 = model(x[:1], x[:1], boundaries=forced[:1])["metrics"]
    assert every4["ratio"] == pytest.approx(4.0) and every4["boundary_rate"] == pytest.approx(0.25)
    p = model.run(x)["p"]
    assert metrics["boundary_prob"] == pytest.approx(p.mean().item(), rel=1e-5)
    expected_aux = ratio_loss(torch.tensor(10 / (2 * T)), p.mean(), 4.0).item()
    assert metrics["aux_raw"] == pytest.approx(expected_aux, rel=1e-4, abs=1e-6)
    assert out["losses"]["aux"].item() == pytest.approx(0.03 * expected_aux, rel=1e-4, abs=1e-7)


# --- replication against the explicit mask -------------------------------------------------------------------
@pytest.mark.parametrize("n_kv_head", [2, 1])
def test_replication_equals_the_explicit_mask_in_values_and_gradients(n_kv_head):
    torch.manual_seed(0)
    rep = ConceptCrossAttention(16, 24, 2, n_kv_head, True, 0.0, 1e-5, "replicate", "count")
    ref = ConceptCrossAttention(16, 24, 2, n_kv_head, True, 0.0, 1e-5, "mask", "count")
    uni = ConceptCrossAttention(16, 24, 2, n_kv_head, True, 0.0, 1e-5, "mask", "uniform")
    ref.load_state_dict(rep.state_dict())
    uni.load_state_dict(rep.state_dict())
    b = torch.rand(3, 20, generator=torch.Generator().manual_seed(1)) < 0.3
    b[:, 0] = True
    seg = segment_ids(b)
    m = int(seg[:, -1].max()) + 1
    x0, z0 = torch.randn(3, 20, 16), torch.randn(3, m + 1, 24)
    grad_out = torch.randn(3, 20, 16)
    results = []
    for module in (rep, ref):
        x, z = x0.clone().requires_grad_(), z0.clone().requires_grad_()
        y = module(x, z, seg)
        (y * grad_out).sum().backward()
        results.append((y.detach(), x.grad, z.grad, [p.grad for p in module.parameters()]))
    (y1, gx1, gz1, gp1), (y2, gx2, gz2, gp2) = results
    torch.testing.assert_close(y1, y2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gx1, gx2, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gz1, gz2, atol=1e-5, rtol=1e-5)
    for a, c in zip(gp1, gp2):
        torch.testing.assert_close(a, c, atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # Psi's plain cross-attention is another function when segments are longer than 1
        assert not torch.allclose(uni(x0, z0, seg), y1, atol=1e-3)


def test_the_null_concept_for_the_first_segment_only():
    """``first_segment``: a token of segment 0 reads the null alone, a later token its segment's predecessors
    alone (Psi has no null): its output does not change with the null's values, and equals the plain
    count-weighted attention over concepts 0 .. j(t) - 1."""
    torch.manual_seed(0)
    ref = ConceptCrossAttention(16, 24, 2, 2, True, 0.0, 1e-5, "mask", "count")
    first = ConceptCrossAttention(16, 24, 2, 2, True, 0.0, 1e-5, "mask", "count", null_first_only=True)
    first.load_state_dict(ref.state_dict())
    seg = segment_ids(torch.tensor([[1, 0, 0, 1, 0, 1, 1, 0, 0, 0]], dtype=torch.bool))
    x, z = torch.randn(1, 10, 16), torch.randn(1, 5, 24)
    other = z.clone()
    other[:, 0] = torch.randn(24)  # another null
    with torch.no_grad():
        y, y_other, y_ref = first(x, z, seg), first(x, other, seg), ref(x, z, seg)
    later = seg[0] > 0
    torch.testing.assert_close(y[:, later], y_other[:, later], atol=0, rtol=0)
    assert not torch.allclose(y[:, ~later], y_other[:, ~later])
    torch.testing.assert_close(y[:, ~later], y_ref[:, ~later])  # segment 0: the null, as before
    assert not torch.allclose(y[:, later], y_ref[:, later])     # later: no weight left on the null


def test_whole_model_replication_equals_mask_in_training():
    x = tokens(2, seed=4)
    runs = []
    for mode in ("replicate", "mask"):
        model = build(decoder_attention=mode).train()
        torch.manual_seed(7)
        losses = model(x[:, :-1], x[:, 1:])["losses"]
        (losses["ntp"] + losses["aux"]).backward()
        runs.append((losses, {n: p.grad for n, p in model.named_parameters()}))
    (l1, g1), (l2, g2) = runs
    torch.testing.assert_close(l1["ntp"], l2["ntp"], atol=1e-5, rtol=1e-5)
    for name in g1:
        torch.testing.assert_close(g1[name], g2[name], atol=1e-5, rtol=1e-4, msg=name)


def test_ema_smoothing_is_the_recursion_of_h_net():
    z = torch.randn(2, 7, 5, dtype=torch.float64)
    p = torch.rand(2, 7, dtype=torch.float64)
    p[:, 0] = 1.0
    expected, prev = torch.empty_like(z), torch.zeros(2, 5, dtype=torch.float64)
    for j in range(7):
        pj = p[:, j].clamp(1e-4, 1 - 1e-4)[:, None]
        prev = pj * z[:, j] + (1 - pj) * prev
        expected[:, j] = prev
    torch.testing.assert_close(dlcm.ema_smooth(z, p), expected)


# --- compression loss ---------------------------------------------------------------------------------------
def test_ratio_loss_hand_values_and_minimum():
    r = 4.0
    assert ratio_loss(torch.tensor(0.25), torch.tensor(0.25), r).item() == pytest.approx(0.0, abs=1e-7)
    assert ratio_loss(torch.tensor(0.5), torch.tensor(0.5), r).item() == pytest.approx(1 / 3)
    assert ratio_loss(torch.tensor(1.0), torch.tensor(1.0), r).item() == pytest.approx(3.0)
    g = torch.tensor(0.3, requires_grad=True)
    ratio_loss(torch.tensor(0.5), g, r).backward()  # dL/dG = R/(R-1) (R F - 1)
    assert g.grad.item() == pytest.approx(4 / 3 * (4 * 0.5 - 1))


def test_global_and_per_sequence_parsers_differ_as_defined():
    p = torch.stack([torch.ones(8), torch.zeros(8)])
    b = p.bool()
    assert compression_loss(p, b, 4.0, "sequence").item() == pytest.approx((3.0 + 1 / 3) / 2)
    assert compression_loss(p, b, 4.0, "global").item() == pytest.approx(1 / 3)


def test_global_parser_value_is_global_and_gradient_local():
    p = torch.tensor([[1.0, 0.2, 0.7, 0.1]], requires_grad=True)
    b = torch.tensor([[True, False, True, False]])
    other = torch.tensor([6.0, 2.0, 12.0])  # another rank / micro-batch: 6 boundaries, sum p 2, 12 tokens
    loss = compression_loss(p, b, 4.0, "global", sync=lambda s: s + other)
    f, g = (2 + 6) / 16, (2.0 + 2) / 16
    assert loss.item() == pytest.approx(ratio_loss(torch.tensor(f), torch.tensor(g), 4.0).item())
    loss.backward()
    torch.testing.assert_close(p.grad, torch.full_like(p, 4 / 3 * (4 * f - 1) / 4))


def test_parser_window_accumulates_micro_batches_and_all_reduce_hook(tmp_path):
    model = build(boundary_predictor="rule").train()  # deterministic boundaries: the expectation is exact
    x1, x2 = tokens(2, seed=1), tokens(2, seed=2)
    p1, b1 = (model.run(x1)[k] for k in ("p", "b"))
    p2, b2 = (model.run(x2)[k] for k in ("p", "b"))
    both_f = (b1.sum() + b2.sum()).item() / (2 * p1.numel())
    both_g = (p1.sum() + p2.sum()).item() / (2 * p1.numel())
    alone = model(x2, x2)["metrics"]["aux_raw"]
    assert alone == pytest.approx(ratio_loss(b2.float().mean(), p2.mean(), 4.0).item(), rel=1e-5)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        stats = torch.tensor([3.0, 1.5, 8.0])
        torch.testing.assert_close(dlcm.all_reduce_parser_stats(stats), stats)
        with model.parser_stats.window():
            model(x1, x1)
            accumulated = model(x2, x2)["metrics"]["aux_raw"]
        assert model.parser_stats.sums is None
    finally:
        dist.destroy_process_group()
    expected = ratio_loss(torch.tensor(both_f), torch.tensor(both_g), 4.0).item()
    assert accumulated == pytest.approx(expected, rel=1e-5)


# --- decoupled muP ------------------------------------------------------------------------------------------
MUP = {"d_model": 32, "n_head": 4, "d_concept": 64, "concept_heads": 4}


def test_mup_param_groups_learning_rates_init_and_logit_scale():
    base = build(**MUP)
    model = build(**MUP, mup_base_width=16)  # s_token 2, s_concept 4
    groups = {g["name"]: g for g in model.param_groups(1e-2, 0.1, eps=1e-8)}
    assert {n: g["lr"] for n, g in groups.items()} == pytest.approx(
        {"token": 5e-3, "concept": 2.5e-3, "embeddings": 1e-2, "vectors": 1e-2})
    assert groups["token"]["eps"] == pytest.approx(5e-9) and groups["concept"]["eps"] == pytest.approx(2.5e-9)
    assert groups["vectors"]["weight_decay"] == 0.0 and groups["token"]["weight_decay"] == 0.1
    ids = [id(p) for g in groups.values() for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    member = {id(p): g for g in groups for p in groups[g]["params"]}
    named = dict(model.named_parameters())
    for name, group in (("wte.weight", "embeddings"), ("lm_head.weight", "embeddings"), ("null_concept", "embeddings"),
                        ("concept_blocks.0.attn.qkv.weight", "concept"), ("up.weight", "token"),
                        ("cross_blocks.0.attn.kv.weight", "concept"), ("cross_blocks.0.attn.q.weight", "token"),
                        ("router.q.weight", "token"), ("blocks.0.mlp.fc.bias", "vectors")):
        assert member[id(named[name])] == group, name
    # init: hidden matrices N(0, sigma^2 / s) (the same draws, scaled), embeddings and router unchanged
    base_named = dict(base.named_parameters())
    for name, p in named.items():
        group = member[id(p)]
        scale = 1 / math.sqrt({"token": 2, "concept": 4}[group]) if group in ("token", "concept") else 1.0
        if name.startswith("router."):
            scale = 1.0
        torch.testing.assert_close(p, base_named[name] * scale, msg=name)
    # logits = (h W^T) / s_token
    model.eval()
    x = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(x)["logits"], model.lm_head(model.run(x)["h"]) / 2)
    opt = torch.optim.AdamW(model.param_groups(1e-2, 0.1, eps=1e-8))
    model.train()(x[:, :-1], x[:, 1:])["losses"]["ntp"].backward()
    opt.step()


def test_mup_bridge_module_rule_and_concept_ratio():
    model = build(**MUP, mup_base_width=16, mup_bridge="module", mup_concept_lr_ratio=2.0)
    groups = {g["name"]: g for g in model.param_groups(1e-2, 0.0)}
    named = dict(model.named_parameters())
    concept = {id(p) for p in groups["concept"]["params"]}
    assert id(named["up.weight"]) in concept and id(named["cross_blocks.0.attn.kv.weight"]) not in concept
    assert groups["concept"]["lr"] == pytest.approx(2 * 1e-2 / 4)
    plain = {g["name"]: g["lr"] for g in build(**MUP).param_groups(1e-2, 0.0)}
    assert set(plain.values()) == {1e-2}


# --- learning, losses, registry ------------------------------------------------------------------------------
def test_learns_a_fixed_batch():
    model = build(seq_len=32, d_model=32, n_head=4)
    x = tokens(4, 33, seed=9)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        out = model(x[:, :-1], x[:, 1:])
        losses.append(out["losses"]["ntp"].item())
        sum(out["losses"].values()).backward()
        opt.step()
        opt.zero_grad()
    assert losses[-1] < 0.5 * losses[0], losses[::8]


def test_ignored_targets_and_registration():
    for arch in ("dlcm_gpt2", "dlcm_pythia", "dlcm_llama"):
        cfg = get_spec(arch).config_cls(vocab_size=50, seq_len=32, d_model=32, n_layer=2, n_head=2)
        assert arch in REGISTRY and cfg.loss_names() == ("ntp", "aux") and get_spec(arch).sampler == "ar"
    model = build().eval()
    x = tokens(2, T + 1, seed=3)
    y = x[:, 1:].clone()
    y[0, :5] = -100
    with torch.no_grad():
        loss = model(x[:, :-1], y)["losses"]["ntp"]
        logits = model(x[:, :-1])["logits"]
    torch.testing.assert_close(loss, F.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100))


@pytest.mark.parametrize("variant", ["dlcm_gpt2", "dlcm_gpt2-rule"])
def test_zero_projected_skip_leaves_the_concepts_as_the_decoders_only_input_at_init(variant):
    """decoder_skip: zero_proj (H-Net's zero-initialised residual_proj): at init, with the cross-attention
    output multiplied by 0 (the mechanisms' "zero"), nothing of the tokens reaches the decoder, so every
    position of every input gets the same logits; the identity skip ("+ H") passes the tokens through."""
    x = tokens(2, T, seed=5)
    zero = lambda z, seg, gate: (z, seg, 0.0)  # noqa: E731
    for skip, alike in (("zero_proj", True), ("identity", False)):
        model = build(variant, decoder_skip=skip).eval()
        model.intervention = zero
        with torch.no_grad():
            logits = model(x)["logits"]
        assert torch.equal(logits, logits[:1, :1].expand_as(logits)) is alike, skip
    block = build(variant, decoder_skip="zero_proj").cross_blocks[0]
    assert block.skip is not None and not block.skip.weight.any()
    assert build(variant).cross_blocks[0].skip is None  # default: the checkpoints' state dict is unchanged


def test_flops_per_token_falls_with_the_compression_ratio():
    shape = {"arch": "dlcm_gpt2", "d_model": 64, "n_layer": 4, "n_head": 4}
    flops = [flops_per_token({**shape, "target_ratio": r}, vocab_size=100, seq_len=256) for r in (2, 4, 8)]
    token = flops_per_token({"arch": "gpt2", **{k: v for k, v in shape.items() if k != "arch"}}, vocab_size=100,
                            seq_len=256)
    assert flops[0] > flops[1] > flops[2] > token


@pytest.mark.parametrize("fields, key", [
    ({"target_ratio": 0.5}, "target_ratio"), ({"target_ratio": 1.0}, "target_ratio"),
    ({"boundary_threshold": 0.0}, "boundary_threshold"), ({"boundary_threshold": 1.0}, "boundary_threshold"),
    ({"boundary_threshold": 1.5}, "boundary_threshold"),
    ({"d_concept": 30, "concept_heads": 4}, "d_concept"),
    ({"concept_kv_heads": 3}, "concept_kv_heads"),
    ({"aux_weight": -0.1}, "aux_weight"),
    ({"boundary_temperature": -1.0}, "boundary_temperature"),
    ({"boundary_predictor": "oracle"}, "boundary_predictor"),
    ({"parser": "batch"}, "parser"),
    ({"concept_weighting": "uniform"}, "concept_weighting"),
    ({"decoder_layers": 3}, "decoder_layers"),
    ({"concept_layers": 0}, "concept_layers"),
    ({"mup_base_width": 0}, "mup_base_width"),
    ({"mup_concept_lr_ratio": 0.0}, "mup_concept_lr_ratio"),
    ({"calibration_momentum": 0.0}, "calibration_momentum"),
    ({"boundary_calibration": "median"}, "boundary_calibration"),
    ({"decoder_skip": "gate"}, "decoder_skip"),
    ({"null_concept": "first_segment"}, "null_concept"),  # replication cannot hide the null's copies
])
def test_bad_config_is_a_one_line_error_naming_the_key(fields, key):
    with pytest.raises(ValueError, match=rf"model\.{key}") as err:
        build(**fields)
    assert "\n" not in str(err.value)


def test_the_trainer_trains_and_logs_dlcm(tiny_data, run_cfg, tmp_path):
    import json

    from trainer.train import Trainer

    run_cfg["model"]["arch"] = "dlcm_gpt2"
    run_cfg["train"].update(steps=12, log_interval=2)
    manifest = Trainer(run_cfg, tiny_data["tokens"], tmp_path).run()
    rows = [json.loads(line) for line in (tmp_path / "train" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if "loss" in r]
    assert {"loss/ntp", "loss/aux", "metric/ratio", "metric/boundary_rate", "metric/boundary_prob"} <= set(train[0])
    assert train[-1]["loss/ntp"] < train[0]["loss/ntp"] - 0.5
    assert manifest["flops_per_token"] > 0 and manifest["final_valid_loss"] is not None


def test_the_trainer_applies_the_mup_groups_and_one_parser_window_per_step(tiny_data, run_cfg, tmp_path, monkeypatch):
    from trainer.train import Trainer, learning_rate

    run_cfg["model"].update(arch="dlcm_gpt2", mup_base_width=16)
    trainer = Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    groups = {g["name"]: g for g in trainer.opt.param_groups}
    assert groups["token"]["lr_mult"] == pytest.approx(16 / run_cfg["model"]["d_model"])
    windows = []
    real = trainer.model.parser_stats.window
    monkeypatch.setattr(trainer.model.parser_stats, "window", lambda: (windows.append(1), real())[1])
    trainer.step(3)
    assert len(windows) == 1  # the two micro-batches of the step share one window
    for g in trainer.opt.param_groups:
        assert g["lr"] == pytest.approx(learning_rate(3, trainer.t) * g["lr_mult"])
