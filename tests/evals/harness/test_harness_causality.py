"""Causality of scoring and generation, for every model family registered in models/registry.py.

The adapter scores and generates with ``model(idx)["logits"]``; that is exact only if the logits at
position t never depend on tokens after t. These tests build a tiny random model of each registered
arch (a new arch is covered automatically; add its required fields to TINY_EXTRA if the minimal
config does not build) and check (1) strict causality of the forward, (2) that the adapter's greedy
generation equals a reference that only ever shows the model the tokens generated so far, batched
or not, and (3) for models with the incremental-decoding hook, that the hook gives the full
forward's logits and the same generations.
"""
from __future__ import annotations

import pytest
import torch

from evals.harness.adapter import ReproLM, has_decode_hook
from models.registry import REGISTRY, build_model

VOCAB, SEQ = 61, 24
TINY = {"d_model": 32, "n_layer": 2, "n_head": 2}
TINY_EXTRA: dict[str, dict] = {}  # arch -> extra fields a minimal config needs


class FakeTokenizer:
    eot_id, vocab_size, sha256 = 0, VOCAB, "fake"

    def encode_batch(self, texts):
        return [[1 + (ord(c) % (VOCAB - 1)) for c in t] for t in texts]

    def decode(self, ids):
        return "".join(chr(96 + i % 26) for i in ids)


def tiny_model(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    try:
        model = build_model({"arch": arch, **TINY, **TINY_EXTRA.get(arch, {})}, vocab_size=VOCAB, seq_len=SEQ)
    except (TypeError, ValueError) as e:
        pytest.fail(f"arch {arch!r}: the minimal config does not build ({e}); add its fields to TINY_EXTRA")
    with torch.no_grad():  # a random model with spread-out logits, so that greedy choices are informative
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(20)
    return model.eval()


def reference_greedy(model, prompt: list[int], n: int) -> list[int]:
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq]))["logits"][0, -1].argmax()))
    return seq[len(prompt):]


class RecomputeHook(torch.nn.Module):
    """A wrapper that offers the incremental-decoding hook (state = the tokens so far) and counts calls."""

    def __init__(self, model):
        super().__init__()
        self.inner, self.calls = model, 0

    def forward(self, idx):
        return self.inner(idx)

    def init_state(self, batch_size: int):
        return torch.zeros(batch_size, 0, dtype=torch.long)

    def decode_step(self, tokens, state):
        self.calls += 1
        state = torch.cat([state, tokens], dim=1)
        return self.inner(state)["logits"][:, -tokens.shape[1]:], state


@pytest.fixture(params=sorted(REGISTRY))
def model(request):
    return tiny_model(request.param)


def test_forward_is_strictly_causal(model):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(1, VOCAB, (2, SEQ), generator=g)
    with torch.no_grad():
        base = model(x)["logits"]
        for t in (1, 5, SEQ // 2, SEQ - 1):
            y = x.clone()
            y[:, t:] = torch.randint(1, VOCAB, (2, SEQ - t), generator=g)
            assert torch.allclose(model(y)["logits"][:, :t], base[:, :t], atol=1e-5), f"position < {t} sees the future"


def test_forward_accepts_inputs_shorter_than_its_units(model):
    """The harness sends 1-token inputs (an empty context is the end-of-text token alone; a short
    document's rolling window); a concept model must score them too (no concept yet = zeros)."""
    with torch.no_grad():
        for n in range(1, 6):
            logits = model(torch.arange(1, n + 1)[None])["logits"]
            assert logits.shape == (1, n, VOCAB) and torch.isfinite(logits).all()


def test_greedy_generation_equals_the_prefix_only_reference(model):
    prompts = [[3, 9, 4, 1, 6], [7] * 9, [11, 5, 2, 8, 13, 1], [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 1]]
    lm = ReproLM(model, FakeTokenizer(), max_length=SEQ, batch_size=3)
    got = lm.greedy(prompts, 8)
    expected = [reference_greedy(model, p, 8) for p in prompts]
    for g, e in zip(got, expected):  # stops early only at end-of-text
        assert g == e[:len(g)] and (len(g) == 8 or e[len(g)] == FakeTokenizer.eot_id)
    one_by_one = ReproLM(model, FakeTokenizer(), max_length=SEQ, batch_size=1).greedy(prompts, 8)
    assert got == one_by_one
    assert [g[:3] for g in got] == [g[:3] for g in lm.greedy(prompts, 3)]


def test_decode_hook_matches_the_full_forward(model):
    hooked = model if has_decode_hook(model) else RecomputeHook(model)
    x = torch.randint(1, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(x)["logits"]
        state = hooked.init_state(2)
        chunks, pieces = [5, 1, 1, 7, 1], []
        for start, n in zip([0, 5, 6, 7, 14], chunks):
            logits, state = hooked.decode_step(x[:, start:start + n], state)
            pieces.append(logits)
    assert torch.allclose(torch.cat(pieces, dim=1), full[:, :15], atol=1e-4)
    prompts = [[3, 9, 4, 1, 6], [5, 6, 7, 8, 9], [11, 5, 2, 8, 13, 1]]
    lm = ReproLM(hooked, FakeTokenizer(), max_length=SEQ, batch_size=4)
    assert lm.stats["decode"] == "decode_step"
    assert lm.greedy(prompts, 6) == ReproLM(model, FakeTokenizer(), max_length=SEQ, batch_size=4).greedy(prompts, 6)
    if isinstance(hooked, RecomputeHook):
        assert hooked.calls > 0
