# Tables and report: read result JSONs only (never checkpoints), see tables/README.md, and only those
# of the profile's runs (runs/index.json): a run dropped from the profile is never read again.


rule runs_index:
    output:
        f"{RUNS}/index.json",
    params:
        json=runs_index_json(),
    log:
        f"{OUT}/logs/runs_index.log",
    localrule: True
    shell:
        WRITE_JSON


rule tables:
    input:
        eval_results(),
        f"{RUNS}/index.json",
    output:
        f"{OUT}/tables/index.json",
    params:
        python=PYTHON,
    log:
        f"{OUT}/logs/tables.log",
    shell:
        logged(f"{{params.python}} -m tables build --results {RUNS} --out {OUT}/tables")


rule report:
    input:
        f"{OUT}/tables/index.json",
    output:
        md=f"{OUT}/report/report.md",
        html=f"{OUT}/report/report.html",
    params:
        python=PYTHON,
    log:
        f"{OUT}/logs/report.log",
    shell:
        logged(
            f"{{params.python}} -m reports build --results {RUNS} --tables {OUT}/tables"
            f" --out {OUT}/report"
        )
