# Evaluation: perplexity with the oracle floor and the unigram baseline on the same tokens.


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
