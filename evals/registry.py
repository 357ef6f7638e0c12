"""Every evaluation, declared once: the names an experiment lists in ``evals`` (each names its result,
``results/runs/<experiment>/seed<k>/eval/<name>.json``), the Snakemake rule that writes it, the lm-eval
suite it runs and the data it reads. The profile check (``workflows/check.py``), the Snakefile's
rules and targets (``workflows/*.smk``), the evaluators' name parsing (``evals/genppl``,
``evals/conditional``) and the table specs (``tables/specs.py``) read this table; no other file lists
the names. Pure data: importing it loads neither torch nor lm-eval.

A family (``variants``) is a name followed by a suffix: a regular expression whose named groups are the
variant's settings (``genppl_s8``: steps 8); the evaluator gives them their meaning.

An evaluation with an ``EntryKind`` is written by a profile section of its own instead (a scaling law's fit,
a kernel benchmark): each id of that section is an entry with one result folder, ``results/runs/<id>/seed0``,
whose rule the DAG generates from the kind. A new kind is its section in the profile schema, its line
here, its module (the resolver, the evaluator and its command) and the table spec that shows it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class EntryKind:
    """A profile section whose ids each write this evaluation's result, ``results/runs/<id>/seed0/eval/<name>.json``."""
    section: str                  # the profile key (``scaling_laws``)
    resolver: str                 # "module:function" (section, experiments, source) -> {id: settings}: defaults
    #                               filled in, refused in one ``ConfigError`` line; each settings has a ``paper``
    reads: tuple[str, ...] = ()   # the files of each run of the settings' ``experiments`` that the result reads
    threads: int | None = None    # the job's threads (None: Snakemake's default, 1)
    gpu: int = 0                  # the GPUs the job asks for


@dataclass(frozen=True)
class Evaluation:
    name: str
    rule: str | None              # the rule writing eval/<name>.json; None: no rule of the DAG yet
    forms: str                    # the names as a user writes them (messages)
    summary: str                  # what it measures
    variants: str = ""            # regex of the suffix after ``name`` (a family of names)
    suite: str | None = None      # the lm-eval suite of evals/tasks/suites.yaml (rule evaluate_harness)
    data: str = "stream"          # stream: a token stream; pairs: paired examples only; any: either
    likelihood: bool = False      # scores next-token likelihoods: causal token LMs only
    world_tasks: bool = False     # lm-eval on the tasks generated from the synthetic world
    kind: EntryKind | None = None  # written by a profile section of its own instead of an experiment's ``evals``
    command: str = "evals.commands"  # "module:function" run by `python -m workflows.cli eval-<name>` (the
    #                               module's arguments(parser, evaluation) gives its options); module alone: :<name>

    @property
    def runner(self) -> tuple[str, str]:
        """The module and function of its command line (``python -m workflows.cli eval-<name>``)."""
        module, _, function = self.command.partition(":")
        return module, function or self.name

    @property
    def listed(self) -> bool:
        """An experiment lists it in ``evals`` (False: an entry kind writes it)."""
        return self.kind is None

    @property
    def real_tasks(self) -> bool:
        """An lm-eval suite of real tasks: from the hub, or from local copies (the profile's ``local_tasks``)."""
        return self.suite is not None and not self.world_tasks

    @property
    def pattern(self) -> str:
        """The regex of its names, unanchored, without named groups (a Snakemake wildcard constraint)."""
        return re.sub(r"\(\?P<\w+>", "(?:", re.escape(self.name) + self.variants)

    def match(self, name: str) -> dict[str, str] | None:
        """The variant's settings (named groups that matched) of ``name``, or None for another name."""
        m = re.fullmatch(re.escape(self.name) + self.variants, name)
        return None if m is None else {k: v for k, v in m.groupdict().items() if v is not None}


HARNESS = "evals.harness.command:run"  # lm-eval on the suite of the evaluation's name
EVALUATIONS = (
    Evaluation("ppl", "evaluate_tokens", "ppl", "perplexity, oracle, unigram", likelihood=True),
    Evaluation("embedded", "evaluate_harness", "embedded", "lm-eval on the synthetic world's tasks", suite="embedded",
               likelihood=True, world_tasks=True, command=HARNESS),
    Evaluation("zeroshot", "evaluate_harness", "zeroshot", "lm-eval suite conceptlm_zeroshot: real tasks",
               suite="conceptlm_zeroshot", likelihood=True, command=HARNESS),
    Evaluation("lm_ppl", "evaluate_harness", "lm_ppl", "lm-eval suite conceptlm_ppl: real tasks", suite="conceptlm_ppl",
               likelihood=True, command=HARNESS),
    Evaluation("fewshot_8b", "evaluate_harness", "fewshot_8b", "lm-eval suite conceptlm_8b: ConceptLM Table 3's "
               "four few-shot tasks", suite="conceptlm_8b", likelihood=True, command=HARNESS),
    Evaluation("dlcm_zeroshot", "evaluate_harness", "dlcm_zeroshot", "lm-eval suite dlcm_zeroshot: DLCM Table 2's "
               "twelve real tasks", suite="dlcm_zeroshot", likelihood=True, command=HARNESS),
    Evaluation("codebook", "evaluate_tokens", "codebook", "product-VQ usage of ConceptLM runs"),
    Evaluation("recon", "evaluate_tokens", "recon", "NCM tokenizer reconstruction from the first k scales", data="any"),
    Evaluation("mechanisms", "evaluate_tokens", "mechanisms", "mechanism checks of concept models: NLL when the "
               "concepts are zeroed, averaged, swapped between windows or hidden (evals/mechanisms.py)"),
    Evaluation("boundaries", "evaluate_boundaries", "boundaries", "DLCM's realised compression and boundary F1"),
    Evaluation("genppl", "evaluate_genppl", "genppl, genppl_s<N>, genppl_k<j>, genppl_data", "Gen. PPL of samples",
               variants=r"(?:_s(?P<steps>[1-9][0-9]*)|_k(?P<scales>[0-9]+)|_(?P<data>data))?",
               command="evals.genppl.command:evaluate"),
    Evaluation("cond", "evaluate_conditional", "cond, cond_k<j>, cond_mbr<n>, cond_cfg<w>",
               "targets generated from sources: BLEU, ROUGE, Sudoku boards", data="pairs",
               variants=r"(?:_k(?P<scales>[0-9]+))?(?:_mbr(?P<mbr>[1-9][0-9]*))?(?:_cfg(?P<guidance>[0-9]+(?:\.[0-9]+)?))?",
               command="evals.conditional.command:run"),
    Evaluation("law", "fit_law", "law", "a scaling law's fit (results/runs/<law>/seed0)",
               kind=EntryKind("scaling_laws", "evals.scaling_fit:resolve_laws",
                              reads=("eval/boundaries.json", "train/metrics.jsonl"))),
    Evaluation("kernel", "kernel_bench", "kernel", "a kernel benchmark's latencies, DLCM Table 6 "
               "(results/runs/<id>/seed0; evals/kernel_latency.py)",
               kind=EntryKind("kernel_benchmarks", "evals.kernel_latency:resolve_benchmarks", threads=1, gpu=1)),
)
BY_NAME = {e.name: e for e in EVALUATIONS}
ENTRY_KINDS = tuple(e for e in EVALUATIONS if e.kind is not None)  # in the order their sections are resolved
# NCM's archs: ``recon`` applies to them only, and their ``mechanisms`` checks (evals/mechanisms_ncm.py) read the
# run's own view of a split, paired examples included
NCM_ARCHS = ("ncm_tokenizer", "ncm")


def find(name: str) -> Evaluation | None:
    """The evaluation (or family) that ``name`` belongs to; None for a name of none."""
    return next((e for e in EVALUATIONS if e.match(name) is not None), None)


def forms() -> str:
    """Every name an experiment may list, as a user writes them (messages)."""
    return ", ".join(e.forms for e in EVALUATIONS if e.listed)


def constraint(rule: str) -> str:
    """The Snakemake wildcard constraint of the names ``rule`` writes."""
    return "|".join(f"(?:{e.pattern})" for e in EVALUATIONS if e.rule == rule)


def item_schema() -> dict:
    """The JSON schema of one entry of an experiment's ``evals``."""
    return {"anyOf": [{"type": "string", "pattern": f"^(?:{e.pattern})$"} for e in EVALUATIONS if e.listed],
            "description": f"an evaluation of evals/registry.py: {forms()}"}


# --- Gen. PPL (evals/genppl/sample.py) and the mechanism checks (evals/mechanisms.py): what a profile's check
# reads of them, here so that it imports neither (nor torch)

# The profile's ``genppl`` section: its defaults (every key the sampler and the scorer read)
SETTINGS_DEFAULTS = {"judges": [], "samples": 64, "batch_size": 16, "temperature": 1.0, "top_k": None, "top_p": None,
                     "seed": 0, "judge_batch_size": 8}


def with_defaults(settings: dict) -> dict:
    """``settings`` (a profile's ``genppl`` section, or part of it) with ``SETTINGS_DEFAULTS`` filled in."""
    return {**SETTINGS_DEFAULTS, **settings}


def truncates(settings: dict) -> bool:
    """Whether the sampler settings change the model's distribution (temperature other than 1, top-k,
    top-p below 1): what masked diffusion's sampler does not support."""
    return settings["temperature"] != 1.0 or bool(settings["top_k"]) or (settings["top_p"] or 1.0) < 1.0


def parse_eval(name: str) -> dict:
    """``{"steps": N}``, ``{"scales": j}``, ``{"data": True}`` or ``{}`` for a Gen. PPL eval name (the
    ``genppl`` family of ``evals.registry``); ValueError for any other name."""
    match = BY_NAME["genppl"].match(name)
    if match is None:
        raise ValueError(f"{name!r} is not a Gen. PPL evaluation: use genppl, genppl_s<steps>, genppl_k<scales> or "
                         "genppl_data")
    return {key: True if key == "data" else int(value) for key, value in match.items()}


CONCEPT_FAMILIES = ("conceptlm", "contextlm", "dlcm")  # registry families (``<family>_<backbone>``) with a concept path


def mechanisms_apply(arch: str) -> bool:
    """Whether model.arch ``arch`` has a concept path the ``mechanisms`` checks measure."""
    return arch in NCM_ARCHS or arch.split("_")[0] in CONCEPT_FAMILIES
