# Evaluation: perplexity with the oracle floor and the unigram baseline on the same tokens, the
# embedded downstream tasks through lm-evaluation-harness (evals/harness, evals/tasks), the
# codebook usage of ConceptLM runs (evals/codebook.py), the reconstruction of NCM tokenizers
# (evals/recon.py), the mechanism checks of concept models (evals/mechanisms.py) and Gen. PPL of samples
# (evals/genppl). An experiment's `evals` picks among them.


# Evaluations that stream the token files (CLI `eval-ppl`, `eval-codebook`, `eval-mechanisms`, ...): one rule,
# the name a wildcard.
rule evaluate_tokens:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokens=run_tokens,
    output:
        f"{RUN}/eval/{{metric}}.json",
    wildcard_constraints:
        metric=constraint("evaluate_tokens"),
    params:
        cli=CLI,
        tokens=folder_of_input("tokens"),
        run_dir=folder_of_input("weights", up=2),
    log:
        f"{RUN}/logs/eval_{{metric}}.log",
    benchmark:
        f"{RUN}/logs/eval_{{metric}}.bench.tsv",
    threads: 1
    resources:
        gpu=1,
    shell:
        logged(
            "{params.cli} eval-{wildcards.metric} --run-dir {params.run_dir} --tokens {params.tokens} --out {output}"
            " --threads {threads}"
        )


# DLCM's boundaries (evals/boundaries.py): the realised compression per document type and against the
# synthetic world's concepts (the corpus beside the tokens), and the ratio logged over training.
rule evaluate_boundaries:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        metrics=f"{RUN}/train/metrics.jsonl",
        tokens=run_tokens,
        tokenizer=run_tokenizer,
        corpus=run_corpus,
    output:
        f"{RUN}/eval/boundaries.json",
    params:
        cli=CLI,
        tokens=folder_of_input("tokens"),
        run_dir=folder_of_input("weights", up=2),
    log:
        f"{RUN}/logs/eval_boundaries.log",
    benchmark:
        f"{RUN}/logs/eval_boundaries.bench.tsv",
    threads: 1
    resources:
        gpu=1,
    shell:
        logged(
            "{params.cli} eval-boundaries --run-dir {params.run_dir} --tokens {params.tokens}"
            " --tokenizer {input.tokenizer} --out {output} --threads {threads}"
        )


# The settings file of a profile entry that is no training run (a scaling law, a kernel benchmark): its
# result re-runs when they change.
rule entry_config:
    input:
        want=settings_stamp(f"{RUNS}/{{entry}}/seed0/config.json", entry_settings_json),
    output:
        f"{RUNS}/{{entry}}/seed0/config.json",
    params:
        json=entry_settings_json,
    log:
        f"{RUNS}/{{entry}}/seed0/logs/config.log",
    localrule: True
    shell:
        WRITE_JSON


rule evaluate_harness:
    input:
        want=settings_stamp(eval_settings("suite"), harness_record),
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokenizer=run_tokenizer,
        tasks=lambda wildcards: [f"{DATA}/tasks/manifest.json"] if BY_NAME[wildcards.suite].world_tasks else [],
        local=local_task_files,
    output:
        settings=eval_settings("suite"),
        result=f"{RUN}/eval/{{suite}}.json",
        samples=f"{RUN}/eval/{{suite}}.samples.jsonl.gz",
    wildcard_constraints:
        suite=constraint("evaluate_harness"),
    params:
        cli=CLI,
        run_dir=folder_of_input("weights", up=2),
        flags=harness_flags,
        task_dir=lambda wildcards, input: f"--task-dir {os.path.dirname(input.tasks[0])}" if input.tasks else "",
    log:
        f"{RUN}/logs/eval_{{suite}}.log",
    benchmark:
        f"{RUN}/logs/eval_{{suite}}.bench.tsv",
    threads: 1
    resources:
        gpu=1,
    shell:
        WRITE_SETTINGS + logged(
            "{params.cli} eval-{wildcards.suite} --run-dir {params.run_dir} --tokenizer {input.tokenizer}"
            " {params.task_dir} {params.flags} --out {output.result} --samples {output.samples} --threads {threads}"
        )



# A judge trained here (genppl.judges names an experiment), exported as a transformers folder so that
# Gen. PPL loads it as it loads gpt2-large (evals/genppl/export.py). Its first seed's run.
rule export_judge:
    input:
        weights=lambda wildcards: f"{RUNS}/{wildcards.judge}/seed{EXPERIMENTS[wildcards.judge]['seeds'][0]}/final/model.safetensors",
        manifest=lambda wildcards: f"{RUNS}/{wildcards.judge}/seed{EXPERIMENTS[wildcards.judge]['seeds'][0]}/final/manifest.json",
        tokenizer=f"{DATA}/tokenizer.json",
    output:
        directory(f"{JUDGES}/{{judge}}"),
    wildcard_constraints:
        judge="|".join(j for j in GENPPL["judges"] if j in EXPERIMENTS) or "^$",
    params:
        cli=CLI,
        run_dir=folder_of_input("weights"),
    log:
        f"{OUT}/logs/export_judge_{{judge}}.log",
    benchmark:
        f"{OUT}/logs/export_judge_{{judge}}.bench.tsv",
    shell:
        logged("{params.cli} export-judge --run-dir {params.run_dir} --tokenizer {input.tokenizer} --out {output}")


# Conditional generation on a paired dataset's test split (evals/conditional): BLEU / ROUGE / Sudoku board
# accuracy with NFE and wall time; cond_mbr<n> (MBR over n candidates), cond_cfg<w> (NCM guidance).
rule evaluate_conditional:
    input:
        want=settings_stamp(eval_settings("cond"), conditional_json),
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokenizer=run_tokenizer,
        tokens=run_tokens,
    output:
        settings=eval_settings("cond"),
        result=f"{RUN}/eval/{{cond}}.json",
        samples=f"{RUN}/eval/{{cond}}.samples.jsonl",
    wildcard_constraints:
        cond=constraint("evaluate_conditional"),
    params:
        cli=CLI,
        run_dir=folder_of_input("weights", up=2),
        settings=conditional_json,
        tokens=folder_of_input("tokens"),
    log:
        f"{RUN}/logs/eval_{{cond}}.log",
    benchmark:
        f"{RUN}/logs/eval_{{cond}}.bench.tsv",
    threads: 1
    resources:
        gpu=1,
    shell:
        WRITE_SETTINGS + logged(
            "{params.cli} eval-cond --run-dir {params.run_dir} --tokenizer {input.tokenizer}"
            " --tokens {params.tokens} --eval {wildcards.cond} --settings {params.settings:q} --out {output.result}"
            " --threads {threads}"
        )


# Gen. PPL: sample (NFE and wall time recorded), then score under every judge; genppl_s<N> sets masked
# diffusion's sampling steps, genppl_k<j> lets NCM complete j real coarse scales, genppl_data scores the
# test windows themselves (evals/genppl/sample.py). One job per (run, eval name); samples kept beside it.
rule evaluate_genppl:
    input:
        want=settings_stamp(eval_settings("gen"), genppl_record),
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokenizer=run_tokenizer,
        tokens=run_tokens,
        judges=judge_folders(),
    output:
        settings=eval_settings("gen"),
        result=f"{RUN}/eval/{{gen}}.json",
        samples=f"{RUN}/eval/{{gen}}.samples.jsonl",
    wildcard_constraints:
        gen=constraint("evaluate_genppl"),
    params:
        cli=CLI,
        run_dir=folder_of_input("weights", up=2),
        judges=judge_flags(),
        settings=GENPPL_SETTINGS,
        tokens=folder_of_input("tokens"),
    log:
        f"{RUN}/logs/eval_{{gen}}.log",
    benchmark:
        f"{RUN}/logs/eval_{{gen}}.bench.tsv",
    threads: 1
    resources:
        gpu=1,
    shell:
        WRITE_SETTINGS + logged(
            "{params.cli} eval-genppl --run-dir {params.run_dir} --tokenizer {input.tokenizer}"
            " {params.judges} --settings {params.settings:q} --eval {wildcards.gen} --tokens {params.tokens}"
            " --out {output.result} --threads {threads}"
        )
