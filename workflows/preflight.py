"""What a profile reads from outside the suite, checked before the first job: one line per problem.

Local corpus files (existence, size, format and encoding from their first bytes: ``corpora.sources``) are
checked whenever the Snakefile is read, dry runs included, since every plan starts from them. Gen. PPL
judges named by hub name or folder, and the pretrained checkpoints of ``train.init_from``, are checked when
the jobs start (``onstart``) and only when a planned job needs them: a judge when a Gen. PPL evaluation is
planned, a checkpoint when its run's training is. Their ``config.json`` is read offline
(``common.hub``), so a missing folder, an uncached hub name under ``HF_HUB_OFFLINE`` or a model that is not
a causal LM is refused before hours of training rather than in the job that loads it.
"""
from __future__ import annotations

from common.hub import causal_lm_problem
from corpora.sources import local_file_problem


def corpus_problems(datasets: dict) -> list[str]:
    """The local corpus files of every dataset (``corpus.local``; a paired dataset's ``datasets.<id>.corpus``)."""
    problems = []
    for ds_id, ds in datasets.items():
        corpus = ds["corpus"]
        key = "corpus" if ds["layout"] is None else f"datasets.{ds_id}.corpus"
        if corpus.get("source") != "local":
            continue
        for split in ("train", "valid", "test"):
            if split in corpus.get("local", {}):
                problem = local_file_problem(corpus["local"][split])
                if problem:
                    problems.append(f"{key}.local.{split}={corpus['local'][split]}: {problem}")
    return problems


def judge_problems(judges: list[str], experiments: dict) -> list[str]:
    """Judges that are neither a run of the profile nor a causal LM readable offline."""
    problems = []
    for judge in judges:
        problem = None if judge in experiments else causal_lm_problem(judge)
        if problem:
            problems.append(f"genppl.judges: {judge}: {problem}")
    return problems


def init_problems(experiments: dict) -> list[str]:
    """``train.init_from`` checkpoints of ``experiments`` (the runs to train) that are not a Llama causal LM
    readable offline."""
    problems, seen = [], set()
    for exp_id, exp in experiments.items():
        source = exp["train"].get("init_from")
        if not source or source in seen:
            continue
        seen.add(source)
        problem = causal_lm_problem(source, family="llama")
        if problem:
            problems.append(f"experiment {exp_id}: train.init_from={source}: {problem}")
    return problems
