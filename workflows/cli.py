"""The suite's one command line: every job of the DAG is a subcommand of ``python -m workflows.cli``, each
reading a settings JSON and paths, calling one library function, and exiting with a one-line error on
bad input (status 2, ``common.errors.entry_point``). ``--help`` after a subcommand lists its options.

Data and training:

    python -m workflows.cli corpus    --settings S --out DIR
    python -m workflows.cli tokenizer --settings S --corpus DIR --out FILE
    python -m workflows.cli tokenize  --settings S --corpus DIR --tokenizer FILE --out DIR [--threads N]
    python -m workflows.cli world-tasks --settings S --out DIR          (the world's lm-eval tasks)
    python -m workflows.cli levels    --settings S --tokenizer FILE --out FILE   (the world's entropy by level)
    python -m workflows.cli pretrain  --config C --tokens DIR --tokenizer FILE --run-dir DIR [--upstream DIR]
                                      [--threads N] [--nproc N]
    python -m workflows.cli export-judge --run-dir DIR --tokenizer FILE --out DIR   (a run as a Gen. PPL judge)

Evaluations: one subcommand ``eval-<name>`` per evaluation of ``evals/registry.py``, named as an
experiment lists it (a family's variant goes in ``--eval``: ``eval-genppl --eval genppl_s8``):

    python -m workflows.cli eval-ppl  --run-dir DIR --tokens DIR --out FILE [--threads N]   (also codebook,
                                      mechanisms, recon; eval-boundaries adds --tokenizer FILE)
    python -m workflows.cli eval-embedded --run-dir DIR --out FILE [...]   (an lm-eval suite: also zeroshot,
                                      lm_ppl, fewshot_8b, dlcm_zeroshot)
    python -m workflows.cli eval-genppl --run-dir DIR --tokenizer FILE --judge J --settings JSON --eval NAME --out FILE
    python -m workflows.cli eval-cond --run-dir DIR --tokenizer FILE --tokens DIR --settings JSON --eval NAME --out FILE
    python -m workflows.cli eval-law  --settings FILE --out FILE
    python -m workflows.cli eval-kernel --settings FILE --out FILE [--threads N]

Tools outside the DAG: ``lm-eval`` (any suites or lm-eval tasks, local copies of real tasks), ``score-samples``
(Gen. PPL of a samples file).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from common.errors import ReproError, entry_point
from common.io import read_settings
from evals.registry import EVALUATIONS
from workflows.experiments import ConfigError


def corpus(a):
    from corpora.corpus import write_corpus

    m = write_corpus(read_settings(a.settings)["corpus"], Path(a.out))
    print(f"corpus {m['id']}: " + ", ".join(f"{s} {v['n_docs']} docs" for s, v in m["splits"].items()))


def tokenizer(a):
    from corpora.tokenization import load_tokenizer, train_bpe

    cfg = read_settings(a.settings)["tokenizer"]
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

    settings = read_settings(a.settings)
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

    run_cfg = read_settings(a.config)
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

    import torch

    from trainer.config import world_size_problem

    problem = world_size_problem(run_cfg["train"], a.nproc)
    if problem:
        raise ConfigError(f"{run_cfg['id']}: {problem}")
    if torch.cuda.is_available() and torch.cuda.device_count() < a.nproc:
        raise ReproError(f"--nproc {a.nproc} but this node has {torch.cuda.device_count()} GPU(s); "
                         "request as many GPUs as processes (the rule's gpu resource)")
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


def _delegate(module: str, run: str = "run", arguments: str = "arguments", **bound):
    """A command whose options and run live with its library (``module.arguments(parser, **bound)``,
    ``module.run(a)``), imported only when the command runs or its options are built."""
    import importlib

    def add(parser):
        getattr(importlib.import_module(module), arguments)(parser, **bound)

    def call(a):
        return getattr(importlib.import_module(module), run)(a)

    return call, add


# data and training; the required options of a list are --<name>, and every such command takes --threads
COMMANDS = {
    "corpus": (corpus, ["settings", "out"]),
    "tokenizer": (tokenizer, ["settings", "corpus", "out"]),
    "tokenize": (tokenize, ["settings", "corpus", "tokenizer", "out"]),
    "world-tasks": _delegate("evals.tasks.embedded"),
    "levels": _delegate("corpora.synthetic.levels"),
    "pretrain": (pretrain, ["config", "tokens", "tokenizer", "run-dir"]),
    "export-judge": _delegate("evals.genppl.command", "export", "export_arguments"),
}
# every evaluation of evals/registry.py, by its name: the command the registry gives it
COMMANDS.update({f"eval-{e.name}": _delegate(e.runner[0], e.runner[1], evaluation=e) for e in EVALUATIONS})
# tools a researcher runs by hand: lm-eval on any suites or tasks, Gen. PPL of a samples file
COMMANDS.update({
    "lm-eval": _delegate("evals.harness.command"),
    "score-samples": _delegate("evals.genppl.command", "score", "score_arguments"),
})
OPTIONAL = {"pretrain": ["upstream"]}  # --upstream: the final/ folder of the run this one builds on


@entry_point
def main(argv=None) -> int | None:
    parser = argparse.ArgumentParser(prog="python -m workflows.cli", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((word for word in argv if not word.startswith("-")), None)
    parsers = {}
    for name, (_, args) in COMMANDS.items():
        p = parsers[name] = sub.add_parser(name, help=name)
        if name != chosen:  # only the chosen command's options are built (a library's, imported then)
            continue
        if callable(args):
            args(p)
            continue
        for arg in args:
            p.add_argument(f"--{arg}", required=True)
        for arg in OPTIONAL.get(name, []):
            p.add_argument(f"--{arg}", default=None)
        p.add_argument("--threads", type=int, default=None)
        if name == "pretrain":  # processes on this node (the rule's gpu resource): > 1 runs under torchrun
            p.add_argument("--nproc", type=int, default=1)
    a, extra = parser.parse_known_args(argv)
    if extra:  # named by the subcommand's own usage, not the top level's
        parsers[a.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return COMMANDS[a.command][0](a)
    except ReproError as e:
        if os.environ.get(ERROR_FILE):  # a rank under _launch: tell the launching process
            with open(os.environ[ERROR_FILE], "a") as f:
                f.write(f"rank {os.environ.get('RANK', '0')}: {e}\n")
        raise


if __name__ == "__main__":
    sys.exit(main())
