"""Conditional NCM (NCM Sec. 3.4): a source prefix every scale block sees and that sees no block,
the null condition for classifier-free guidance, and sampling that reads the prefix from a KV cache."""
from __future__ import annotations

import pytest
import torch

from models.ncm import NCM, sample
from models.registry import build_model

V, P, L = 20, 6, 16
TOK = {"arch": "ncm_tokenizer", "d_model": 16, "n_layer": 1, "n_head": 2, "codebook_size": 12, "d_code": 8,
       "n_scales": 4, "seq_len": L}


def generator(**fields) -> NCM:
    torch.manual_seed(0)
    return build_model({"arch": "ncm", "d_model": 32, "n_layer": 2, "n_head": 4, "tokenizer": TOK,
                        "prefix_len": P, **fields}, vocab_size=V, seq_len=P + L)


def windows(n=3, seed=1):
    return torch.randint(0, V, (n, P + L), generator=torch.Generator().manual_seed(seed))


def test_the_tokenizer_encodes_the_target_window_only():
    model = generator()
    assert model.tokenizer.cfg.seq_len == L and model.P == P
    with pytest.raises(ValueError, match="prefix_len"):
        build_model({"arch": "ncm", "d_model": 32, "n_layer": 2, "n_head": 4, "tokenizer": TOK, "prefix_len": P + L},
                    vocab_size=V, seq_len=P + L)
    with pytest.raises(ValueError, match="target window has seq_len 20"):
        build_model({"arch": "ncm", "d_model": 32, "n_layer": 2, "n_head": 4, "tokenizer": TOK, "prefix_len": 2},
                    vocab_size=V, seq_len=P + L)


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_the_prefix_sees_no_target_and_every_block_sees_the_prefix(attention):
    model = generator(attention=attention).eval()
    x = windows()
    codes = model.tokenizer.encode(x[:, P:])
    src = model.source_input(x[:, :P])
    inputs = torch.cat([src, model.inputs(codes)], 1)
    base = model.backbone(inputs, model.mask)
    changed_target = inputs.clone()
    changed_target[:, P:] += torch.randn_like(changed_target[:, P:])
    out = model.backbone(changed_target, model.mask)
    assert torch.equal(out[:, :P], base[:, :P])  # a change in the targets never changes the prefix's states
    changed_source = inputs.clone()
    changed_source[:, 0] += torch.randn_like(changed_source[:, 0])  # not a constant: LayerNorm removes a shift
    out = model.backbone(changed_source, model.mask)
    o = [P + v for v in model.offsets]
    for k in range(model.K):  # every block reads the source
        assert not torch.allclose(out[:, o[k]:o[k + 1]], base[:, o[k]:o[k + 1]])


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_segment_attention_with_a_source_equals_the_explicit_mask(attention):
    model = generator(attention=attention).eval()
    x = windows()
    inputs = torch.cat([model.source_input(x[:, :P]), model.inputs(model.tokenizer.encode(x[:, P:]))], 1)
    mask = model.mask.mask()
    assert mask.shape == (P + model.N,) * 2
    assert mask[:P, :P].all() and not mask[:P, P:].any() and mask[P:, :P].all()
    torch.testing.assert_close(model.backbone(inputs, model.mask), model.backbone(inputs, mask), atol=1e-5, rtol=1e-5)


def test_the_null_condition_replaces_every_source_token_and_training_drops_sources():
    model = generator(cond_dropout=0.5)
    x = windows(n=2)
    null = model.source_input(x[:, :P], torch.tensor([True, False]))
    torch.testing.assert_close(null[0], model.null + model.src_pos.weight)
    torch.testing.assert_close(null[1], model.src_embed(x[1, :P]) + model.src_pos.weight)
    drawn = []
    real = model.source_input
    model.source_input = lambda source, null=None: (drawn.append(null), real(source, null))[1]
    torch.manual_seed(3)
    model.train()(windows(n=64), None)
    assert 10 < int(drawn[0].sum()) < 54  # about half of 64 sources dropped
    model.eval()(windows(n=4), None)
    assert drawn[1] is None  # never in evaluation


@pytest.mark.parametrize("attention", ["block_diagonal", "block_causal"])
def test_greedy_conditional_sampling_agrees_with_the_teacher_forced_forward(attention):
    model = generator(attention=attention)
    x = windows()
    steps = []
    hook = model.head.register_forward_hook(lambda module, args, output: steps.append(output))
    out = sample(model, 3, temperature=0, source=x[:, :P])
    hook.remove()
    assert out["nfe"] == model.K
    with torch.no_grad():
        h = model.eval().hidden(out["codes"], x[:, :P])
        logits = model.head(h)
    torch.testing.assert_close(torch.cat(steps, 1), logits, atol=1e-5, rtol=1e-5)
    other = sample(model, 3, temperature=0, source=windows(seed=9)[:, :P])
    assert not all(torch.equal(a, b) for a, b in zip(out["codes"], other["codes"]))  # the source matters


def test_guidance_doubles_the_calls_and_mixes_conditional_and_null_logits():
    model = generator()
    x = windows()
    steps = []
    hook = model.head.register_forward_hook(lambda module, args, output: steps.append(output))
    out = sample(model, 3, temperature=0, source=x[:, :P], guidance=2.5)
    hook.remove()
    assert out["nfe"] == 2 * model.K
    with torch.no_grad():
        model.eval()
        cond = model.head(model.hidden(out["codes"], x[:, :P]))
        uncond = model.head(model.hidden(out["codes"], x[:, :P], torch.ones(3, dtype=torch.bool)))
    mixed = uncond + 2.5 * (cond - uncond)
    assert torch.equal(mixed.argmax(-1), torch.cat(out["codes"], 1))
    torch.testing.assert_close(torch.cat([s[:3] for s in steps], 1), cond, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="source"):
        sample(model, 3)
