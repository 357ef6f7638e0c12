"""The Gen. PPL protocol against hand computations with a tiny word-level GPT-2 judge (every token
visible): the number, the EOS mask, truncation, batch-size invariance, the reference mask's batch
dependence, several judges, and entropy on the model's own ids."""
from __future__ import annotations

import math

import pytest
import torch

from tests.evals.genppl.conftest import EOS, WORDS

W = {w: i for i, w in enumerate(WORDS)}


def ids(text: str) -> list[int]:
    return [W[w] for w in text.split()]


@pytest.fixture(scope="module")
def judge(word_judge):
    from evals.genppl import load_judge

    return load_judge(word_judge["dir"])


@pytest.fixture(scope="module")
def model_tok(word_judge):
    from evals.genppl import load_model_tokenizer

    return load_model_tokenizer(word_judge["tokenizer"])


@pytest.fixture(scope="module")
def hf_model(word_judge):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(word_judge["dir"]).eval()


def samples(model_tok, rows):
    from evals.genppl import Samples

    return Samples(rows, model_tok.decode_batch(rows), "test")


@torch.no_grad()
def hand_nll(hf_model, row: list[int], targets: list[int]) -> float:
    """Summed NLL (float64 log-softmax) of the tokens at positions ``targets`` of ``row``, the
    judge run on the row alone (no padding, no mask)."""
    logp = torch.log_softmax(hf_model(torch.tensor([row])).logits[0].double(), -1)
    return -sum(float(logp[t - 1, row[t]]) for t in targets)


def test_gen_ppl_equals_a_hand_computation(judge, model_tok, hf_model):
    from evals.genppl import Protocol, gen_ppl

    a, b = ids("the cat sat on the mat <eos> <eos>"), ids("a dog sat")
    r = gen_ppl(samples(model_tok, [a, b]), [judge], Protocol(max_length=16, batch_size=2))
    # a: cat sat on the mat + the first <eos>, not the second; b: dog sat (no BOS: 'the' and 'a' unscored)
    total = hand_nll(hf_model, a, [1, 2, 3, 4, 5, 6]) + hand_nll(hf_model, b, [1, 2])
    assert r["metrics"]["genppl/tokens/judge"] == 8
    assert r["metrics"]["genppl/nll/judge"] == pytest.approx(total / 8, rel=1e-6)
    assert r["metrics"]["genppl/ppl"] == pytest.approx(math.exp(total / 8), rel=1e-6)
    details = r["details"]
    assert details["judges"]["judge"]["pad_set_to_eos"] is True
    assert details["protocol"]["pad_eos"] == "exclude" and details["protocol"]["differences_from_reference"]


def test_eos_mask_scores_non_eos_tokens_and_the_first_eos_only():
    from evals.genppl import eos_mask

    row = torch.tensor([[5, 3, EOS, 8, EOS, EOS, 4, EOS]])
    keep = eos_mask(row, torch.ones_like(row), EOS, "exclude")
    # targets 1..7: 3, <eos> (first), 8 (text after an EOS counts), <eos>, <eos> (later EOS do not), 4, <eos>
    assert keep.tolist() == [[True, True, True, False, False, True, False]]
    padded = torch.tensor([[5, 3, 4, EOS, EOS]])
    attention = torch.tensor([[1, 1, 1, 0, 0]])
    assert eos_mask(padded, attention, EOS, "exclude").tolist() == [[True, True, False, False]]
    assert eos_mask(padded, attention, EOS, "duo").tolist() == [[True, True, True, False]]


def test_text_after_an_eos_is_scored(judge, model_tok, hf_model):
    from evals.genppl import Protocol, gen_ppl

    row = ids("the cat <eos> dog <eos> <eos>")
    r = gen_ppl(samples(model_tok, [row]), [judge], Protocol(max_length=16, batch_size=1))
    assert r["metrics"]["genppl/tokens/judge"] == 3  # cat, <eos>, dog
    assert r["metrics"]["genppl/nll/judge"] == pytest.approx(hand_nll(hf_model, row, [1, 2, 3]) / 3, rel=1e-6)


def test_truncation_at_max_length(judge, model_tok, hf_model):
    from evals.genppl import Protocol, gen_ppl

    row = ids("the cat sat on the mat")
    r = gen_ppl(samples(model_tok, [row]), [judge], Protocol(max_length=4, batch_size=1))
    assert r["metrics"]["genppl/tokens/judge"] == 3
    assert r["metrics"]["genppl/nll/judge"] == pytest.approx(hand_nll(hf_model, row[:4], [1, 2, 3]) / 3, rel=1e-6)
    assert r["details"]["judges"]["judge"]["truncated_samples"] == 1


def test_batch_size_invariant_and_no_sample_dropped(judge, model_tok):
    from evals.genppl import Protocol, gen_ppl

    g = torch.Generator().manual_seed(1)
    rows = []
    for n in (3, 12, 5, 9, 4, 7, 11):  # 7 samples: no batch size below divides them all
        row = torch.randint(2, len(WORDS), (n,), generator=g).tolist()
        if n % 3 == 0:
            row[n // 2] = EOS
        rows.append(row)
    s = samples(model_tok, rows)
    results = [gen_ppl(s, [judge], Protocol(max_length=16, batch_size=bs))["metrics"] for bs in (1, 2, 3, 8)]
    assert len({m["genppl/tokens/judge"] for m in results}) == 1
    for m in results[1:]:
        assert m["genppl/ppl"] == pytest.approx(results[0]["genppl/ppl"], rel=1e-6)
    # every sample is scored: the token count is the sum over samples scored alone
    alone = sum(gen_ppl(samples(model_tok, [r]), [judge], Protocol(max_length=16, batch_size=1))
                ["metrics"]["genppl/tokens/judge"] for r in rows)
    assert results[-1]["genppl/tokens/judge"] == alone


def test_reference_mask_scores_the_first_padding_eos_depending_on_the_batch(judge, model_tok, hf_model):
    """pad_eos='duo' is D's mask: the shorter row of a batch of two gets its first padding EOS scored;
    alone it does not. The default never scores padding."""
    from evals.genppl import Protocol, gen_ppl

    a, b = ids("the cat sat on the mat"), ids("a dog sat")
    s = samples(model_tok, [a, b])
    together = gen_ppl(s, [judge], Protocol(max_length=16, batch_size=2, pad_eos="duo"))["metrics"]
    apart = gen_ppl(s, [judge], Protocol(max_length=16, batch_size=1, pad_eos="duo"))["metrics"]
    assert together["genppl/tokens/judge"] == apart["genppl/tokens/judge"] + 1
    total = hand_nll(hf_model, a, [1, 2, 3, 4, 5]) + hand_nll(hf_model, b + [EOS], [1, 2, 3])
    assert together["genppl/nll/judge"] == pytest.approx(total / 8, rel=1e-6)
    default = gen_ppl(s, [judge], Protocol(max_length=16, batch_size=2))["metrics"]
    assert default["genppl/tokens/judge"] == apart["genppl/tokens/judge"] == 7


def test_several_judges_are_reported_with_their_mean(word_judge, judge, model_tok, tmp_path):
    import shutil

    from evals.genppl import GenPPLError, Protocol, gen_ppl, load_judge

    shutil.copytree(word_judge["dir"], tmp_path / "second")
    second = load_judge(tmp_path / "second")
    s = samples(model_tok, [ids("the cat sat"), ids("a big red dog ran")])
    m = gen_ppl(s, [judge, second], Protocol(max_length=16))["metrics"]
    assert m["genppl/ppl/judge"] == pytest.approx(m["genppl/ppl/second"])
    assert m["genppl/ppl"] == pytest.approx((m["genppl/ppl/judge"] + m["genppl/ppl/second"]) / 2)
    with pytest.raises(GenPPLError, match="share a name"):
        gen_ppl(s, [judge, judge], Protocol(max_length=16))


def test_entropy_on_the_models_own_ids(judge, model_tok):
    from evals.genppl import Protocol, gen_ppl, mean_entropy, unigram_entropy

    h = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))
    assert unigram_entropy([3, 3, 4, EOS]) == pytest.approx(h)  # EOS counts like any id
    assert unigram_entropy([5, 5, 5]) == 0.0
    assert mean_entropy([[3, 3, 4, EOS], [5, 5, 5]]) == pytest.approx(h / 2)
    m = gen_ppl(samples(model_tok, [[3, 3, 4, EOS], [5, 5, 5]]), [judge], Protocol(max_length=16))["metrics"]
    assert m["samples/entropy"] == pytest.approx(h / 2) and m["samples/n"] == 2


def test_samples_file_decodes_ids_with_special_tokens_kept(word_judge, model_tok, tmp_path):
    from evals.genppl import read_samples
    from tests.evals.genppl.conftest import write_samples

    write_samples(tmp_path / "s.jsonl", [{"ids": ids("the cat <eos>"), "text": "the cat", "nfe": 12},
                                         {"ids": ids("a dog")}])
    s = read_samples(tmp_path / "s.jsonl", model_tok)
    assert s.texts == ["the cat <eos>", "a dog"]
    assert s.text_field_differs == 1  # the sampler dropped the special token from its text; the ids are scored
