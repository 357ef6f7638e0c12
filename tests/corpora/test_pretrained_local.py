"""Pretrained tokenizers from local files: GPT-2's encoder.json + vocab.bpe, a tokenizer.json
folder; one-line errors for an incomplete, truncated or EOT-less folder; the hash follows the files."""
import json
from pathlib import Path

import pytest

from corpora.tokenization import EOT, TokenizerError, load_tokenizer

SHARED_GPT2 = Path(__file__).resolve().parents[3] / "shared" / "data" / "gpt2_tokenizer"


def byte_alphabet() -> list[str]:
    from tokenizers import pre_tokenizers

    return sorted(pre_tokenizers.ByteLevel.alphabet())


def gpt2_files(folder: Path, merges=("h e", "l l", "he ll")) -> Path:
    """A tiny vocabulary in OpenAI's GPT-2 format: the 256 byte symbols, the merged tokens, then EOT."""
    folder.mkdir(parents=True, exist_ok=True)
    tokens = byte_alphabet() + ["".join(merge.split()) for merge in merges] + [EOT]
    (folder / "encoder.json").write_text(json.dumps({token: i for i, token in enumerate(tokens)}))
    (folder / "vocab.bpe").write_text("#version: 0.2\n" + "\n".join(merges) + "\n")
    return folder


def pretrained(folder: Path):
    return load_tokenizer({"kind": "pretrained", "name": str(folder)})


def test_gpt2_bpe_from_encoder_json_and_vocab_bpe(tmp_path):
    tok = pretrained(gpt2_files(tmp_path / "gpt2"))
    vocab = json.loads((tmp_path / "gpt2" / "encoder.json").read_text())
    assert (tok.vocab_size, tok.eot_id) == (len(vocab), vocab[EOT])
    ids = tok.encode_batch(["hello", "hell o"])
    assert ids[0] == [vocab["hell"], vocab["o"]]  # the merges applied in their order
    assert ids[1] == [vocab["hell"], vocab["Ġ"], vocab["o"]]  # a space is the byte symbol Ġ, no prefix space
    assert tok.decode(ids[1]) == "hell o" and tok.encode_batch([EOT])[0] == [vocab[EOT]]


def test_a_tokenizer_json_folder_encodes_as_the_file_does(tmp_path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer, raw.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    raw.train_from_iterator(["the cat sat on the mat"] * 20, trainers.BpeTrainer(
        vocab_size=300, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    (tmp_path / "neox").mkdir()
    raw.save(str(tmp_path / "neox" / "tokenizer.json"))
    tok = pretrained(tmp_path / "neox")
    assert tok.encode_batch(["the cat sat"])[0] == raw.encode("the cat sat").ids
    assert tok.eot_id == raw.token_to_id(EOT) and tok.sha256.startswith("local:")


def test_the_hash_follows_the_files(tmp_path):
    first = pretrained(gpt2_files(tmp_path / "a")).sha256
    assert pretrained(gpt2_files(tmp_path / "b")).sha256 == first  # same files, same tokenizer
    assert pretrained(gpt2_files(tmp_path / "c", merges=("h e", "l l"))).sha256 != first


@pytest.mark.parametrize("keep, message", [(["encoder.json"], "missing vocab.bpe"),
                                           ([], "missing encoder.json and vocab.bpe")])
def test_an_incomplete_folder_is_one_line(tmp_path, keep, message):
    folder = gpt2_files(tmp_path / "gpt2")
    for path in folder.iterdir():
        if path.name not in keep:
            path.unlink()
    with pytest.raises(TokenizerError, match=message) as error:
        pretrained(folder)
    assert "\n" not in str(error.value) and "neither tokenizer.json nor encoder.json + vocab.bpe" in str(error.value)


def test_truncated_or_eot_less_files_are_one_line(tmp_path):
    folder = gpt2_files(tmp_path / "gpt2")
    (folder / "encoder.json").write_text('{"h": 0, "e"')
    with pytest.raises(TokenizerError, match="unreadable tokenizer files") as error:
        pretrained(folder)
    assert "\n" not in str(error.value)
    vocab = {token: i for i, token in enumerate(byte_alphabet())}  # no <|endoftext|>
    (folder / "encoder.json").write_text(json.dumps(vocab))
    (folder / "vocab.bpe").write_text("#version: 0.2\n")
    with pytest.raises(TokenizerError, match="no end-of-text token"):
        pretrained(folder)


def test_a_hub_name_offline_names_the_local_alternative(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TokenizerError, match="not available offline.*local folder") as error:
        load_tokenizer({"kind": "pretrained", "name": "no-such-org/no-such-tokenizer"})
    assert "\n" not in str(error.value)


@pytest.mark.skipif(not SHARED_GPT2.is_dir(), reason="the real GPT-2 files are not beside this checkout")
def test_the_real_gpt2_files_give_gpt2_ids():
    tok = pretrained(SHARED_GPT2)
    assert (tok.vocab_size, tok.eot_id) == (50257, 50256)
    assert tok.encode_batch(["Hello world, this is GPT-2"])[0] == [15496, 995, 11, 428, 318, 402, 11571, 12, 17]
