"""A profile checked before the DAG is built, in two layers: the JSON schema
(``config/schemas/config.schema.yaml``: unknown keys, types, ranges of every section but ``model``) and the
semantics: the model settings by the arch's config dataclass (``models.fields``), the train settings by
``trainer.config.TrainConfig``, batch divisible by micro-batch, embedded tasks only on the synthetic world,
codebook evals only on models with a codebook, datasets, upstream runs, local tasks, judges. Every error is
one line naming the key and the fix (``validate``)."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jsonschema
import yaml

from evals.registry import NCM_ARCHS, find
from workflows.load import ConfigError
from workflows.resolve import SECTIONS, datasets, entry_kinds, genppl_settings, local_tasks, resolve


SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schemas" / "config.schema.yaml"


INIT_FROM_ARCHS = ("llama", "conceptlm_llama")  # train.init_from: models/hf_llama.py


def check_tables() -> None:
    """The table specs, the papers' printed cells and their claims load (a claim or formula naming a row
    or column no spec defines is refused here, before any job, not when the tables are built)."""
    from tables.build import SPECS, REPORTED
    from tables.checks import load_claims
    from tables.reported import load_reported
    from tables.specs import load_specs
    from tables.validation import DataError

    try:
        specs = load_specs(SPECS)
        for paper in load_reported(specs, REPORTED).values():
            load_claims(specs[paper.paper], paper)
    except DataError as error:
        raise ConfigError(f"{error}; fix the table spec or claim there") from None


def _schema() -> dict:
    """The profile schema, its entries of ``evals`` those of the registry (``evals/registry.py``) now. Read by
    libyaml where PyYAML has it: 4 ms against 40 ms in Python, four times per profile check."""
    from evals.registry import item_schema

    schema = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schema["properties"]["experiments"]["items"]["properties"]["evals"]["items"] = item_schema()
    return schema


def _where(config, path) -> str:
    """``experiments[pm_s].overrides`` for a jsonschema path (list items named by their id)."""
    parts, node = [], config
    for p in path:
        if isinstance(p, int):
            item = node[p] if isinstance(node, list) and p < len(node) else None
            parts[-1] += f"[{item.get('id', p) if isinstance(item, dict) else p}]"
        else:
            parts.append(str(p))
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            node = None
    return ".".join(parts) or "(top level)"


def _schema_error(error: jsonschema.ValidationError, config: dict, source: str) -> ConfigError:
    where = _where(config, error.absolute_path)
    if error.validator == "additionalProperties":
        known = ", ".join(sorted(error.schema.get("properties", {})))
        unknown = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return ConfigError(f"{source}: {where}: unknown key {unknown[0]!r}; known keys: {known}")
    hint = " ".join(error.schema.get("description", "").split())  # one line
    return ConfigError(f"{source}: {where}: {error.message}" + (f" ({hint})" if hint else ""))


def _check_schema(instance: dict, schema: dict, config: dict, source: str) -> None:
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    if errors:
        raise _schema_error(jsonschema.exceptions.best_match(errors), config, source)


def validate(config, source: str = "config", files: bool = True) -> dict:
    """Check a whole profile; return it unchanged. Raises ConfigError on the first problem (``files``: a local
    corpus's files and the local task copies must exist)."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: a profile is a mapping with profile, corpus, tokenizer, defaults, experiments")
    schema = _schema()
    _check_schema(config, schema, config, source)
    experiments = resolve(config, source)
    for ds_id, ds in datasets(config, source).items():  # the data before the experiments that read it
        if ds["tokenizer_of"] == ds_id:
            _check_alphabet(ds, "tokenizer" if ds["layout"] is None else f"datasets.{ds_id}.tokenizer", source)
        if ds["layout"] is not None:
            _check_dataset(ds_id, ds, source)
    section_schema = {"$defs": schema["$defs"], "type": "object",
                      "properties": {s: {"$ref": f"#/$defs/{s}"} for s in SECTIONS}}
    for exp_id, exp in experiments.items():
        settings = {s: exp[s] for s in SECTIONS}
        try:
            _check_schema(settings, section_schema, settings, f"{source}: experiments[{exp_id}]")
            _check_semantics(config, exp)
        except ConfigError as e:
            raise ConfigError(str(e) if str(e).startswith(source)
                              else f"{source}: experiments[{exp_id}]: {e}") from None
    _check_genppl(config, experiments, source)
    _check_local_tasks(config, experiments, source, files)
    entry_kinds(config, experiments, source)
    _check_corpus(config["corpus"], source, files)
    _check_upstream_data(config, experiments, source)
    return config


def _check_upstream_data(config: dict, experiments: dict, source: str) -> None:
    """A run and the run it builds on read token ids of the same tokenizer (the frozen NCM tokenizer reads
    the generator's ids), and an NCM generator continues only an upstream generator whose source
    prefix it shares (none, or the same length)."""
    tokenizer_of = {ds_id: ds["tokenizer_of"] for ds_id, ds in datasets(config, source).items()}
    for exp_id, exp in experiments.items():
        if exp["upstream"] is None:
            continue
        up = experiments[exp["upstream"]["experiment"]]
        where = f"{source}: experiments[{exp_id}]"
        if tokenizer_of[up["data"]] != tokenizer_of[exp["data"]]:
            raise ConfigError(f"{where}: upstream {up['id']!r} reads {up['data']} "
                              f"(tokenizer of {tokenizer_of[up['data']]}) "
                              f"and this experiment {exp['data']} (tokenizer of {tokenizer_of[exp['data']]}); "
                              "build on a run of the same tokenizer")
        theirs, ours = up["model"].get("prefix_len", 0), exp["model"].get("prefix_len", 0)
        if up["model"].get("arch") == exp["model"].get("arch") and theirs not in (0, ours):
            raise ConfigError(f"{where}: upstream {up['id']!r} has model.prefix_len={theirs} and this experiment "
                              f"{ours}; continue an unconditional generator or one with the same source length")


def _check_semantics(config: dict, exp: dict) -> None:
    from models.registry import get_spec, model_config
    from trainer.config import fsdp_problem, world_size_problem

    model, train = exp["model"], exp["train"]
    for key, value in _leaves({s: exp[s] for s in SECTIONS}):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value}: not a finite number; give a number (YAML .nan / .inf are not settings)")
    if "arch" not in model or "seq_len" not in model:
        raise ConfigError("model.arch and model.seq_len are required (set them in defaults.model)")
    fields = {k: v for k, v in model.items() if k != "seq_len"}
    try:
        _, typed = model_config(fields, vocab_size=config["tokenizer"].get("vocab_size", 50257),
                                seq_len=model["seq_len"])
    except (ValueError, TypeError) as e:
        raise ConfigError(str(e)) from None
    spec = get_spec(model["arch"])
    unknown = sorted(set(train.get("loss_weights", {})) - set(typed.loss_names()))
    if unknown:
        raise ConfigError(f"train.loss_weights.{unknown[0]}: {model['arch']} has no loss {unknown[0]!r}; "
                          f"its losses are {', '.join(typed.loss_names())}")
    weights = {name: train.get("loss_weights", {}).get(name, 1.0)
               for name in typed.trained_losses()}
    if not any(weights.values()):
        raise ConfigError(f"train.loss_weights: every loss {model['arch']} computes under these model settings "
                          f"weighs 0 ({weights}), so nothing trains; "
                          "give one a positive weight (or switch a loss back on)")
    if train.get("init_from") and model["arch"] not in INIT_FROM_ARCHS:
        raise ConfigError(f"train.init_from: a LlamaForCausalLM loads into {' and '.join(INIT_FROM_ARCHS)} only, "
                          f"not model.arch={model['arch']}; drop init_from or use a Llama arch")
    if train.get("parallel") == "fsdp":
        problem = fsdp_problem(spec, typed)
        if problem:
            raise ConfigError(problem)
    _check_evals(config, exp, spec, typed)
    _check_data(config, exp, spec, typed)
    world = [name for name in exp["evals"] if find(name).world_tasks]
    if world and config["corpus"]["source"] != "synthetic":
        raise ConfigError(f"evals: {world[0]} tasks are built from the synthetic world, and corpus.source is "
                          f"{config['corpus']['source']}; use zeroshot / lm_ppl (real tasks) instead")
    if "codebook" in exp["evals"] and getattr(typed, "predictor", None) != "codebook":
        raise ConfigError(f"evals: codebook measures product-VQ usage, and model.arch={model['arch']} has no "
                          "codebook; drop 'codebook' from evals or use a conceptlm_* arch")
    problem = world_size_problem(train)
    if problem:
        raise ConfigError(problem)
    # (an eval_interval above steps is a setting: validation runs after the last step only, trainer/metrics.py)
    if isinstance(train.get("warmup_steps"), int) and isinstance(train.get("steps"), int) \
            and train["warmup_steps"] > train["steps"]:
        raise ConfigError(f"train.warmup_steps={train['warmup_steps']} exceeds train.steps={train['steps']}: "
                          "the learning rate would never finish warming up; "
                          f"set train.warmup_steps to at most {train['steps']}")


def _check_evals(config: dict, exp: dict, spec, typed) -> None:
    """Each evaluation applies to the experiment's model: likelihood evals to causal token LMs, recon
    to NCM tokenizers (and generators, through their frozen tokenizer), Gen. PPL to models that sample."""
    from evals.registry import mechanisms_apply, parse_eval, truncates
    from models.registry import REGISTRY

    arch, evals = spec.name, exp["evals"]
    for name in evals:
        if find(name).likelihood and arch not in REGISTRY:
            raise ConfigError(f"evals: {name} scores next-token likelihoods and model.arch={arch} has none; give this "
                              "experiment evals of its kind (recon for ncm_tokenizer, genppl for ncm and mdlm_*)")
    if "boundaries" in evals and getattr(typed, "boundary_predictor", None) is None:
        raise ConfigError(f"evals: boundaries measures DLCM's concept boundaries and model.arch={arch} has none; "
                          "drop 'boundaries' or use a dlcm_* arch")
    if "mechanisms" in evals:
        if not mechanisms_apply(arch):
            raise ConfigError(f"evals: mechanisms checks a concept path and model.arch={arch} has none; drop "
                              "'mechanisms' or use a conceptlm_*, contextlm_*, dlcm_*, ncm_tokenizer or ncm arch")
    if "recon" in evals and arch not in NCM_ARCHS:
        raise ConfigError(f"evals: recon measures an NCM tokenizer's reconstruction and model.arch={arch} has none; "
                          "drop 'recon' or use arch ncm_tokenizer / ncm")
    generative = {name: parse_eval(name) for name in evals if find(name).name == "genppl"}
    if not generative:
        return
    kind = spec.sampler
    for name, variant in generative.items():
        if kind is None and "data" not in variant:
            raise ConfigError(f"evals: {name} samples from the model and model.arch={arch} has no sampler; drop it "
                              "(genppl_data, the test windows themselves, applies to any run)")
        if "steps" in variant and kind != "mdlm":
            raise ConfigError(f"evals: {name} sets the sampling steps of masked diffusion, and model.arch={arch} "
                              "samples in a fixed number of calls (NCM: K, autoregressive: L); use genppl")
        if "scales" in variant:
            K = getattr(getattr(typed, "tokenizer_config", None), "K", None) if kind == "ncm" else None
            if K is None or variant["scales"] > K:
                raise ConfigError(f"evals: {name} completes the first {variant['scales']} scales of real windows: "
                                  f"an ncm experiment with at least that many scales (model.arch={arch}, K={K})")
    settings = genppl_settings(config)
    if kind == "mdlm" and truncates(settings) and any("data" not in v for v in generative.values()):
        raise ConfigError(f"evals: {next(iter(generative))}: masked diffusion samples at temperature 1 without top-k / "
                          f"top-p (MDLM / DUO), and genppl sets temperature {settings['temperature']}, top_k "
                          f"{settings['top_k']}, top_p {settings['top_p']}; use 1.0 / null / null")
    if "genppl" in config and not settings["judges"]:
        raise ConfigError(f"evals: {next(iter(generative))} needs genppl.judges: an experiment id of this profile "
                          "(a gpt2 run) or a transformers name / folder such as gpt2-large")
    if "genppl" not in config:
        raise ConfigError(f"evals: {next(iter(generative))} needs the profile's genppl section "
                          "(judges, samples, batch_size, temperature; see config/default.yaml)")


def _check_data(config: dict, exp: dict, spec, typed) -> None:
    """The experiment's dataset (``data:``) fits its model: a paired dataset is read whole (model.seq_len =
    source_len + target_len; token LMs continue the source, ncm and mdlm_* take it as a prefix,
    ``model.prefix_len`` = source_len) or as its targets only (model.seq_len = target_len); the main corpus
    has no source."""
    from models.registry import BACKBONES

    ds = datasets(config)[exp["data"]]
    layout, seq_len = ds["layout"], exp["model"]["seq_len"]
    prefix = getattr(typed, "prefix_len", None)
    conditional = [name for name in exp["evals"] if find(name).data == "pairs"]
    if layout is None:
        if prefix:
            raise ConfigError(f"model.prefix_len={prefix}: a source prefix needs paired data; "
                              "set data: <an id of datasets>")
        if conditional:
            raise ConfigError(f"evals: {conditional[0]} generates targets from sources and {exp['data']} "
                              "is a plain corpus; set data: <an id of datasets> or drop it")
        return
    kind = spec.sampler
    for name in conditional:
        variant = find(name).match(name)
        if kind is None:
            raise ConfigError(f"evals: {name} generates targets and model.arch={spec.name} does not generate; use a "
                              "token LM, ncm or mdlm_* experiment")
        if "scales" in variant and kind != "ncm":
            raise ConfigError(f"evals: {name} completes real coarse scales: NCM's diagnostic (model.arch={spec.name})")
        if "guidance" in variant and kind != "ncm":
            raise ConfigError(f"evals: {name}: classifier-free guidance is NCM's (model.arch={spec.name}); use cond or "
                              "cond_mbr<n>")
        if "guidance" in variant and not typed.cond_dropout:
            raise ConfigError(f"evals: {name}: guidance needs the null condition, never trained with "
                              "model.cond_dropout=0; set it (0.1) or drop the guided eval")
        if "scales" in variant and int(variant["scales"]) > typed.tokenizer_config.K:
            raise ConfigError(f"evals: {name} completes the first {variant['scales']} real scales and the "
                              f"tokenizer has K={typed.tokenizer_config.K}; use j <= K")
    P, L = layout["source_len"], layout["target_len"]
    other = [name for name in exp["evals"] if find(name).data == "stream"
             and not (name == "mechanisms" and spec.name in NCM_ARCHS)]
    if other:
        raise ConfigError(f"evals: {other[0]} reads a token stream and {exp['data']} holds paired examples; use cond, "
                          "cond_mbr<n>, cond_cfg<w> (and recon, mechanisms for NCM)")
    if seq_len == P + L:
        if prefix is None and spec.name not in BACKBONES:
            raise ConfigError(f"data: {exp['data']}: model.arch={spec.name} cannot condition on a source; "
                              "use a token LM "
                              f"(gpt2, pythia, llama), ncm or mdlm_*, or read the targets only (model.seq_len: {L})")
        if prefix is not None and prefix != P:
            raise ConfigError(f"model.prefix_len={prefix}: {exp['data']} has {P} source tokens per example; set "
                              f"model.prefix_len: {P}")
    elif seq_len == L:
        if prefix:
            raise ConfigError(f"model.prefix_len={prefix} with model.seq_len={L} (the targets only); "
                              f"set model.seq_len: {P + L} to read the sources too, or model.prefix_len: 0")
        if conditional:
            raise ConfigError(f"evals: {conditional[0]} conditions on sources and model.seq_len={L} reads the targets "
                              f"only; set model.seq_len: {P + L} and model.prefix_len")
    else:
        raise ConfigError(f"model.seq_len={seq_len}: {exp['data']} holds {P} source + {L} target tokens per example; "
                          f"set model.seq_len: {P + L} (source and target) or {L} (the targets only)")


def _check_local_tasks(config: dict, experiments: dict, source: str, files: bool = True) -> None:
    """Every local copy exists and matches its sha256 (``files``; a profile read on a machine without the
    copies, or shrunk by smoke mode, which writes its own), and each real-task evaluation an experiment lists
    has at least one task with a copy: found now, not when the evaluation job starts."""
    local = local_tasks(config, source)
    if local is None:
        return
    from evals.harness.errors import HarnessError
    from evals.harness.suites import load_suites
    from evals.tasks.local_data import verify

    try:
        if files:
            verify(local, f"{source}: local_tasks")
    except HarnessError as error:
        raise ConfigError(str(error)) from None
    suites = load_suites()
    for exp_id, exp in experiments.items():
        for name in exp["evals"]:
            evaluation = find(name)
            tasks = [entry["task"] for entry in suites[evaluation.suite]["tasks"]] if evaluation.real_tasks else []
            if tasks and not set(tasks) & set(local):
                raise ConfigError(f"{source}: experiments[{exp_id}]: evals {name} runs {', '.join(tasks)}, "
                                  "none of which "
                                  f"has a local copy in {config['local_tasks']['manifest']}; add one or drop {name}")


def _check_genppl(config: dict, experiments: dict, source: str) -> None:
    """The judges of Gen. PPL: an experiment id of this profile is trained here and exported as a
    ``transformers`` folder, so it must be a GPT-2 run of the same corpus; any other name is a hub
    name or a folder, loaded by ``transformers`` at evaluation time."""
    for judge in config.get("genppl", {}).get("judges", []):
        folder = Path(judge).expanduser()
        if judge not in experiments and folder.is_dir() and not (folder / "config.json").is_file():
            raise ConfigError(f"{source}: genppl.judges: {judge} is a folder without config.json, not a transformers "
                              "model; give a causal LM folder, a hub name (gpt2-large) or a gpt2 experiment id")
        if judge in experiments:
            from models.configs import gpt2_mismatch
            from models.registry import model_config

            if experiments[judge]["data"] != config["corpus"]["id"]:
                raise ConfigError(f"{source}: genppl.judges: experiment {judge!r} trains on "
                                  f"{experiments[judge]['data']}; "
                                  "a judge scores free text: train it on the main corpus")
            model = experiments[judge]["model"]
            mismatch = ("arch", model.get("arch")) if model.get("arch") != "gpt2" else gpt2_mismatch(
                model_config({k: v for k, v in model.items() if k != "seq_len"}, vocab_size=257,
                             seq_len=model["seq_len"])[1])
            if mismatch is not None:
                raise ConfigError(f"{source}: genppl.judges: experiment {judge!r} "
                                  f"has model.{mismatch[0]}={mismatch[1]}; "
                                  "a judge trained here is exported to transformers' GPT2LMHeadModel: use a plain "
                                  "gpt2 experiment")
            if "genppl" in experiments[judge]["evals"]:
                raise ConfigError(f"{source}: experiments[{judge}]: the judge cannot be scored by itself; drop genppl "
                                  "from its evals")


def _check_alphabet(ds: dict, where: str, source: str) -> None:
    """A chars tokenizer gives each character of its alphabet one id: no character twice (the schema checks
    the alphabet's type; a character of the text outside it is the tokenize job's one-line error)."""
    tok = ds["tokenizer"]
    alphabet = tok.get("alphabet") if tok.get("kind") == "chars" else None
    twice = sorted({c for c in alphabet if alphabet.count(c) > 1}) if isinstance(alphabet, str) else []
    if twice:
        raise ConfigError(f"{source}: {where}.alphabet lists {twice[0]!r} more than once; each character is one "
                          "token id: list it once")


def _check_dataset(ds_id: str, ds: dict, source: str) -> None:
    """A paired dataset: its tokenizer's kind and its corpus settings."""
    where = f"{source}: datasets.{ds_id}"
    tok = ds["tokenizer"]
    try:
        jsonschema.validate(tok, _schema()["properties"]["tokenizer"])
    except jsonschema.ValidationError as e:
        raise ConfigError(f"{where}.tokenizer: {e.message}") from None
    corpus = ds["corpus"]
    if corpus["source"] == "pairs" and "pairs" not in corpus:
        raise ConfigError(f"{where}.corpus: source pairs needs a pairs section (task, n)")
    if corpus["source"] == "sudoku":
        if "sudoku" not in corpus:
            raise ConfigError(f"{where}.corpus: source sudoku needs a sudoku section (tiers, n)")
        if tok.get("kind") != "chars" or not set("0123456789|") <= set(tok.get("alphabet", "")):
            raise ConfigError(f"{where}.tokenizer: Sudoku grids are read one character per token of 0-9 and '|'; use "
                              "{kind: chars, alphabet: '0123456789|'}")
        if min(ds["layout"]["source_len"], ds["layout"]["target_len"]) < 89:
            raise ConfigError(f"{where}.layout: a Sudoku grid is 89 characters (81 digits, 8 row separators); set "
                              "source_len and target_len to at least 89")
        external = corpus["sudoku"].get("external")
        if external is not None and not Path(external).expanduser().is_file():
            raise ConfigError(f"{where}.corpus.sudoku.external={external}: no such file; fix the path or drop it")
    if corpus.get("pairs", {}).get("task") in ("translate", "summary"):
        _check_corpus({**corpus, "source": "synthetic"}, where)
    for split, spec in corpus.get("pairs", {}).get("local", {}).items():
        if split not in ("train", "valid", "test"):
            continue
        for key, path in (spec.items() if isinstance(spec, dict) else [("", spec)]):
            if not Path(path).expanduser().is_file():
                raise ConfigError(f"{where}.corpus.pairs.local.{split}{'.' + key if key else ''}={path}: no such file; "
                                  "fix the path")
            if not key and Path(path).suffix not in (".jsonl", ".json", ".tsv"):
                raise ConfigError(f"{where}.corpus.pairs.local.{split}={path}: a single pair file is .jsonl or .tsv; "
                                  "for two line-aligned text files give {source: file, target: file}")


def _check_corpus(corpus: dict, source: str, files: bool = True) -> None:
    if corpus["source"] == "synthetic":
        from corpora.synthetic import WorldConfig

        settings = corpus.get("synthetic", {})
        known = [f.name for f in dataclasses.fields(WorldConfig)]
        unknown = sorted(set(settings) - set(known))
        if unknown:
            raise ConfigError(f"{source}: corpus.synthetic.{unknown[0]}: not a setting of the synthetic world; its "
                              f"settings are {', '.join(known)}")
        try:
            WorldConfig(**settings)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{source}: corpus.synthetic: {e}") from None
    elif corpus["source"] == "hf":
        from corpora.sources import HF_CORPORA

        if corpus["hf"]["name"] not in HF_CORPORA:
            raise ConfigError(f"{source}: corpus.hf.name={corpus['hf']['name']!r} is not a known corpus; "
                              f"choose one of {sorted(HF_CORPORA)} or use source: local")
    elif files:
        for split in (split for split in ("train", "valid", "test") if split in corpus["local"]):
            path = Path(corpus["local"][split]).expanduser()
            if not path.is_file():
                raise ConfigError(f"{source}: corpus.local.{split}={corpus['local'][split]}: no such file; "
                                  "fix the path (relative paths start at the working directory: snakemake -d, "
                                  "the repository root by default)")



def _leaves(tree, prefix: str = ""):
    """(dotted key, value) of every leaf of nested mappings."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
