"""The KV cache of the token LMs (models.blocks.KVCache, TokenLM.decode_step / generate).

Every backbone: GPT-2 (learned positions: the offset of the position embedding), Pythia (partial
rotary at the cached offset, parallel residual), Llama (GQA caches n_kv_head heads, full rotary
with Llama 3.1 scaling). The cached logits must equal the full forward's at every step, generation
must be the same with and without the cache, and sampling must be a function of the seed.
"""
from __future__ import annotations

import pytest
import torch

from models.registry import build_model
from models.token_lm import filter_logits

VOCAB, SEQ = 61, 32
BACKBONES = {
    "gpt2": {},
    "pythia": {},
    "llama": {"n_kv_head": 2, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
}


def tiny(arch: str, **extra) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model({"arch": arch, "d_model": 32, "n_layer": 2, "n_head": 4, **extra}, vocab_size=VOCAB,
                        seq_len=SEQ)
    with torch.no_grad():  # spread-out logits, so that greedy choices are informative
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(5)
    return model.eval()


@pytest.fixture(params=sorted(BACKBONES))
def model(request):
    return tiny(request.param, **BACKBONES[request.param])


def test_cached_logits_equal_the_full_forward_at_every_step(model):
    x = torch.randint(0, VOCAB, (3, SEQ), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(x)["logits"]
        state = model.init_state(3)
        logits, state = model.decode_step(x[:, :7], state)  # prefill
        torch.testing.assert_close(logits, full[:, :7], atol=1e-5, rtol=0)
        for t in range(7, SEQ):  # one token per call, attending to the cache
            logits, state = model.decode_step(x[:, t:t + 1], state)
            torch.testing.assert_close(logits[:, 0], full[:, t], atol=1e-5, rtol=0, msg=f"position {t}")
    assert state.length == SEQ


def test_several_new_tokens_after_a_prefix_see_the_prefix_and_each_other_causally(model):
    """A multi-token feed after a prefix: SDPA's is_causal would align its mask top-left (query 0 seeing
    key 0 only); the cache builds the bottom-right mask."""
    x = torch.randint(0, VOCAB, (2, 20), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(x)["logits"]
        state = model.init_state(2)
        pieces = [model.decode_step(x[:, a:b], state)[0] for a, b in ((0, 4), (4, 11), (11, 12), (12, 20))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)


def test_greedy_generation_is_the_same_with_and_without_the_cache(model):
    prompts = torch.randint(0, VOCAB, (4, 6), generator=torch.Generator().manual_seed(3))
    cached = model.generate(prompts, 20, temperature=0)
    recomputed = model.generate(prompts, 20, temperature=0, use_cache=False)
    assert torch.equal(cached.ids, recomputed.ids)
    assert torch.equal(cached.ids[:, :6], prompts)
    assert cached.nfe == recomputed.nfe == 20  # the prefill is the first call
    one_by_one = torch.cat([model.generate(p[None], 20, temperature=0).ids for p in prompts])
    assert torch.equal(one_by_one, cached.ids)  # batching changes nothing


def test_decoding_feeds_one_position_per_call_after_the_prefill(model):
    widths = []
    hook = model.blocks[0].register_forward_pre_hook(lambda mod, args, kw: widths.append(args[0].shape[1]),
                                                     with_kwargs=True)
    try:
        model.generate(torch.zeros(2, 5, dtype=torch.long), 8, temperature=0)
    finally:
        hook.remove()
    assert widths == [5] + [1] * 7


def test_sampling_is_a_function_of_the_seed(model):
    prompts = torch.randint(0, VOCAB, (3, 4), generator=torch.Generator().manual_seed(4))

    def run(seed, **kw):
        return model.generate(prompts, 16, temperature=1.0, generator=torch.Generator().manual_seed(seed), **kw).ids

    a = run(0, top_k=20, top_p=0.9)
    assert torch.equal(a, run(0, top_k=20, top_p=0.9))
    assert not torch.equal(run(0), run(1))
    assert torch.equal(run(5), run(5, use_cache=False))  # same draws, same distributions


def test_eos_finishes_a_row_and_stops_when_every_row_is_done():
    model = tiny("gpt2")
    prompts = torch.randint(0, VOCAB, (2, 3), generator=torch.Generator().manual_seed(5))
    free = model.generate(prompts, 12, temperature=0).ids[:, 3:]
    for eos in (int(free[0, 2]), int(free[1, 0])):  # row 0's third token; row 1's first
        out = model.generate(prompts, 12, temperature=0, eos_id=eos)
        assert out.ids.shape == (2, 15) and torch.equal(out.ids[:, :3], prompts)
        ends = []
        for row, ref in zip(out.ids[:, 3:], free):
            hit = (ref == eos).nonzero()
            end = int(hit[0]) if len(hit) else 12
            assert torch.equal(row[:end], ref[:end])  # as without eos up to it ...
            assert (row[end:] == eos).all()            # ... then eos to the end
            ends.append(end)
        assert out.nfe == min(12, max(ends) + 1)  # decoding stops once every row has ended


def test_concept_models_generate_by_recomputation():
    """ConceptLM / ContextLM / MTP inherit TokenLM but not its cache: their forward adds a path."""
    for arch in ("conceptlm_pythia", "contextlm_gpt2", "mtp_llama"):
        model = tiny(arch)
        assert not model.INCREMENTAL_DECODE
        with pytest.raises(ValueError, match="not with a KV cache"):
            model.init_state(1)
        prompt = torch.randint(0, VOCAB, (2, 5), generator=torch.Generator().manual_seed(6))
        out = model.generate(prompt, 6, temperature=0)
        seq = prompt.clone()
        with torch.no_grad():
            for _ in range(6):
                seq = torch.cat([seq, model(seq)["logits"][:, -1:].argmax(-1)], dim=1)
        assert torch.equal(out.ids, seq), arch


def test_overlong_generation_is_a_clear_error():
    model = tiny("pythia")
    with pytest.raises(ValueError, match="model.seq_len=32"):
        model.generate(torch.zeros(1, 30, dtype=torch.long), 3)
    state = model.init_state(1)
    model.decode_step(torch.zeros(1, 32, dtype=torch.long), state)
    with pytest.raises(ValueError, match="exceeds model.seq_len"):
        model.decode_step(torch.zeros(1, 1, dtype=torch.long), state)


def test_filter_logits_keeps_top_k_and_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]]))
    kept = lambda x: torch.isfinite(x)[0].tolist()  # noqa: E731
    assert kept(filter_logits(logits, top_k=2)) == [True, True, False, False, False]
    assert kept(filter_logits(logits, top_p=0.7)) == [True, True, False, False, False]
    assert kept(filter_logits(logits, top_p=0.71)) == [True, True, True, False, False]
    assert kept(filter_logits(logits, top_p=0.01)) == [True, False, False, False, False]
    shuffled = logits[:, [3, 0, 4, 2, 1]]
    assert kept(filter_logits(shuffled, top_p=0.7)) == [False, True, False, False, True]
    with pytest.raises(ValueError, match="temperature"):
        filter_logits(logits, temperature=-1)


def test_the_adapter_decodes_token_lms_with_the_cache_and_concept_models_by_recomputation():
    from evals.harness.adapter import ReproLM

    class Tok:
        eot_id, vocab_size, sha256 = 0, VOCAB, "fake"

    assert ReproLM(tiny("llama"), Tok(), max_length=SEQ).stats["decode"] == "decode_step"
    assert ReproLM(tiny("conceptlm_gpt2"), Tok(), max_length=SEQ).stats["decode"] == "recompute"
