"""The conditional evaluation: metric values equal the libraries' own, MBR returns the consensus, and
a run trained on paired data is evaluated end to end (NFE, samples, refusals)."""
from __future__ import annotations

import json

import pytest
import torch

from evals.conditional import ConditionalEvalError, decode_targets, evaluate_conditional, parse_eval
from evals.conditional.metrics import MetricError, bleu, mbr_select, rouge, utility
from trainer.train import Trainer

REFS = ["the cat sat on the mat .", "a quick brown fox jumps over the lazy dog", "it rained all day in the city"]
PREDS = ["the cat sat on a mat .", "a brown fox jumped over the dog", "rain all day in town"]


def test_bleu_and_rouge_equal_the_libraries():
    import sacrebleu
    from rouge_score import rouge_scorer

    got = bleu(PREDS, REFS)
    want = sacrebleu.corpus_bleu(PREDS, [REFS], tokenize="13a")
    assert got["bleu"] == pytest.approx(want.score) and "tok:13a" in got["signature"]
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    scores = [scorer.score(r, p) for r, p in zip(REFS, PREDS)]
    for key, value in rouge(PREDS, REFS).items():
        assert value == pytest.approx(sum(s[key].fmeasure for s in scores) / 3)
    assert bleu(REFS, REFS)["bleu"] == pytest.approx(100.0) and rouge(REFS, REFS)["rougeL"] == pytest.approx(1.0)
    with pytest.raises(MetricError, match="reference 1 is empty"):
        rouge(PREDS, [REFS[0], " ", REFS[2]])
    with pytest.raises(MetricError, match="2 predictions for 3 references"):
        bleu(PREDS[:2], REFS)


@pytest.mark.parametrize("kind", ["bleu", "rougeL", "chars"])
def test_mbr_returns_the_consensus_candidate(kind):
    consensus = "the cat sat on the mat near the door"
    # each variant differs from the consensus in one word, from the other variants in two
    candidates = ["a cat sat on the mat near the door", "the cat ran on the mat near the door", consensus,
                  "the cat sat on the rug near the door", "zebra"]
    assert mbr_select(candidates, kind) == 2
    assert mbr_select(["x y", "x y"], kind) == 0 and mbr_select(["only"], kind) == 0
    assert utility(kind, consensus, consensus) == pytest.approx(100.0 if kind == "bleu" else 1.0)


def test_eval_names():
    assert parse_eval("cond") == {} and parse_eval("cond_mbr16") == {"mbr": 16}
    assert parse_eval("cond_mbr4_cfg1.5") == {"mbr": 4, "guidance": 1.5}
    assert parse_eval("cond_k3") == {"scales": 3}
    with pytest.raises(ConditionalEvalError, match="not a conditional evaluation"):
        parse_eval("cond_s3")


def test_targets_are_cut_at_the_first_end_of_text(tiny_pairs):
    from corpora.tokenization import load_tokenizer

    tok = load_tokenizer({"kind": "bpe"}, tiny_pairs["tokenizer"])
    ids = tok.encode_batch(["the cat"])[0]
    assert decode_targets(tok, torch.tensor([ids + [0, 5, 6], ids + [7, 8, 9]])) == \
        ["the cat", tok.decode(ids + [7, 8, 9])]


@pytest.fixture(scope="module")
def trained_pair_run(tiny_pairs, tmp_path_factory):
    from tests.conftest import LAYOUT
    from tests.conftest import TINY_RUN
    import copy

    run = copy.deepcopy(TINY_RUN)
    run.update(id="pairs_ar", corpus=tiny_pairs["corpus_cfg"], layout=dict(LAYOUT))
    run["model"]["seq_len"] = LAYOUT["source_len"] + LAYOUT["target_len"]
    run["train"]["steps"] = 8
    run_dir = tmp_path_factory.mktemp("pair_run") / "run"
    Trainer(run, tiny_pairs["tokens"], run_dir, threads=1).run()
    return run_dir


@pytest.mark.parametrize("name", ["cond", "cond_mbr3", "cond_mbr1"])
def test_a_paired_run_is_evaluated_end_to_end(tiny_pairs, trained_pair_run, tmp_path, name):
    out = tmp_path / f"{name}.json"
    settings = {"examples": 7, "batch_size": 3}
    r = evaluate_conditional(trained_pair_run / "final", tiny_pairs["tokenizer"], tiny_pairs["tokens"], out, settings,
                             name)
    m = r["metrics"]
    n_cand = 3 if name == "cond_mbr3" else 1
    # MBR's candidates, one of them too (cond_mbr1), are drawn at mbr_temperature; cond decodes at temperature
    assert r["details"]["temperature"] == (1.0 if "mbr" in name else 0.0)
    assert m["samples/n"] == 7 and m["samples/candidates"] == n_cand
    assert 1 <= m["samples/calls_per_sample"] <= 10 and m["samples/nfe"] == n_cand * m["samples/calls_per_sample"]
    assert 0 <= m["test/bleu"] <= 100 and 0 <= m["test/rougeL"] <= 1 and m["samples/time_s"] > 0
    assert r["details"]["bleu_signature"].startswith("nrefs:1") and json.loads(out.read_text())["eval"] == name
    rows = [json.loads(x) for x in out.with_name(f"{name}.samples.jsonl").read_text().splitlines()]
    assert len(rows) == 7 and all(len(x.get("candidates", [1, 2, 3])) == 3 for x in rows)
    again = evaluate_conditional(trained_pair_run / "final", tiny_pairs["tokenizer"], tiny_pairs["tokens"],
                                 tmp_path / "again.json", {**settings, "batch_size": 7}, name)
    if name == "cond":  # argmax decoding: the batch size changes nothing
        assert again["metrics"]["test/bleu"] == m["test/bleu"]


def test_guidance_is_refused_for_a_token_lm(tiny_pairs, trained_pair_run, tmp_path):
    with pytest.raises(ConditionalEvalError, match="guidance .* is NCM's"):
        evaluate_conditional(trained_pair_run / "final", tiny_pairs["tokenizer"], tiny_pairs["tokens"],
                             tmp_path / "x.json", {"examples": 2}, "cond_cfg2")


def test_another_tokenizer_is_refused_before_generating(tiny_pairs, trained_pair_run, tmp_path):
    from corpora.tokenization import train_chars

    other = tmp_path / "chars.json"
    train_chars("abc", other)
    with pytest.raises(ConditionalEvalError, match="not the tokenizer the run .* was trained with"):
        evaluate_conditional(trained_pair_run / "final", other, tiny_pairs["tokens"], tmp_path / "x.json", {}, "cond")
    assert not (tmp_path / "x.samples.jsonl").exists()


def test_a_character_outside_the_alphabet_is_refused(tmp_path):
    from corpora.tokenization import TokenizerError, load_tokenizer, train_chars

    train_chars("0123456789|", tmp_path / "t.json")
    tok = load_tokenizer({"kind": "chars"}, tmp_path / "t.json")
    assert tok.encode_batch(["12|3"]) == [[2, 3, 11, 4]] and tok.decode([2, 0, 3]) == "12"
    with pytest.raises(TokenizerError, match="character 'x' .* not in the tokenizer's alphabet"):
        tok.encode_batch(["5x3"])
