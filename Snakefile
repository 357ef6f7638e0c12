# Thin entry point: profile + validation, one include per stage, the final target.
#   snakemake --profile workflows/profiles/local --configfile config/default.yaml
import os

from snakemake.utils import min_version

min_version("9.0")


# --configfile PROFILE replaces the embedded default; a profile may `extends:` another (common.smk).
# Snakemake itself reads --configfile: a missing file or a YAML syntax error is its message, before
# this file runs; `python -m workflows.experiments PROFILE` (run by `make`) names file, line and column.
if workflow.overwrite_configfiles and not config:
    raise WorkflowError(f"{workflow.overwrite_configfiles[-1]}: the profile is empty; give profile, corpus, tokenizer, "
                        "defaults and experiments (see config/default.yaml), or omit --configfile for the default")
if not config:

    configfile: os.path.join(workflow.basedir, "config", "default.yaml")


# `snakemake --report report.zip`: the report, tables, audit and figures, grouped by category.
report: "workflows/report/workflow.rst"


include: "workflows/common.smk"
include: "workflows/data.smk"
include: "workflows/pretrain.smk"
include: "workflows/evaluate.smk"
include: "workflows/kinds.smk"
include: "workflows/tables.smk"


rule all:
    default_target: True
    input:
        run_outputs(),
        eval_results(),
        f"{OUT}/tables/index.json",
        f"{OUT}/report/report.html",


# One target per paper (`snakemake conceptlm`, `ncm`, `dlcm`): the runs and evaluations of the experiments
# tagged with that paper (`paper:`, default conceptlm), with whatever they build on (upstream runs, judges).
# Tables and the report come with the bare `snakemake`.
for _paper in PAPERS:

    rule:
        name:
            _paper
        input:
            run_outputs(_paper),
            eval_results(_paper),
