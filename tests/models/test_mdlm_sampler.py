"""The masked-diffusion sampler (MDLM.sample): ancestral steps with the p_x0 cache, NFE accounting,
noise removal, the posterior's masking probabilities, determinism from the seed."""
from __future__ import annotations

import math

import pytest
import torch

import models.mdlm as mdlm
from models.registry import build_model

V, L = 23, 10


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = build_model({"arch": "mdlm_llama", "d_model": 32, "n_layer": 2, "n_head": 4, "n_kv_head": 2},
                    vocab_size=V, seq_len=L)
    with torch.no_grad():  # spread-out predictions
        for p in m.parameters():
            if p.dim() > 1:
                p.mul_(4)
    return m.eval()


class CallCounter:
    """Counts network evaluations independently of the sampler: one final-norm call per forward."""

    def __init__(self, model):
        self.calls = 0
        self.hook = model.ln_f.register_forward_hook(lambda *_: setattr(self, "calls", self.calls + 1))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.hook.remove()


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("n, steps", [(6, 1), (6, 4), (6, 16), (6, 64), (1, 64), (2, 200)])
def test_nfe_is_the_number_of_network_calls_and_the_cache_bounds_it(model, n, steps):
    with CallCounter(model) as counter:
        out = model.sample(n, steps, generator=seeded(steps))
    assert out.nfe == counter.calls
    # a call only at the first step, after a step that unmasked something in the batch, and for noise removal
    assert out.nfe <= min(steps, n * L) + 1
    if steps > 2 * n * L:
        assert out.nfe <= n * L + 1 < steps  # most steps change nothing: the cache spared their calls
    with CallCounter(model) as counter:
        plain = model.sample(n, steps, generator=seeded(steps), cache=False)
    assert plain.nfe == counter.calls and steps <= plain.nfe <= steps + 1
    assert torch.equal(plain.ids, out.ids)  # the cache is exact: same draws, same samples


@pytest.mark.parametrize("noise_removal", ["ancestral", "greedy"])
def test_samples_hold_no_mask_and_only_data_tokens(model, noise_removal):
    for steps in (1, 3, 32):
        ids = model.sample(5, steps, generator=seeded(steps), noise_removal=noise_removal).ids
        assert ids.shape == (5, L) and ids.dtype == torch.long
        assert ((ids >= 0) & (ids < V)).all(), f"a [MASK] (id {V}) survived {steps} steps"


def test_noise_removal_fills_what_the_last_step_left(model, monkeypatch):
    """With the grid ending at t = 1 nothing is unmasked by the steps (alpha_s = alpha_t); the final
    step then fills every position from p_theta(x0 | all [MASK]), from the cached p_x0 (1 call)."""
    monkeypatch.setattr(mdlm, "SAMPLE_EPS", 1.0)
    with torch.no_grad():
        p = model(torch.full((1, L), V))["logits"][0].double().exp()
    left = model.sample(4, 5, generator=seeded(0), noise_removal="none")
    assert (left.ids == V).all() and left.nfe == 1
    greedy = model.sample(4, 5, generator=seeded(0), noise_removal="greedy")
    assert greedy.nfe == 1 and (greedy.ids == p.argmax(-1)).all()
    drawn = model.sample(4000, 5, generator=seeded(1), noise_removal="ancestral")
    assert drawn.nfe == 1 and (drawn.ids < V).all()
    freq = torch.nn.functional.one_hot(drawn.ids[:, 0], V + 1).double().mean(0)
    assert (freq - p[0]).abs().max() < 4 * math.sqrt(0.25 / 4000)  # draws follow p_theta


def test_one_step_unmasks_with_the_posterior_probability(model, monkeypatch):
    """One step from t = 1 to s: a position stays masked with probability (1 - alpha_s) / (1 - alpha_t)
    = s / 1, and an unmasked one is drawn from p_theta."""
    s = 0.3
    monkeypatch.setattr(mdlm, "SAMPLE_EPS", s)
    n = 3000
    out = model.sample(n, 1, generator=seeded(2), noise_removal="none")
    still = (out.ids == V).double().mean().item()
    assert abs(still - s) < 4 * math.sqrt(s * (1 - s) / (n * L))
    with torch.no_grad():
        p = model(torch.full((1, L), V))["logits"][0, 3].double().exp()
    col = out.ids[:, 3]
    freq = torch.nn.functional.one_hot(col[col < V], V + 1).double().mean(0)
    assert (freq - p).abs().max() < 4 * math.sqrt(0.25 / int((col < V).sum()))


def test_sampling_is_a_function_of_the_seed(model):
    a = model.sample(3, 12, generator=seeded(5))
    b = model.sample(3, 12, generator=seeded(5))
    assert torch.equal(a.ids, b.ids) and a.nfe == b.nfe
    assert not torch.equal(a.ids, model.sample(3, 12, generator=seeded(6)).ids)


def test_the_posterior_is_float64(model, monkeypatch):
    seen = []
    real = model.categorical

    def spy(q, generator):
        seen.append(q.dtype)
        return real(q, generator)

    monkeypatch.setattr(model, "categorical", spy)
    model.sample(2, 4, generator=seeded(0))
    assert seen and all(d == torch.float64 for d in seen)


def test_length_and_bad_arguments(model):
    assert model.sample(2, 3, length=6, generator=seeded(0)).ids.shape == (2, 6)
    with pytest.raises(ValueError, match="steps=0"):
        model.sample(2, 0)
    with pytest.raises(ValueError, match="noise_removal='argmax'"):
        model.sample(2, 4, noise_removal="argmax")
