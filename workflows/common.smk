# Helpers only: validate the profile once, resolve experiments, name paths by experiment id.
# The rules call `python -m workflows.cli ...`: the package is installed (editable) by `make`.
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


def ppl_results():
    return [f"results/runs/{e}/seed{s}/eval/ppl.json" for e, s in runs()]


def data_settings():
    return {"corpus": config["corpus"], "tokenizer": config["tokenizer"]}


def settings_of_run(wildcards):
    return run_config(config, wildcards.experiment, int(wildcards.seed))


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
