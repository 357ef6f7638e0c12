"""The commands of the evaluations that read a run and its token data, a settings file or nothing else
(``python -m workflows.cli eval-<name>``; ``evals/registry.py`` names each one's ``command``): the options
(``arguments(parser, evaluation)``, by the rule that runs the evaluation) and one run per evaluation
(``<name>(args)``), which calls one evaluator and prints one line. The lm-eval, Gen. PPL and conditional
evaluations keep theirs in their packages
(``command.py``)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from common.io import read_settings


def _paths(p: argparse.ArgumentParser, *names: str) -> None:
    for name in names:
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--threads", type=int, default=None, help="torch threads")


# the required options per rule of the DAG (evals/registry.py's ``rule``): paths, then --threads
OPTIONS = {"evaluate_tokens": ("run-dir", "tokens", "out"),
           "evaluate_boundaries": ("run-dir", "tokens", "tokenizer", "out"),
           "fit_law": ("settings", "out"), "kernel_bench": ("settings", "out")}


def arguments(p: argparse.ArgumentParser, evaluation) -> None:
    """The options of ``evaluation``'s command: the paths its rule passes, and torch threads."""
    for name in OPTIONS[evaluation.rule]:
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--threads", type=int, default=None, help="torch threads")


def settings_object(text: str, defaults: dict, section: str, error: type) -> dict:
    """``--settings``: a JSON object of the profile's ``section`` whose keys its evaluator knows (``defaults``);
    else ``error`` in one line."""
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"--settings: not JSON ({e}); pass the profile's {section} section as JSON") from e
    if not isinstance(settings, dict):
        raise error(f"--settings: {text[:40]!r} is not a JSON object; pass the profile's {section} section")
    unknown = sorted(set(settings) - set(defaults))
    if unknown:
        raise error(f"--settings: unknown key {unknown[0]!r} of the {section} section; known keys: "
                    f"{', '.join(sorted(defaults))}")
    return settings


def _evaluate(a, evaluate) -> dict:
    """Run ``evaluate(final_dir, tokens_dir, out)`` (an evaluation of a run's token data) on ``a``."""
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    return evaluate(Path(a.run_dir) / "final", Path(a.tokens), Path(a.out))


def ppl(a):
    from evals.perplexity import evaluate_perplexity

    r = _evaluate(a, evaluate_perplexity)
    m = r["metrics"]
    print(f"{r['experiment']} seed {r['seed']}: test PPL {m['test/ppl']:.3f} | oracle {m['test/oracle_ppl']} "
          f"| unigram {m['test/unigram_ppl']:.1f}")


def codebook(a):
    from evals.codebook import evaluate_codebook

    r = _evaluate(a, evaluate_codebook)
    m, d = r["metrics"], r["details"]
    print(f"{r['experiment']} seed {r['seed']}: codebook utilisation {m['test/utilisation_pct']:.1f}% "
          f"| usage PPL mean {m['test/usage_ppl_mean']:.1f} (min {m['test/usage_ppl_min']:.1f}) "
          f"of N={d['codebook_size']} | collapse {'yes' if m['test/collapse'] else 'no'}")


def mechanisms(a):
    from evals.mechanisms import evaluate_mechanisms

    r = _evaluate(a, evaluate_mechanisms)
    m = r["metrics"]
    cells = ", ".join(f"{c['name']} {m[c['key']]:+.4f}" if m.get(c["key"]) is not None else f"{c['name']} n/a"
                      for c in r["details"]["checks"])
    print(f"{r['experiment']} seed {r['seed']}: intact NLL {m['mech/intact_nll']:.4f} nats/token | {cells}")


def recon(a):
    from evals.recon import evaluate_recon

    r = _evaluate(a, evaluate_recon)
    m = r["metrics"]
    print(f"{r['experiment']} seed {r['seed']}: exact token reconstruction from all {m['model/K']} scales "
          f"{100 * m['test/token_acc']:.1f}%, from the first: {100 * m['test/token_acc_k1']:.1f}%")


def boundaries(a):
    from evals.boundaries import evaluate_boundaries

    r = _evaluate(a, lambda final, tokens, out: evaluate_boundaries(final, tokens, out, Path(a.tokenizer)))
    m = r["metrics"]
    f1 = m.get("test/f1_tol0")
    print(f"{r['experiment']} seed {r['seed']}: {m['test/tokens_per_concept']:.2f} tokens per concept "
          f"(target {m['model/target_ratio']:g})" + (f" | F1 against the world's concepts {f1:.3f} exact, "
          f"{m['test/f1_tol1']:.3f} within 1 token" if f1 is not None else ""))


def law(a):
    from evals.scaling_fit import evaluate_law

    from evals.scaling_fit import LAW_KEYS

    settings = read_settings(a.settings, LAW_KEYS)
    runs = settings.pop("runs")
    r = evaluate_law(settings.pop("id"), settings, runs, Path(a.out))
    m = r["metrics"]
    held = f", held-out R^2 {m['law/r2_heldout']:.3f}" if m["law/r2_heldout"] is not None else ""
    unsure = r["details"]["ill_determined"]
    print(f"{r['experiment']}: {int(m['law/points'])} points of {int(m['law/runs'])} runs, R^2 {m['law/r2_fit']:.3f}"
          f"{held}" + (f" | ill-determined: {', '.join(unsure)}" if unsure else " | every constant determined"))


def kernel(a):
    from evals.kernel_latency import KERNEL_DEFAULTS, evaluate_kernel

    settings = read_settings(a.settings, ["id", "rows", *KERNEL_DEFAULTS])
    r = evaluate_kernel(settings.pop("id"), settings, Path(a.out), threads=a.threads or 1)
    cells = ", ".join(f"{key} {value:.1f}" for key, value in r["metrics"].items() if value is not None)
    print(f"{r['experiment']} ({r['details']['device']}, {r['details']['dtype']}, {r['details']['pass']}): {cells} ms")
