"""Bad input is one line, before scoring: judges that are not causal LMs, a judge tokenizer that
cannot encode the samples, empty or malformed samples, a tokenizer other than the run's."""
from __future__ import annotations

import pytest

from tests.evals.genppl.conftest import write_samples


def one_line(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


@pytest.fixture(scope="module")
def model_tok(word_judge):
    from evals.genppl import load_model_tokenizer

    return load_model_tokenizer(word_judge["tokenizer"])


def test_encoder_decoder_judge_is_refused(tmp_path):
    from transformers import T5Config, T5ForConditionalGeneration

    from evals.genppl import GenPPLError, load_judge

    T5ForConditionalGeneration(T5Config(vocab_size=16, d_model=8, d_ff=8, num_layers=1, num_heads=2,
                                        d_kv=4)).save_pretrained(tmp_path / "t5")
    with pytest.raises(GenPPLError) as e:
        load_judge(tmp_path / "t5")
    assert "encoder-decoder" in one_line(e)


def test_encoder_without_lm_head_is_refused(tmp_path):
    from transformers import BertConfig, BertModel

    from evals.genppl import GenPPLError, load_judge

    BertModel(BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=8)).save_pretrained(tmp_path / "bert")
    with pytest.raises(GenPPLError) as e:
        load_judge(tmp_path / "bert")
    assert "not a causal LM checkpoint" in one_line(e)


def test_bidirectional_lm_is_refused_by_the_causality_probe(tmp_path):
    """BertLMHeadModel without is_decoder loads under AutoModelForCausalLM with every weight, but
    attends both ways: only the probe can tell."""
    from transformers import BertConfig, BertLMHeadModel

    from evals.genppl import GenPPLError, load_judge

    BertLMHeadModel(BertConfig(vocab_size=16, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=8)).save_pretrained(tmp_path / "bert_lm")
    with pytest.raises(GenPPLError) as e:
        load_judge(tmp_path / "bert_lm")
    assert "attends to later tokens" in one_line(e)


def test_missing_judges_and_run_folders_are_refused(judge_run, tmp_path):
    from evals.genppl import GenPPLError, load_judge

    with pytest.raises(GenPPLError) as e:
        load_judge(judge_run["run_dir"])
    assert "export-judge" in one_line(e)
    (tmp_path / "empty").mkdir()
    with pytest.raises(GenPPLError) as e:
        load_judge(tmp_path / "empty")
    assert "no config.json" in one_line(e)
    with pytest.raises(GenPPLError) as e:
        load_judge("no-such-org/no-such-judge")
    assert "offline" in one_line(e)


def test_judge_tokenizer_that_cannot_encode_the_samples_is_refused(word_judge, tmp_path):
    from evals.genppl import GenPPLError, Protocol, Samples, encodability, gen_ppl, load_judge

    judge = load_judge(word_judge["dir"])
    s = Samples([[2, 3]], ["the zebra sat on the mat"], "test")  # 'zebra' -> [UNK]
    with pytest.raises(GenPPLError) as e:
        gen_ppl(s, [judge], Protocol(max_length=16))
    assert "cannot encode" in one_line(e) and "zebra" in one_line(e)
    assert gen_ppl(s, [judge], Protocol(max_length=16, max_unknown_rate=0.5))["metrics"]["genppl/ppl"] > 0
    # a tokenizer without unknown token or byte fallback drops characters silently: the offsets show it
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(vocab={"<eos>": 0, "t": 1, "h": 2, "e": 3, "th": 4, "the": 5},
                               merges=[("t", "h"), ("th", "e")]))
    bpe.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    bpe.save(str(tmp_path / "bpe.json"))
    report = encodability(PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "bpe.json")), ["the thx zz"])
    assert (report["unencodable"], report["of"]) == (3, 8)
    # GPT-2's unknown token is its end-of-text token: in the samples it is known text, not an unknown one
    bpe.add_special_tokens(["<eos>"])
    bpe.save(str(tmp_path / "bpe.json"))
    gpt2_like = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "bpe.json"), unk_token="<eos>", eos_token="<eos>")
    report = encodability(gpt2_like, ["the<eos>the zz"])
    assert (report["unencodable"], report["of"]) == (2, 13)


def test_empty_and_malformed_samples_are_refused(model_tok, tmp_path):
    from evals.genppl import GenPPLError, read_samples

    cases = {"empty.jsonl": ([{"ids": [2, 3]}, {"ids": []}], "empty sample"),
             "none.jsonl": ([], "no samples"),
             "vocab.jsonl": ([{"ids": [2, 99]}], "not a token of the model tokenizer"),
             "shape.jsonl": ([{"text": "the cat"}], "'ids'")}
    for name, (rows, expect) in cases.items():
        write_samples(tmp_path / name, rows)
        with pytest.raises(GenPPLError) as e:
            read_samples(tmp_path / name, model_tok)
        assert expect in one_line(e), name
    (tmp_path / "bad.jsonl").write_text('{"ids": [2]}\nnot json\n')
    with pytest.raises(GenPPLError) as e:
        read_samples(tmp_path / "bad.jsonl", model_tok)
    assert "bad.jsonl:2" in one_line(e)


def test_cli_errors_are_one_line_and_exit_2(word_judge, judge_run, tmp_path, capsys):
    from workflows.cli import main

    write_samples(tmp_path / "s.jsonl", [{"ids": [2, 3, 4]}])
    base = ["score-samples", "--samples", str(tmp_path / "s.jsonl"), "--judge", str(word_judge["dir"]),
            "--run-dir", str(judge_run["run_dir"]), "--out", str(tmp_path / "genppl.json")]
    # the word tokenizer is not the one the run was trained with
    assert main(base + ["--model-tokenizer", str(word_judge["tokenizer"])]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "not the tokenizer the run" in err
    assert main(["export-judge", "--run-dir", str(tmp_path), "--tokenizer", str(judge_run["tokenizer"]),
                 "--out", str(tmp_path / "judge")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "no manifest" in err
    assert not (tmp_path / "genppl.json").exists() and not (tmp_path / "judge").exists()
