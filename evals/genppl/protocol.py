"""Gen. PPL of generated samples under a judge LM, and their unigram entropy: the MDLM/DUO protocol.

The steps, in order (docs/sources.md, "Evaluation notes" A, with the upstream lines it names;
D = s-sahoo/duo @ 7c9b498 ``metrics.py`` / ``main.py``, M = kuleshov-group/mdlm @ c112c52 ``diffusion.py``):

1. **Entropy first**, on the generator's own token ids (D ``Metrics.record_entropy``, metrics.py:155-161):
   per sample the unigram entropy in nats of its ids (every id counts, special / padding / EOS ids
   included), then the mean over samples (:func:`unigram_entropy`, :func:`mean_entropy`).
2. **Decode** the ids with the *model's* tokenizer, special tokens kept (D main.py:123-124
   ``batch_decode`` without ``skip_special_tokens``): the judged text contains ``<|endoftext|>`` (or
   ``[CLS]`` / ``[SEP]`` for a BERT tokenizer) literally (:class:`ModelTokenizer`).
3. **Judge**: ``AutoModelForCausalLM`` / ``AutoTokenizer`` by hub name or local folder (``gpt2-large``
   in D configs/config.yaml:68, M :53), default dtype float32, eval mode (:func:`load_judge`); pad token
   = EOS when the tokenizer has none (D metrics.py:83-85). Refused before scoring, one line each: a
   folder that is not a transformers model, a model that ``AutoModelForCausalLM`` cannot build, whose
   causal-LM weights are missing from the checkpoint, or that is not causal (a probe changes the last
   token and checks that no earlier logit moves); a tokenizer without EOS.
4. **Retokenise** with the judge's tokenizer (D ``_eval_retokenize``, metrics.py:113-153):
   ``truncation=True, padding=True, max_length=max_length`` (D: ``model.length``, the generator's
   sequence length: 128 LM1B / TinyStories, 1024 OWT), the tokenizer's own special tokens (GPT-2 adds
   none), padding on the right (set explicitly; a left-padding tokenizer would make the EOS mask score
   padding). Refused before scoring: a judge tokenizer that cannot encode the samples — the fraction of
   non-space characters not covered by a known token (unknown token, or dropped for lack of byte
   fallback) above ``max_unknown_rate`` (:func:`encodability`).
5. **Score**: batches of ``batch_size`` (D ``eval.perplexity_batch_size`` 8), every row split into
   chunks of the judge's context (``n_positions``; D 1024 for GPT-2; a no-op when max_length fits),
   each chunk scored alone: NLL = CE(logits[:, :-1], ids[:, 1:]), no BOS prepended, so the first
   token of a chunk is never scored (D metrics.py:186-210).
6. **EOS mask** (D metrics.py:205-210): on positions 1:, ``(cumsum(ids == eos) == 1) | (ids != eos)``:
   every non-EOS token (text after an EOS included) plus the first EOS; later EOS are not scored.
7. **Aggregate**: the token-weighted mean NLL over all samples (D ``NLL`` / torchmetrics
   ``MeanMetric`` with weights), then exp; per-token NLLs in float32 (fp32 logits), sums in float64.

Deliberate differences from the reference code, each recorded in the result's ``details.protocol``:

* **float64 accumulation.** D's ``gen_ppl`` is a separate torchmetrics ``Perplexity()`` that stays
  float32 (only the train/valid NLL metrics are set to float64, metrics.py:72); we sum in float64.
* **No dropped samples.** D and M score ``N // batch_size`` batches and silently drop the leftover
  samples; we score every sample (the last batch may be smaller), so the result does not depend on
  the batch size.
* **Padding is never scored** (``pad_eos="exclude"``, default). With pad = EOS, D's mask scores the
  first padding EOS of every row shorter than the longest row of its batch (when the row has no EOS of
  its own): whether that token counts depends on which samples share the batch. We AND the mask with
  the attention mask, so only the samples' own tokens count and the result is batch-size invariant.
  ``pad_eos="duo"`` reproduces D's mask exactly (batch-dependent; for comparisons with D's code).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from common.errors import ReproError

EOT = "<|endoftext|>"  # corpora.tokenization.EOT: the only special token of our BPE


class GenPPLError(ReproError, ValueError):
    """Bad samples, judge, tokenizer or settings, found before scoring; one line naming the file or
    option at fault and what to do."""


# ------------------------------------------------------------------------------------------------
# Protocol settings


@dataclass(frozen=True)
class Protocol:
    """The choices of the Gen. PPL protocol that are settings (the fixed steps are in the module
    docstring); all of them go into ``details.protocol`` of the result."""
    max_length: int                    # judge retokenisation truncates here (D: model.length, the generator's L)
    batch_size: int = 8                # D eval.perplexity_batch_size; the result does not depend on it
    pad_eos: str = "exclude"           # exclude: padding never scored (batch invariant) | duo: D's mask exactly
    max_unknown_rate: float = 1e-3     # refuse a judge whose tokenizer cannot encode more of the samples' characters
    dtype: str = "float32"             # judge weights (D loads gpt2-large at the default fp32)

    def __post_init__(self):
        if self.max_length < 2:
            raise GenPPLError(f"max_length={self.max_length}: the protocol scores positions 1:, so it needs at least 2")
        if self.batch_size < 1:
            raise GenPPLError(f"batch_size={self.batch_size}: use a positive batch size")
        if self.pad_eos not in ("exclude", "duo"):
            raise GenPPLError(f"pad_eos={self.pad_eos!r}: use 'exclude' (batch invariant) or 'duo' "
                              "(the reference mask)")
        if not 0.0 <= self.max_unknown_rate < 1.0:
            raise GenPPLError(f"max_unknown_rate={self.max_unknown_rate}: use a fraction in [0, 1)")
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise GenPPLError(f"dtype={self.dtype!r}: use float32 (the reference), bfloat16 or float16")

    def record(self) -> dict:
        return {**asdict(self),
                "steps": ["entropy on the model's own ids (nats, per sample, mean over samples)",
                          "decode with the model's tokenizer, special tokens kept",
                          "retokenise with the judge's tokenizer: truncation at max_length, padding right, "
                          "pad = eos if unset, the judge tokenizer's own special tokens, no BOS prepended",
                          "rows split into chunks of the judge's context, each chunk scored alone",
                          "NLL = CE(logits[:, :-1], ids[:, 1:]) in float32",
                          "mask on positions 1: = (cumsum(ids == eos) == 1) | (ids != eos)"
                          + (" & attention_mask (padding never scored)" if self.pad_eos == "exclude" else
                             " (D's mask: the first padding EOS of a row shorter than its batch's longest counts)"),
                          "token-weighted mean NLL over all samples, summed in float64, then exp",
                          "several judges: metrics per judge and the arithmetic mean of their Gen PPL"],
                "differences_from_reference": [
                    "float64 sums (D's gen_ppl Perplexity metric is float32)",
                    "every sample scored, the last batch may be smaller (D and M drop N mod batch_size samples)",
                    *(["padding never scored (D scores the first padding EOS of rows shorter than their "
                       "batch's longest, which makes its number depend on the batch composition)"]
                      if self.pad_eos == "exclude" else [])],
                "reference": "s-sahoo/duo@7c9b498 metrics.py:83-85,113-161,186-210, main.py:118-125; "
                             "kuleshov-group/mdlm@c112c52 diffusion.py:474-573"}


# ------------------------------------------------------------------------------------------------
# Step 1: entropy on the model's own ids


def unigram_entropy(ids) -> float:
    """Unigram entropy in nats of one sample's token ids (every id counts)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        raise GenPPLError("unigram entropy of an empty sample")
    _, counts = np.unique(ids, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


def mean_entropy(samples_ids) -> float:
    """Mean over samples of their unigram entropy (D ``record_entropy``)."""
    return math.fsum(unigram_entropy(s) for s in samples_ids) / len(samples_ids)


# ------------------------------------------------------------------------------------------------
# Step 2: the model's tokenizer and the samples file


@dataclass
class ModelTokenizer:
    """The generator's tokenizer: decode keeping special tokens, encode without adding any."""
    name: str
    sha256: str | None
    vocab_size: int
    eos_text: str | None
    _decode: Callable = field(repr=False)
    _encode: Callable = field(repr=False)

    def decode_batch(self, ids: list[list[int]]) -> list[str]:
        return self._decode(ids)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self._encode(texts)


def load_model_tokenizer(spec: str | Path) -> ModelTokenizer:
    """Our ``tokenizer.json`` (a file: a trained tokenizer, or the record ``{"pretrained": name}`` the tokenizer
    rule writes for a pretrained one, loaded as the run loaded it) or a ``transformers`` tokenizer by name or
    folder."""
    from corpora.tokenization import pretrained_record, pretrained_tokenizer

    path = Path(spec)
    pretrained = pretrained_record(path)
    if pretrained is not None:
        try:
            tok, sha256 = pretrained_tokenizer(pretrained)
        except ReproError as e:
            raise GenPPLError(f"{path}: {e}") from None
        return ModelTokenizer(pretrained, sha256, len(tok), tok.eos_token,
                              lambda ids: tok.batch_decode(ids, skip_special_tokens=False),
                              lambda texts: tok(texts, add_special_tokens=False)["input_ids"])
    if path.is_file():
        from tokenizers import Tokenizer

        from common.io import sha256_file

        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:
            raise GenPPLError(f"{path}: unreadable tokenizer ({str(e).splitlines()[0]}); pass the tokenizer.json "
                              "of the samples' corpus") from e
        return ModelTokenizer(
            str(path), sha256_file(path), tok.get_vocab_size(), EOT if tok.token_to_id(EOT) is not None else None,
            lambda ids: tok.decode_batch(ids, skip_special_tokens=False),
            lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)])
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(spec))
    except (OSError, ValueError) as e:
        raise GenPPLError(f"--model-tokenizer {spec}: neither a tokenizer.json file nor a tokenizer available "
                          f"offline ({str(e).splitlines()[0]}); pass the samples' tokenizer") from e
    return ModelTokenizer(str(spec), f"pretrained:{spec}", len(tok), tok.eos_token,
                          lambda ids: tok.batch_decode(ids, skip_special_tokens=False),
                          lambda texts: tok(texts, add_special_tokens=False)["input_ids"])


@dataclass
class Samples:
    """Generated samples: token ids of the model and the text the judge sees (decoded, specials kept)."""
    ids: list[list[int]]
    texts: list[str]
    source: str
    text_field_differs: int = 0       # samples whose "text" field is not the decode of their ids

    def record(self) -> dict:
        return {"file": self.source, "n": len(self.ids), "model_tokens": sum(map(len, self.ids)),
                "text": "decoded from ids with the model's tokenizer, special tokens kept",
                "text_field_differs": self.text_field_differs}


def read_samples(path: str | Path, tokenizer: ModelTokenizer) -> Samples:
    """Read a samples file: JSON lines, one object per sample, no header line, blank lines ignored.

    Each object has ``ids`` (the generator's token ids, a non-empty list of ints below the model
    tokenizer's vocabulary size) and optionally ``text``; other keys are ignored. The ids are what
    is scored: the judged text is their decode (special tokens kept), and a ``text`` field that
    differs from it is only counted (``text_field_differs``), since samplers may write text without
    special tokens."""
    path = Path(path)
    if not path.is_file():
        raise GenPPLError(f"{path}: samples file not found; write one JSON object per sample with 'ids'")
    ids, given = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise GenPPLError(f"{path}:{n}: not JSON ({e.msg}); write one JSON object per line") from e
            if not isinstance(row, dict) or not isinstance(row.get("ids"), list):
                raise GenPPLError(f"{path}:{n}: a sample is an object with 'ids' (a list of token ids)")
            sample = row["ids"]
            if not sample:
                raise GenPPLError(f"{path}:{n}: empty sample (no ids); drop it or fix the sampler")
            bad = [i for i in sample
                   if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < tokenizer.vocab_size]
            if bad:
                bad = bad[0]
                raise GenPPLError(f"{path}:{n}: id {bad!r} is not a token of the model tokenizer "
                                  f"({tokenizer.vocab_size} tokens); pass the tokenizer the samples were made with")
            ids.append(sample)
            given.append(row.get("text"))
    if not ids:
        raise GenPPLError(f"{path}: no samples; the sampler wrote nothing")
    texts = tokenizer.decode_batch(ids)
    for n, text in enumerate(texts):
        if not text.strip():
            raise GenPPLError(f"{path}: sample {n} decodes to empty text; the judge has nothing to score")
    differs = sum(g is not None and g != t for g, t in zip(given, texts))
    return Samples(ids, texts, str(path), differs)


# ------------------------------------------------------------------------------------------------
# Step 3: the judge


@dataclass
class Judge:
    key: str                # metric key: the folder's name or the hub name with '/' -> '_'
    name: str               # as given
    model: torch.nn.Module
    tokenizer: object
    context: int            # tokens per forward (chunk size)
    info: dict


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _is_run_folder(path: Path) -> bool:
    return (path / "manifest.json").is_file() or (path / "final" / "manifest.json").is_file()


@torch.no_grad()
def _causal_probe(model, vocab: int, device) -> tuple[float, float]:
    """(largest change of an earlier position's logits, of the last position's) when only the last
    token of a sequence changes; a causal LM gives (0, > 0)."""
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, vocab, (1, 8), generator=g)
    b = a.clone()
    b[0, -1] = (a[0, -1] + 1) % vocab
    delta = (model(a.to(device)).logits[0].float() - model(b.to(device)).logits[0].float()).abs()
    return float(delta[:-1].max()), float(delta[-1].max())


def load_judge(name_or_path: str | Path, device: str | torch.device = "cpu", dtype: str = "float32") -> Judge:
    """A causal LM and its tokenizer by hub name or local folder, checked (one-line ``GenPPLError``)."""
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    name = str(name_or_path)
    path = Path(name)
    if path.exists():
        if path.is_dir() and _is_run_folder(path):
            raise GenPPLError(f"--judge {name}: a training run of this suite, not a transformers model folder; "
                              f"export it first with `python -m workflows.cli export-judge --run-dir {path} "
                              "--tokenizer TOKENIZER --out DIR` and pass DIR")
        if not (path.is_dir() and (path / "config.json").is_file()):
            raise GenPPLError(f"--judge {name}: not a transformers model folder (no config.json); pass a folder with "
                              "config.json, weights and tokenizer files, or a hub name")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    try:
        try:
            config = AutoConfig.from_pretrained(name)
        except (OSError, ValueError) as e:
            raise GenPPLError(f"--judge {name}: no model config available offline ({_one_line(e)}); download it once "
                              "with network or pass a local folder") from e
        if getattr(config, "is_encoder_decoder", False):
            raise GenPPLError(f"--judge {name}: an encoder-decoder model ({config.model_type}), not a causal LM; "
                              "pick a decoder-only judge such as gpt2-large")
        try:
            model, loading = AutoModelForCausalLM.from_pretrained(name, dtype=getattr(torch, dtype),
                                                                  output_loading_info=True)
        except ValueError as e:
            raise GenPPLError(f"--judge {name}: not a causal LM (AutoModelForCausalLM cannot build a "
                              f"{config.model_type!r} model); pick a decoder-only judge such as gpt2-large") from e
        except OSError as e:
            raise GenPPLError(f"--judge {name}: weights not available ({_one_line(e)}); download them once or "
                              "pass a complete folder") from e
        if loading.get("missing_keys"):
            missing = sorted(loading["missing_keys"])
            raise GenPPLError(f"--judge {name}: the checkpoint has no weights for {len(missing)} parameters of a "
                              f"causal LM (e.g. {missing[0]}); it is not a causal LM checkpoint: pick another judge")
        model = model.eval().to(device)
        vocab = model.get_input_embeddings().num_embeddings
        leak, last = _causal_probe(model, vocab, device)
        if leak > 1e-5 * last and leak > 1e-7:  # bit-identical in a causal model; relative, as tiny models move little
            raise GenPPLError(f"--judge {name}: earlier logits change by {leak:.3g} when only the last token changes "
                              f"(the last by {last:.3g}): the model attends to later tokens, it is not a causal LM; "
                              "pick a decoder-only judge")
        try:
            tok = AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as e:
            raise GenPPLError(f"--judge {name}: no tokenizer available ({_one_line(e)}); the folder needs the "
                              "tokenizer files (export-judge writes them)") from e
    finally:
        transformers.logging.set_verbosity(verbosity)
    if tok.eos_token_id is None:
        raise GenPPLError(f"--judge {name}: its tokenizer has no EOS token, which the EOS mask and padding need; "
                          "set eos_token in its tokenizer_config.json")
    if len(tok) > vocab:
        raise GenPPLError(f"--judge {name}: its tokenizer has {len(tok)} tokens, the model embeds {vocab}; "
                          "the tokenizer does not belong to this model")
    pad_set = tok.pad_token is None
    if pad_set:
        tok.pad_token = tok.eos_token  # D metrics.py:83-85
    padding_side = tok.padding_side
    tok.padding_side = "right"
    context = getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)
    if not context:
        raise GenPPLError(f"--judge {name}: its config states no context length (n_positions / "
                          "max_position_embeddings); pick another judge")
    key = path.name if path.exists() else name.replace("/", "_")
    info = {"name": name, "model_type": config.model_type, "class": type(model).__name__,
            "params": sum(p.numel() for p in model.parameters()), "dtype": dtype, "context": int(context),
            "vocab": vocab, "tokenizer_class": type(tok).__name__, "eos_token": tok.eos_token,
            "eos_token_id": tok.eos_token_id, "pad_token": tok.pad_token, "pad_set_to_eos": pad_set,
            "padding_side_given": padding_side, "causal_probe": {"earlier_max_change": leak, "last_max_change": last},
            "commit": getattr(config, "_commit_hash", None)}
    exported = path / "judge_manifest.json"
    if exported.is_file():
        info["exported_from"] = json.loads(exported.read_text())
    return Judge(key, name, model, tok, int(context), info)


# ------------------------------------------------------------------------------------------------
# Step 4: can the judge's tokenizer encode the samples?


def encodability(tokenizer, texts: list[str]) -> dict:
    """How much of the samples the judge's tokenizer cannot represent.

    Fast tokenizers: the non-space characters not covered by the offsets of any token other than the
    unknown token (mapped to ``unk``, or silently dropped for lack of byte fallback); the unknown token's
    own text is known (GPT-2's unknown token is its end-of-text token, which the samples hold). Slow
    tokenizers (no offsets): the fraction of tokens that are the unknown token."""
    unk = tokenizer.unk_token_id
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
        bad = total = 0
        example = None
        for text, ids, offsets in zip(texts, enc["input_ids"], enc["offset_mapping"]):
            covered = np.zeros(len(text), dtype=bool)
            for i, (s, e) in zip(ids, offsets):
                if i != unk or text[s:e] == tokenizer.unk_token:
                    covered[s:e] = True
            solid = np.fromiter((not c.isspace() for c in text), dtype=bool, count=len(text))
            missing = solid & ~covered
            bad += int(missing.sum())
            total += int(solid.sum())
            if example is None and missing.any():
                k = int(np.argmax(missing))
                example = text[max(0, k - 10):k + 10]
        return {"check": "characters not covered by a known token (offsets)", "unencodable": bad,
                "of": total, "rate": bad / max(total, 1), "example": example}
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    bad = sum(i == unk for row in ids for i in row) if unk is not None else 0
    total = sum(map(len, ids))
    return {"check": "unknown tokens among tokens (slow tokenizer, no offsets)", "unencodable": bad, "of": total,
            "rate": bad / max(total, 1), "example": None}


def check_encodable(judge: Judge, texts: list[str], protocol: Protocol) -> dict:
    report = encodability(judge.tokenizer, texts)
    if report["rate"] > protocol.max_unknown_rate:
        raise GenPPLError(f"--judge {judge.name}: its tokenizer cannot encode {report['rate']:.2%} of the samples' "
                          f"characters (e.g. {report['example']!r}; limit {protocol.max_unknown_rate:.2%}): no byte "
                          "fallback for this text; pick a judge whose tokenizer covers it or raise --max-unknown-rate")
    return report


# ------------------------------------------------------------------------------------------------
# Steps 5-7: score


def eos_mask(ids: torch.Tensor, attention: torch.Tensor, eos_id: int, pad_eos: str) -> torch.Tensor:
    """Which targets (positions 1:) count: every non-EOS token plus the first EOS (D metrics.py:205-210);
    with ``pad_eos="exclude"`` only the row's own tokens (attention mask), never padding."""
    is_eos = ids == eos_id
    keep = ((is_eos.cumsum(-1) == 1) | ~is_eos)[:, 1:]
    if pad_eos == "exclude":
        keep = keep & attention[:, 1:].bool()
    return keep


@torch.no_grad()
def judge_nll(judge: Judge, texts: list[str], protocol: Protocol) -> dict:
    """Per-sample summed NLL (nats, float64) and scored-token counts under one judge, and the corpus
    Gen PPL = exp(sum NLL / sum tokens)."""
    tok, device = judge.tokenizer, next(judge.model.parameters()).device
    nll = np.zeros(len(texts), dtype=np.float64)
    count = np.zeros(len(texts), dtype=np.int64)
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # no "longer than the maximum" warning: truncation is the protocol
    try:
        lengths = [len(row) for row in tok(texts)["input_ids"]]  # untruncated, for the truncation count
    finally:
        transformers.logging.set_verbosity(verbosity)
    for start in range(0, len(texts), protocol.batch_size):  # every sample, the last batch may be smaller
        batch = tok(texts[start:start + protocol.batch_size], return_tensors="pt", truncation=True, padding=True,
                    max_length=protocol.max_length, return_token_type_ids=False, return_attention_mask=True)
        ids, attention = batch["input_ids"], batch["attention_mask"]
        for ids_c, att_c in zip(ids.split(judge.context, dim=-1), attention.split(judge.context, dim=-1)):
            if ids_c.shape[1] < 2:
                continue
            logits = judge.model(ids_c.to(device), attention_mask=att_c.to(device)).logits.float()
            per_token = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids_c[:, 1:].to(device), reduction="none")
            keep = eos_mask(ids_c, att_c, tok.eos_token_id, protocol.pad_eos)
            nll[start:start + len(ids_c)] += (per_token.cpu().double() * keep).sum(-1).numpy()  # fp32 each, fp64 sums
            count[start:start + len(ids_c)] += keep.sum(-1).numpy()
    total, tokens = math.fsum(nll), int(count.sum())
    if tokens == 0:
        raise GenPPLError(f"--judge {judge.name}: no token of the samples is scored (each retokenises to one token); "
                          "the samples are too short for Gen PPL")
    return {"ppl": math.exp(total / tokens), "nll": total / tokens, "tokens": tokens,
            "truncated_samples": sum(n > protocol.max_length for n in lengths),
            "per_sample_nll": nll.tolist(), "per_sample_tokens": count.tolist()}


def gen_ppl(samples: Samples, judges: list[Judge], protocol: Protocol) -> dict:
    """``{"metrics": {...}, "details": {...}}`` of the samples under every judge, with their entropy.

    Metrics: ``genppl/ppl`` (the arithmetic mean over judges of their Gen PPL, NCM appendix E.1 averages
    several judges; equal to the judge's when one), ``genppl/{ppl,nll,tokens}/<judge key>``,
    ``samples/entropy`` (mean unigram entropy, nats), ``samples/n``, ``samples/model_tokens``, and
    ``genppl/ceiling``: the largest judge vocabulary, the Gen PPL of tokens drawn uniformly from it (a Gen PPL
    above it means nothing about the samples but that the sampler was not trained)."""
    if not judges:
        raise GenPPLError("no judge given; pass --judge NAME_OR_FOLDER at least once")
    keys = [j.key for j in judges]
    if len(set(keys)) != len(keys):
        raise GenPPLError(f"judges {keys}: two judges share a name; pass each judge once")
    metrics = {"samples/entropy": mean_entropy(samples.ids), "samples/n": len(samples.ids),
               "samples/model_tokens": sum(map(len, samples.ids))}
    details = {"protocol": protocol.record(), "samples": samples.record(), "judges": {}}
    for judge in judges:  # every judge's tokenizer is checked before any scoring
        details["judges"][judge.key] = {**judge.info, "encodability": check_encodable(judge, samples.texts, protocol)}
    ppls = []
    for judge in judges:
        r = judge_nll(judge, samples.texts, protocol)
        metrics.update({f"genppl/ppl/{judge.key}": r["ppl"], f"genppl/nll/{judge.key}": r["nll"],
                        f"genppl/tokens/{judge.key}": r["tokens"]})
        details["judges"][judge.key]["truncated_samples"] = r["truncated_samples"]
        ppls.append(r["ppl"])
    metrics["genppl/ppl"] = math.fsum(ppls) / len(ppls)
    vocabs = [judge.info.get("vocab") for judge in judges]
    if all(isinstance(v, int) and v > 0 for v in vocabs):  # a uniform draw over the judges' vocabulary scores this
        metrics["genppl/ceiling"] = float(max(vocabs))
    details["mean_over_judges"] = "arithmetic mean of the judges' Gen PPL (NCM App. E.1 does not say which mean)"
    return {"metrics": metrics, "details": details}
