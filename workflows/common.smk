# Helpers only: validate the profile once, resolve experiments, name paths by experiment id.
import sys

sys.path.insert(0, workflow.basedir)

from workflows.experiments import ConfigError, resolve, run_config, validate

try:
    validate(config, "profile")
except ConfigError as error:
    raise WorkflowError(f"invalid profile: {error}") from None

EXPERIMENTS = resolve(config)
PYTHON = sys.executable
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
