"""The masked-diffusion baseline's objective (models/mdlm.py): absorbing [MASK], SUBS, the
log-linear NELBO weight, antithetic times, the randomness source, and its place in the registry."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from models.registry import REGISTRY, build_model, flops_per_token, get_spec

V, L = 23, 12
ARCHS = ("mdlm_gpt2", "mdlm_pythia", "mdlm_llama")


def tiny(arch: str = "mdlm_gpt2", **extra):
    torch.manual_seed(0)
    return build_model({"arch": arch, "d_model": 32, "n_layer": 2, "n_head": 4, **extra}, vocab_size=V, seq_len=L)


@pytest.mark.parametrize("arch", ARCHS)
def test_subs_never_predicts_mask_and_copies_unmasked_tokens(arch):
    model = tiny(arch).eval()
    g = torch.Generator().manual_seed(1)
    x0 = torch.randint(0, V, (3, L), generator=g)
    masked = torch.rand(3, L, generator=g) < 0.5
    xt = x0.masked_fill(masked, model.mask_id)
    with torch.no_grad():
        log_p = model(xt)["logits"]
    assert log_p.shape == (3, L, V + 1)
    assert torch.isneginf(log_p[..., model.mask_id]).all()  # [MASK] has probability 0 everywhere
    assert torch.allclose(log_p[masked].logsumexp(-1), torch.zeros(int(masked.sum())), atol=1e-5)
    kept = log_p[~masked]
    assert (kept.gather(1, x0[~masked][:, None]) == 0).all()  # unmasked: log p = 0 on the input ...
    assert torch.isneginf(kept).sum() == kept.numel() - len(kept)  # ... and -inf on everything else


def test_the_network_is_bidirectional():
    model = tiny("mdlm_pythia").eval()
    x = torch.full((1, L), model.mask_id)
    y = x.clone()
    y[0, -1] = 3
    with torch.no_grad():
        a, b = model(x)["logits"], model(y)["logits"]
    assert not torch.allclose(a[0, 0], b[0, 0])  # the first position sees the last


def replay(model, x0, seed):
    """The loss by hand, redrawing t and the masks from the global RNG as forward does: antithetic
    t, masks with probability (1 - eps) t, -log p(x0) / t on masked positions, mean over all."""
    n, eps, noise = x0.shape[0], model.cfg.sampling_eps, model.cfg.noise_eps
    torch.manual_seed(seed)
    u = torch.rand(n)
    t = ((u / n + torch.arange(n) / n) % 1) * (1 - eps) + eps
    masked = torch.rand(x0.shape) < (1 - noise) * t[:, None]
    xt = x0.masked_fill(masked, model.mask_id)
    logits = model.lm_head(model.hidden(xt))
    log_p = F.log_softmax(logits[..., :V], dim=-1).gather(-1, x0[..., None]).squeeze(-1)  # SUBS on masked rows
    return (-(log_p * masked) / t[:, None]).sum() / x0.numel(), masked


@pytest.mark.parametrize("arch", ARCHS)
def test_loss_equals_the_hand_computation(arch):
    model = tiny(arch).train()
    x0 = torch.randint(0, V, (4, L), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(7)
    out = model(x0, x0)
    expected, masked = replay(model, x0, 7)
    torch.testing.assert_close(out["losses"]["nelbo"], expected, atol=1e-5, rtol=1e-5)
    assert out["metrics"]["mask_frac"] == pytest.approx(masked.float().mean().item())
    out["losses"]["nelbo"].backward()  # differentiable through the fused head + loss
    assert model.wte.weight.grad is not None and model.wte.weight.grad[model.mask_id].abs().sum() > 0
    assert model.lm_head.weight.grad[model.mask_id].abs().sum() == 0  # the -inf [MASK] logit gets no gradient


def test_weight_is_minus_alpha_prime_over_one_minus_alpha():
    model = tiny()
    t = torch.tensor([1e-3, 0.25, 0.5, 1.0])
    eps = model.cfg.noise_eps
    assert torch.allclose(model.alpha(t), 1 - (1 - eps) * t)
    assert torch.allclose(model.loss_weight(t), (1 - eps) / ((1 - eps) * t))  # = 1/t


def test_antithetic_times_cover_one_stratum_each():
    model = tiny()
    for seed in range(5):
        torch.manual_seed(seed)
        t = model.sample_t(8)
        u = (t - 1e-3) / (1 - 1e-3)
        assert torch.equal((u * 8).floor().long(), torch.arange(8))
    plain = tiny(antithetic=False)
    torch.manual_seed(0)
    assert not torch.equal(((plain.sample_t(8) - 1e-3) / (1 - 1e-3) * 8).floor().long(), torch.arange(8))


def test_training_draws_from_the_global_rng_and_evaluation_does_not():
    model = tiny()
    x0 = torch.randint(0, V, (2, L), generator=torch.Generator().manual_seed(3))
    torch.manual_seed(11)
    a = model(x0, x0)["losses"]["nelbo"]
    torch.manual_seed(11)
    assert torch.equal(model(x0, x0)["losses"]["nelbo"], a)  # the trainer's seed and checkpointed RNG decide
    model.eval()
    with torch.no_grad():
        e1 = model(x0, x0)["losses"]["nelbo"]
        before = torch.manual_seed(99).get_state()
        e2 = model(x0, x0)["losses"]["nelbo"]
    assert torch.equal(e1, e2)  # validation: the same masks every time ...
    assert torch.equal(torch.get_rng_state(), before)  # ... and the training RNG does not move


def test_bad_settings_and_inputs_are_one_line_errors():
    with pytest.raises(ValueError, match="model.noise_eps"):
        tiny(noise_eps=1.0)
    with pytest.raises(ValueError, match="model.sampling_eps"):
        tiny(sampling_eps=0.0)
    model = tiny()
    with pytest.raises(ValueError, match="clean sequence"):
        model(torch.full((1, L), V), torch.zeros(1, L, dtype=torch.long))


def test_registered_outside_the_causal_registry_with_its_losses_and_flops():
    assert not any(a.startswith("mdlm") for a in REGISTRY)  # the causal-LM checks iterate REGISTRY
    for arch in ARCHS:
        spec = get_spec(arch)
        cfg = spec.config_cls(vocab_size=V, seq_len=L, d_model=32, n_layer=2, n_head=4)
        assert cfg.loss_names() == cfg.trained_losses() == ("nelbo",) and spec.sampler == "mdlm"
        assert (cfg.noise_eps, cfg.sampling_eps, cfg.antithetic) == (1e-3, 1e-3, True)
    base = flops_per_token({"arch": "gpt2", "d_model": 32, "n_layer": 2, "n_head": 4}, vocab_size=V, seq_len=L)
    mdlm = flops_per_token({"arch": "mdlm_gpt2", "d_model": 32, "n_layer": 2, "n_head": 4}, vocab_size=V, seq_len=L)
    assert mdlm - base == 6 * 32  # one more head row ([MASK])
    model = tiny()
    assert model.num_params(non_embedding=False) - model.num_params() == (V + 1) * 32 + L * 32


def test_the_lm_eval_adapter_refuses_it():
    from evals.harness.adapter import ReproLM
    from evals.harness.errors import HarnessError

    class Tok:
        eot_id, vocab_size, sha256 = 0, V, "fake"

    with pytest.raises(HarnessError, match="not a causal language model"):
        ReproLM(tiny(), Tok(), max_length=L)
