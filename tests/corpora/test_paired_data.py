"""Paired examples on disk and how runs read them: the record layout, the two views (whole example
or targets only), the unscored source targets, and the conditional token LM / masked-diffusion losses."""
from __future__ import annotations

import json

import pytest
import torch

from corpora.pairs import _local_rows
from corpora.sources import CorpusError
from corpora.tokenization import load_tokenizer
from models.registry import build_model
from tests.conftest import LAYOUT
from trainer.data import DataError, mask_source, open_split, read_manifest, view

P, L = LAYOUT["source_len"], LAYOUT["target_len"]


def test_records_are_source_then_target_padded_with_eot(tiny_pairs):
    tok = load_tokenizer({"kind": "bpe"}, tiny_pairs["tokenizer"])
    manifest = read_manifest(tiny_pairs["tokens"])
    rows = [json.loads(x) for x in (tiny_pairs["corpus"] / "test.jsonl").read_text().splitlines()]
    tokens = open_split(tiny_pairs["tokens"], "test")
    assert manifest["layout"] == LAYOUT and len(tokens) == len(rows) * (P + L) + 1 and tokens[-1] == tok.eot_id
    cut = {"source": 0, "target": 0}
    for i, row in enumerate(rows):
        record = tokens[i * (P + L):(i + 1) * (P + L)].tolist()
        src, tgt = tok.encode_batch([row["source"], row["target"]])
        assert record[:P] == (src + [0] * P)[:P]
        assert record[P:] == (tgt + [0] * L)[:L]  # the target, one <|endoftext|> when it fits, padding
        if len(tgt) <= L:
            assert tok.decode(record[P:P + len(tgt)]) == row["target"]
        cut["source"] += len(src) > P
        cut["target"] += len(tgt) > L
    split = manifest["splits"]["test"]
    assert (split["cut_sources"], split["cut_targets"]) == (cut["source"], cut["target"]) and cut["target"] > 0
    assert split["n_docs"] == len(rows)


def test_runs_read_whole_examples_or_the_targets_only(tiny_pairs, pair_run):
    manifest = read_manifest(tiny_pairs["tokens"])
    whole = view(manifest, pair_run, tiny_pairs["tokens"])
    assert (whole.stride, whole.offset, whole.n_source) == (P + L, 0, P)
    targets = view(manifest, {**pair_run, "model": {**pair_run["model"], "seq_len": L}}, tiny_pairs["tokens"])
    assert (targets.stride, targets.offset, targets.n_source) == (P + L, P, 0)
    assert targets.count(len(open_split(tiny_pairs["tokens"], "valid"))) == 30
    with pytest.raises(DataError, match="set model.seq_len: 22 .* or 10"):
        view(manifest, {**pair_run, "model": {**pair_run["model"], "seq_len": 16}}, tiny_pairs["tokens"])
    with pytest.raises(DataError, match="laid out as .* expects one stream"):
        view(manifest, {k: v for k, v in pair_run.items() if k != "layout"}, tiny_pairs["tokens"])


def test_only_target_side_tokens_are_scored():
    from trainer.data import View

    y = torch.arange(2 * (P + L)).view(2, P + L)
    masked = mask_source(y, View(P + L, 0, P + L, P))
    assert (masked[:, :P - 1] == -100).all() and (masked[:, -1] == -100).all()
    assert torch.equal(masked[:, P - 1:-1], y[:, P - 1:-1])  # the first target token is predicted from the source
    targets_only = mask_source(y[:, :L], View(P + L, P, L, 0))  # the next example's first token is not scored
    assert (targets_only[:, -1] == -100).all() and torch.equal(targets_only[:, :-1], y[:, :L - 1])
    assert mask_source(y, View(P + L, 0, P + L, 0)) is y


def test_the_token_lm_loss_is_the_mean_over_scored_targets():
    torch.manual_seed(0)
    model = build_model({"arch": "gpt2", "d_model": 16, "n_layer": 1, "n_head": 2}, vocab_size=30, seq_len=P + L)
    x = torch.randint(0, 30, (3, P + L))
    y = torch.randint(0, 30, (3, P + L))
    from trainer.data import View

    loss = model(x, mask_source(y, View(P + L, 0, P + L, P)))["losses"]["ntp"]
    logits = model(x)["logits"]
    want = torch.nn.functional.cross_entropy(logits[:, P - 1:-1].flatten(0, 1), y[:, P - 1:-1].flatten())
    torch.testing.assert_close(loss, want, atol=1e-5, rtol=1e-5)


def test_masked_diffusion_never_masks_the_source_and_samples_after_it():
    torch.manual_seed(0)
    model = build_model({"arch": "mdlm_gpt2", "d_model": 16, "n_layer": 1, "n_head": 2, "prefix_len": P},
                        vocab_size=30, seq_len=P + L)
    x = torch.randint(0, 30, (4, P + L))
    seen = []
    real = model.hidden
    model.hidden = lambda xt: (seen.append(xt.clone()), real(xt))[1]
    model.train()(x, x)
    assert torch.equal(seen[0][:, :P], x[:, :P]) and (seen[0][:, P:] == model.mask_id).any()
    model.eval()
    out = model.sample(4, 6, source=x[:, :P], generator=torch.Generator().manual_seed(0))
    assert torch.equal(out.ids[:, :P], x[:, :P]) and (out.ids[:, P:] < 30).all()


def test_local_pair_files_name_the_bad_line(tmp_path):
    bad = tmp_path / "x.tsv"
    bad.write_text("a b\tb a\nonly one field\n")
    with pytest.raises(CorpusError, match=r"x.tsv:2: 1 tab-separated fields"):
        list(_local_rows(bad, "s", "t"))
    empty = tmp_path / "y.jsonl"
    empty.write_text(json.dumps({"s": "a", "t": "b"}) + "\n" + json.dumps({"s": "a", "t": " "}) + "\n")
    with pytest.raises(CorpusError, match=r"y.jsonl:2: empty"):
        list(_local_rows(empty, "s", "t"))


def test_line_aligned_files_are_pairs_and_unequal_counts_are_refused(tmp_path):
    from corpora.pairs import _local_split

    de, en = tmp_path / "t.de", tmp_path / "t.en"
    de.write_text("ein Haus\nzwei Katzen\n")
    en.write_text("a house\ntwo cats\n")
    rows = list(_local_split({"source": str(de), "target": str(en)}, "s", "t"))
    assert [(r["source"], r["target"]) for r in rows] == [("ein Haus", "a house"), ("zwei Katzen", "two cats")]
    en.write_text("a house\n")
    with pytest.raises(CorpusError, match=r"t.de has 2 lines and .*t.en 1; give line-aligned files"):
        list(_local_split({"source": str(de), "target": str(en)}, "s", "t"))
    en.write_text("a house\n\n")
    with pytest.raises(CorpusError, match=r"t.de:2 / .*t.en:2: empty"):
        list(_local_split({"source": str(de), "target": str(en)}, "s", "t"))
