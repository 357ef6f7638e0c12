"""Llama import parity (no download: small random ``LlamaConfig``), ConceptLM-Llama initialisation
(§4.3), FLOPs per token against Appendix C, parameter counts."""
from __future__ import annotations

import pytest
import torch

from models.registry import REGISTRY, build_model, flops_per_token, get_spec
from models.token_lm import block_matmul_params

LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}


def hf_llama(rope=None, bias=False, tied=False):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attention_bias=bias, mlp_bias=bias, tie_word_embeddings=tied, rms_norm_eps=1e-5,
                      **({"rope_parameters": rope} if rope else {}))
    return LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("rope,bias,tied", [(None, False, False), (LLAMA3_ROPE, False, False), (None, True, True)])
def test_llama_matches_transformers_logits(rope, bias, tied):
    from models.hf_llama import from_hf_llama

    hf = hf_llama(rope, bias, tied)
    ours = from_hf_llama(hf).eval()
    assert ours.cfg.n_kv_head == 2 and ours.cfg.mlp_hidden == 96
    x = torch.randint(0, 211, (2, 64))
    with torch.no_grad():
        torch.testing.assert_close(ours(x)["logits"], hf(x).logits, atol=1e-5, rtol=1e-5)


def test_conceptlm_llama_from_hf_copies_the_backbone_and_seeds_the_concept_layers():
    from models.hf_llama import conceptlm_from_hf_llama

    hf = hf_llama(LLAMA3_ROPE)
    model = conceptlm_from_hf_llama(hf, seq_len=32).eval()
    assert model.cfg.insert_layer == 1 and model.cfg.segments == 4
    for concept_block, block in zip(model.concept_blocks, model.blocks[:2], strict=True):
        for (name, a), b in zip(concept_block.state_dict().items(), block.state_dict().values()):
            assert torch.equal(a, b), name
    assert concept_block.attn.rotary is not block.attn.rotary  # concept positions j * k, not j
    x = torch.randint(0, 211, (2, 32))
    with torch.no_grad():
        model.concept_head.weight.zero_()  # a silent concept path leaves the imported model's logits
        torch.testing.assert_close(model(x)["logits"], hf(x).logits, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="concept_layers=4 exceeds the 3 backbone layers"):
        conceptlm_from_hf_llama(hf, seq_len=32, concept_layers=4)


def test_pm_llama_from_hf_inserts_copies_of_the_first_layers():
    from models.hf_llama import from_hf_llama, pm_from_hf_llama

    hf = hf_llama(LLAMA3_ROPE)
    plain, pm = from_hf_llama(hf, seq_len=32), pm_from_hf_llama(hf, seq_len=32)
    assert pm.cfg.n_layer == plain.cfg.n_layer + 2 == 5
    for ours, source in zip(pm.blocks, [0, 0, 1, 1, 2], strict=True):  # L0 | copies of L0, L1 | L1, L2
        for (name, a), b in zip(ours.state_dict().items(), plain.blocks[source].state_dict().values()):
            assert torch.equal(a, b), name
    assert torch.equal(pm.lm_head.weight, plain.lm_head.weight)
    with pytest.raises(ValueError, match="must lie within the 3 backbone layers"):
        pm_from_hf_llama(hf, seq_len=32, extra_layers=4)


def test_llama_block_is_rmsnorm_swiglu_gqa():
    model = build_model({"arch": "llama", "d_model": 32, "n_layer": 1, "n_head": 4, "n_kv_head": 2,
                         "mlp_hidden": 40}, vocab_size=50, seq_len=16)
    block = model.blocks[0]
    assert isinstance(block.ln1, torch.nn.RMSNorm) and block.attn.qkv.weight.shape == (32 + 2 * 16, 32)
    assert block.mlp.fc.weight.shape == (80, 32) and block.attn.qkv.bias is None
    assert model.lm_head.weight is not model.wte.weight


def test_concept_flops_follow_appendix_c():
    """App. C: ConceptLM-8B = 32 token layers + 2 concept layers on T/4 positions, PM-8B = 34 token
    layers; per layer the linear term scales with positions and the attention term with positions^2.
    So the two concept layers cost 1/4 of PM's two extra layers' linear FLOPs and 1/16 of their
    attention FLOPs; the predictor (heads, code sum, distances) comes on top."""
    shape = {"d_model": 64, "n_layer": 4, "n_head": 4}
    base = flops_per_token({"arch": "gpt2", **shape}, vocab_size=100, seq_len=1024)
    pm = flops_per_token({"arch": "gpt2", **shape, "n_layer": 6}, vocab_size=100, seq_len=1024)
    concept = flops_per_token({"arch": "conceptlm_gpt2", **shape}, vocab_size=100, seq_len=1024)
    cfg = get_spec("conceptlm_gpt2").config_cls(vocab_size=100, seq_len=1024, **shape)
    linear, attention = 2 * 6.0 * block_matmul_params(cfg), 2 * 12.0 * 64 * 1024
    assert pm - base == linear + attention
    predictor = (6 * 64 * 4 * 64 + 8 * 64 * 64) / 4
    assert concept - base == pytest.approx(linear / 4 + attention / 16 + predictor)
    assert concept < pm
    context = flops_per_token({"arch": "contextlm_gpt2", **shape}, vocab_size=100, seq_len=1024)
    assert context - base == pytest.approx(linear / 4 + attention / 16 + 6 * 64 * 64 / 4)
    mtp = flops_per_token({"arch": "mtp_gpt2", **shape}, vocab_size=100, seq_len=1024)
    assert mtp - base == 3 * (linear / 2 + attention / 2 + 6 * 100 * 64)


@pytest.mark.parametrize("arch", sorted(REGISTRY))
def test_num_params_excludes_embeddings(arch):
    model = build_model({"arch": arch, "d_model": 16, "n_layer": 2, "n_head": 2}, vocab_size=50, seq_len=16)
    embedding = 50 * 16 + (16 * 16 if model.wpe is not None else 0)
    assert model.num_params(non_embedding=False) - model.num_params() == embedding
    assert model.num_params(non_embedding=False) == sum(p.numel() for p in model.parameters())
