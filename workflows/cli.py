"""Thin command-line entry points that the Snakemake rules call; each reads a settings JSON and
paths, calls one library function, and exits with a one-line error on bad input (status 2,
``common.errors.entry_point``).

    python -m workflows.cli corpus    --settings S --out DIR
    python -m workflows.cli tokenizer --settings S --corpus DIR --out FILE
    python -m workflows.cli tokenize  --settings S --corpus DIR --tokenizer FILE --out DIR [--threads N]
    python -m workflows.cli pretrain  --config C --tokens DIR --tokenizer FILE --run-dir DIR [--upstream DIR] [--threads N] [--nproc N]
    python -m workflows.cli eval-recon --run-dir DIR --tokens DIR --out FILE [--threads N]
    python -m workflows.cli eval-ppl  --run-dir DIR --tokens DIR --out FILE [--threads N]
    python -m workflows.cli eval-codebook --run-dir DIR --tokens DIR --out FILE [--threads N]
    python -m workflows.cli eval-mechanisms --run-dir DIR --tokens DIR --out FILE [--threads N]
    python -m workflows.cli eval-boundaries --run-dir DIR --tokens DIR --tokenizer FILE --out FILE [--threads N]
    python -m workflows.cli fit-law --settings FILE --out FILE
    python -m workflows.cli kernel-bench --settings FILE --out FILE [--threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from common.errors import ReproError, entry_point
from workflows.experiments import ConfigError


def _json(path: str) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot read settings ({e}); re-run snakemake to rewrite it") from e


def corpus(a):
    from corpora.corpus import write_corpus

    m = write_corpus(_json(a.settings)["corpus"], Path(a.out))
    print(f"corpus {m['id']}: " + ", ".join(f"{s} {v['n_docs']} docs" for s, v in m["splits"].items()))


def tokenizer(a):
    from corpora.tokenization import load_tokenizer, train_bpe

    cfg = _json(a.settings)["tokenizer"]
    if cfg["kind"] == "bpe":
        digest = train_bpe(Path(a.corpus), cfg["vocab_size"], cfg["min_frequency"], Path(a.out))
    elif cfg["kind"] == "chars":
        from corpora.tokenization import train_chars

        digest = train_chars(cfg["alphabet"], Path(a.out))
    else:  # a pretrained tokenizer: record which one, so the DAG has a file to depend on
        from common.io import atomic_write_json
        tok = load_tokenizer(cfg)
        atomic_write_json(a.out, {"pretrained": cfg["name"], "vocab_size": tok.vocab_size})
        digest = tok.sha256
    print(f"tokenizer {a.out}: sha256 {digest[:12]}")


def tokenize(a):
    from corpora.tokenization import load_tokenizer, tokenize_corpus, tokenize_pairs

    settings = _json(a.settings)
    tok = load_tokenizer(settings["tokenizer"], Path(a.tokenizer))
    if settings.get("layout"):
        m = tokenize_pairs(Path(a.corpus), tok, Path(a.out), settings["layout"])
    else:
        m = tokenize_corpus(Path(a.corpus), tok, Path(a.out), workers=a.threads or 1)
    print("tokens: " + ", ".join(f"{s} {v['n_tokens']:,}" for s, v in m["splits"].items()))


def pretrain(a):
    from corpora.tokenization import check_tokenizer, load_tokenizer
    from trainer.data import read_manifest
    from trainer.train import Trainer

    run_cfg = _json(a.config)
    check_tokenizer(read_manifest(Path(a.tokens)), load_tokenizer(run_cfg["tokenizer"], Path(a.tokenizer)).sha256,
                    Path(a.tokens))
    if a.nproc > 1 and "LOCAL_RANK" not in os.environ:
        return _launch(a, run_cfg)
    Trainer(run_cfg, Path(a.tokens), Path(a.run_dir), threads=a.threads,
            upstream=Path(a.upstream) if a.upstream else None).run()


ERROR_FILE = "REPRO_RANK_ERRORS"  # where ranks launched by _launch append their one-line errors


def _launch(a, run_cfg: dict) -> None:
    """Re-run this command under ``torchrun`` with ``--nproc`` processes on this node (one per GPU; gloo on
    CPU), the job's threads shared among them. The experiment fixes the global batch; the trainer derives
    gradient accumulation from the world size, so the result does not depend on the process count."""
    import subprocess

    from trainer.train import world_size_problem

    problem = world_size_problem(run_cfg["train"], a.nproc)
    if problem:
        raise ConfigError(f"{run_cfg['id']}: {problem}")
    if torch.cuda.is_available() and torch.cuda.device_count() < a.nproc:
        raise ReproError(f"--nproc {a.nproc} but this node has {torch.cuda.device_count()} GPU(s); request as many GPUs "
                         "as processes (the rule's gpu resource)")
    args = ["pretrain", "--config", a.config, "--tokens", a.tokens, "--tokenizer", a.tokenizer, "--run-dir", a.run_dir]
    args += ["--upstream", a.upstream] if a.upstream else []
    args += ["--threads", str(max(1, a.threads // a.nproc))] if a.threads else []
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={a.nproc}",
               "-m", "workflows.cli", *args]
    print("launching: " + " ".join(command), flush=True)
    with tempfile.TemporaryDirectory() as folder:  # the ranks' one-line errors, so the last line is the cause
        errors = Path(folder) / "errors"
        code = subprocess.run(command, env={**os.environ, ERROR_FILE: str(errors)}).returncode
        first = errors.read_text().splitlines()[0] if errors.is_file() else None
    if code:
        raise ReproError(first or f"torchrun exited with status {code}: see the ranks' output above")


def _evaluate(a, evaluate) -> dict:
    """Run ``evaluate(final_dir, tokens_dir, out)`` (an evaluation of a run's token data) on ``a``."""
    if a.threads:
        torch.set_num_threads(a.threads)
    return evaluate(Path(a.run_dir) / "final", Path(a.tokens), Path(a.out))


def eval_ppl(a):
    from evals.perplexity import evaluate_perplexity

    r = _evaluate(a, evaluate_perplexity)
    m = r["metrics"]
    print(f"{r['experiment']} seed {r['seed']}: test PPL {m['test/ppl']:.3f} | oracle {m['test/oracle_ppl']} "
          f"| unigram {m['test/unigram_ppl']:.1f}")


def eval_codebook(a):
    from evals.codebook import evaluate_codebook

    r = _evaluate(a, evaluate_codebook)
    m, d = r["metrics"], r["details"]
    print(f"{r['experiment']} seed {r['seed']}: codebook utilisation {m['test/utilisation_pct']:.1f}% "
          f"| usage PPL mean {m['test/usage_ppl_mean']:.1f} (min {m['test/usage_ppl_min']:.1f}) "
          f"of N={d['codebook_size']} | collapse {'yes' if m['test/collapse'] else 'no'}")


def eval_mechanisms(a):
    from evals.mechanisms import evaluate_mechanisms

    r = _evaluate(a, evaluate_mechanisms)
    m = r["metrics"]
    cells = ", ".join(f"{c['name']} {m[c['key']]:+.4f}" if m.get(c["key"]) is not None else f"{c['name']} n/a"
                      for c in r["details"]["checks"])
    print(f"{r['experiment']} seed {r['seed']}: intact NLL {m['mech/intact_nll']:.4f} nats/token | {cells}")


def eval_recon(a):
    from evals.recon import evaluate_recon

    r = _evaluate(a, evaluate_recon)
    m = r["metrics"]
    print(f"{r['experiment']} seed {r['seed']}: exact token reconstruction from all {m['model/K']} scales "
          f"{100 * m['test/token_acc']:.1f}%, from the first: {100 * m['test/token_acc_k1']:.1f}%")


def eval_boundaries(a):
    from evals.boundaries import evaluate_boundaries

    r = _evaluate(a, lambda final, tokens, out: evaluate_boundaries(final, tokens, out, Path(a.tokenizer)))
    m = r["metrics"]
    f1 = m.get("test/f1_tol0")
    print(f"{r['experiment']} seed {r['seed']}: {m['test/tokens_per_concept']:.2f} tokens per concept "
          f"(target {m['model/target_ratio']:g})" + (f" | F1 against the world's concepts {f1:.3f} exact, "
          f"{m['test/f1_tol1']:.3f} within 1 token" if f1 is not None else ""))


def fit_law(a):
    from evals.scaling_fit import evaluate_law

    settings = _json(a.settings)
    runs = settings.pop("runs")
    r = evaluate_law(settings.pop("id"), settings, runs, Path(a.out))
    m = r["metrics"]
    held = f", held-out R^2 {m['law/r2_heldout']:.3f}" if m["law/r2_heldout"] is not None else ""
    unsure = r["details"]["ill_determined"]
    print(f"{r['experiment']}: {int(m['law/points'])} points of {int(m['law/runs'])} runs, R^2 {m['law/r2_fit']:.3f}"
          f"{held}" + (f" | ill-determined: {', '.join(unsure)}" if unsure else " | every constant determined"))


def kernel_bench(a):
    from evals.kernel_latency import evaluate_kernel

    settings = _json(a.settings)
    r = evaluate_kernel(settings.pop("id"), settings, Path(a.out), threads=a.threads or 1)
    cells = ", ".join(f"{key} {value:.1f}" for key, value in r["metrics"].items() if value is not None)
    print(f"{r['experiment']} ({r['details']['device']}, {r['details']['dtype']}, {r['details']['pass']}): {cells} ms")


COMMANDS = {
    "corpus": (corpus, ["settings", "out"]),
    "tokenizer": (tokenizer, ["settings", "corpus", "out"]),
    "tokenize": (tokenize, ["settings", "corpus", "tokenizer", "out"]),
    "pretrain": (pretrain, ["config", "tokens", "tokenizer", "run-dir"]),
    "eval-ppl": (eval_ppl, ["run-dir", "tokens", "out"]),
    "eval-codebook": (eval_codebook, ["run-dir", "tokens", "out"]),
    "eval-mechanisms": (eval_mechanisms, ["run-dir", "tokens", "out"]),
    "eval-recon": (eval_recon, ["run-dir", "tokens", "out"]),
    "eval-boundaries": (eval_boundaries, ["run-dir", "tokens", "tokenizer", "out"]),
    "fit-law": (fit_law, ["settings", "out"]),
    "kernel-bench": (kernel_bench, ["settings", "out"]),
}
OPTIONAL = {"pretrain": ["upstream"]}  # --upstream: the final/ folder of the run this one builds on


@entry_point
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workflows.cli", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, args) in COMMANDS.items():
        p = sub.add_parser(name)
        for arg in args:
            p.add_argument(f"--{arg}", required=True)
        for arg in OPTIONAL.get(name, []):
            p.add_argument(f"--{arg}", default=None)
        p.add_argument("--threads", type=int, default=None)
        if name == "pretrain":  # processes on this node (the rule's gpu resource): > 1 runs under torchrun
            p.add_argument("--nproc", type=int, default=1)
    a = parser.parse_args(argv)
    try:
        COMMANDS[a.command][0](a)
    except ReproError as e:
        if os.environ.get(ERROR_FILE):  # a rank under _launch: tell the launching process
            with open(os.environ[ERROR_FILE], "a") as f:
                f.write(f"rank {os.environ.get('RANK', '0')}: {e}\n")
        raise


if __name__ == "__main__":
    sys.exit(main())
