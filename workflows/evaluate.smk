# Evaluation: perplexity with the oracle floor and the unigram baseline on the same tokens, the
# embedded downstream tasks through lm-evaluation-harness (evals/harness, evals/tasks), and the
# codebook usage of ConceptLM runs (evals/codebook.py). An experiment's `evals` picks among them.


# Evaluations that stream the token files (CLI `eval-ppl`, `eval-codebook`): one rule, the name a wildcard.
rule evaluate_tokens:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokens=f"{DATA}/tokens/manifest.json",
    output:
        f"{RUN}/eval/{{metric}}.json",
    wildcard_constraints:
        metric="ppl|codebook",
    params:
        cli=CLI,
        tokens=folder_of_input("tokens"),
        run_dir=folder_of_input("weights", up=2),
    log:
        f"{RUN}/logs/eval_{{metric}}.log",
    threads: 1
    resources:
        gpu=1,
    conda:
        ENV
    shell:
        logged(
            "{params.cli} eval-{wildcards.metric} --run-dir {params.run_dir} --tokens {params.tokens} --out {output}"
            " --threads {threads}"
        )


rule evaluate_harness:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokenizer=f"{DATA}/tokenizer.json",
        tasks=lambda wildcards: [f"{DATA}/tasks/manifest.json"] if wildcards.suite == "embedded" else [],
    output:
        result=f"{RUN}/eval/{{suite}}.json",
        samples=f"{RUN}/eval/{{suite}}.samples.jsonl",
    wildcard_constraints:
        suite="|".join(HARNESS),
    params:
        python=PYTHON,
        run_dir=folder_of_input("weights", up=2),
        tasks=lambda wildcards: HARNESS[wildcards.suite],
        task_dir=lambda wildcards, input: f"--task-dir {os.path.dirname(input.tasks[0])}" if input.tasks else "",
    log:
        f"{RUN}/logs/eval_{{suite}}.log",
    threads: 1
    resources:
        gpu=1,
    conda:
        ENV
    shell:
        logged(
            "{params.python} -m evals.harness --run-dir {params.run_dir} --tokenizer {input.tokenizer} --tasks {params.tasks}"
            " {params.task_dir} --out {output.result} --threads {threads}"
        )

