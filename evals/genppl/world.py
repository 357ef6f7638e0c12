"""Ground-truth quality of samples from a generator trained on the synthetic world: no judge, no bias.

The world's grammar knows the exact probability of every document it can produce
(:func:`corpora.synthetic.api.score_document`, a ``ValueError`` for any other text), so for a set of
samples we report how many the grammar accepts and the exact NLL per token of the accepted ones.

What a unit is. Samples decode to text in which ``<|endoftext|>`` marks document boundaries, as in
the training stream (``EOT doc EOT doc ...``, ``corpora.tokenization``). With ``boundaries="eot"``
(default: samples are windows of that stream, which is how every model here is trained):

* a piece between two EOTs is a **complete document**: accepted or rejected by ``score_document``;
  its exact NLL is ``-logprob``;
* the piece after the last EOT is a **prefix** of a document cut by the window: accepted when some
  document starts with it (:func:`corpora.synthetic.accept.prefix_verdict`); it has no NLL;
* the piece before the first EOT is the end of a document whose start lies outside the window: it is
  not judged (its length is counted in ``unjudged_head_chars``). A sample without any EOT is such a
  piece and is not judged.

With ``boundaries="document"`` every sample is one whole document (a sampler that generates single
documents): EOTs at its ends are stripped, and the rest is accepted or rejected as a document.

A sample is **accepted** when it has at least one judged unit and every judged unit is accepted;
``sample_accept_rate`` is over samples with a judged unit. The NLL per token is over the accepted
complete documents: ``sum(-logprob) / sum(tokens)``, the tokens of a document being its re-encoding
with the model's tokenizer plus one for the EOT that closes it (the token that carries the
end-of-document event, the oracle convention of ``results/data/<corpus>/tokens/manifest.json``), so
the number is comparable with the oracle NLL per token of the test split. Re-encoding counts the
canonical tokenisation, not the generator's own segmentation. Selection matters: accepted documents
skew toward short, likely ones, so read the NLL together with the acceptance rate.
"""
from __future__ import annotations

import math

from corpora.synthetic.accept import document_verdict, prefix_verdict
from corpora.synthetic.config import WorldConfig
from evals.genppl.protocol import EOT, GenPPLError

BOUNDARIES = ("eot", "document")


def world_config(settings: dict) -> tuple[WorldConfig, int]:
    """(WorldConfig, seed) from a profile's corpus block ``{"source": "synthetic", "seed": s, "synthetic": {...}}``
    or the data settings the DAG writes (``results/data/<corpus>/settings.json``: ``{"corpus": {...}, ...}``)."""
    if isinstance(settings, dict) and isinstance(settings.get("corpus"), dict):
        settings = settings["corpus"]
    if not isinstance(settings, dict) or settings.get("source", "synthetic") != "synthetic":
        raise GenPPLError(f"world settings {settings!r}: a synthetic corpus block is needed "
                          "({'source': 'synthetic', 'seed': 0, 'synthetic': {...}})")
    if "seed" not in settings:
        raise GenPPLError("world settings: 'seed' is missing; copy the corpus block of the profile the samples' model "
                          "was trained on")
    try:
        return WorldConfig(**settings.get("synthetic", {})), int(settings["seed"])
    except (TypeError, ValueError) as e:
        raise GenPPLError(f"world settings: {e}") from e


def _encoder(tokenizer):
    """``texts -> [[ids]]`` from a ModelTokenizer / LoadedTokenizer (``encode_batch``), a
    ``tokenizers.Tokenizer`` or a ``transformers`` tokenizer."""
    from tokenizers import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return lambda texts: [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    if hasattr(tokenizer, "encode_batch"):
        return tokenizer.encode_batch
    if callable(tokenizer):
        return lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"]
    raise GenPPLError(f"world_quality: cannot encode with a {type(tokenizer).__name__}")


def world_quality(samples_text: list[str], world_cfg: WorldConfig | dict, seed: int, tokenizer, *,
                  boundaries: str = "eot", eos_text: str = EOT, max_examples: int = 5) -> dict:
    """Grammar acceptance and exact NLL of samples (see the module docstring). Returns counts, rates
    (None when nothing was judged) and up to ``max_examples`` rejection reasons."""
    if boundaries not in BOUNDARIES:
        raise GenPPLError(f"boundaries={boundaries!r}: use one of {BOUNDARIES}")
    if isinstance(world_cfg, dict):
        world_cfg = WorldConfig(**world_cfg)
    encode = _encoder(tokenizer)
    docs_ok, docs_bad, prefixes_ok, prefixes_bad, head_chars = [], 0, 0, 0, 0
    judged = accepted = 0
    rejections: list[dict] = []

    def reject(sample: int, kind: str, why: str) -> None:
        if len(rejections) < max_examples:
            rejections.append({"sample": sample, "unit": kind, "why": why})

    for n, text in enumerate(samples_text):
        if boundaries == "document":
            body = text
            while body.startswith(eos_text):
                body = body[len(eos_text):]
            while body.endswith(eos_text):
                body = body[:-len(eos_text)]
            complete, tail, head = [body], None, ""
        else:
            pieces = text.split(eos_text)
            head, complete, tail = pieces[0], pieces[1:-1], pieces[-1] if len(pieces) > 1 else None
            head_chars += len(head)
        units_ok = True
        for doc in complete:
            logprob, why = document_verdict(world_cfg, seed, doc)
            if logprob is None:
                docs_bad += 1
                units_ok = False
                reject(n, "document", why)
            else:
                docs_ok.append((doc, logprob))
        if tail:  # an empty tail: the sample ends with EOT, nothing is cut
            why = prefix_verdict(world_cfg, seed, tail)
            if why is None:
                prefixes_ok += 1
            else:
                prefixes_bad += 1
                units_ok = False
                reject(n, "prefix", why)
        if complete or tail:
            judged += 1
            accepted += units_ok
    tokens = sum(len(ids) + 1 for ids in encode([d for d, _ in docs_ok])) if docs_ok else 0
    nll = -math.fsum(lp for _, lp in docs_ok)
    n_docs, n_prefixes = len(docs_ok) + docs_bad, prefixes_ok + prefixes_bad
    return {"samples": len(samples_text), "judged_samples": judged, "accepted_samples": accepted,
            "sample_accept_rate": accepted / judged if judged else None,
            "docs": n_docs, "accepted_docs": len(docs_ok),
            "doc_accept_rate": len(docs_ok) / n_docs if n_docs else None,
            "prefixes": n_prefixes, "accepted_prefixes": prefixes_ok,
            "prefix_accept_rate": prefixes_ok / n_prefixes if n_prefixes else None,
            "accepted_tokens": tokens, "nll_per_token": nll / tokens if tokens else None,
            "ppl": math.exp(nll / tokens) if tokens else None, "unjudged_head_chars": head_chars,
            "boundaries": boundaries, "seed": seed,
            "tokens_rule": "model-tokenizer re-encoding of each accepted document + 1 for its closing EOT",
            "rejections": rejections}
