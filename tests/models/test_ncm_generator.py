"""The NCM generator: masks that are what they claim, the inputs and loss weights of Eq. 10,
perturbation with clean labels, the frozen upstream tokenizer, and K-call sampling."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from models.ncm import NCM, attention_mask, filter_logits, loss_weights, sample
from models.registry import build_model
from trainer.checkpoint import CheckpointError, save_weights
from trainer.train import make_optimizer

V, L = 20, 16
TOK = {"arch": "ncm_tokenizer", "d_model": 16, "n_layer": 1, "n_head": 2, "codebook_size": 12, "d_code": 8,
       "n_scales": 4}


def generator(**fields) -> NCM:
    torch.manual_seed(0)
    return build_model({"arch": "ncm", "d_model": 32, "n_layer": 2, "n_head": 4, "tokenizer": TOK, **fields},
                       vocab_size=V, seq_len=L)


def batch(n=3, seed=1):
    return torch.randint(0, V, (n, L), generator=torch.Generator().manual_seed(seed))


def test_masks_are_explicit_and_as_named():
    diag, causal = attention_mask((1, 2, 3), "block_diagonal"), attention_mask((1, 2, 3), "block_causal")
    levels = [0, 1, 1, 2, 2, 2]
    for i in range(6):
        for j in range(6):
            assert diag[i, j] == (levels[i] == levels[j]) and causal[i, j] == (levels[i] >= levels[j])


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_a_change_in_block_j_reaches_only_the_blocks_the_mask_allows(attention):
    model = generator(attention=attention).eval()
    x = model.inputs(model.tokenizer.encode(batch()))
    base = model.backbone(x, model.mask)
    o = model.offsets
    for j in range(model.K):
        y = x.clone()
        y[:, o[j]:o[j + 1]] += torch.randn_like(y[:, o[j]:o[j + 1]])
        out = model.backbone(y, model.mask)
        for i in range(model.K):
            same = torch.allclose(out[:, o[i]:o[i + 1]], base[:, o[i]:o[i + 1]], atol=0, rtol=0)
            sees = i == j if attention == "block_diagonal" else i >= j
            assert same != sees, f"{attention}: block {i + 1} after a change in block {j + 1}"


def test_block_inputs_are_the_coarser_reconstruction_at_the_block_length():
    model = generator().eval()
    codes = model.tokenizer.encode(batch())
    x = model.inputs(codes)
    tok, o = model.tokenizer, model.offsets
    assert x.shape == (3, sum(model.lengths), 32)
    first = model.sos + model.lvl_embed.weight[0] + model.pos.weight[:o[1]]
    torch.testing.assert_close(x[:, :o[1]], first.expand(3, -1, -1))
    for k in range(1, model.K):
        embedded = model.word_embed(tok.down(tok.cumulative(codes, k), k))
        want = embedded + model.lvl_embed.weight[k] + model.pos.weight[o[k]:o[k + 1]]
        torch.testing.assert_close(x[:, o[k]:o[k + 1]], want)
    changed = [c if j != 1 else (c + 1) % 12 for j, c in enumerate(codes)]  # scale 2 conditions blocks 3, 4
    y = model.inputs(changed)
    assert torch.equal(y[:, :o[2]], x[:, :o[2]]) and not torch.allclose(y[:, o[2]:], x[:, o[2]:])


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 1.5])
def test_loss_is_eq10_weighted_per_scale_cross_entropy(alpha):
    ls = (2, 4, 8, 16)
    w = loss_weights(ls, alpha)
    torch.testing.assert_close(w, torch.tensor([l ** -alpha for l in ls], dtype=torch.float64)
                               / sum(l ** (1 - alpha) for l in ls))
    assert abs(float((w * torch.tensor(ls)).sum()) - 1) < 1e-12
    if alpha == 0:
        assert torch.allclose(w, torch.full((4,), 1 / 30, dtype=torch.float64))  # every code alike
    if alpha == 1:
        assert torch.allclose(w * torch.tensor(ls), torch.full((4,), 0.25, dtype=torch.float64))  # every scale alike
    model = generator(alpha=alpha, perturb_rate=0.0)
    x = batch()
    out = model(x, x)
    codes = model.tokenizer.encode(x)
    logits = model.logits(codes)
    o = model.offsets
    ces = [F.cross_entropy(logits[:, o[k]:o[k + 1]].flatten(0, 1), codes[k].flatten()) for k in range(4)]
    want = sum(float(w[k]) * ls[k] * ces[k] for k in range(4))
    torch.testing.assert_close(out["losses"]["gen"], want)
    assert [round(out["metrics"][f"ce_s{k + 1}"], 5) for k in range(4)] == [round(c.item(), 5) for c in ces]
    assert all(0 <= out["metrics"][f"acc_s{k + 1}"] <= 1 for k in range(4))


def test_perturbation_changes_conditioning_codes_only_and_keeps_labels_clean(monkeypatch):
    model = generator(perturb_rate=0.5).train()
    x = batch(n=64)
    codes = model.tokenizer.encode(x)
    torch.manual_seed(3)
    noisy = model.perturb(codes)
    assert torch.equal(noisy[-1], codes[-1])  # the finest scale conditions nothing
    changed = torch.cat([(a != b).flatten() for a, b in zip(noisy[:-1], codes[:-1])]).float()
    assert 0.4 < changed.mean() < 0.6 and all(0 <= c.min() and c.max() < 12 for c in noisy)
    with torch.no_grad():  # evaluation never perturbs
        clean = F.cross_entropy(model.eval().logits(codes).flatten(0, 1), torch.cat(codes, 1).flatten())
        torch.testing.assert_close(model(x, x)["losses"]["gen"], clean)
    model.train()
    monkeypatch.setattr(model, "perturb", lambda c: noisy)
    out = model(x, x)
    logits = model.logits(noisy)  # inputs from the perturbed codes ...
    want = F.cross_entropy(logits.flatten(0, 1), torch.cat(codes, 1).flatten())  # ... labels the clean ones (alpha 0)
    torch.testing.assert_close(out["losses"]["gen"], want)


def test_tokenizer_is_frozen_in_eval_mode_and_left_out_of_the_optimizer():
    model = generator().train()
    assert model.training and not model.tokenizer.training
    assert not any(p.requires_grad for p in model.tokenizer.parameters())
    opt = make_optimizer(model, {"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1})
    optimised = {id(p) for group in opt.param_groups for p in group["params"]}
    assert not optimised & {id(p) for p in model.tokenizer.parameters()}
    before = {k: v.clone() for k, v in model.tokenizer.state_dict().items()}
    x = batch()
    model(x, x)["losses"]["gen"].backward()
    opt.step()
    assert all(torch.equal(before[k], v) for k, v in model.tokenizer.state_dict().items())
    assert model.num_params(non_embedding=False) == sum(p.numel() for p in model.parameters() if p.requires_grad)


def test_load_upstream_loads_the_tokenizer_run_and_refuses_another_config(tmp_path):
    torch.manual_seed(5)
    trained = build_model(TOK, vocab_size=V, seq_len=L)
    final = tmp_path / "final"
    final.mkdir()
    save_weights(trained, final / "model.safetensors")
    (final / "manifest.json").write_text(json.dumps({"config": {"model": {**TOK, "seq_len": L}}, "vocab_size": V}))
    model = generator()
    model.load_upstream(final)
    assert all(torch.equal(a, b) for a, b in zip(model.tokenizer.state_dict().values(), trained.state_dict().values()))
    assert not model.tokenizer.training and not any(p.requires_grad for p in model.tokenizer.parameters())
    (final / "manifest.json").write_text(json.dumps({"config": {"model": {**TOK, "n_scales": 5, "seq_len": L}}}))
    with pytest.raises(CheckpointError, match=r"model.n_scales=5.*model.tokenizer.n_scales=4"):
        model.load_upstream(final)
    with pytest.raises(CheckpointError, match="no tokenizer weights"):
        model.load_upstream(tmp_path)


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_sampling_makes_exactly_K_calls_each_on_its_scale(attention, monkeypatch):
    model = generator(attention=attention)
    seen = []
    real = model.backbone
    monkeypatch.setattr(model, "backbone", lambda x, *args, **kw: (seen.append(x.shape[1]), real(x, *args, **kw))[1])
    calls = model.calls
    out = sample(model, 5, generator=torch.Generator().manual_seed(0))
    assert out["nfe"] == model.K == 4 and len(seen) == 4 and model.calls == calls + 4 and model.training
    assert seen == list(model.lengths)  # only the current scale's l_k positions (block-causal: KV cache)
    assert out["ids"].shape == (5, L) and out["ids"].dtype == torch.long
    assert 0 <= out["ids"].min() and out["ids"].max() < V
    assert [c.shape for c in out["codes"]] == [(5, n) for n in model.lengths]


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_greedy_sampling_agrees_with_the_teacher_forced_forward(attention):
    """Scale by scale, the sampler computes what training computes: greedy codes are the argmax of
    the teacher-forced logits given those same codes, and the ids are the decoder's argmax."""
    model = generator(attention=attention)
    steps = []
    hook = model.head.register_forward_hook(lambda module, args, output: steps.append(output))
    out = sample(model, 3, temperature=0)
    hook.remove()
    with torch.no_grad():
        logits = model.eval().logits(out["codes"])
        torch.testing.assert_close(torch.cat(steps, 1), logits, atol=1e-5, rtol=1e-5)
        assert torch.equal(logits.argmax(-1), torch.cat(out["codes"], 1))
        assert torch.equal(out["ids"], model.tokenizer.reconstruct(out["codes"]).argmax(-1))


def test_sampling_is_deterministic_from_the_seed_and_batched():
    model = generator()
    a = sample(model, 4, temperature=1.0, top_k=5, top_p=0.9, generator=torch.Generator().manual_seed(7))
    b = sample(model, 4, temperature=1.0, top_k=5, top_p=0.9, generator=torch.Generator().manual_seed(7))
    c = sample(model, 4, temperature=1.0, top_k=5, top_p=0.9, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a["ids"], b["ids"]) and all(torch.equal(x, y) for x, y in zip(a["codes"], b["codes"]))
    assert not all(torch.equal(x, y) for x, y in zip(a["codes"], c["codes"]))


def test_top_k_and_top_p_filters():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 3.0]])
    kept = filter_logits(logits, 2, None).isfinite()
    assert kept.tolist() == [[True, False, False, False, True]]
    p = logits.softmax(-1)[0]  # sorted: 3.0 (0.61), 2.0 (0.22), 1.0 (0.08) ...
    assert filter_logits(logits, None, float(p[4]) - 1e-3).isfinite().tolist() == [[False, False, False, False, True]]
    two = filter_logits(logits, None, float(p[4] + p[0]) - 1e-3)
    assert two.isfinite().tolist() == [[True, False, False, False, True]]
    assert filter_logits(logits, None, 1.0).isfinite().all()


def test_generator_learns_on_a_fixed_batch():
    model = generator(perturb_rate=0.0)
    x = batch(n=8)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    losses = []
    for _ in range(40):
        loss = model(x, x)["losses"]["gen"]
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_segment_attention_equals_the_explicit_mask(attention):
    """models.blocks.Segments (attention computed block by block, the masked pairs never computed) gives
    the outputs and gradients of the same blocks under the explicit bool mask."""
    model = generator(attention=attention).eval()
    x = model.inputs(model.tokenizer.encode(batch())).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    fast, slow = model.backbone(x, model.mask), model.backbone(x2, model.mask.mask())
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    g = torch.randn_like(fast)
    torch.testing.assert_close(torch.autograd.grad(fast, x, g)[0], torch.autograd.grad(slow, x2, g)[0],
                               atol=5e-5, rtol=1e-5)  # float32 sums in another order (seen: 1.2e-5)


SIZES = (3, 5, 8, 12)


@pytest.mark.parametrize("head", ["shared", "per_scale"])
def test_per_scale_heads_and_codebook_sizes_give_eq10_over_each_scales_own_codes(head):
    """With per-scale codebook sizes, scale k's logits have |V_k| columns (a shared head's first |V_k|
    rows, or scale k's own head), the rest -inf in ``logits``; the loss is Eq. 10 over them, and
    sampled codes stay inside each codebook."""
    model = generator(tokenizer={**TOK, "codebook_sizes": list(SIZES)}, head=head, perturb_rate=0.0, alpha=1.0)
    if head == "per_scale":
        assert [h.weight.shape[0] for h in model.head] == list(SIZES)
    else:
        assert model.head.weight.shape[0] == 12 and torch.equal(model.head_weight(1), model.head.weight[:5])
    x = batch()
    out = model(x, x)
    codes = model.tokenizer.encode(x)
    logits = model.logits(codes)
    o, w = model.offsets, loss_weights(model.lengths, 1.0)
    ces = []
    for k, v in enumerate(SIZES):
        block = logits[:, o[k]:o[k + 1]]
        assert block[..., :v].isfinite().all() and (block[..., v:] == float("-inf")).all()
        ces.append(F.cross_entropy(block[..., :v].flatten(0, 1), codes[k].flatten()))
    torch.testing.assert_close(out["losses"]["gen"], sum(float(w[k]) * model.lengths[k] * ces[k] for k in range(4)))
    out["losses"]["gen"].backward()
    heads = model.head if head == "per_scale" else [model.head]
    assert all(h.weight.grad.abs().sum() > 0 for h in heads)
    for seed in range(3):
        s = sample(model, 4, generator=torch.Generator().manual_seed(seed))
        assert all(int(c.max()) < v for c, v in zip(s["codes"], SIZES))


def test_per_scale_perturbation_stays_inside_each_codebook(monkeypatch):
    model = generator(tokenizer={**TOK, "codebook_sizes": list(SIZES)}, perturb_rate=0.99)
    codes = [torch.zeros(50, n, dtype=torch.long) for n in model.lengths]
    out = model.perturb(codes)
    assert all(int(c.max()) < v and c.any() for c, v in zip(out[:-1], SIZES)) and torch.equal(out[-1], codes[-1])


@pytest.mark.parametrize("head", ["shared", "per_scale"])
def test_no_two_tensors_of_the_generator_or_its_tokenizer_share_a_draw(head):
    """blocks.init_weights seeds each tensor by its name in the whole model: the per-part calls (embeddings,
    heads, the encoder's and decoder's stacks) must not repeat a draw between same-named parts."""
    torch.manual_seed(0)
    model = generator(head=head)
    drawn = [p for p in model.parameters() if p.dim() > 1]
    firsts = [tuple(p.flatten()[:4].tolist()) for p in drawn]
    assert len(set(firsts)) == len(firsts)
