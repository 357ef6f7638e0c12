# The result of each entry kind (evals/registry.py, ENTRY_KINDS): a scaling law's fit (scaling_laws: in the
# profile; evals/scaling_fit.py) from the validation losses of its grid's runs, with N, P and R from their
# boundaries evaluations; a kernel latency benchmark (kernel_benchmarks:; evals/kernel_latency.py, DLCM
# Table 6) at one thread, as every job of the local profile: the latencies are those of one core beside
# another job. Re-run when the entry's settings (or the runs it reads) change. One per kind, named by the
# evaluation's `rule` field, defined in a function so that each shell line binds its own kind (a shell line
# is formatted when its job runs). A file of its own: Snakemake's linter asks that functions and named rules
# live apart.
def entry_kind_rule(evaluation):
    kind = evaluation.kind

    rule:
        name:
            evaluation.rule
        input:
            settings=f"{RUNS}/{{entry}}/seed0/config.json",
            runs=entry_inputs,
        output:
            f"{RUNS}/{{entry}}/seed0/eval/{evaluation.name}.json",
        params:
            cli=CLI,
        threads: kind.threads or 1
        resources:
            gpu=kind.gpu,
        log:
            f"{RUNS}/{{entry}}/seed0/logs/{evaluation.rule}.log",
        benchmark:
            f"{RUNS}/{{entry}}/seed0/logs/{evaluation.rule}.bench.tsv",
        shell:
            logged(f"{{params.cli}} eval-{evaluation.name} --settings {{input.settings}} --out {{output}}"
                   + (" --threads {threads}" if kind.threads else ""))


for evaluation in ENTRY_KINDS:
    entry_kind_rule(evaluation)
