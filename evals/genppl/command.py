"""The Gen. PPL evaluator's subcommands of ``python -m workflows.cli``: their arguments and runs.

    # a trained GPT-2 run -> an offline transformers judge folder
    python -m workflows.cli export-judge --run-dir results/runs/judge_gpt2/seed0 \\
        --tokenizer results/data/world/tokenizer.json --out results/judges/world_gpt2

    # the DAG's evaluation: sample from a run (NCM, masked diffusion or a token LM), then score
    python -m workflows.cli eval-genppl --run-dir results/runs/ncm_s/seed0 \\
        --tokenizer results/data/world/tokenizer.json \\
        --judge results/judges/judge_gpt2_ncm --settings '{"samples": 64, ...}' \\
        --out results/runs/ncm_s/seed0/eval/genppl.json

    # samples -> result JSON (Gen PPL per judge and their mean, entropy, world acceptance and exact NLL)
    python -m workflows.cli score-samples --samples results/runs/ncm_s/seed0/samples/k12.jsonl \\
        --judge results/judges/world_gpt2 [--judge gpt2-large ...] \\
        --model-tokenizer results/data/world/tokenizer.json --run-dir results/runs/ncm_s/seed0 \\
        --out results/runs/ncm_s/seed0/eval/genppl_k12.json

Samples file: JSON lines, one object per sample and nothing else (no header line; blank lines
ignored): {"ids": [token ids of the generator], "text": "..." (optional)}; other keys are ignored.
The ids are scored (decoded with the model tokenizer, special tokens kept); sampler settings (NFE,
temperature, wall time) belong in the sampler's own result, not in this file.

Bad input (a judge that is not a causal LM or whose tokenizer cannot encode the samples, empty
samples, a tokenizer other than the run's, unreadable world settings) is one line on stderr and exit
code 2, before any sample is scored.
"""
from __future__ import annotations

import argparse
import json

from evals.genppl.protocol import GenPPLError


def export_arguments(e: argparse.ArgumentParser) -> None:
    e.add_argument("--run-dir", required=True, help="the judge's run folder (or its final/)")
    e.add_argument("--tokenizer", required=True, help="tokenizer.json of the run's corpus")
    e.add_argument("--out", required=True, help="judge folder to write")


def export(a: argparse.Namespace) -> int:
    """A trained GPT-2 run exported as a transformers judge folder."""
    from evals.genppl.export import export_judge

    print(f"judge written to {export_judge(a.run_dir, a.tokenizer, a.out)}")
    return 0


def arguments(g: argparse.ArgumentParser, evaluation=None) -> None:
    g.add_argument("--run-dir", required=True, help="the generating run (or its final/)")
    g.add_argument("--tokenizer", required=True, help="the run's tokenizer.json")
    g.add_argument("--judge", action="append", required=True, help="judge: hub name or transformers folder; repeatable")
    g.add_argument("--settings", required=True,
                   help="JSON: the profile's genppl section (samples, batch_size, temperature, top_k, top_p, seed, "
                        "judge_batch_size)")
    g.add_argument("--eval", default="genppl",
                   help="genppl, genppl_s<steps> (masked diffusion), genppl_k<scales> (NCM completing real coarse "
                        "scales) or genppl_data (the test windows themselves)")
    g.add_argument("--tokens", help="the run's token folder (needed by genppl_k<j> and genppl_data)")
    g.add_argument("--out", required=True, help="result JSON; the samples go beside it as <stem>.samples.jsonl")
    g.add_argument("--threads", type=int, help="torch threads")


def evaluate(a: argparse.Namespace) -> int:
    """Sample from a run, then score the samples (the DAG's genppl evaluations)."""
    from evals.genppl.sample import evaluate_genppl
    from evals.registry import SETTINGS_DEFAULTS, parse_eval

    _threads(a)
    from evals.commands import settings_object

    settings = settings_object(a.settings, SETTINGS_DEFAULTS, "genppl", GenPPLError)
    try:
        variant = parse_eval(a.eval)
    except ValueError as e:
        raise GenPPLError(f"--eval: {e}") from e
    r = evaluate_genppl(a.run_dir, a.tokenizer, a.judge, a.out, settings, variant=variant, tokens_dir=a.tokens)
    print(json.dumps(r["metrics"], indent=1))
    return 0


def score_arguments(s: argparse.ArgumentParser) -> None:
    s.add_argument("--samples", required=True, help="samples JSON lines ({'ids': [...], 'text': '...'} per line)")
    s.add_argument("--judge", action="append", required=True,
                   help="judge: hub name (gpt2-large) or transformers folder; repeat for several "
                        "(their mean is reported)")
    s.add_argument("--model-tokenizer", required=True, help="the generator's tokenizer.json (or transformers name)")
    s.add_argument("--run-dir", required=True,
                   help="the generating run (or its final/): its manifest goes into the result")
    s.add_argument("--out", required=True, help="result JSON; its stem is the eval name")
    s.add_argument("--world-settings",
                   help="JSON corpus block of the synthetic world (default: the run's, when synthetic)")
    s.add_argument("--no-world", action="store_true", help="skip grammar acceptance even for a synthetic-world run")
    s.add_argument("--boundaries", choices=("eot", "document"), default="eot",
                   help="eot: samples are windows of the EOT-separated stream; document: each sample is one document")
    s.add_argument("--max-length", type=int, help="judge truncation length (default: the run's model.seq_len)")
    s.add_argument("--batch-size", type=int, default=8)
    s.add_argument("--pad-eos", choices=("exclude", "duo"), default="exclude",
                   help="exclude: padding never scored (batch invariant); duo: the reference code's mask")
    s.add_argument("--max-unknown-rate", type=float, default=1e-3,
                   help="refuse a judge whose tokenizer cannot encode more than this fraction of the characters")
    s.add_argument("--device", default="auto")
    s.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    s.add_argument("--threads", type=int, help="torch threads")


def score(a: argparse.Namespace) -> int:
    """Gen PPL, entropy and world quality of a samples file."""
    from evals.genppl.score import score_samples

    _threads(a)
    r = score_samples(a.samples, a.judge, a.model_tokenizer, a.run_dir, a.out, world_settings=a.world_settings,
                      use_world=not a.no_world, boundaries=a.boundaries, max_length=a.max_length,
                      batch_size=a.batch_size, pad_eos=a.pad_eos, max_unknown_rate=a.max_unknown_rate,
                      device=a.device, dtype=a.dtype)
    print(json.dumps(r["metrics"], indent=1))
    return 0


def _threads(a: argparse.Namespace) -> None:
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
