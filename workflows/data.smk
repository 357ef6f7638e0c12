# Data stage: settings -> corpus -> tokenizer -> token memmaps.


rule data_settings:
    output:
        f"{DATA}/settings.json",
    params:
        json=data_settings_json(),
    log:
        f"{DATA}/logs/settings.log",
    localrule: True
    conda:
        ENV
    shell:
        WRITE_JSON


rule corpus:
    input:
        f"{DATA}/settings.json",
    output:
        multiext(f"{DATA}/corpus/", "train.jsonl", "valid.jsonl", "test.jsonl", "manifest.json"),
    params:
        cli=CLI,
        out=folder_of_output,
    log:
        f"{DATA}/logs/corpus.log",
    conda:
        ENV
    shell:
        logged("{params.cli} corpus --settings {input} --out {params.out}")


rule tokenizer:
    input:
        settings=f"{DATA}/settings.json",
        corpus=f"{DATA}/corpus/manifest.json",
    output:
        f"{DATA}/tokenizer.json",
    params:
        cli=CLI,
        corpus=folder_of_input("corpus"),
    log:
        f"{DATA}/logs/tokenizer.log",
    conda:
        ENV
    shell:
        logged("{params.cli} tokenizer --settings {input.settings} --corpus {params.corpus} --out {output}")


rule tokenize:
    input:
        settings=f"{DATA}/settings.json",
        corpus=f"{DATA}/corpus/manifest.json",
        tokenizer=f"{DATA}/tokenizer.json",
    output:
        multiext(f"{DATA}/tokens/", "train.bin", "valid.bin", "test.bin", "manifest.json"),
    params:
        cli=CLI,
        corpus=folder_of_input("corpus"),
        out=folder_of_output,
    log:
        f"{DATA}/logs/tokenize.log",
    conda:
        ENV
    shell:
        logged(
            "{params.cli} tokenize --settings {input.settings} --corpus {params.corpus}"
            " --tokenizer {input.tokenizer} --out {params.out}"
        )


rule embedded_tasks:
    input:
        settings=f"{DATA}/settings.json",
        corpus=f"{DATA}/corpus/manifest.json",
    output:
        multiext(
            f"{DATA}/tasks/",
            "embedded_cloze.yaml",
            "embedded_cloze.jsonl",
            "embedded_choice.yaml",
            "embedded_choice.jsonl",
            "embedded_ppl.yaml",
            "embedded_ppl.jsonl",
            "manifest.json",
        ),
    params:
        python=PYTHON,
        out=folder_of_output,
    log:
        f"{DATA}/logs/embedded_tasks.log",
    conda:
        ENV
    shell:
        logged("{params.python} -m evals.tasks.embedded --settings {input.settings} --out {params.out}")
