# Pretraining: one job per (experiment, seed). Rolling checkpoints live in ckpt/ and are not
# outputs (Snakemake deletes the outputs of failed jobs); a re-run resumes from them.


rule run_config:
    output:
        f"{RUN}/config.json",
    params:
        json=run_settings_json,
    log:
        f"{RUN}/logs/config.log",
    localrule: True
    conda:
        ENV
    shell:
        WRITE_JSON


rule pretrain:
    input:
        config=f"{RUN}/config.json",
        tokens=f"{DATA}/tokens/manifest.json",
        tokenizer=f"{DATA}/tokenizer.json",
    output:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
    params:
        cli=CLI,
        tokens=folder_of_input("tokens"),
        run_dir=folder_of_input("config"),
    log:
        metrics=f"{RUN}/train/metrics.jsonl",
        stdout=f"{RUN}/logs/pretrain.log",
    threads: 1
    resources:
        gpu=1,
    conda:
        ENV
    shell:
        "{params.cli} pretrain --config {input.config} --tokens {params.tokens} --tokenizer {input.tokenizer}"
        " --run-dir {params.run_dir} --threads {threads} > {log.stdout} 2>&1"
