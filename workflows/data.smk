# Data stage: settings -> corpus -> tokenizer -> token memmaps.


rule data_settings:
    input:
        want=settings_stamp(f"{DS}/settings.json", data_settings_json),
    output:
        f"{DS}/settings.json",
    params:
        json=data_settings_json,
    log:
        f"{DS}/logs/settings.log",
    localrule: True
    shell:
        WRITE_JSON


rule corpus:
    input:
        settings=f"{DS}/settings.json",
        files=corpus_files,
    output:
        multiext(f"{DS}/corpus/", "train.jsonl", "valid.jsonl", "test.jsonl", "manifest.json"),
    params:
        cli=CLI,
        out=folder_of_output,
    log:
        f"{DS}/logs/corpus.log",
    benchmark:
        f"{DS}/logs/corpus.bench.tsv",
    shell:
        logged("{params.cli} corpus --settings {input.settings} --out {params.out}")


rule tokenizer:
    wildcard_constraints:
        dataset="|".join(d for d, ds in DATASETS.items() if ds["tokenizer_of"] == d),
    input:
        settings=f"{DS}/settings.json",
        corpus=f"{DS}/corpus/manifest.json",
    output:
        f"{DS}/tokenizer.json",
    params:
        cli=CLI,
        corpus=folder_of_input("corpus"),
    log:
        f"{DS}/logs/tokenizer.log",
    benchmark:
        f"{DS}/logs/tokenizer.bench.tsv",
    shell:
        logged("{params.cli} tokenizer --settings {input.settings} --corpus {params.corpus} --out {output}")


rule tokenize:
    input:
        settings=f"{DS}/settings.json",
        corpus=f"{DS}/corpus/manifest.json",
        tokenizer=lambda wildcards: tokenizer_file(wildcards.dataset),
    output:
        multiext(f"{DS}/tokens/", "train.bin", "valid.bin", "test.bin", "manifest.json"),
    params:
        cli=CLI,
        corpus=folder_of_input("corpus"),
        out=folder_of_output,
    log:
        f"{DS}/logs/tokenize.log",
    benchmark:
        f"{DS}/logs/tokenize.bench.tsv",
    shell:
        logged(
            "{params.cli} tokenize --settings {input.settings} --corpus {params.corpus}"
            " --tokenizer {input.tokenizer} --out {params.out} --threads {threads}"
        )


rule embedded_tasks:
    input:
        settings=f"{DS}/settings.json",
        corpus=f"{DS}/corpus/manifest.json",
    output:
        multiext(
            f"{DS}/tasks/",
            "embedded_cloze.yaml",
            "embedded_cloze.jsonl",
            "embedded_choice.yaml",
            "embedded_choice.jsonl",
            "embedded_ppl.yaml",
            "embedded_ppl.jsonl",
            "manifest.json",
        ),
    params:
        cli=CLI,
        out=folder_of_output,
    log:
        f"{DS}/logs/embedded_tasks.log",
    benchmark:
        f"{DS}/logs/embedded_tasks.bench.tsv",
    shell:
        logged("{params.cli} world-tasks --settings {input.settings} --out {params.out}")


# The synthetic world's entropy split into its plan units and their surface, and how far back the plan
# depends (corpora/synthetic/levels.py): what a concept model could find in this world. Main corpus only.
LEVELS = [f"{DATA}/levels.json"] if PROFILE["corpus"]["source"] == "synthetic" else []


rule world_levels:
    input:
        settings=f"{DATA}/settings.json",
        tokenizer=f"{DATA}/tokenizer.json",
    output:
        f"{DATA}/levels.json",
    params:
        cli=CLI,
    log:
        f"{DATA}/logs/levels.log",
    benchmark:
        f"{DATA}/logs/levels.bench.tsv",
    shell:
        logged("{params.cli} levels --settings {input.settings} --tokenizer {input.tokenizer}"
               " --out {output}")
