# Helpers only: validate the profile once, resolve experiments, name paths by experiment id.
# The rules call `python -m workflows.cli ...`: the package is installed (editable) by `make`.
import json
import os
import sys

from workflows.experiments import ConfigError, resolve, run_config, validate

try:
    validate(config, "profile")
except ConfigError as error:
    raise WorkflowError(f"invalid profile: {error}") from None

EXPERIMENTS = resolve(config)
CLI = f"{sys.executable} -m workflows.cli"
ENV = "envs/repro.yaml"
DATA = f"results/data/{config['corpus']['id']}"
RUN = "results/runs/{experiment}/seed{seed}"


wildcard_constraints:
    experiment="|".join(EXPERIMENTS),
    seed=r"\d+",


def runs():
    """(experiment, seed) pairs of the profile."""
    return [(e, s) for e, exp in EXPERIMENTS.items() for s in exp["seeds"]]


def eval_results():
    """Every result JSON of the profile: perplexity and embedded downstream tasks per run."""
    return [f"results/runs/{e}/seed{s}/eval/{name}.json" for e, s in runs() for name in ("ppl", "embedded")]


def data_settings_json():
    return json.dumps({"corpus": config["corpus"], "tokenizer": config["tokenizer"]}, sort_keys=True)


def run_settings_json(wildcards):
    return json.dumps(run_config(config, wildcards.experiment, int(wildcards.seed)), sort_keys=True)


# Settings files are written by the shell (no Python start-up per job); a change of the resolved
# settings changes the params and re-runs exactly the affected jobs.
WRITE_JSON = "printf '%s\\n' {params.json:q} > {output}.tmp && mv {output}.tmp {output}"


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
