# Evaluation: perplexity with the oracle floor and the unigram baseline on the same tokens, and the
# embedded downstream tasks through lm-evaluation-harness (evals/harness, evals/tasks).


rule evaluate_ppl:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokens=f"{DATA}/tokens/manifest.json",
    output:
        f"{RUN}/eval/ppl.json",
    params:
        cli=CLI,
        tokens=folder_of_input("tokens"),
        run_dir=folder_of_input("weights", up=2),
    log:
        f"{RUN}/logs/eval_ppl.log",
    threads: 1
    conda:
        ENV
    shell:
        "{params.cli} eval-ppl --run-dir {params.run_dir} --tokens {params.tokens} --out {output}"
        " --threads {threads} > {log} 2>&1"


rule evaluate_harness:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokenizer=f"{DATA}/tokenizer.json",
        tasks=f"{DATA}/tasks/manifest.json",
    output:
        result=f"{RUN}/eval/embedded.json",
        samples=f"{RUN}/eval/embedded.samples.jsonl",
    params:
        python=sys.executable,
        run_dir=folder_of_input("weights", up=2),
        task_dir=folder_of_input("tasks"),
    log:
        f"{RUN}/logs/eval_embedded.log",
    threads: 1
    conda:
        ENV
    shell:
        "{params.python} -m evals.harness --run-dir {params.run_dir} --tokenizer {input.tokenizer} --tasks embedded"
        " --task-dir {params.task_dir} --out {output.result} --threads {threads} > {log} 2>&1"
