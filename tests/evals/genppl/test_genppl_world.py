"""Ground truth from the synthetic world: generated documents are accepted with their exact NLL,
corrupted ones rejected; window cuts are judged as prefixes; the prefix test accepts every prefix of
a document and nothing that leaves the language."""
from __future__ import annotations

import math

import pytest

from corpora.synthetic import WorldConfig, generate_split

EOT = "<|endoftext|>"
CFG = WorldConfig(train_docs=2, valid_docs=2, test_docs=12)


@pytest.fixture(scope="module")
def docs():
    return list(generate_split(CFG, "test", 5))


@pytest.fixture(scope="module")
def tok(tiny_data):
    from evals.genppl import load_model_tokenizer

    return load_model_tokenizer(tiny_data["tokenizer"])


def corrupt(text: str) -> str:
    """Swap two words in the middle: still English-looking, not a derivation of the grammar."""
    words = text.split(" ")
    k = len(words) // 2
    words[k], words[k + 1] = words[k + 1], words[k]
    return " ".join(words)


def test_generated_document_accepted_with_its_exact_nll(docs, tok):
    from evals.genppl import world_quality

    doc = docs[0]
    q = world_quality([EOT + doc["text"] + EOT], CFG, 5, tok)
    n_tokens = len(tok.encode_batch([doc["text"]])[0]) + 1  # + the EOT carrying the end-of-document event
    assert (q["docs"], q["accepted_docs"], q["sample_accept_rate"]) == (1, 1, 1.0)
    assert q["accepted_tokens"] == n_tokens
    assert q["nll_per_token"] == pytest.approx(-doc["logprob"] / n_tokens, rel=1e-12)
    assert q["ppl"] == pytest.approx(math.exp(-doc["logprob"] / n_tokens))


def test_corrupted_document_rejected(docs, tok):
    from evals.genppl import world_quality

    bad = corrupt(docs[1]["text"])
    assert bad != docs[1]["text"]
    q = world_quality([EOT + bad + EOT, EOT + docs[2]["text"] + EOT], CFG, 5, tok)
    assert (q["docs"], q["accepted_docs"], q["accepted_samples"]) == (2, 1, 1)
    assert q["nll_per_token"] == pytest.approx(
        -docs[2]["logprob"] / (len(tok.encode_batch([docs[2]["text"]])[0]) + 1))
    assert q["rejections"][0]["sample"] == 0 and "not in the synthetic language" in q["rejections"][0]["why"]


def test_windows_head_unjudged_tail_judged_as_prefix(docs, tok):
    from evals.genppl import world_quality

    a, b, c = (d["text"] for d in docs[3:6])
    window = a[len(a) // 2:] + EOT + b + EOT + c[: len(c) // 2]
    q = world_quality([window], CFG, 5, tok)
    assert (q["docs"], q["accepted_docs"], q["prefixes"], q["accepted_prefixes"]) == (1, 1, 1, 1)
    assert q["unjudged_head_chars"] == len(a) - len(a) // 2 and q["sample_accept_rate"] == 1.0
    bad_tail = a[len(a) // 2:] + EOT + b + EOT + corrupt(c)[: len(c) - 3]
    q = world_quality([bad_tail, a], CFG, 5, tok)  # the second has no EOT: not judged
    assert (q["prefixes"], q["accepted_prefixes"], q["judged_samples"], q["accepted_samples"]) == (1, 0, 1, 0)
    assert q["sample_accept_rate"] == 0.0 and q["nll_per_token"] is not None


def test_document_boundaries(docs, tok):
    from evals.genppl import world_quality

    q = world_quality([docs[6]["text"], EOT + docs[7]["text"] + EOT, corrupt(docs[8]["text"])], CFG, 5, tok,
                      boundaries="document")
    assert (q["docs"], q["accepted_docs"], q["sample_accept_rate"]) == (3, 2, pytest.approx(2 / 3))


def test_prefix_verdict_accepts_every_prefix_and_rejects_departures(docs):
    from corpora.synthetic.accept import prefix_verdict

    text = docs[9]["text"]
    for k in range(0, len(text) + 1, 5):
        assert prefix_verdict(CFG, 5, text[:k]) is None, text[:k]
    assert prefix_verdict(CFG, 5, text) is None
    assert prefix_verdict(CFG, 5, text + " The") is not None  # goes on after the end of the document
    assert prefix_verdict(CFG, 5, text[:20] + "#") is not None
