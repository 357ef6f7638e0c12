# Tables and report: read result JSONs only (never checkpoints), see tables/README.md.


rule tables:
    input:
        eval_results(),
    output:
        "results/tables/index.json",
    params:
        python=sys.executable,
    log:
        "results/logs/tables.log",
    conda:
        ENV
    shell:
        "{params.python} -m tables build --results results/runs --out results/tables > {log} 2>&1"


rule report:
    input:
        "results/tables/index.json",
    output:
        md="results/report/report.md",
        html="results/report/report.html",
    params:
        python=sys.executable,
    log:
        "results/logs/report.log",
    conda:
        ENV
    shell:
        "{params.python} -m reports build --results results/runs --tables results/tables"
        " --out results/report > {log} 2>&1"
