"""ConceptLM's losses: gradient routing (§3, Fig. 3), every switch, codebook-usage metrics, MTP, and
the configuration errors raised before any job runs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import yaml

from models.quantizers import COLLAPSE_FRACTION, codebook_usage
from models.registry import build_model

ROOT = Path(__file__).resolve().parents[2]
TINY = {"d_model": 16, "n_layer": 2, "n_head": 2, "codebook_size": 8, "chunk_size": 4}


def concept_model(**overrides):
    torch.manual_seed(0)
    fields = {"arch": "conceptlm_gpt2", **TINY, "insert_layer": 1, **overrides}
    return build_model(fields, vocab_size=37, seq_len=32)


def batch():
    x = torch.randint(0, 37, (2, 33), generator=torch.Generator().manual_seed(2))
    return x[:, :-1], x[:, 1:]


def grads_after(model, loss_name):
    model.zero_grad(set_to_none=True)
    model(*batch())["losses"][loss_name].backward()
    return {n: p.grad for n, p in model.named_parameters()}


def nonzero(g):
    return g is not None and g.abs().sum() > 0


ENCODER = ("wte.weight", "wpe.weight", "blocks.0.attn.qkv.weight")
DECODER = "blocks.1.attn.qkv.weight"


@pytest.mark.parametrize("transform", ["linear", "mlp"])
def test_vq_loss_trains_the_code_transform_only(transform):
    g = grads_after(concept_model(code_transform=transform), "vq")
    assert not any(nonzero(g[n]) for n in ENCODER), "the VQ loss reached the encoder"
    assert all(nonzero(g[n]) for n in g if n.startswith("quantizer.") and n.endswith("weight"))
    assert not nonzero(g[DECODER]) and not nonzero(g["concept_head.weight"])


def test_vq_on_attached_states_pulls_on_the_encoder():
    g = grads_after(concept_model(vq_detach_input=False), "vq")
    assert all(nonzero(g[n]) for n in ENCODER)


def test_ncp_target_is_detached_and_ncp_reaches_the_encoder_through_the_predictor():
    model = concept_model()
    x = model.embed(batch()[0])
    x = model.blocks[0](x)
    c, c_hat = model.concepts(x, model.quantizer.codes())
    c.retain_grad()
    model.ncp_loss(c, c_hat).backward()
    assert c.grad[:, -1].abs().max() == 0, "the last chunk is only a target: no gradient unless the target leaks"
    assert c.grad[:, 0].abs().max() > 0, "earlier chunks feed the predictor"
    g = grads_after(model, "ncp")
    assert all(nonzero(g[n]) for n in ENCODER) and nonzero(g["concept_head.weight"])
    assert not nonzero(g[DECODER]), "NCP has no path through the decoder"


def test_attached_ncp_target_sends_gradient_into_the_target():
    model = concept_model(ncp_detach_target=False)
    c, c_hat = model.concepts(model.blocks[0](model.embed(batch()[0])), model.quantizer.codes())
    c.retain_grad()
    model.ncp_loss(c, c_hat).backward()
    assert c.grad[:, -1].abs().max() > 0


@pytest.mark.parametrize("arch", ["conceptlm_gpt2", "contextlm_gpt2"])
def test_ntp_trains_the_concept_path(arch):
    g = grads_after(concept_model(arch=arch), "ntp")
    assert nonzero(g["concept_head.weight"]) and nonzero(g["concept_blocks.0.mlp.fc.weight"])
    assert nonzero(g["blocks.0.attn.qkv.weight"])
    if arch == "conceptlm_gpt2":
        assert nonzero(g["quantizer.in_weight"])


def test_loss_terms_follow_their_flags():
    assert set(concept_model()(*batch())["losses"]) == {"ntp", "ncp", "vq"}
    out = concept_model(ncp=False, vq=False)(*batch())
    assert set(out["losses"]) == {"ntp"} and "vq_util_pct" in out["metrics"]  # still monitored
    assert set(concept_model(vq=False)(*batch())["losses"]) == {"ntp", "ncp"}
    out = concept_model(arch="contextlm_gpt2")(*batch())
    assert set(out["losses"]) == {"ntp"} and "metrics" not in out
    assert set(concept_model(arch="contextlm_gpt2", ncp=True)(*batch())["losses"]) == {"ntp", "ncp"}


def test_reductions_and_beta_scale_the_losses_as_documented():
    losses = lambda **kw: concept_model(**kw)(*batch())["losses"]
    base = losses()
    torch.testing.assert_close(losses(ncp_reduction="norm")["ncp"], 16 * base["ncp"])       # x d
    torch.testing.assert_close(losses(vq_segment_reduction="sum")["vq"],                    # x S (= n_head)
                               2 * losses(vq_segment_reduction="mean")["vq"])
    torch.testing.assert_close(losses(vq_beta=0.0)["vq"] * 1.25, base["vq"])                # (1 + beta) x MSE


def test_coefficients_raw_or_softmax():
    """With every code of a segment equal to one vector v, softmax coefficients give v exactly (a convex
    combination); the raw coefficients of the code scale it by their sum."""
    x = torch.randn(1, 8, 16)
    ones = torch.ones(2, 8, 8)
    _, soft = concept_model(coefficients="softmax").concepts(x, ones)
    _, raw = concept_model(coefficients="raw").concepts(x, ones)
    torch.testing.assert_close(soft, torch.ones_like(soft))
    assert not torch.allclose(raw, torch.ones_like(raw))


def test_code_transform_and_concept_norm_are_switches():
    mlp, linear = concept_model(code_transform="mlp").quantizer, concept_model(code_transform="linear").quantizer
    assert mlp.out_weight.shape == (2, 16, 8) and not hasattr(linear, "out_weight")
    torch.testing.assert_close(linear.codes(), linear.base_codes @ linear.in_weight)
    assert isinstance(concept_model(concept_norm=False).concept_norm, torch.nn.Identity)
    assert isinstance(concept_model(concept_norm=True).concept_norm, torch.nn.LayerNorm)


def test_codebook_usage_on_constructed_assignments():
    n = 16
    uniform = torch.arange(n).repeat(3).view(-1, 1).expand(-1, 2)                   # S = 2, every code 3 times
    m = codebook_usage(uniform, n)
    assert m["vq_util_pct"] == 100 and m["vq_dead_codes"] == 0 and m["vq_collapse"] == 0
    assert m["vq_ppl_s0"] == pytest.approx(n) and m["vq_ppl_mean"] == pytest.approx(n)
    half = torch.arange(n // 2).repeat(2).view(-1, 1)
    m = codebook_usage(half, n)
    assert m["vq_util_pct"] == 50 and m["vq_dead_codes"] == n // 2 and m["vq_ppl_s0"] == pytest.approx(n / 2)
    mixed = torch.stack([torch.arange(n), torch.zeros(n, dtype=torch.long)], dim=1)  # segment 1 collapsed
    m = codebook_usage(mixed.view(2, n // 2, 2), n)                                 # any leading shape
    assert m["vq_ppl_s0"] == pytest.approx(n) and m["vq_ppl_s1"] == pytest.approx(1.0)
    assert m["vq_util_pct"] == pytest.approx((100 + 100 / n) / 2) and m["vq_dead_codes"] == n - 1
    assert m["vq_collapse"] == 1.0
    spread = torch.arange(64).remainder(4).view(-1, 1)                            # 4 of 64 codes, evenly
    assert codebook_usage(spread, 64)["vq_collapse"] == float(4 < COLLAPSE_FRACTION * 64) == 0.0
    assert codebook_usage(torch.arange(64).remainder(3).view(-1, 1), 64)["vq_collapse"] == 1.0  # 3 < 3.2


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_mtp_heads_predict_the_tokens_after_next(reduction):
    torch.manual_seed(0)
    model = build_model({"arch": "mtp_pythia", "d_model": 16, "n_layer": 2, "n_head": 2, "mtp_reduction": reduction},
                        vocab_size=37, seq_len=32)
    x, y = batch()
    out = model(x, y)["losses"]
    h = model.embed(x)
    for block in model.blocks:
        h = block(h)
    expected = [F.cross_entropy(model.lm_head(model.ln_f(b(h)))[:, :32 - i].flatten(0, 1), y[:, i:].flatten())
                for i, b in enumerate(model.future_blocks, start=1)]
    assert len(expected) == 3
    expected = torch.stack(expected)
    torch.testing.assert_close(out["mtp"], expected.sum() if reduction == "sum" else expected.mean())
    torch.testing.assert_close(out["ntp"], F.cross_entropy(model(x)["logits"].flatten(0, 1), y.flatten()))


BAD = [  # (override, words the one-line error must contain)
    ({"model.chunk_size": 3}, "model.chunk_size=3 does not divide model.seq_len=256"),
    ({"model.n_segments": 5}, "model.n_segments=5 does not divide model.d_model=64"),
    ({"model.insert_layer": 5}, "model.insert_layer=5 is beyond model.n_layer=4"),
    ({"model.codebook_size": 1}, "model.codebook_size"),
    ({"model.vq": True, "model.arch": "contextlm_gpt2"}, "model.vq=true needs model.predictor='codebook'"),
    ({"model.fusion": "concat"}, "model.fusion"),
]


@pytest.mark.parametrize("override,message", BAD)
def test_bad_concept_settings_fail_profile_validation(override, message):
    from workflows.experiments import ConfigError, validate

    profile = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    ok = {"id": "concept_s", "base": "base_gpt2_s",
          "overrides": {"model.arch": "conceptlm_gpt2", "model.chunk_size": 4}}
    validate({**profile, "experiments": profile["experiments"] + [ok]})
    bad = copy.deepcopy(ok)
    bad["overrides"].update(override)
    with pytest.raises(ConfigError, match=r"experiments\[concept_s\]") as err:
        validate({**profile, "experiments": profile["experiments"] + [bad]})
    assert message in str(err.value) and "\n" not in str(err.value)
