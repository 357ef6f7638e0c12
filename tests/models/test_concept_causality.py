"""Causality of every concept-level variant at every chunk size, and the k - 1 shift of §2.3 (docs/sources.md,
"ConceptLM: what the paper leaves open", item 1).

The shift is where concept models leak the future: the concept added at position t must come from
chunks that are complete by t. The exhaustive test perturbs one token at a time and requires every
earlier logit to stay bit-identical.
"""
from __future__ import annotations

import pytest
import torch

from models.conceptlm import shift_broadcast
from models.registry import build_model

TINY = {"d_model": 16, "n_layer": 2, "n_head": 2, "codebook_size": 8}
VARIANTS = {
    "conceptlm_gpt2": {},                                      # L0: pools the embeddings
    "conceptlm_pythia": {},                                    # L1, rotary concept positions
    "conceptlm_llama": {"n_kv_head": 1},                       # GQA
    "conceptlm_gpt2-switches": {"fusion": "add", "coefficients": "softmax", "code_transform": "mlp",
                                "concept_norm": True, "insert_layer": 1, "tie_embeddings": True},
    "conceptlm_pythia-no-decoder": {"insert_layer": 2},        # encoder = every layer
    "contextlm_gpt2": {},
    "contextlm_pythia": {},
    "contextlm_llama": {},
}
SEQ = 24


def build(variant: str, k: int):
    arch, extra = variant.split("-")[0], VARIANTS[variant]
    fields = {**TINY, **extra, "chunk_size": k}
    if arch.startswith("contextlm"):
        fields.pop("codebook_size")
    torch.manual_seed(0)
    return build_model({"arch": arch, **fields}, vocab_size=37, seq_len=SEQ).eval()


@pytest.mark.parametrize("k", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_no_position_sees_a_later_token(variant, k):
    model = build(variant, k)
    length = SEQ - 1  # a trailing partial chunk for every k > 1
    x = torch.randint(0, 37, (1, length), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x)["logits"]
        for p in range(length):
            y = x.clone()
            y[0, p] = (y[0, p] + 1) % 37
            out = model(y)["logits"]
            assert torch.equal(out[:, :p], ref[:, :p]), f"{variant} k={k}: a position before {p} saw token {p}"
            assert not torch.equal(out[:, p], ref[:, p])


def test_k4_timeline_of_note_000():
    """docs/sources.md, "ConceptLM: what the paper leaves open", item 1: positions 0-2 get zeros, 3-6 the
    prediction of chunk 1 (from chunk 0), 7-10 that of chunk 2 (from chunks 0-1), 11 that of chunk 3."""
    c_hat = torch.arange(1.0, 4.0).view(1, 3, 1)  # row j predicts chunk j + 1; value = chunk predicted
    got = shift_broadcast(c_hat, 4, 12).flatten().tolist()
    assert got == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3]


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 8])
def test_every_concept_comes_from_complete_chunks_and_as_early_as_possible(k):
    m = 6
    c_hat = torch.arange(1.0, m + 1).view(1, m, 1)
    for length in (m * k, m * k - 1):
        chunk = shift_broadcast(c_hat, k, length).flatten().long().tolist()
        for t, j in enumerate(chunk):
            if j:  # the prediction of chunk j is made from chunks < j, the last of which ends at j*k - 1
                assert j * k - 1 <= t, f"k={k}: position {t} uses chunk {j - 1}, complete only at {j * k - 1}"
            assert (t + 1) // k == j  # and it arrives at the last token of chunk j - 1, not later


def test_paper_printed_index_would_leak():
    """§2.3 prints the concept index floor(t / (k - 1)); from t = 2k - 2 it uses a chunk not yet complete."""
    k = 4
    leaks = [t for t in range(k - 1, 40) if (t // (k - 1)) * k - 1 > t]
    assert leaks[0] == 2 * k - 2 == 6


def test_zero_concept_is_the_backbone():
    """With the predictor zeroed the concept path adds nothing: ConceptLM = its token backbone."""
    model = build("conceptlm_pythia", 4)
    base = build_model({"arch": "pythia", "d_model": 16, "n_layer": 2, "n_head": 2}, vocab_size=37, seq_len=SEQ)
    base.load_state_dict({k: v for k, v in model.state_dict().items() if k in base.state_dict()})
    with torch.no_grad():
        model.concept_head.weight.zero_()
        model.concept_head.bias.zero_()
        x = torch.randint(0, 37, (2, SEQ))
        torch.testing.assert_close(model(x)["logits"], base.eval()(x)["logits"], rtol=0, atol=0)
