# Tables and report: read result JSONs only (never checkpoints), see tables/README.md, and only those
# of the profile's runs (runs/index.json): a run dropped from the profile is never read again.


# Every profile of config/ and this one: the tables name the profile that fills what this one leaves out.
PROFILE_FILES = sorted({*map(str, Path(workflow.basedir, "config").glob("*.yaml")), str(Path(SOURCE).resolve())})
TABLE_PAPERS = sorted(path.name for path in Path(workflow.basedir, "tables", "specs").iterdir() if path.is_dir())


# The profile files (and every file its extends: chain reads) are its inputs, not only its params: an edited
# profile rewrites the index even where Snakemake has no record of the params (a results folder copied
# elsewhere, .snakemake deleted), so a seed or an evaluation added to the profile reaches the tables.
rule runs_index:
    input:
        sorted({*PROFILE_FILES, *map(str, profile_chain(SOURCE))}),
    output:
        f"{RUNS}/index.json",
    params:
        json=runs_index_json(),
    log:
        f"{OUT}/logs/runs_index.log",
    localrule: True
    shell:
        WRITE_JSON


rule profiles_index:
    input:
        PROFILE_FILES,
    output:
        f"{OUT}/profiles.json",
    params:
        python=PYTHON,
    log:
        f"{OUT}/logs/profiles_index.log",
    localrule: True
    shell:
        logged("{params.python} -m workflows.coverage --out {output} {input}")


rule tables:
    input:
        eval_results(),
        runs=f"{RUNS}/index.json",
        profiles=f"{OUT}/profiles.json",
        levels=LEVELS,
    output:
        f"{OUT}/tables/index.json",
        report(f"{OUT}/tables/audit.md", caption="report/audit.rst", category="Audit"),
        *[report(directory(f"{OUT}/tables/{paper}"), patterns=["{table}.csv"], caption="report/table.rst",
                 category="Tables", subcategory=paper, labels={"paper": paper, "table": "{table}"})
          for paper in TABLE_PAPERS],
    params:
        python=PYTHON,
        expected=expected_configs_json(),
    log:
        f"{OUT}/logs/tables.log",
    shell:
        # the runs' configs as the profile resolves them now: results of another config are refused, and the
        # report made from the old tables is withdrawn
        f"printf '%s\\n' {{params.expected:q}} > {OUT}/logs/expected_configs.json && "
        + logged(f"{{params.python}} -m tables build --results {RUNS} --out {OUT}/tables --coverage {{input.profiles}}"
                 f" --expected {OUT}/logs/expected_configs.json"
                 f" --withdraw {OUT}/report/report.html --withdraw {OUT}/report/report.md"
                 + (" --levels {input.levels}" if LEVELS else ""))


rule report:
    input:
        f"{OUT}/tables/index.json",
    output:
        md=f"{OUT}/report/report.md",
        html=report(f"{OUT}/report/report.html", caption="report/report.rst", category="Report"),
        figures=report(directory(f"{OUT}/report/figures"), patterns=["{name}.png"], caption="report/figure.rst",
                       category="Figures", labels={"figure": "{name}"}),
    params:
        python=PYTHON,
    log:
        f"{OUT}/logs/report.log",
    shell:
        logged(
            f"{{params.python}} -m reports build --results {RUNS} --tables {OUT}/tables"
            f" --out {OUT}/report"
        )
