# Pretraining: one job per (experiment, seed). Rolling checkpoints live in ckpt/ and are not
# outputs (Snakemake deletes the outputs of failed jobs); a re-run resumes from them only when they
# are bound to the same settings and token data (trainer/checkpoint.py), and a completed run removes
# them, so a forced or changed re-run trains afresh. The training log train/metrics.jsonl is an
# output the trainer owns (each checkpoint keeps a copy to resume it from), never a Snakemake log:
# Snakemake erases logs before a job. The job's log is its console, shown on failure.
# A run with `upstream:` (NCM's generator) takes the upstream run's final/ as input: the DAG trains
# the tokenizer first, and a re-trained tokenizer re-trains the generator.


rule run_config:
    input:
        want=settings_stamp(f"{RUN}/config.json", run_settings_json),
    output:
        f"{RUN}/config.json",
    params:
        json=run_settings_json,
    log:
        f"{RUN}/logs/config.log",
    localrule: True
    shell:
        WRITE_JSON


rule pretrain:
    input:
        config=f"{RUN}/config.json",
        tokens=run_tokens,
        tokenizer=run_tokenizer,
        upstream=upstream_final,
    output:
        weights=f"{RUN}/final/model.safetensors",
        manifest=f"{RUN}/final/manifest.json",
        metrics=f"{RUN}/train/metrics.jsonl",
    params:
        cli=CLI,
        tokens=folder_of_input("tokens"),
        run_dir=folder_of_input("config"),
        upstream=upstream_flag,
    log:
        f"{RUN}/logs/pretrain.log",
    benchmark:
        f"{RUN}/logs/pretrain.bench.tsv",
    threads: 1
    resources:
        gpu=1,
    shell:
        logged(
            "{params.cli} pretrain --config {input.config} --tokens {params.tokens} --tokenizer {input.tokenizer}"
            " --run-dir {params.run_dir} {params.upstream} --threads {threads} --nproc {resources.gpu}"
        )


# The process count of a training job is its gpu resource (profiles: set-resources: pretrain: gpu: N), on
# one node; refused before any job runs (dry runs included) where it cannot split an experiment's global
# batch, asks for more than one node or for more GPUs than the profile declares a node has;
# and, when the jobs start, where a profile declares GPUs (resources: gpu=N) that this machine, running
# the jobs itself, does not have.
check_launch(rules.pretrain.rule.resources, workflow.global_resources.get("gpus_per_node"))


onstart:
    check_gpus(workflow)
    check_external(workflow)
    PROGRESS.append(progress.start(workflow.dag, lambda e, s: (f"{RUNS}/{e}/seed{s}", EXPERIMENTS[e]["train"]["steps"])))


# the progress line (workflows/progress.py) stops with the jobs, printing its last state
onsuccess:
    stop_progress()


onerror:
    stop_progress()
