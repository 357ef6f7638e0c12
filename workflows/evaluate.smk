# Evaluation: perplexity with the oracle floor and the unigram baseline on the same tokens.


rule evaluate_ppl:
    input:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        tokens=f"{DATA}/tokens/manifest.json",
    output:
        f"{RUN}/eval/ppl.json",
    log:
        f"{RUN}/logs/eval_ppl.log",
    threads: 1
    shell:
        "{PYTHON} -m workflows.cli eval-ppl --run-dir {RUN} --tokens {DATA}/tokens --out {output}"
        " --threads {threads} > {log} 2>&1"
