# Data stage: settings -> corpus -> tokenizer -> token memmaps.


rule data_settings:
    output:
        f"{DATA}/settings.json",
    params:
        settings=data_settings(),
    localrule: True
    run:
        from common.io import atomic_write_json

        atomic_write_json(output[0], params.settings)


rule corpus:
    input:
        f"{DATA}/settings.json",
    output:
        multiext(f"{DATA}/corpus/", "train.jsonl", "valid.jsonl", "test.jsonl", "manifest.json"),
    log:
        f"{DATA}/logs/corpus.log",
    shell:
        "{PYTHON} -m workflows.cli corpus --settings {input} --out {DATA}/corpus > {log} 2>&1"


rule tokenizer:
    input:
        settings=f"{DATA}/settings.json",
        corpus=f"{DATA}/corpus/manifest.json",
    output:
        f"{DATA}/tokenizer.json",
    log:
        f"{DATA}/logs/tokenizer.log",
    shell:
        "{PYTHON} -m workflows.cli tokenizer --settings {input.settings} --corpus {DATA}/corpus"
        " --out {output} > {log} 2>&1"


rule tokenize:
    input:
        settings=f"{DATA}/settings.json",
        corpus=f"{DATA}/corpus/manifest.json",
        tokenizer=f"{DATA}/tokenizer.json",
    output:
        multiext(f"{DATA}/tokens/", "train.bin", "valid.bin", "test.bin", "manifest.json"),
    log:
        f"{DATA}/logs/tokenize.log",
    shell:
        "{PYTHON} -m workflows.cli tokenize --settings {input.settings} --corpus {DATA}/corpus"
        " --tokenizer {input.tokenizer} --out {DATA}/tokens > {log} 2>&1"
