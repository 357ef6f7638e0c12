"""The NCM tokenizer's mechanisms: residual quantisation, truncation to k scales (nested dropout),
straight-through and stop-gradient paths, and reconstruction accuracy rising with the scales used."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from models.ncm_tokenizer import NCMTokenizer, Phi, phi_assignment, reconstruction_accuracy
from models.registry import build_model

TOK = {"arch": "ncm_tokenizer", "d_model": 32, "n_layer": 1, "n_head": 2, "codebook_size": 16, "d_code": 8,
       "n_scales": 4}
V, L = 20, 16


def tokenizer(**fields) -> NCMTokenizer:
    torch.manual_seed(0)
    return build_model({**TOK, **fields}, vocab_size=V, seq_len=L)


def batch(n=4, seed=1):
    return torch.randint(0, V, (n, L), generator=torch.Generator().manual_seed(seed))


def test_encode_gives_K_scales_of_their_lengths_and_cumulative_sums_them():
    model = tokenizer().eval()
    x = batch()
    codes = model.encode(x)
    assert [c.shape for c in codes] == [(4, n) for n in model.lengths] and model.lengths == (2, 4, 8, 16)
    assert all(c.dtype == torch.long and 0 <= c.min() and c.max() < 16 for c in codes)
    with torch.no_grad():
        assert torch.equal(model.cumulative(codes, 0), torch.zeros(4, L, 8))
        parts = [model.embed_codes(c, k) for k, c in enumerate(codes)]
        torch.testing.assert_close(model.cumulative(codes, 3), parts[0] + parts[1] + parts[2])
        # the residual loop: scale k's codes are the nearest codes to Down_k(z - zhat^(k-1))
        z = model.latent(x)
        for k in range(4):
            rest = model.down(z - model.cumulative(codes, k), k)
            dist = torch.cdist(rest, model.codebook(k).weight[None].expand(4, -1, -1))
            assert torch.equal(codes[k], dist.argmin(-1))


@pytest.mark.parametrize("k", [1, 2, 3])
def test_reconstruction_from_k_scales_depends_on_no_finer_scale(k):
    model = tokenizer().eval()
    codes = model.encode(batch())
    other = [c if j < k else torch.randint(0, 16, c.shape) for j, c in enumerate(codes)]
    with torch.no_grad():
        assert torch.equal(model.reconstruct(codes, k), model.reconstruct(other, k))
        assert not torch.allclose(model.reconstruct(codes, k + 1), model.reconstruct(other, k + 1))


def test_nested_dropout_truncates_each_sequence_exactly(monkeypatch):
    """With the truncation forced to k_b per sequence, the training loss is the cross-entropy of the
    decoder on zhat^(k_b), and no codebook of a scale > max k_b receives a gradient."""
    model = tokenizer(vq_scales="last").train()
    x = batch()
    keep = torch.tensor([1, 2, 2, 1])
    monkeypatch.setattr(model, "truncation", lambda b, device: keep)
    out = model(x, x)
    (out["losses"]["rec"] + out["losses"]["vq"]).backward()
    for k, book in enumerate(model.codebooks):
        grad = book.weight.grad
        assert (grad is None or not grad.any()) if k + 1 > 2 else grad.abs().sum() > 0, f"scale {k + 1}"
    with torch.no_grad():
        codes = model.encode(x)
        z = model.latent(x)
        rec, vq = [], []
        for b, k in enumerate(keep.tolist()):
            zhat = model.cumulative([c[b:b + 1] for c in codes], k)
            rec.append(F.cross_entropy(model.lm_head(model.decode(zhat))[0], x[b], reduction="none"))
            vq.append(1.25 * (zhat - z[b:b + 1]).pow(2).mean())  # beta * commit + codebook, same value
        torch.testing.assert_close(out["losses"]["rec"], torch.cat(rec).mean())
        torch.testing.assert_close(out["losses"]["vq"], torch.stack(vq).mean())


def test_nested_dropout_draws_every_level_in_training_and_none_in_eval():
    model = tokenizer(nested_dropout=1.0)
    torch.manual_seed(0)
    drawn = model.train().truncation(4000, torch.device("cpu"))
    counts = torch.bincount(drawn, minlength=5)[1:]
    assert counts.min() > 800 and drawn.max() == 4  # uniform over 1..K
    assert torch.equal(model.eval().truncation(8, torch.device("cpu")), torch.full((8,), 4))
    assert torch.equal(tokenizer(nested_dropout=0.0).train().truncation(8, torch.device("cpu")), torch.full((8,), 4))
    half = tokenizer(nested_dropout=0.5).train().truncation(4000, torch.device("cpu"))
    assert 0.55 < (half == 4).float().mean() < 0.7  # 1/2 kept + 1/2 x 1/4 drawn at K


def test_gradient_paths_straight_through_commitment_and_codebook():
    """rec reaches the encoder through the straight-through estimator, not the codebooks; the VQ
    loss reaches the encoder only through beta x commitment, and the codebooks."""
    x = batch()
    model = tokenizer(nested_dropout=0.0).train()
    model(x, x)["losses"]["rec"].backward()
    assert model.to_code.weight.grad.abs().sum() > 0
    assert all(b.weight.grad is None or not b.weight.grad.any() for b in model.codebooks)
    for beta, reaches in ((0.0, False), (0.25, True)):
        model = tokenizer(nested_dropout=0.0, vq_beta=beta).train()
        model(x, x)["losses"]["vq"].backward()
        assert (model.to_code.weight.grad is not None and model.to_code.weight.grad.abs().sum() > 0) == reaches
        assert all(b.weight.grad.abs().sum() > 0 for b in model.codebooks)
        assert model.lm_head.weight.grad is None


def test_metrics_per_scale_and_codebook_sharing():
    model = tokenizer()
    out = model(batch(), batch())
    for k in range(1, 5):
        assert {f"usage_pct_s{k}", f"usage_ppl_s{k}", f"vq_s{k}"} <= set(out["metrics"])
        assert 0 < out["metrics"][f"usage_pct_s{k}"] <= 100 and 1 <= out["metrics"][f"usage_ppl_s{k}"] <= 16
    assert [out["metrics"][f"vq_s{k}"] for k in (1, 4)] and len(model.codebooks) == 4
    assert len(tokenizer(shared_codebook=True).codebooks) == 1
    assert model.cfg.loss_names() == ("rec", "vq")


def test_phi_sharing_follows_var():
    assert phi_assignment(5, 0) == [0, 1, 2, 3, 4] and phi_assignment(5, 1) == [0] * 5
    shared = phi_assignment(10, 4)
    assert shared[0] == 0 and shared[-1] == 3 and sorted(set(shared)) == [0, 1, 2, 3] and shared == sorted(shared)
    assert len(tokenizer(phi_share=0).phis) == 4 and len(tokenizer(phi_share=1).phis) == 1
    assert len(tokenizer(phi_ratio=0.0).phis) == 0


def test_phi_is_the_blend_with_a_k3_convolution():
    torch.manual_seed(0)
    phi = Phi(8, 0.3)
    torch.nn.init.normal_(phi.conv.weight)
    torch.nn.init.normal_(phi.conv.bias)
    h = torch.randn(3, 10, 8)
    want = 0.7 * h + 0.3 * phi.conv(h.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(phi(h), want, atol=1e-5, rtol=1e-5)


def test_tied_head_shares_the_token_embedding():
    model = tokenizer(tie_embeddings=True)
    assert model.lm_head.weight is model.wte.weight
    assert model.num_params(non_embedding=False) == sum(p.numel() for p in model.parameters())


def test_reconstruction_accuracy_rises_with_the_scales_used():
    """A tiny tokenizer trained 150 steps on random token windows: exact token accuracy from the
    first k scales grows with k (the finest scale alone holds one code per token)."""
    model = tokenizer(codebook_size=64, d_code=16)
    g = torch.Generator().manual_seed(1)
    data = torch.randint(0, V, (256, L), generator=g)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    before = reconstruction_accuracy(model, data[:64])
    for _ in range(150):
        x = data[torch.randint(0, 256, (32,), generator=g)]
        losses = model(x, x)["losses"]
        opt.zero_grad()
        (losses["rec"] + losses["vq"]).backward()
        opt.step()
    acc = reconstruction_accuracy(model, data[:64])
    assert sorted(acc) == [1, 2, 3, 4] and model.training  # the mode is restored
    assert all(acc[k + 1] >= acc[k] - 0.02 for k in range(1, 4)), acc
    assert acc[4] > acc[1] + 0.3 and acc[4] > before[4] + 0.3, (before, acc)


def test_dead_codes_restart_from_the_data_and_usage_is_an_ema():
    model = tokenizer(dead_code_threshold=0.5, dead_code_decay=0.9).train()
    x = batch(n=8)
    before = [book.weight.detach().clone() for book in model.codebooks]
    seen = {}
    real = model.restart_dead_codes
    model.restart_dead_codes = lambda u, k: (seen.__setitem__(k, u.detach().clone()), real(u, k))[1]
    model(x, x)
    for k, book in enumerate(model.codebooks):  # step one: every code was dead, so every code is a data vector
        flat = seen[k].reshape(-1, seen[k].shape[-1])
        assert (book.weight.detach()[:, None] == flat[None]).all(-1).any(1).all()
        assert not torch.allclose(book.weight, before[k])
    usage = model.code_usage.clone()
    codes = model.eval().encode(x)  # eval: no restart, no counting
    assert torch.equal(model.code_usage, usage)
    uniform = 8 * model.lengths[0] / 16
    hit = torch.bincount(codes[0].flatten(), minlength=16).float()
    torch.testing.assert_close(usage[0], 0.9 * uniform + 0.1 * hit)  # restarted at the uniform rate, then the EMA
    off = tokenizer(dead_code_threshold=0.0).train()
    weights = [b.weight.detach().clone() for b in off.codebooks]
    off(x, x)
    assert all(torch.equal(b.weight, w) for b, w in zip(off.codebooks, weights)) and not off.code_usage.any()


def test_per_scale_codebook_sizes_bound_each_scale():
    """``codebook_sizes``: scale k has |V_k| codes, its codes stay below |V_k|, and dead-code restarts and
    usage counts see only its own codes."""
    sizes = (2, 3, 5, 16)
    model = tokenizer(codebook_sizes=sizes).train()
    assert [b.weight.shape[0] for b in model.codebooks] == list(sizes) and model.cfg.sizes == sizes
    out = model(batch(), batch())
    assert [out["metrics"][f"usage_pct_s{k + 1}"] for k in range(4)] == pytest.approx(  # float32 metrics
        [100.0 * (c.unique().numel()) / v for c, v in zip(model.quantize(model.latent(batch()))[0], sizes)])
    for k, v in enumerate(sizes):
        assert not model.code_usage[k, v:].any()  # the padding of a smaller book is never counted
    model.eval()
    for _ in range(3):
        codes = model.encode(torch.randint(0, V, (8, L)))
        assert all(int(c.max()) < v for c, v in zip(codes, sizes))
    assert tokenizer(codebook_size=7).cfg.sizes == (7,) * 4


def test_scale_straight_through_keeps_values_and_routes_the_gradient_through_pooling(monkeypatch):
    """``straight_through: scale`` decodes the same reconstruction as the latent estimator; truncated to
    the first scale (area pooling to l_1, nearest up-sampling, no phi), the encoder's gradient is the
    same at every position a code covers -- only the pooled latent reaches the decoder."""
    x = batch()
    fields = dict(nested_dropout=1.0, up="nearest", phi_ratio=0.0, scale_lengths=[2, 4, 8, 16],
                  dead_code_threshold=0.0)  # no restarts: both estimators see the same codebooks
    logits = {}
    for mode in ("latent", "scale"):
        model = tokenizer(straight_through=mode, **fields).train()
        monkeypatch.setattr(model, "truncation", lambda b, d: torch.ones(b, dtype=torch.long))
        z = model.latent(x).detach().requires_grad_(True)
        monkeypatch.setattr(model, "latent", lambda idx, z=z: z)
        out = model(x, x)
        out["losses"]["rec"].backward()
        logits[mode] = model.eval()(x)["logits"]
        spans = z.grad.view(4, 2, 8, -1)
        same = torch.allclose(spans, spans[:, :, :1].expand_as(spans), atol=1e-7)
        assert same == (mode == "scale")
        assert all(b.weight.grad is None or not b.weight.grad.any() for b in model.codebooks)
    torch.testing.assert_close(logits["latent"], logits["scale"])


def test_anchored_straight_through_adds_the_full_reconstruction_at_the_latent(monkeypatch):
    """``straight_through: anchored``: rec is the mean of the truncated reconstruction's loss (per-scale
    estimator) and the full one's (latent estimator), so truncated to the first scale the encoder's gradient
    is no longer constant over a code's span (the full term reaches every position), and it equals the sum
    of the two estimators' gradients, halved; evaluation decodes all scales as before."""
    from models.ncm_tokenizer import ncm_tokenizer_flops_per_token

    x = batch()
    fields = dict(nested_dropout=1.0, up="nearest", phi_ratio=0.0, scale_lengths=[2, 4, 8, 16], dead_code_threshold=0.0)
    grads, recs = {}, {}
    for mode, keep in (("anchored", 1), ("scale", 1), ("latent", 4)):
        model = tokenizer(straight_through=mode, **fields).train()
        monkeypatch.setattr(model, "truncation", lambda b, d, keep=keep: torch.full((b,), keep, dtype=torch.long))
        z = model.latent(x).detach().requires_grad_(True)
        monkeypatch.setattr(model, "latent", lambda idx, z=z: z)
        rec = model(x, x)["losses"]["rec"]
        rec.backward()
        grads[mode], recs[mode] = z.grad, rec.item()
    assert recs["anchored"] == pytest.approx((recs["scale"] + recs["latent"]) / 2, rel=1e-5)
    torch.testing.assert_close(grads["anchored"], (grads["scale"] + grads["latent"]) / 2, rtol=1e-4, atol=1e-7)
    spans = grads["anchored"].view(4, 2, 8, -1)
    assert not torch.allclose(spans, spans[:, :, :1].expand_as(spans), atol=1e-7)
    torch.testing.assert_close(tokenizer(straight_through="anchored", **fields).eval()(x)["logits"],
                               tokenizer(**fields).eval()(x)["logits"])
    # the second decode is in the FLOPs
    cfg = lambda mode: tokenizer(straight_through=mode, **fields).cfg  # noqa: E731
    extra = ncm_tokenizer_flops_per_token(cfg("anchored")) - ncm_tokenizer_flops_per_token(cfg("latent"))
    c = cfg("latent")
    from models.ncm_tokenizer import block_flops
    assert extra == pytest.approx(c.decoder_layers * block_flops(c, L) + 6.0 * c.vocab_size * c.d_model)
