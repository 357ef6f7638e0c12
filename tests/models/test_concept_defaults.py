"""Every arm is built as the authors' code builds it unless a documented switch says otherwise.

Each test pins the registry defaults of one backbone / family to its source: an item of docs/sources.md,
"ConceptLM: the authors' code" (cited "item N"; G, P, L = the authors' GPT-2, Pythia, Llama files), a
``transformers`` modelling file, or Gloeckle et al. (2024). Changing a default must fail here; the
docstrings of ``models.token_lm``, ``models.llama``, ``models.conceptlm``, ``models.contextlm`` and
``models.mtp`` record the same sources.
"""
from __future__ import annotations

import math

import pytest
import torch

from models.registry import build_model, get_spec

SHAPE = {"d_model": 32, "n_layer": 2, "n_head": 4}


def cfg_of(arch: str, **fields):
    return get_spec(arch).config_cls(vocab_size=50, seq_len=32, **{**SHAPE, **fields})


def model_of(arch: str, **fields):
    torch.manual_seed(0)
    return build_model({"arch": arch, **SHAPE, **fields}, vocab_size=50, seq_len=32)


# --- tying -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["gpt2", "conceptlm_gpt2", "contextlm_gpt2", "mtp_gpt2"])
def test_gpt2_arms_are_untied(arch):
    """G keeps ``wte`` and ``lm_head`` apart (G L180-181) and its ``tie_weights()`` does nothing (G L477),
    for ConceptLM and its 'baseline' branch alike; Base/PM GPT-2 follow so the comparison stays fair
    (``TokenLMConfig`` docstring). GPT-2's own tie remains the switch ``tie_embeddings: true``."""
    assert cfg_of(arch).tie_embeddings is False
    model = model_of(arch)
    assert model.lm_head.weight is not model.wte.weight
    tied = model_of(arch, tie_embeddings=True)
    assert tied.lm_head.weight is tied.wte.weight


@pytest.mark.parametrize("arch", ["pythia", "conceptlm_pythia", "llama", "conceptlm_llama", "mtp_pythia"])
def test_pythia_and_llama_arms_are_untied(arch):
    """P: separate ``embed_out`` (P L227), ``tie_weights()`` does nothing (P L616); HF ``GPTNeoXConfig``
    and ``LlamaConfig`` (and Llama-3.1-8B) have ``tie_word_embeddings=False``; L copies the base's
    separate ``lm_head`` (L L985-987)."""
    model = model_of(arch)
    assert model.cfg.tie_embeddings is False and model.lm_head.weight is not model.wte.weight


# --- ConceptLM per backbone --------------------------------------------------------------------------

def test_conceptlm_gpt2_code_transform_is_one_bias_free_linear_map():
    """Item 4: G builds ``SimVQ(dim=d/H)`` without ``codebook_transform``, i.e. the library
    default ``nn.Linear(dim, dim, bias=False)`` (G L194-200)."""
    assert cfg_of("conceptlm_gpt2").code_transform == "linear"
    q = model_of("conceptlm_gpt2").quantizer
    assert [n for n, _ in q.named_parameters()] == ["in_weight"] and q.in_weight.shape == (4, 8, 8)
    torch.testing.assert_close(q.codes(), q.base_codes @ q.in_weight)


def test_conceptlm_gpt2_sums_the_vq_loss_over_segments():
    """Item 6: G sums the per-segment VQ losses (``total_commit_loss += ...``, G L358)."""
    assert cfg_of("conceptlm_gpt2").vq_segment_reduction == "sum"
    x = torch.randint(0, 50, (2, 33), generator=torch.Generator().manual_seed(1))
    vq = lambda **kw: model_of("conceptlm_gpt2", **kw)(x[:, :-1], x[:, 1:])["losses"]["vq"]
    torch.testing.assert_close(vq(), 4 * vq(vq_segment_reduction="mean"))  # S = n_head = 4


def test_conceptlm_gpt2_fuses_norm_add_at_l0_without_concept_norm_or_positions():
    """Item 11: G's decoder input is ``ln_f(h) + ln_f(c)`` (G L401-404); item 2: G's concept
    module is GPT2Blocks with a causal mask, no final LN and no positional signal; §4.1 / Table 14:
    GPT-2's main setting is L0."""
    cfg = cfg_of("conceptlm_gpt2")
    assert (cfg.fusion, cfg.concept_norm, cfg.insert_layer) == ("norm_add", False, 0)
    model = model_of("conceptlm_gpt2")
    assert isinstance(model.concept_norm, torch.nn.Identity)
    assert all(block.attn.rotary is None for block in model.concept_blocks)
    x, c = torch.randn(2, 8, 32), torch.randn(2, 8, 32)
    torch.testing.assert_close(model.fuse(x, c), model.ln_f(x) + model.ln_f(c))


def test_conceptlm_pythia_follows_the_pythia_code():
    """Item 4: P's codebook transform is Linear(d_s, 2 d_s) -> ReLU -> Linear(2 d_s, d_s)
    (P L244-255); item 6: P averages the VQ loss over segments (P L493); item 11: P fuses by plain addition
    ('rawadd', P L546-547); item 2: a final LayerNorm after the concept layers (P L60, L135) and rotary
    concept positions j * k (P L118); §4.1: the module after the first layer."""
    cfg = cfg_of("conceptlm_pythia")
    assert (cfg.code_transform, cfg.vq_segment_reduction, cfg.fusion, cfg.concept_norm, cfg.insert_layer) == \
        ("mlp", "mean", "add", True, 1)
    model = model_of("conceptlm_pythia")
    assert model.quantizer.in_weight.shape == (4, 8, 16) and model.quantizer.out_weight.shape == (4, 16, 8)
    assert isinstance(model.concept_norm, torch.nn.LayerNorm) and model.concept_norm.eps == 1e-5
    x, c = torch.randn(2, 8, 32), torch.randn(2, 8, 32)
    torch.testing.assert_close(model.fuse(x, c), x + c)
    rotary = model.concept_blocks[0].attn.rotary
    torch.testing.assert_close(rotary.cos[1], model.blocks[0].attn.rotary.cos[4])  # concept 1 at position k


def test_conceptlm_llama_has_no_concept_norm_and_the_mlp_transform():
    """L applies its coefficient heads straight to the concept layers' output (L L756-773: no norm), with
    the MLP transform (item 4, L L506-517) and the segment mean (item 6, L L745)."""
    cfg = cfg_of("conceptlm_llama")
    assert (cfg.concept_norm, cfg.code_transform, cfg.vq_segment_reduction, cfg.insert_layer) == \
        (False, "mlp", "mean", 1)
    assert isinstance(model_of("conceptlm_llama").concept_norm, torch.nn.Identity)


@pytest.mark.parametrize("arch", ["conceptlm_gpt2", "conceptlm_pythia", "conceptlm_llama"])
def test_coefficient_heads_have_a_zero_initialised_bias(arch):
    """Item 7: ``ctx_lm_head`` is S ``nn.Linear(d, N)`` with the default bias in G (L42), P (L67)
    and L (L519/L556), Llama included; ``post_init`` zeroes it and draws the weight from N(0, 0.02)."""
    head = model_of(arch).concept_head
    assert head.bias is not None and head.bias.abs().max() == 0


def test_contextlm_gpt2_takes_the_gpt2_insertion_and_fusion():
    """ContextLM on GPT-2 shares ConceptLM-GPT-2's L0 and ``ln_f(h) + ln_f(c)`` (items 2, 11);
    no concept norm on any backbone (item 2)."""
    assert (cfg_of("contextlm_gpt2").insert_layer, cfg_of("contextlm_gpt2").fusion) == (0, "norm_add")
    assert (cfg_of("contextlm_pythia").insert_layer, cfg_of("contextlm_pythia").fusion) == (1, "add")
    assert not any(cfg_of(f"contextlm_{b}").concept_norm for b in ("gpt2", "pythia", "llama"))


# --- MTP ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["mtp_gpt2", "mtp_pythia", "mtp_llama"])
def test_mtp_sums_the_future_heads(arch):
    """Gloeckle et al. (2024) §2: the n-token loss L_n sums the heads' cross-entropies; ``mean`` is the
    switch."""
    assert cfg_of(arch).mtp_reduction == "sum"
    x = torch.randint(0, 50, (2, 33), generator=torch.Generator().manual_seed(1))
    loss = lambda **kw: model_of(arch, **kw)(x[:, :-1], x[:, 1:])["losses"]["mtp"]
    torch.testing.assert_close(loss(), 3 * loss(mtp_reduction="mean"))  # n_future - 1 = 3 heads


# --- initialisation ----------------------------------------------------------------------------------

WIDE = {"d_model": 256, "n_head": 4, "n_layer": 8}


def proj_std(block) -> float:
    return torch.cat([block.attn.proj.weight.flatten(), block.mlp.proj.weight.flatten()]).std().item()


@pytest.mark.parametrize("arch", ["conceptlm_gpt2", "contextlm_gpt2"])
def test_gpt2_concept_blocks_are_scaled_by_the_model_depth(arch):
    """HF ``GPT2PreTrainedModel._init_weights`` draws every ``c_proj`` from N(0, 0.02 / sqrt(2 n_layer)) with
    ``config.n_layer``, the model's, for every GPT2Block, G's concept module included (built from the same
    config, G L34): 0.02 / 4 at 8 layers, not 0.02 / 2 from the 2 concept layers."""
    torch.manual_seed(0)
    model = build_model({"arch": arch, **WIDE}, vocab_size=50, seq_len=32)
    expected = 0.02 / math.sqrt(2 * 8)
    for block in (*model.concept_blocks, model.blocks[0]):
        assert proj_std(block) == pytest.approx(expected, rel=0.02)
    assert block.attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.02)


def test_mtp_gpt2_future_blocks_are_scaled_by_the_model_depth():
    """As the concept blocks: the HF GPT-2 scheme with the model's ``n_layer`` for every block it builds."""
    torch.manual_seed(0)
    model = build_model({"arch": "mtp_gpt2", **WIDE}, vocab_size=50, seq_len=32)
    for block in model.future_blocks:
        assert proj_std(block) == pytest.approx(0.02 / math.sqrt(16), rel=0.02)


@pytest.mark.parametrize("arch", ["pythia", "conceptlm_pythia", "llama", "conceptlm_llama", "mtp_pythia"])
def test_neox_and_llama_output_projections_are_not_depth_scaled(arch):
    """HF ``GPTNeoXPreTrainedModel`` and ``LlamaPreTrainedModel`` use ``PreTrainedModel._init_weights``:
    N(0, 0.02) for every linear layer, no depth scaling (also the authors' bundled modeling_gpt_neox.py
    L70-82 and L L439-448). ``scale_residual_init: true`` is the switch to GPT-2's scheme."""
    torch.manual_seed(0)
    model = build_model({"arch": arch, **WIDE}, vocab_size=50, seq_len=32)
    extra = [*getattr(model, "concept_blocks", []), *getattr(model, "future_blocks", [])]
    for block in (model.blocks[0], *extra):
        assert proj_std(block) == pytest.approx(0.02, rel=0.02)
    scaled = build_model({"arch": arch, **WIDE, "scale_residual_init": True}, vocab_size=50, seq_len=32)
    assert proj_std(scaled.blocks[0]) == pytest.approx(0.005, rel=0.02)


@pytest.mark.parametrize("arch", ["gpt2", "pythia", "llama"])
def test_embeddings_and_head_start_at_the_hf_std(arch):
    """HF ``_init_weights`` (GPT-2, GPT-NeoX, Llama): ``nn.Embedding`` and ``nn.Linear`` from N(0, 0.02),
    ``initializer_range`` = 0.02; norms start at gain 1 (bias 0)."""
    torch.manual_seed(0)
    model = build_model({"arch": arch, **WIDE}, vocab_size=500, seq_len=64)
    assert model.wte.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.lm_head.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert torch.all(model.ln_f.weight == 1)
    if model.wpe is not None:
        assert model.wpe.weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_backbone_norms_biases_and_dropout():
    """GPT-2 (HF ``GPT2Config``): LayerNorm eps 1e-5, biases, tanh GELU, learned positions. Pythia (HF
    ``GPTNeoXConfig``): eps 1e-5, biases, exact GELU, 25 % rotary, parallel residual. Llama (Llama-3.1-8B
    config): RMSNorm eps 1e-5, no biases, SwiGLU, full rotary. Dropout 0.0 on all (Pythia and Llama HF
    defaults; GPT-2's 0.1 is the switch ``dropout``, G's value is in its unreleased config)."""
    expected = {
        "gpt2": dict(norm="layernorm", norm_eps=1e-5, bias=True, activation="gelu_tanh", positional="learned",
                     parallel_residual=False, dropout=0.0, init_std=0.02, scale_residual_init=True),
        "pythia": dict(norm="layernorm", norm_eps=1e-5, bias=True, activation="gelu", positional="rotary",
                       rotary_pct=0.25, rotary_base=10000.0, parallel_residual=True, dropout=0.0, init_std=0.02,
                       scale_residual_init=False),
        "llama": dict(norm="rmsnorm", norm_eps=1e-5, bias=False, activation="swiglu", positional="rotary",
                      rotary_pct=1.0, parallel_residual=False, dropout=0.0, init_std=0.02, scale_residual_init=False),
    }
    for arch, fields in expected.items():
        cfg = cfg_of(arch)
        assert {k: getattr(cfg, k) for k in fields} == fields, arch


def test_norm_only_fusion_decodes_from_ln_f_of_the_token_states_alone():
    """The diagnostic row ``fusion: norm_only`` (ln_f(h), no concept): logits do not move when the
    concept path changes, and equal the decoder applied to ln_f of the encoder states."""
    torch.manual_seed(0)
    model = model_of("conceptlm_gpt2", fusion="norm_only", ncp=False, vq=False).eval()
    idx = torch.randint(0, model.cfg.vocab_size, (2, 16))
    before = model(idx)["logits"]
    with torch.no_grad():
        for p in model.concept_blocks.parameters():
            p.add_(1.0)
    after = model(idx)["logits"]
    assert torch.equal(before, after)
    with torch.no_grad():
        x = model.ln_f(model.encode(idx))
        for block in model.blocks[model.cfg.insert_layer:]:
            x = block(x)
    assert torch.allclose(after, model.lm_head(model.ln_f(x)), atol=1e-6)
    assert model.cfg.loss_names() == ("ntp", "ncp", "vq") and set(model(idx, idx)["losses"]) == {"ntp"}
