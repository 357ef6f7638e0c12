"""Every kind of bad profile input tried, with the one line that refuses it: a new refusal is one more row.

Each row edits the embedded default profile and expects ``validate`` (what ``make``'s pre-check and the
Snakefile run before any job) to refuse it with one line holding the given text. Bad inputs that only show
outside the profile are tested where they occur, through Snakemake: damaged result files, unreadable local
corpora, unavailable judges and init_from checkpoints (tests/test_workflow.py), a damaged upstream run
(tests/test_ncm_pipeline.py), a full disk (tests/test_rerun.py), duplicate YAML keys, warm-up and world
settings under plain ``snakemake`` (tests/test_workflow.py), results of another config (tests/tables/).
"""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from workflows.experiments import ConfigError, kernel_benchmarks, resolve, scaling_laws, validate

ROOT = Path(__file__).resolve().parents[1]
BASE = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())


def exp(c: dict, i: str) -> dict:
    """The experiment entry ``i`` of profile ``c``."""
    return next(e for e in c["experiments"] if e["id"] == i)


def real(c: dict) -> None:
    """No embedded tasks: they need the synthetic world."""
    for e in c["experiments"]:
        if "evals" in e:
            e["evals"] = [n for n in e["evals"] if n != "embedded"]


def setp(c: dict, path: str, value) -> None:
    """Set the dotted ``path`` of profile ``c`` to ``value``."""
    d = c
    *head, last = path.split(".")
    for k in head:
        d = d.setdefault(k, {})
    d[last] = value


BAD_INPUTS = [
    ('unknown top-level key',
     lambda c: c.update(nope=1),
     "(top level): unknown key 'nope'; known keys: conditional, corpus, datasets, defaults, description,"),
    ('profile name not a folder name',
     lambda c: c.update(profile="a b/c"),
     "profile: 'a b/c' does not match '^[a-z0-9][a-z0-9_.-]*$' (name of this profile (embedded, small, paper-...):"),
    ('unknown corpus source',
     lambda c: setp(c, "corpus.source", "web"),
     "corpus.source: 'web' is not one of ['synthetic', 'hf', 'local'] (synthetic world, a Hugging Face corpus by"),
    ('unknown hf corpus',
     lambda c: real(c) or c.update(corpus={"id": "x", "source": "hf", "seed": 0, "hf": {"name": "nope", "max_docs": {"train": 1, "valid": 1, "test": 1}}}),
     "corpus.hf.name='nope' is not a known corpus; choose one of ['lm1b', 'openwebtext', 'pile', 'tinystories',"),
    ('missing local corpus file',
     lambda c: real(c) or c.update(corpus={"id": "x", "source": "local", "seed": 0, "local": {"train": "/nonexistent/t.txt"}}),
     'corpus.local.train=/nonexistent/t.txt: no such file; fix the path (relative paths start at the working'),
    ('unknown synthetic setting',
     lambda c: setp(c, "corpus.synthetic.nope", 1),
     'corpus.synthetic.nope: not a setting of the synthetic world; its settings are train_docs, valid_docs,'),
    ('synthetic setting of the wrong type',
     lambda c: setp(c, "corpus.synthetic.train_docs", "many"),
     "corpus.synthetic: WorldConfig.train_docs must be a positive integer, got 'many'"),
    ('unknown tokenizer kind',
     lambda c: setp(c, "tokenizer.kind", "wordpiece"),
     "tokenizer.kind: 'wordpiece' is not one of ['bpe', 'pretrained', 'chars'] (byte-level BPE trained on the"),
    ('vocabulary below the bytes',
     lambda c: setp(c, "tokenizer.vocab_size", 100),
     'tokenizer.vocab_size: 100 is less than the minimum of 257 (byte-level BPE needs the 256 byte tokens plus'),
    ('unknown model arch',
     lambda c: setp(c, "defaults.model.arch", "gpt5"),
     "experiments[base_gpt2_s]: model.arch='gpt5' is not a registered model; choose one of ['conceptlm_gpt2',"),
    ('heads do not divide width',
     lambda c: setp(c, "defaults.model.n_head", 5),
     'experiments[base_gpt2_s]: model.d_model=64 is not divisible by model.n_head=5; choose n_head dividing d_model'),
    ('missing seq_len',
     lambda c: c["defaults"]["model"].pop("seq_len"),
     'experiments[base_gpt2_s]: model.arch and model.seq_len are required (set them in defaults.model)'),
    ('unknown model key',
     lambda c: setp(c, "defaults.model.nope", 1),
     "experiments[base_gpt2_s]: model.nope: gpt2 models have no field 'nope'; known keys: activation, bias,"),
    ('zero learning rate',
     lambda c: setp(c, "defaults.train.lr", 0),
     'defaults.train.lr: 0 is less than or equal to the minimum of 0 (must be > 0)'),
    ('negative weight decay',
     lambda c: setp(c, "defaults.train.weight_decay", -0.1),
     'defaults.train.weight_decay: -0.1 is less than the minimum of 0'),
    ('zero steps',
     lambda c: setp(c, "defaults.train.steps", 0),
     'defaults.train.steps: 0 is less than the minimum of 1 (must be a positive integer)'),
    ('warm-up longer than training',
     lambda c: setp(c, "defaults.train.warmup_steps", 10**6),
     'experiments[base_gpt2_s]: train.warmup_steps=1000000 exceeds train.steps=600: the learning rate would never'),
    ('batch not a multiple of the micro-batch',
     lambda c: (setp(c, "defaults.train.batch_size", 10), setp(c, "defaults.train.micro_batch_size", 3)),
     'experiments[base_gpt2_s]: train.batch_size=10 is not a multiple of train.micro_batch_size=3; make the'),
    ('non-finite setting',
     lambda c: setp(c, "defaults.train.lr", float("nan")),
     'experiments[base_gpt2_s]: train.lr=nan: not a finite number; give a number (YAML .nan / .inf are not settings)'),
    ('unknown train key',
     lambda c: setp(c, "defaults.train.nope", 1),
     "defaults.train: unknown key 'nope'; known keys: batch_size, betas, checkpoint_interval, compile, eps,"),
    ('loss weight of no loss of the model',
     lambda c: exp(c, "base_gpt2_s").setdefault("overrides", {}).update({"train.loss_weights": {"ncp": 1.0}}),
     "experiments[base_gpt2_s]: train.loss_weights.ncp: gpt2 has no loss 'ncp'; its losses are ntp"),
    ('init_from on a non-Llama arch',
     lambda c: exp(c, "base_gpt2_s").setdefault("overrides", {}).update({"train.init_from": "x/y"}),
     'experiments[base_gpt2_s]: train.init_from: a LlamaForCausalLM loads into llama and conceptlm_llama only, not'),
    ('duplicate experiment id',
     lambda c: c["experiments"].append({"id": "base_gpt2_s"}),
     "experiments: id 'base_gpt2_s' appears twice; ids must be unique"),
    ('base that is no experiment',
     lambda c: c["experiments"].append({"id": "z", "base": "nope"}),
     "experiments[z]: base 'nope' is not an experiment id"),
    ('base chain cycle',
     lambda c: c["experiments"].extend([{"id": "a1", "base": "a2"}, {"id": "a2", "base": "a1"}]),
     'experiments[a1]: base chain a1 -> a2 -> a1 is a cycle'),
    ('unknown override key',
     lambda c: c["experiments"].append({"id": "z", "base": "base_gpt2_s", "overrides": {"model.nope": 1}}),
     "experiments[z]: model.nope: gpt2 models have no field 'nope'; known keys: activation, bias, d_model, dropout,"),
    ('relative override without a value',
     lambda c: c["experiments"].append({"id": "z", "base": "base_gpt2_s", "overrides": {"model.rope_scaling": "+2"}}),
     "experiments[z].overrides: model.rope_scaling: '+2' is relative, but model.rope_scaling has no integer value"),
    ('placeholders without a sweep',
     lambda c: c["experiments"].append({"id": "z_{model.n_layer}", "base": "base_gpt2_s"}),
     'experiments[z_{model.n_layer}]: {...} placeholders need a sweep'),
    ('sweep lists of different lengths',
     lambda c: c["experiments"].append({"id": "z_{model.n_layer}_{model.d_model}", "base": "base_gpt2_s", "sweep": {"model.n_layer": [1, 2], "model.d_model": [64]}}),
     'experiments[z_{model.n_layer}_{model.d_model}]: sweep lists have lengths [1, 2]; give every key as many values'),
    ('sweep id without placeholders',
     lambda c: c["experiments"].append({"id": "z", "base": "base_gpt2_s", "sweep": {"model.n_layer": [1, 2]}}),
     'experiments[z]: the id must name each experiment with {key} placeholders of sweep keys (model.n_layer)'),
    ('unknown eval',
     lambda c: exp(c, "base_gpt2_s").update(evals=["nope"]),
     "experiments[base_gpt2_s].evals[0]: 'nope' is not valid under any of the given schemas (an evaluation of"),
    ('codebook eval without a codebook',
     lambda c: exp(c, "base_gpt2_s").update(evals=["codebook"]),
     'experiments[base_gpt2_s]: evals: codebook measures product-VQ usage, and model.arch=gpt2 has no codebook;'),
    ('boundaries eval on a token LM',
     lambda c: exp(c, "base_gpt2_s").update(evals=["boundaries"]),
     "experiments[base_gpt2_s]: evals: boundaries measures DLCM's concept boundaries and model.arch=gpt2 has none;"),
    ('mechanisms on a model without a concept path',
     lambda c: exp(c, "base_gpt2_s").update(evals=["mechanisms"]),
     'experiments[base_gpt2_s]: evals: mechanisms checks a concept path and model.arch=gpt2 has none; drop'),
    ('recon on a model that is no NCM tokenizer',
     lambda c: exp(c, "base_gpt2_s").update(evals=["recon"]),
     "experiments[base_gpt2_s]: evals: recon measures an NCM tokenizer's reconstruction and model.arch=gpt2 has"),
    ('embedded tasks on a real corpus',
     lambda c: c.update(corpus={"id": "x", "source": "hf", "seed": 0, "hf": {"name": "openwebtext", "max_docs": {"train": 1, "valid": 1, "test": 1}}}),
     'experiments[pm_gpt2_s]: evals: embedded tasks are built from the synthetic world, and corpus.source is hf;'),
    ('masked-diffusion steps on an AR model',
     lambda c: exp(c, "base_gpt2_s").update(evals=["genppl_s8"]),
     'experiments[base_gpt2_s]: evals: genppl_s8 sets the sampling steps of masked diffusion, and model.arch=gpt2'),
    ('generator without its upstream',
     lambda c: next(e for e in c["experiments"] if e["id"] == "ncm_s").pop("upstream"),
     'experiments[ncm_s]: model.arch=ncm trains on top of a ncm_tokenizer run; set upstream: <id of a ncm_tokenizer'),
    ('upstream that is no experiment',
     lambda c: next(e for e in c["experiments"] if e["id"] == "ncm_s").update(upstream="nope"),
     "experiments[ncm_s]: upstream 'nope' is not an experiment id; name the ncm_tokenizer experiment it builds on"),
    ('upstream on a model that builds on nothing',
     lambda c: exp(c, "base_gpt2_s").update(upstream="ncm_tok_s"),
     'experiments[base_gpt2_s]: upstream: model.arch=gpt2 does not build on another run; drop upstream (only archs'),
    ('data that is no dataset',
     lambda c: exp(c, "base_gpt2_s").update(data="nope"),
     "experiments[base_gpt2_s]: data 'nope' is not a dataset; use the corpus id 'world' or an id of datasets"),
    ('negative seed',
     lambda c: exp(c, "base_gpt2_s").update(seeds=[-1]),
     'experiments[base_gpt2_s].seeds[0]: -1 is less than the minimum of 0'),
    ('judge that is no experiment nor model',
     lambda c: c["genppl"].update(judges=[str(ROOT)]),
     'is a folder without config.json, not a transformers model; give a causal LM folder, a hub name'),
    ('judge scored by itself',
     lambda c: next(e for e in c["experiments"] if e["id"] == "judge_gpt2_ncm").update(evals=["genppl"]),
     'experiments[judge_gpt2_ncm]: the judge cannot be scored by itself; drop genppl from its evals'),
    ('genppl without judges',
     lambda c: c["genppl"].update(judges=[]),
     'genppl.judges: [] should be non-empty (an experiment id of this profile (a gpt2 run, trained here and'),
    ('non-positive genppl samples',
     lambda c: c["genppl"].update(samples=0),
     'genppl.samples: 0 is less than the minimum of 1 (must be a positive integer)'),
    ('unknown genppl key',
     lambda c: c["genppl"].update(nope=1),
     "genppl: unknown key 'nope'; known keys: batch_size, judge_batch_size, judges, samples, seed, temperature,"),
    ('unknown conditional key',
     lambda c: c["conditional"].update(nope=1),
     "conditional: unknown key 'nope'; known keys: batch_size, examples, mbr_temperature, mbr_utility, seed, steps,"),
    ('dataset id of the main corpus',
     lambda c: c["datasets"].update(world=c["datasets"]["world_translate"]),
     "datasets.world: the id 'world' names the main corpus; give the paired dataset another id"),
    ('dataset tokenizer naming no dataset',
     lambda c: c["datasets"]["world_translate"].update(tokenizer="nope"),
     "datasets.world_translate.tokenizer: 'nope' is not a dataset with its own tokenizer; name the main corpus"),
    ('pairs corpus without its pairs section',
     lambda c: c["datasets"]["world_translate"]["corpus"].pop("pairs"),
     'datasets.world_translate.corpus: source pairs needs a pairs section (task, n)'),
    ('law id of an experiment',
     lambda c: c["scaling_laws"].update(base_gpt2_s=c["scaling_laws"]["dlcm_law"]),
     "scaling_laws.base_gpt2_s: the id is an experiment's; a law writes results/runs/<id>/: rename it"),
    ('law naming no experiment',
     lambda c: c["scaling_laws"]["dlcm_law"].update(experiments=["nope_*"]),
     "scaling_laws.dlcm_law.experiments: 'nope_*' names no experiment of the profile"),
    ('law run without boundaries',
     lambda c: c["scaling_laws"]["dlcm_law"].update(experiments=["base_gpt2_s", "dlcm_s"]),
     'scaling_laws.dlcm_law.experiments: base_gpt2_s has no boundaries evaluation, which gives the law its N, P and'),
    ('law hold-out outside its grid',
     lambda c: c["scaling_laws"]["dlcm_law"].update(holdout=["base_gpt2_s"]),
     "scaling_laws.dlcm_law.holdout: base_gpt2_s is not in the law's grid"),
    ('unknown kernel row key',
     lambda c: c["kernel_benchmarks"]["attention_bench"].update(rows=[{"seq_len": 64, "hidden": 100, "heads": 3}]),
     "kernel_benchmarks.attention_bench.rows[0]: unknown key 'heads'; known keys: hidden, seq_len"),
    ('kernel row listed twice',
     lambda c: c["kernel_benchmarks"]["attention_bench"].update(rows=[{"seq_len": 64, "hidden": 64}, {"seq_len": 64, "hidden": 64}]),
     'kernel_benchmarks.attention_bench.rows: s64_h64 is listed twice; drop one'),
    ('local tasks manifest missing',
     lambda c: c.update(local_tasks={"manifest": "/nonexistent/m.yaml"}),
     'local_tasks.manifest: /nonexistent/m.yaml not found (relative paths are to the working directory); give the'),
]


def refusal(edit) -> str:
    """The one line ``validate`` (and the profile's law and benchmark entries) refuse the edited default with."""
    config = copy.deepcopy(BASE)
    edit(config)
    with pytest.raises(ConfigError) as error:
        profile = validate(config, "p.yaml")
        experiments = resolve(profile)
        scaling_laws(profile, experiments, "p.yaml")
        kernel_benchmarks(profile, experiments, "p.yaml")
    return str(error.value)


@pytest.mark.parametrize("kind, edit, message", BAD_INPUTS, ids=[row[0] for row in BAD_INPUTS])
def test_each_bad_input_is_refused_in_one_line_before_any_job(kind, edit, message):
    said = refusal(edit)
    assert "\n" not in said and said.startswith("p.yaml: ") and message in said, said


def test_the_list_has_no_kind_twice_and_the_default_passes():
    assert len({row[0] for row in BAD_INPUTS}) == len(BAD_INPUTS)
    profile = validate(copy.deepcopy(BASE), "p.yaml")
    experiments = resolve(profile)
    assert scaling_laws(profile, experiments, "p.yaml") and kernel_benchmarks(profile, experiments, "p.yaml")
