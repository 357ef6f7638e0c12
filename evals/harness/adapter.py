"""One lm-evaluation-harness adapter for every model family of ``models.registry``.

``ReproLM`` (registered in lm-eval as ``concept-repro``) wraps any model that follows the suite's
shared interface, ``model(idx)["logits"]`` of shape (batch, time, vocab) and **strictly causal**
(the logits at position t never depend on tokens after t), plus a ``LoadedTokenizer`` from
``corpora.tokenization``. It is passed as an object to ``lm_eval.simple_evaluate``; the unforked
harness builds the requests, applies the task's prompt and computes the metrics.

Semantics (those of lm-eval's ``hf`` backend, so numbers are comparable and the parity test holds):

* **loglikelihood** ``(context, continuation) -> (sum of log p(continuation tokens), is_greedy)``.
  Trailing spaces of the context move to the continuation, the pair is tokenised whole and split at
  ``len(tokenize(context))`` (``TemplateLM._encode_pair``); an empty context is replaced by the
  end-of-text token. The model sees ``(context + continuation)[-(max_length + 1):][:-1]``: a context
  too long for the window is **truncated from the left** (counted in ``stats['truncated_contexts']``
  and recorded in the result). A continuation longer than the window is scored in windows of
  ``max_length // 2`` targets, each conditioned on at least ``max_length // 2`` preceding tokens
  (the ``hf`` backend asserts there); no request is ever skipped or scored 0. When BPE merges
  across the context/continuation boundary so that the split leaves no continuation token, the
  continuation is tokenised on its own (``stats['boundary_merges']``).
* **loglikelihood_rolling** ``(text,) -> log p(text | end-of-text)``: the windows of
  ``lm_eval.utils.get_rolling_token_windows`` with ``context_len = rolling_context_len`` (1 = the
  ``hf`` backend: disjoint windows, the last one with a full-size context; larger values overlap the
  windows so that every scored token after the first window sees at least that many tokens). Every
  token is scored exactly once.
* **generate_until** ``(context, gen_kwargs) -> text``: greedy only; stops at the end-of-text token,
  at any ``until`` string (which is cut from the output) or after ``max_gen_toks`` tokens; the
  context is left-truncated to ``max_length - max_gen_toks`` tokens. A model that offers the
  incremental-decoding hook below uses it (the token LMs: their KV cache, ``models.token_lm``);
  any other model (ConceptLM, ContextLM, MTP: no concept-state cache) is run again on the growing
  prefix, which is exact for a strictly causal model. ``stats['decode']`` records which.

Incremental-decoding hook (optional, per model family)::

    state = model.init_state(batch_size)                 # empty caches (KV, concept buffers, ...)
    logits, state = model.decode_step(tokens, state)     # tokens (B, t) follow everything fed so far;
                                                         # logits (B, t, V) must equal the full
                                                         # forward's logits at those positions

The first call feeds the (equal-length) prompts, later calls one token each. A model class whose
``INCREMENTAL_DECODE`` is false has the methods (inherited from ``TokenLM``) but not an exact
cache, and is recomputed. A model whose ``CAUSAL_LM`` is false (the masked-diffusion baseline,
``models.mdlm``) is refused: lm-eval's scores assume a causal LM.

Batching: requests are turned into scoring windows, identical inputs are run once (several
one-token continuations of one context share a forward pass), the rest sorted longest first and
right-padded, which a causal model ignores. Only the scored positions go through ``log_softmax``.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from lm_eval import utils as lm_utils
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text
from tqdm import tqdm

from evals.harness.errors import HarnessError

ADAPTER_NAME = "concept-repro"
ADAPTER_VERSION = "1.0"
EOT_TEXT = "<|endoftext|>"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Window:
    """One scoring unit: the model reads ``inputs``; the last ``len(targets)`` positions predict ``targets``."""
    inputs: tuple[int, ...]
    targets: tuple[int, ...]


def loglikelihood_windows(context: list[int], continuation: list[int], max_length: int) -> tuple[list[Window], bool]:
    """Windows scoring ``continuation`` after ``context`` (both non-empty), and whether context was cut."""
    seq = context + continuation
    if len(continuation) <= max_length:
        inputs = seq[-(max_length + 1):][:-1]
        return [Window(tuple(inputs), tuple(continuation))], len(seq) > max_length + 1
    step = max(1, max_length // 2)
    windows = []
    for a in range(len(context), len(seq), step):
        b = min(a + step, len(seq))
        windows.append(Window(tuple(seq[max(0, b - 1 - max_length):b - 1]), tuple(seq[a:b])))
    return windows, True


def rolling_windows(tokens: list[int], prefix: int, max_length: int, context_len: int = 1) -> list[Window]:
    """lm-eval's rolling windows over a document: every token of ``tokens`` is a target exactly once."""
    out = []
    for ctx, cont in map(lm_utils.make_disjoint_window,
                         lm_utils.get_rolling_token_windows(token_list=tokens, prefix_token=prefix,
                                                            max_seq_len=max_length, context_len=context_len)):
        out.append(Window(tuple((ctx + cont)[:-1]), tuple(cont)))
    return out


def has_decode_hook(model) -> bool:
    """Whether ``model`` decodes incrementally: it has the hook and its class declares it exact."""
    return (callable(getattr(model, "decode_step", None)) and callable(getattr(model, "init_state", None))
            and getattr(model, "INCREMENTAL_DECODE", True))


class LineProgress:
    """Progress as plain lines for logs (no terminal, no tqdm carriage returns): one line each ``every``
    seconds, and a last one: ``scoring windows: 12,000 / 74,000 (16%), 35 s, about 3 min left``."""

    def __init__(self, total: int, desc: str, every: float = 30.0, clock=time.monotonic, stream=None):
        self.total, self.desc, self.every, self.clock = total, desc, every, clock
        self.stream = stream if stream is not None else sys.stderr
        self.done, self.start = 0, clock()
        self.last = self.start

    def update(self, n: int) -> None:
        self.done += n
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self._line(now)

    def close(self) -> None:
        if self.last != self.start:  # only what ran long enough to report along the way
            self._line(self.clock())

    def _line(self, now: float) -> None:
        spent = now - self.start
        left = spent * (self.total - self.done) / self.done if self.done else 0.0
        eta = f", about {left / 60:.0f} min left" if left >= 90 else f", about {left:.0f} s left" if left else ""
        print(f"{self.desc}: {self.done:,} / {self.total:,} ({100 * self.done / max(self.total, 1):.0f}%), "
              f"{spent:.0f} s{eta}", file=self.stream, flush=True)


def _progress(total: int, desc: str, disable: bool):
    """A tqdm bar on a terminal; plain lines every 30 s in a log (a long local suite says where it is)."""
    if sys.stderr.isatty():
        return tqdm(total=total, desc=desc, disable=disable)
    return LineProgress(total, desc)


@register_model(ADAPTER_NAME)
class ReproLM(TemplateLM):
    """lm-eval ``LM`` over one of our models and its tokenizer (see the module docstring)."""

    backend = "causal"

    def __init__(self, model: torch.nn.Module, tokenizer, *, max_length: int, batch_size: int = 16,
                 max_gen_toks: int = 256, rolling_context_len: int = 1, device: str = "auto",
                 info: dict | None = None):
        super().__init__()
        if not isinstance(batch_size, int) or batch_size < 1:
            raise HarnessError(f"batch_size must be a positive integer, got {batch_size!r} ('auto' is not supported)")
        if not 1 <= rolling_context_len <= max_length:
            raise HarnessError(f"rolling_context_len must be in [1, max_length={max_length}], "
                               f"got {rolling_context_len}")
        if getattr(model, "CAUSAL_LM", True) is False:
            raise HarnessError(f"{type(model).__name__} is not a causal language model (log p(x_t | x_<t) is not "
                               "its output); lm-eval scores causal LMs only: evaluate it with its own sampler")
        device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.model = model.to(device).eval()
        self.tok = tokenizer
        self.max_length = int(max_length)
        self.batch_size = batch_size
        self.max_gen_toks = max_gen_toks
        self.rolling_context_len = rolling_context_len
        self._device = torch.device(device)
        self.info = dict(info or {})
        self.stats = {"loglikelihood_requests": 0, "rolling_requests": 0, "generate_requests": 0,
                      "forward_rows": 0, "truncated_contexts": 0, "long_continuations": 0, "boundary_merges": 0,
                      "decode": "decode_step" if has_decode_hook(model) else "recompute"}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_run(cls, final_dir: str | Path, tokenizer_path: str | Path, *, expect_arch: str | None = None,
                 **kwargs) -> "ReproLM":
        """The trained model in ``final_dir`` (sha256 checked) with its tokenizer; one-line errors if
        the checkpoint's family is unknown or not ``expect_arch``, or the tokenizer does not fit."""
        from evals.harness.checkpoints import load_for_eval

        model, tok, info = load_for_eval(Path(final_dir), Path(tokenizer_path), expect_arch=expect_arch)
        return cls(model, tok, max_length=info["max_length"], info=info, **kwargs)

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None) -> "ReproLM":
        args = lm_utils.simple_parse_args_string(arg_string)
        return cls.create_from_arg_obj(args, additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None) -> "ReproLM":
        """``model_args`` for lm-eval's own CLI: ``final_dir=...,tokenizer=...[,batch_size=16,...]``."""
        args = dict(arg_dict)
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None and k in ("batch_size", "device")}
        args.update(extra)
        try:
            final_dir, tokenizer = args.pop("final_dir"), args.pop("tokenizer")
        except KeyError as e:
            raise HarnessError(f"model_args needs final_dir=... and tokenizer=... (missing {e.args[0]})") from None
        return cls.from_run(final_dir, tokenizer, **args)

    # ------------------------------------------------------------------ lm-eval properties
    @property
    def eot_token_id(self) -> int:
        return self.tok.eot_id

    @property
    def prefix_token_id(self) -> int:
        return self.tok.eot_id

    @property
    def device(self):
        return self._device

    @property
    def tokenizer_name(self) -> str:
        return f"repro:{self.tok.sha256}"

    def get_model_info(self) -> dict:
        return {"adapter": ADAPTER_NAME, "adapter_version": ADAPTER_VERSION, "max_length": self.max_length,
                "adapter_batch_size": self.batch_size, "rolling_context_len": self.rolling_context_len,
                **{k: v for k, v in self.info.items() if isinstance(v, (str, int, float, bool))}}

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        return self.tok.encode_batch([string])[0]

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tok.decode(tokens)

    # ------------------------------------------------------------------ model calls
    @torch.inference_mode()
    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x.to(self._device))
        self.stats["forward_rows"] += x.shape[0]
        return out["logits"] if isinstance(out, dict) else out

    @torch.inference_mode()
    def score_windows(self, windows: list[Window], disable_tqdm: bool = True) -> list[tuple[float, bool]]:
        """(sum of target log-probs, every target is the argmax) per window; identical inputs share a row."""
        rows: dict[tuple[int, ...], list[int]] = {}
        for i, w in enumerate(windows):
            if not w.inputs or not w.targets or len(w.targets) > len(w.inputs) or len(w.inputs) > self.max_length:
                raise HarnessError(f"internal: malformed scoring window (inputs {len(w.inputs)}, targets "
                                   f"{len(w.targets)}, max_length {self.max_length})")
            rows.setdefault(w.inputs, []).append(i)
        order = sorted(rows, key=lambda t: (-len(t), t))
        out: list[tuple[float, bool] | None] = [None] * len(windows)
        bar = _progress(len(order), "scoring windows", disable_tqdm)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            x = torch.zeros(len(batch), len(batch[0]), dtype=torch.long)
            for r, inputs in enumerate(batch):
                x[r, :len(inputs)] = torch.tensor(inputs)
            logits = self._logits(x)
            need = [max(len(windows[i].targets) for i in rows[inputs]) for inputs in batch]
            row_idx = torch.cat([torch.full((n,), r) for r, n in enumerate(need)])
            pos_idx = torch.cat([torch.arange(len(inputs) - n, len(inputs)) for inputs, n in zip(batch, need)])
            picked = logits[row_idx.to(logits.device), pos_idx.to(logits.device)].float()
            logp = F.log_softmax(picked, dim=-1).cpu()
            greedy = picked.argmax(dim=-1).cpu()
            offset = 0
            for inputs, n in zip(batch, need):
                lp, gr = logp[offset:offset + n], greedy[offset:offset + n]
                for i in rows[inputs]:
                    targets = torch.tensor(windows[i].targets)
                    k = len(targets)
                    vals = lp[n - k:].gather(1, targets[:, None]).squeeze(1)
                    out[i] = (float(vals.double().sum()), bool((gr[n - k:] == targets).all()))
                offset += n
            bar.update(len(batch))
        bar.close()
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ loglikelihood
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """``TemplateLM.loglikelihood`` with one batched tokenizer call (same splits, see module docstring)."""
        pairs = [req.args for req in requests]
        strings = []
        for context, continuation in pairs:
            if context == "":
                strings.append(continuation)
            else:
                context, continuation = _move_spaces(context, continuation)
                strings += [context + continuation, context]
        encoded = iter(self.tok.encode_batch(strings) if strings else [])
        new_reqs = []
        for req, (context, continuation) in zip(requests, pairs):
            if context == "":
                cont_enc = next(encoded)
                if not cont_enc:
                    raise HarnessError(f"{_where(req)}: empty continuation {continuation!r}; nothing to score")
                ctx_enc, cont_enc = (([self.prefix_token_id], cont_enc) if cont_enc[0] != self.prefix_token_id
                                     else (cont_enc[:1], cont_enc[1:]))
            else:
                whole, ctx_enc = next(encoded), next(encoded)
                cont_enc = whole[len(ctx_enc):]
                if not cont_enc:  # BPE merged across the boundary: score the continuation tokenised alone
                    cont_enc = self.tok.encode_batch([_move_spaces(context, continuation)[1]])[0]
                    self.stats["boundary_merges"] += 1
            if not cont_enc:
                raise HarnessError(f"{_where(req)}: empty continuation {continuation!r}; nothing to score")
            new_reqs.append(((context, continuation), ctx_enc, cont_enc))
        return self._loglikelihood_tokens(new_reqs, disable_tqdm=disable_tqdm)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        windows, owner = [], []
        for j, (_, ctx_enc, cont_enc) in enumerate(requests):
            ws, cut = loglikelihood_windows(list(ctx_enc), list(cont_enc), self.max_length)
            self.stats["truncated_contexts"] += int(cut and len(cont_enc) <= self.max_length)
            self.stats["long_continuations"] += int(len(cont_enc) > self.max_length)
            windows += ws
            owner += [j] * len(ws)
        scores = self.score_windows(windows, disable_tqdm)
        total = [0.0] * len(requests)
        greedy = [True] * len(requests)
        for j, (lp, g) in zip(owner, scores):
            total[j] += lp
            greedy[j] = greedy[j] and g
        results = list(zip(total, greedy))
        self.stats["loglikelihood_requests"] += len(requests)
        for (strings, _, _), answer in zip(requests, results):
            if strings is not None:
                self.cache_hook.add_partial("loglikelihood", strings, answer)
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        texts = [req.args[0] for req in requests]
        windows, owner = [], []
        for j, tokens in enumerate(self.tok.encode_batch(texts) if texts else []):
            ws = rolling_windows(tokens, self.prefix_token_id, self.max_length, self.rolling_context_len)
            windows += ws
            owner += [j] * len(ws)
        total = [0.0] * len(texts)
        for j, (lp, _) in zip(owner, self.score_windows(windows, disable_tqdm)):
            total[j] += lp
        self.stats["rolling_requests"] += len(texts)
        for text, value in zip(texts, total):
            self.cache_hook.add_partial("loglikelihood_rolling", (text,), value)
        return total

    # ------------------------------------------------------------------ generation
    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        results: list[str | None] = [None] * len(requests)
        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            groups.setdefault(json.dumps(req.args[1], sort_keys=True, default=str), []).append(i)
        for indices in groups.values():
            gen_kwargs = requests[indices[0]].args[1]
            kwargs = normalize_gen_kwargs(gen_kwargs, self.max_gen_toks)
            if kwargs.get("do_sample"):
                raise HarnessError(f"{_where(requests[indices[0]])}: sampling (do_sample=True) is not supported; "
                                   "the adapter decodes greedily")
            until = [s for s in handle_stop_sequences(kwargs.pop("until", None), eos=EOT_TEXT) if s]
            max_new = int(kwargs.pop("max_gen_toks"))
            if not 0 < max_new < self.max_length:
                raise HarnessError(f"{_where(requests[indices[0]])}: max_gen_toks={max_new} must be in "
                                   f"[1, max_length={self.max_length})")
            contexts = [requests[i].args[0] for i in indices]
            encoded = self.tok.encode_batch(contexts)
            prompts = []
            for enc in encoded:
                enc = enc or [self.prefix_token_id]
                if len(enc) > self.max_length - max_new:
                    self.stats["truncated_contexts"] += 1
                    enc = enc[-(self.max_length - max_new):]
                prompts.append(enc)
            generated = self.greedy(prompts, max_new, until, disable_tqdm)
            for i, context, tokens in zip(indices, contexts, generated):
                text = postprocess_generated_text(self.tok_decode(tokens), until, None)
                results[i] = text
                self.cache_hook.add_partial("generate_until", (context, gen_kwargs), text)
        self.stats["generate_requests"] += len(requests)
        return results  # type: ignore[return-value]

    def greedy(self, prompts: list[list[int]], max_new: int, until: list[str] = (),
               disable_tqdm: bool = True) -> list[list[int]]:
        """Greedy continuations (token ids, end-of-text excluded) of every prompt; each stops at
        end-of-text, when its decoded text contains a stop string, or after ``max_new`` tokens."""
        order = sorted(range(len(prompts)), key=lambda i: (-len(prompts[i]), prompts[i]))
        out: list[list[int] | None] = [None] * len(prompts)
        bar = _progress(len(prompts), "generating", disable_tqdm)
        incremental = has_decode_hook(self.model)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            if incremental:  # the hook feeds equal-length prompts together
                by_len: dict[int, list[int]] = {}
                for i in batch:
                    by_len.setdefault(len(prompts[i]), []).append(i)
                for same in by_len.values():
                    for i, gen in zip(same, self._greedy_incremental([prompts[i] for i in same], max_new, until)):
                        out[i] = gen
            else:
                for i, gen in zip(batch, self._greedy_recompute([prompts[i] for i in batch], max_new, until)):
                    out[i] = gen
            bar.update(len(batch))
        bar.close()
        return out  # type: ignore[return-value]

    def _finished(self, gen: list[int], token: int, until: list[str], max_new: int) -> bool:
        if token == self.eot_token_id:
            return True
        gen.append(token)
        return len(gen) >= max_new or (bool(until) and any(s in self.tok_decode(gen) for s in until))

    @torch.inference_mode()
    def _greedy_recompute(self, prompts: list[list[int]], max_new: int, until: list[str]) -> list[list[int]]:
        seqs = [list(p) for p in prompts]
        gens: list[list[int]] = [[] for _ in prompts]
        active = list(range(len(prompts)))
        while active:
            x = torch.zeros(len(active), max(len(seqs[i]) for i in active), dtype=torch.long)
            for r, i in enumerate(active):
                x[r, :len(seqs[i])] = torch.tensor(seqs[i])
            logits = self._logits(x)
            last = torch.tensor([len(seqs[i]) - 1 for i in active], device=logits.device)
            nxt = logits[torch.arange(len(active), device=logits.device), last].argmax(-1).tolist()
            still = []
            for i, token in zip(active, nxt):
                if not self._finished(gens[i], token, until, max_new):
                    seqs[i].append(token)
                    still.append(i)
            active = still
        return gens

    @torch.inference_mode()
    def _greedy_incremental(self, prompts: list[list[int]], max_new: int, until: list[str]) -> list[list[int]]:
        state = self.model.init_state(len(prompts))
        logits, state = self.model.decode_step(torch.tensor(prompts, device=self._device), state)
        self.stats["forward_rows"] += len(prompts)
        gens: list[list[int]] = [[] for _ in prompts]
        done = [False] * len(prompts)
        while True:
            nxt = logits[:, -1].argmax(-1)
            for i, token in enumerate(nxt.tolist()):
                if not done[i]:
                    done[i] = self._finished(gens[i], token, until, max_new)
            if all(done):
                return gens
            logits, state = self.model.decode_step(nxt[:, None], state)


def _move_spaces(context: str, continuation: str) -> tuple[str, str]:
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


def _where(req) -> str:
    task = getattr(req, "task_name", None)
    doc = getattr(req, "doc_id", None)
    return f"task {task} doc {doc}" if task is not None else "request"
