# Thin entry point: profile + validation, one include per stage, the final target.
#   snakemake --profile workflows/profiles/local --configfile config/default.yaml
import os

from snakemake.utils import min_version

min_version("9.0")


# --configfile PROFILE replaces the embedded default; a profile may `extends:` another (common.smk).
if not config:

    configfile: os.path.join(workflow.basedir, "config", "default.yaml")


include: "workflows/common.smk"
include: "workflows/data.smk"
include: "workflows/pretrain.smk"
include: "workflows/evaluate.smk"
include: "workflows/tables.smk"


rule all:
    default_target: True
    input:
        eval_results(),
        f"{OUT}/tables/index.json",
        f"{OUT}/report/report.html",
