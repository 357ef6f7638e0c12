"""The adapter's contract on a tiny trained GPT-2 (seq_len 32): sums, greedy flags, truncation,
rolling windows, generation with stop strings, against token-by-token references that feed the model
only the tokens before each target."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from evals.harness.adapter import ReproLM, loglikelihood_windows, rolling_windows
from evals.harness.errors import HarnessError

TEXT = ("the cat sees a red house near the river and then the small dog runs slowly under the big tree because "
        "the bird sleeps while the blue bird finds a small house over the river")


def logprobs(model, inputs: list[int]) -> torch.Tensor:
    """log p(next | inputs) at every position, from a forward on ``inputs`` alone (float64)."""
    with torch.no_grad():
        return F.log_softmax(model(torch.tensor([inputs]))["logits"][0].double(), -1)


def reference(model, ctx: list[int], cont: list[int], max_length: int) -> tuple[float, bool]:
    """Token by token: target i sees seq[start:i] only, start = max(0, len(seq) - max_length - 1)."""
    seq = ctx + cont
    start = max(0, len(seq) - max_length - 1)
    total, greedy = 0.0, True
    for i in range(len(ctx), len(seq)):
        lp = logprobs(model, seq[start:i])[-1]
        total += float(lp[seq[i]])
        greedy &= int(lp.argmax()) == seq[i]
    return total, greedy


def split(lm, context: str, continuation: str) -> tuple[list[int], list[int]]:
    if context == "":
        return [lm.eot_token_id], lm.tok.encode_batch([continuation])[0]
    n = len(context) - len(context.rstrip())
    if n:
        context, continuation = context[:-n], context[-n:] + continuation
    whole, ctx = lm.tok.encode_batch([context + continuation, context])
    return ctx, whole[len(ctx):]


PAIRS = [("the cat sees a", " red house"), ("", " the cat"), ("the dog runs ", "slowly"),
         (TEXT, " near the river"), (TEXT[:60], " bird"), ("a", " small dog runs quickly under the big tree")]


def test_loglikelihood_matches_token_by_token_reference(lm, make_requests):
    out = lm.loglikelihood(make_requests("loglikelihood", PAIRS))
    for (ctx, cont), (value, greedy) in zip(PAIRS, out):
        ref_value, ref_greedy = reference(lm.model, *split(lm, ctx, cont), lm.max_length)
        assert value == pytest.approx(ref_value, abs=1e-4)
        assert greedy == ref_greedy
        assert value < 0


def test_is_greedy_exactly_when_every_token_is_the_argmax(lm):
    ctx = lm.tok.encode_batch(["the cat sees"])[0]
    gen = lm.greedy([ctx], 5)[0]
    assert len(gen) == 5
    wrong = gen[:-1] + [(gen[-1] + 1) % lm.tok.vocab_size or 1]
    (lp_g, g), (lp_w, w) = lm._loglikelihood_tokens([(None, ctx, gen), (None, ctx, wrong)])
    assert g is True and w is False
    assert lp_g > lp_w


def test_results_do_not_depend_on_batch_size_or_order(harness_run, make_requests):
    reqs = make_requests("loglikelihood", PAIRS)
    runs = []
    for bs, order in ((1, 1), (3, 1), (16, -1)):
        lm = ReproLM.from_run(harness_run["final"], harness_run["tokenizer"], batch_size=bs)
        runs.append(lm.loglikelihood(reqs[::order])[::order])
    for other in runs[1:]:
        for (a, ga), (b, gb) in zip(runs[0], other):
            assert a == pytest.approx(b, abs=1e-5) and ga == gb


def test_long_context_is_truncated_from_the_left_and_counted(harness_run, make_requests):
    lm = ReproLM.from_run(harness_run["final"], harness_run["tokenizer"], batch_size=2)
    ctx = " ".join([TEXT] * 3)
    (value, _), = lm.loglikelihood(make_requests("loglikelihood", [(ctx, " near the river")]))
    c, k = split(lm, ctx, " near the river")
    assert len(c) + len(k) > lm.max_length + 1
    assert lm.stats["truncated_contexts"] == 1
    assert value == pytest.approx(reference(lm.model, c, k, lm.max_length)[0], abs=1e-4) and value < 0


def test_continuation_longer_than_the_window_is_scored_in_windows(lm):
    toks = lm.tok.encode_batch([" ".join([TEXT] * 2)])[0]
    ctx, cont = toks[:5], toks[5:]
    assert len(cont) > 2 * lm.max_length
    windows, _ = loglikelihood_windows(ctx, cont, lm.max_length)
    assert [t for w in windows for t in w.targets] == cont  # every continuation token once, in order
    expected, position = 0.0, len(ctx)
    for w in windows:  # each window's first target sees max_length // 2 tokens (or all there are)
        assert len(w.inputs) <= lm.max_length
        assert len(w.inputs) - len(w.targets) + 1 >= min(lm.max_length // 2, position)
        position += len(w.targets)
        n = len(w.inputs) - len(w.targets)
        for j, target in enumerate(w.targets):
            expected += float(logprobs(lm.model, list(w.inputs[:n + j + 1]))[-1][target])
    (value, _), = lm._loglikelihood_tokens([(None, ctx, cont)])
    assert value == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize("context_len", [1, 7])
@pytest.mark.parametrize("n", [1, 31, 32, 33, 101])
def test_rolling_windows_cover_every_token_exactly_once(n, context_len):
    tokens = list(range(1, n + 1))
    windows = rolling_windows(tokens, 0, 32, context_len)
    assert [t for w in windows for t in w.targets] == tokens
    assert windows[0].inputs[0] == 0  # the first token is predicted from end-of-text
    for w in windows:
        assert 1 <= len(w.targets) <= len(w.inputs) <= 32
        shifted = list(w.inputs[1:]) + [w.targets[-1]]
        assert shifted[-len(w.targets):] == list(w.targets)  # inputs[t] predicts inputs[t + 1]
    if n > 32:
        assert all(len(w.inputs) == 32 for w in windows[1:])  # later windows get a full-size context


@pytest.mark.parametrize("context_len", [1, 9])
def test_rolling_loglikelihood_matches_token_by_token_reference(harness_run, make_requests, context_len):
    lm = ReproLM.from_run(harness_run["final"], harness_run["tokenizer"], batch_size=3,
                          rolling_context_len=context_len)
    short, long = "the cat sees a red house", " ".join([TEXT] * 2)
    values = lm.loglikelihood_rolling(make_requests("loglikelihood_rolling", [(short,), (long,)]))
    toks = lm.tok.encode_batch([short])[0]
    assert values[0] == pytest.approx(reference(lm.model, [lm.eot_token_id], toks, lm.max_length)[0], abs=1e-4)
    expected = 0.0
    for w in rolling_windows(lm.tok.encode_batch([long])[0], lm.eot_token_id, lm.max_length, context_len):
        n = len(w.inputs) - len(w.targets)
        for j, target in enumerate(w.targets):
            expected += float(logprobs(lm.model, list(w.inputs[:n + j + 1]))[-1][target])
    assert values[1] == pytest.approx(expected, abs=1e-3)


def test_boundary_merge_never_leaves_an_empty_continuation(harness_run, make_requests):
    lm = ReproLM.from_run(harness_run["final"], harness_run["tokenizer"], batch_size=2)
    for word in "house river quickly slowly because sleeps jumps under".split():
        for cut in range(1, len(word)):
            ctx, cont = f"the {word[:cut]}", word[cut:]
            whole, c = lm.tok.encode_batch([ctx + cont, ctx])
            if len(whole) == len(c):
                (value, _), = lm.loglikelihood(make_requests("loglikelihood", [(ctx, cont)]))
                assert value < 0 and lm.stats["boundary_merges"] == 1
                return
    pytest.skip("no context/continuation pair merges across the boundary with this tokenizer")


class Scripted(torch.nn.Module):
    """Strictly causal toy: the next token is a fixed function of the current one (EOT after ``eot_after``)."""

    def __init__(self, vocab: int, eot: int, eot_after: int | None = None):
        super().__init__()
        self.vocab, self.eot, self.eot_after = vocab, eot, eot_after
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def next_token(self, idx: torch.Tensor) -> torch.Tensor:
        nxt = (idx * 7 + 3) % (self.vocab - 1) + 1
        return torch.where(nxt == self.eot, (nxt % (self.vocab - 2)) + 2, nxt)

    def forward(self, idx):
        nxt = self.next_token(idx)
        if self.eot_after is not None:
            pos = torch.arange(idx.shape[1]).expand_as(idx)
            nxt = torch.where(pos >= self.start + self.eot_after - 2, torch.full_like(nxt, self.eot), nxt)
        return {"logits": F.one_hot(nxt, self.vocab).float() * 10}


def test_generate_until_stops_at_strings_eot_and_max_gen_toks(lm, make_requests):
    model = Scripted(lm.tok.vocab_size, lm.eot_token_id)
    g = ReproLM(model, lm.tok, max_length=32, batch_size=2)
    prompt = "the cat"
    chain = g.greedy([lm.tok.encode_batch([prompt])[0]], 12)[0]
    full = lm.tok.decode(chain)
    stop = next(lm.tok.decode(chain[i:i + 1]) for i in range(3, 12) if lm.tok.decode(chain[i:i + 1]).strip())
    cut = full.split(stop)[0]
    out = g.generate_until(make_requests("generate_until", [
        (prompt, {"until": [stop], "max_gen_toks": 12}),
        (prompt, {"until": ["@@never@@"], "max_gen_toks": 4}),
        (prompt, {"until": "@@never@@", "max_gen_toks": 12, "do_sample": False})]))
    assert out[0] == cut and stop not in out[0]
    assert out[1] == lm.tok.decode(chain[:4])
    assert out[2] == full
    model.eot_after, model.start = 3, len(lm.tok.encode_batch([prompt])[0])
    out = g.generate_until(make_requests("generate_until", [(prompt, {"until": ["@@never@@"], "max_gen_toks": 12})]))
    assert out[0] == lm.tok.decode(chain[:2])  # the third token is end-of-text: excluded, generation stops


def test_generation_refuses_sampling_and_oversized_budgets(lm, make_requests):
    with pytest.raises(HarnessError, match="sampling"):
        lm.generate_until(make_requests("generate_until", [("the", {"until": ["."], "do_sample": True,
                                                                    "temperature": 1.0})]))
    with pytest.raises(HarnessError, match="max_gen_toks"):
        lm.generate_until(make_requests("generate_until", [("the", {"until": ["."], "max_gen_toks": 32})]))


def test_registered_in_lm_eval_and_buildable_from_model_args(harness_run):
    from lm_eval.api.registry import get_model

    cls = get_model("concept-repro")
    assert cls is ReproLM
    lm = cls.create_from_arg_string(f"final_dir={harness_run['final']},tokenizer={harness_run['tokenizer']}",
                                    {"batch_size": 5, "device": None})
    assert lm.batch_size == 5 and lm.max_length == 32 and lm.info["arch"] == "gpt2"
    with pytest.raises(HarnessError, match="final_dir"):
        cls.create_from_arg_string("tokenizer=x")


def test_progress_in_a_log_is_a_line_every_30_seconds():
    """Without a terminal (a job's log) a long suite says where it is, as lines, not tqdm carriage returns."""
    import io

    from evals.harness.adapter import LineProgress

    now, out = [0.0], io.StringIO()
    bar = LineProgress(74_000, "scoring windows", clock=lambda: now[0], stream=out)
    for _ in range(4):
        now[0] += 10
        bar.update(6_000)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "scoring windows: 18,000 / 74,000 (24%), 30 s, about 2 min left" and len(lines) == 2
    assert "\r" not in out.getvalue()
    quiet = io.StringIO()
    short = LineProgress(10, "scoring windows", clock=lambda: 0.0, stream=quiet)
    short.update(10)
    short.close()
    assert quiet.getvalue() == ""  # a short job prints nothing
