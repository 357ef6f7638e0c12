# Helpers only: validate the profile once, resolve experiments, name paths by experiment id.
# The rules call `python -m workflows.cli ...`: the package is installed (editable) by `make`.
import functools
import json
import os
import re
import shlex
import sys

from pathlib import Path
from types import SimpleNamespace

from workflows.experiments import (ConfigError, PAPERS, as_entries, datasets, entry_kinds, genppl_settings,
                                   local_tasks, profile_chain, read_profile, resolve, result_index, run_config,
                                   validate, with_parents)

# A profile's `extends:` file is relative to the profile (the last --configfile; config/ by default).
# Errors name that file.
SOURCE = str(workflow.overwrite_configfiles[-1]) if workflow.overwrite_configfiles else "config/default.yaml"
FOLDER = Path(SOURCE).parent if workflow.overwrite_configfiles else Path(workflow.basedir) / "config"
try:
    if workflow.overwrite_configfiles:  # Snakemake's loader lets a duplicate key win: read the file strictly too
        read_profile(Path(SOURCE))
    PROFILE = validate(with_parents(dict(config), FOLDER, SOURCE), SOURCE)
except ConfigError as error:
    raise WorkflowError(f"invalid profile: {error}") from None

EXPERIMENTS = resolve(PROFILE)
# Experiments and the ids of the entry kinds' sections (evals/registry.py, ENTRY_KINDS: `scaling_laws:`,
# `kernel_benchmarks:`; each id a result folder of its own, results/runs/<id>/seed0/eval/<evaluation>.json)
# as entries (workflows/resolve.py::Entry): the result files the targets ask for, the tables' index, the
# rules of the entry kinds (workflows/kinds.smk).
ENTRIES = as_entries(EXPERIMENTS, entry_kinds(PROFILE, EXPERIMENTS, SOURCE))
OTHERS = {entry.id: entry.settings for entry in ENTRIES.values() if entry.kind != "experiment"}
# CPU libraries pick their code path (vector width, cache blocking) by host, and the numbers follow: every
# x86 job runs with MKL's reproducible AVX2 branch and ATen's AVX2 kernels (common/provenance.py; a value
# already in the environment wins, and is recorded). Cost measured on the embedded shapes: 3-9 % per
# training step (docs/embedded.md, "Same numbers on another host").
from common.provenance import host_pins

for _name, _value in host_pins().items():
    os.environ.setdefault(_name, _value)
# The interpreter running Snakemake runs the jobs. It reaches the shell through the environment, not
# through params, so a moved checkout or another venv path does not count as changed settings.
os.environ["REPRO_PYTHON"] = sys.executable


envvars:
    "REPRO_PYTHON",


PYTHON = "$REPRO_PYTHON"
CLI = f"{PYTHON} -m workflows.cli"
# The embedded default writes results/; any other profile results/<profile>/ (same layout inside), so
# profiles that share experiment ids (config/small.yaml) never overwrite each other's runs.
OUT = "results" if PROFILE["profile"] == "embedded" else f"results/{PROFILE['profile']}"
# A token split or checkpoint edited after its job wrote it is refused here, before any job (common/verify.py).
from common.verify import damaged
from workflows import progress
from workflows.stamps import want

_damaged = damaged(OUT, [f"{e}/seed{s}" for e, exp in EXPERIMENTS.items() for s in exp["seeds"]])
if _damaged:
    raise WorkflowError(f"{len(_damaged)} damaged result file(s): " + " | ".join(_damaged))
# One folder per dataset: the main corpus (DATA: the judges, the embedded tasks) and each paired
# dataset of `datasets:` (an experiment's `data:`), built by the same data rules ({dataset} wildcard).
DATASETS = datasets(PROFILE)
# Local corpus files: existence, size, format and encoding, before any plan is made (workflows/preflight.py).
from workflows import preflight

_problems = preflight.corpus_problems(DATASETS)
if _problems:
    raise WorkflowError("; ".join(_problems))
DATA_ROOT = f"{OUT}/data"
DATA = f"{DATA_ROOT}/{PROFILE['corpus']['id']}"
DS = f"{DATA_ROOT}/{{dataset}}"
RUNS = f"{OUT}/runs"
RUN = f"{RUNS}/{{experiment}}/seed{{seed}}"


# Every evaluation name (an experiment's `evals`), the job writing it and its lm-eval suite: evals/registry.py.
from evals.registry import BY_NAME, ENTRY_KINDS, constraint


wildcard_constraints:
    experiment="|".join(map(re.escape, EXPERIMENTS)),
    entry="|".join(map(re.escape, OTHERS)) or "(?!)",
    dataset="|".join(map(re.escape, DATASETS)),
    seed=r"\d+",


def runs(paper=None):
    """(experiment, seed) pairs of the profile (of one paper's experiments: ``paper``)."""
    return [(e, s) for e, exp in EXPERIMENTS.items() for s in exp["seeds"] if paper in (None, exp["paper"])]


def eval_results(paper=None):
    """Every result JSON of the profile (of one paper's entries: ``paper``): each experiment's ``evals`` for
    each of its runs, each scaling law's fit and each kernel benchmark."""
    return [path for entry in ENTRIES.values() if paper in (None, entry.paper) for path in entry.result_files(RUNS)]


def entry_reads(entry):
    """The files of each run of its grid that an entry's result reads (its kind's ``reads``)."""
    return BY_NAME[ENTRIES[entry].kind].kind.reads


def entry_runs(entry):
    """``{"<experiment>/seed<k>": folder}`` of every run an entry reads (a scaling law's grid); none when its
    kind reads no run."""
    if not entry_reads(entry):
        return {}
    return {f"{e}/seed{s}": f"{RUNS}/{e}/seed{s}" for e in OTHERS[entry]["experiments"]
            for s in EXPERIMENTS[e]["seeds"]}


def entry_inputs(wildcards):
    """The files of those runs that the entry's result reads."""
    return [f"{folder}/{name}" for folder in entry_runs(wildcards.entry).values()
            for name in entry_reads(wildcards.entry)]


def entry_settings_json(wildcards):
    """The settings of an entry that is no training run (with the run folders it reads, if any)."""
    entry, runs = wildcards.entry, entry_runs(wildcards.entry)
    return json.dumps({"id": entry, **OTHERS[entry], **({"runs": runs} if runs else {})}, sort_keys=True)


def run_outputs(paper=None):
    """Every run's training outputs. Targets in their own right: Snakemake re-runs a job whose outputs
    are missing only when something asks for them, and an existing result file does not — so a run
    whose settings changed and whose re-training failed, or whose log was deleted, is re-trained by
    the next plain `snakemake`, never left behind its old results."""
    return [f"{RUNS}/{e}/seed{s}/{name}" for e, s in runs(paper)
            for name in ("final/model.safetensors", "final/manifest.json", "train/metrics.jsonl")]


def upstream_final(wildcards):
    """The final weights and manifest of the run this one builds on (``upstream:``), or nothing."""
    up = EXPERIMENTS[wildcards.experiment]["upstream"]
    if up is None:
        return []
    return [f"{RUNS}/{up['experiment']}/seed{up['seed']}/final/{name}" for name in ("model.safetensors", "manifest.json")]


def upstream_flag(wildcards, input):
    return f"--upstream {os.path.dirname(input.upstream[0])}" if input.upstream else ""


# Gen. PPL judges: an experiment id of the profile is trained here and exported (rule export_judge);
# any other entry is a transformers hub name or folder, passed as it is.
GENPPL = genppl_settings(PROFILE)
CONDITIONAL = PROFILE.get("conditional", {})  # evals/conditional fills in its defaults


def conditional_json(wildcards):
    """The conditional settings an experiment's evaluations read: masked diffusion's ``steps`` only for
    mdlm_* runs, so changing it re-runs no other evaluation."""
    settings = dict(CONDITIONAL)
    if not EXPERIMENTS[wildcards.experiment]["model"]["arch"].startswith("mdlm_"):
        settings.pop("steps", None)
    return json.dumps(settings, sort_keys=True)
JUDGES = f"{OUT}/judges"


def judge_folders():
    return [f"{JUDGES}/{j}" for j in GENPPL["judges"] if j in EXPERIMENTS]


def judge_flags():
    return " ".join(f"--judge {f'{JUDGES}/{j}' if j in EXPERIMENTS else j}" for j in GENPPL["judges"])


GENPPL_SETTINGS = json.dumps({k: v for k, v in GENPPL.items() if k != "judges"}, sort_keys=True)  # the CLI's --settings


def genppl_record(wildcards):
    """What a Gen. PPL evaluation is made with beside its run: the judges and the sampling settings."""
    return json.dumps({"judges": judge_flags(), "settings": GENPPL_SETTINGS})


def harness_record(wildcards):
    return json.dumps({"flags": harness_flags(wildcards)}, sort_keys=True)


def expected_configs_json():
    """Each training run's config hash, and each section's, as the profile resolves it now, with its token
    manifest and upstream run, and each law's and kernel benchmark's settings: the tables refuse results made
    with another config or from other files (a results folder copied in, or metadata lost with .snakemake)."""
    from common.io import config_hash

    expected = {}
    for experiment, seed in runs():
        run = settings_of_run(experiment, seed)
        upstream = EXPERIMENTS[experiment]["upstream"]
        expected[f"{experiment}/seed{seed}"] = {
            "hash": config_hash(run), "sections": {key: config_hash(value) for key, value in run.items()},
            "tokens": f"{DATA_ROOT}/{EXPERIMENTS[experiment]['data']}/tokens/manifest.json",
            "upstream": f"{upstream['experiment']}/seed{upstream['seed']}" if upstream else None}
    for entry in OTHERS:  # a law's fit or a kernel benchmark: its settings are its config
        settings = json.loads(entry_settings_json(SimpleNamespace(entry=entry)))
        settings.pop("runs", None)  # a law's run folders are where it reads, not what it records
        expected[f"{entry}/seed0"] = {"hash": config_hash(settings),
                                      "sections": {key: config_hash(value) for key, value in settings.items()}}
    return json.dumps(expected, sort_keys=True, separators=(",", ":"))


def runs_index_json():
    """The profile's run folders and the evaluations of each (tables/results.py reads only these, so a run
    or an evaluation dropped from the profile never reaches a table)."""
    index = result_index(ENTRIES)
    # what the tables need of the profile: its scale (a cell at reduced scale is an analogue) and main corpus
    from tables.results import corpus_label

    profile = {"name": PROFILE["profile"], "scale": PROFILE.get("scale", "reduced"),
               "corpus": corpus_label(PROFILE["corpus"]), **({"noise_floor": PROFILE["noise_floor"]}
                                                              if "noise_floor" in PROFILE else {})}
    return json.dumps({"runs": index, "profile": profile}, sort_keys=True)


def data_settings_json(wildcards):
    """What a dataset's files are made from (a paired dataset also its layout)."""
    ds = DATASETS[wildcards.dataset]
    settings = {"corpus": ds["corpus"], "tokenizer": ds["tokenizer"]}
    if ds["layout"] is not None:
        settings["layout"] = ds["layout"]
    return json.dumps(settings, sort_keys=True)


def corpus_files(wildcards):
    """The local files a dataset's corpus reads: inputs of the corpus rule, so an edited file (not only
    a changed path) rebuilds the corpus and everything trained on it."""
    corpus = DATASETS[wildcards.dataset]["corpus"]
    specs = [corpus["local"][s] for s in ("train", "valid", "test") if s in corpus["local"]] if corpus["source"] == "local" else []
    local = corpus.get("pairs", {}).get("local", {})
    specs += [local[s] for s in ("train", "valid", "test") if s in local]
    files = [f for spec in specs for f in (spec.values() if isinstance(spec, dict) else [spec])]
    external = corpus.get("sudoku", {}).get("external")
    return files + ([external] if external else [])


def tokenizer_file(dataset):
    """The tokenizer file a dataset is tokenized with: its own, or the one of the dataset it names."""
    return f"{DATA_ROOT}/{DATASETS[dataset]['tokenizer_of']}/tokenizer.json"


def run_tokens(wildcards):
    return f"{DATA_ROOT}/{EXPERIMENTS[wildcards.experiment]['data']}/tokens/manifest.json"


def run_corpus(wildcards):
    """The test documents of the run's dataset (the boundaries evaluation re-tokenises them)."""
    return f"{DATA_ROOT}/{EXPERIMENTS[wildcards.experiment]['data']}/corpus/test.jsonl"


def run_tokenizer(wildcards):
    return tokenizer_file(EXPERIMENTS[wildcards.experiment]["data"])


@functools.cache
def settings_of_run(experiment: str, seed: int) -> dict:
    """A training run's config (``run_config``), once per run: the DAG asks for it from several rules."""
    return run_config(PROFILE, experiment, seed, EXPERIMENTS)


def run_settings_json(wildcards):
    return json.dumps(settings_of_run(wildcards.experiment, int(wildcards.seed)), sort_keys=True)


# Real tasks from local copies (the profile's `local_tasks`): the manifest and every file it names are
# inputs of the real-task evaluations, so a changed copy re-runs them.
LOCAL_TASKS = local_tasks(PROFILE, SOURCE)
if LOCAL_TASKS is not None:  # each real-task suite's task names, read once (not once per job)
    from evals.harness.suites import load_suites

    SUITE_TASKS = {name: {entry["task"] for entry in suite["tasks"]} for name, suite in load_suites().items()}


def local_task_files(wildcards):
    """The manifest and the data files of the suite's tasks that a real-task evaluation reads ([] for the
    world's tasks or without local_tasks): editing one task's copy re-runs only the suites that have it."""
    if LOCAL_TASKS is None or not BY_NAME[wildcards.suite].real_tasks:
        return []
    tasks = SUITE_TASKS[BY_NAME[wildcards.suite].suite]
    files = [spec[key] for task, spec in LOCAL_TASKS.items() if task in tasks for key in ("path", "labels") if key in spec]
    return [PROFILE["local_tasks"]["manifest"], *dict.fromkeys(files)]


def harness_flags(wildcards):
    """The experiment's ``eval`` settings as flags of the harness (``eval.batch_size``: lm-eval's batch size,
    ``eval.limit``: documents per task; absent: the CLI's defaults), and the local copies of real tasks. Outside the run's config: changing them
    re-runs the evaluations only."""
    settings = EXPERIMENTS[wildcards.experiment]["eval"]
    flags = [f"--{key.replace('_', '-')} {settings[key]}" for key in ("batch_size", "limit")
             if settings.get(key) is not None]
    if LOCAL_TASKS is not None and BY_NAME[wildcards.suite].real_tasks:
        entry = PROFILE["local_tasks"]
        flags += ["--local-only", f"--local-data {shlex.quote(entry['manifest'])}"]
        flags += [f"--local-root {shlex.quote(entry['root'])}"] if entry.get("root") else []
    return " ".join(flags)


# Every job writes its console to its log; on failure the log's last lines go to Snakemake's console, so
# the job's own error line is what the user sees, with or without --show-failed-logs.
def logged(command):
    """``command`` (which writes its console to {log}), showing the log's last lines on failure."""
    return f"{command} > {{log}} 2>&1 || {{{{ tail -n 5 {{log}} >&2; exit 1; }}}}"

# Settings files: the params' JSON text, byte for byte, through the suite's atomic writer (common.io);
# a change of the resolved settings changes the params and re-runs exactly the affected jobs.
WRITE_JSON = f"printf '%s\\n' {{params.json:q}} | {PYTHON} -m common.io {{output}}"


PROGRESS = []  # the DAG-level progress reporter while the jobs run (onstart in pretrain.smk)


def stop_progress():
    for reporter in PROGRESS:
        if reporter is not None:
            reporter.stop()


# An evaluation whose settings reach it as params (lm-eval flags, the conditional and Gen. PPL settings) writes
# them first, as the oldest of its outputs, into a settings file of its own, which the stamp below compares:
# a changed setting re-runs the evaluation without Snakemake's metadata too.
def eval_settings(name):
    """The settings file of the evaluation whose output wildcard is ``name`` (suite, cond, gen)."""
    return f"{RUN}/eval/.settings/{{{name}}}/settings.json"


WRITE_SETTINGS = f"{PYTHON} -m common.io {{output.settings}} < {{input.want}} && "  # the stamp's text, as is


def settings_stamp(pattern, settings):
    """Input function of a settings rule: the stamp (workflows.stamps) holding what its file ``pattern`` should
    hold, ``settings(wildcards)``: newer than the file when they differ, so a changed profile re-writes it and
    re-runs what reads it even where Snakemake's metadata is gone (a copied results folder)."""
    return lambda wildcards: str(want(pattern.format(**dict(wildcards.items())), settings(wildcards)))



def folder_of_input(name, up=1):
    """Param function: the folder ``up`` levels above input ``name`` (no hard-coded prefixes)."""

    def folder(wildcards, input):
        path = input[name]
        for _ in range(up):
            path = os.path.dirname(path)
        return path

    return folder


def folder_of_output(wildcards, output):
    return os.path.dirname(output[0])


def resource_value(resource):
    """A Snakemake resource's plain value (None for one computed per job, or unset)."""
    if callable(getattr(resource, "_evaluator", None)):
        return None
    return getattr(resource, "value", resource)


def check_launch(resources, gpus_per_node=None):
    """A one-line error, before any job and in a dry run too, for the pretrain rule's ``resources``: more than
    one node (training runs ``torchrun --standalone``, one node, one process per GPU), more GPUs than the
    profile declares a node has (``resources: gpus_per_node=N``), or a process count (its gpu resource) that
    does not divide an experiment's global batch into micro-batches."""
    from trainer.config import world_size_problem

    gpus, nodes = resource_value(resources.get("gpu")), resource_value(resources.get("nodes"))
    gpus_per_node = resource_value(gpus_per_node)
    if isinstance(nodes, int) and nodes > 1:
        raise WorkflowError(f"pretrain's nodes={nodes}: training runs on one node (torchrun --standalone, one "
                            "process per GPU); multi-node training is not supported: set nodes: 1 and at most "
                            "the GPUs of one node (set-resources: pretrain: gpu)")
    if isinstance(gpus, int) and isinstance(gpus_per_node, int) and gpus > gpus_per_node:
        raise WorkflowError(f"pretrain's gpu={gpus} but the profile declares gpus_per_node={gpus_per_node} "
                            "(resources:): a training job runs on one node; set set-resources: pretrain: "
                            f"gpu: {gpus_per_node} (and its cpus_per_task / set-threads to match)")
    if isinstance(gpus, int) and gpus > 1:
        for exp_id, exp in EXPERIMENTS.items():
            problem = world_size_problem(exp["train"], gpus)
            if problem:
                raise WorkflowError(f"experiment {exp_id} with pretrain's gpu={gpus}: {problem}")


def check_external(workflow):
    """One line, before the first job, for a Gen. PPL judge or an ``init_from`` checkpoint that a planned job
    would fail to load (missing folder, hub name not cached offline, not a causal LM): only what the planned
    jobs need (``workflow.dag``), so a run of other targets is not held up by them."""
    planned = list(workflow.dag.needrun_jobs())
    sampling = any(job.rule.name == "evaluate_genppl" for job in planned)
    training = {job.wildcards_dict.get("experiment") for job in planned if job.rule.name == "pretrain"}
    problems = (preflight.judge_problems(GENPPL["judges"], EXPERIMENTS) if sampling else []) + \
        preflight.init_problems({e: EXPERIMENTS[e] for e in sorted(training & set(EXPERIMENTS))})
    if problems:
        raise WorkflowError("; ".join(problems))


def check_gpus(workflow):
    """A one-line error, before the first job, for GPUs declared by the profile (resources: gpu=N) on a
    machine without CUDA that runs the jobs itself (with a cluster executor the login node may have none).
    Called from ``onstart`` (a dry run starts nothing), where the executor is known."""
    declared = resource_value(workflow.global_resources.get("gpu"))
    if declared and workflow.local_exec:
        import torch

        if not torch.cuda.is_available():
            raise WorkflowError(f"the profile declares gpu={declared} (resources:) but this machine has no CUDA "
                                "device; run with --profile workflows/profiles/local, or on a GPU machine")
