"""Profiles and experiments: load, validate, resolve. Used by the Snakefile and by the tests.

An experiment is a named entry ``{id, base, overrides, seeds, evals}``. Its settings are the profile's
``defaults`` (model / train / eval), then its base's overrides (recursively), then its own
``overrides`` (dotted keys such as ``model.n_layer: 6``). A ``sweep`` entry stands for one experiment
per listed value (``conceptlm_n{model.codebook_size}`` with ``sweep: {model.codebook_size: [8, 16]}``).
A new size or ablation is therefore one entry in a profile, never new code. ``evals`` lists what is
measured on the runs; neither it nor the ``eval`` settings are part of a run's settings (``run_config``),
so changing them never re-trains. A profile
may ``extends:`` another (``with_parents``). Everything is checked before the DAG is built, in two
layers: the JSON schema (``config/schemas/config.schema.yaml``: unknown keys, types, ranges of every
section but ``model``) and semantic checks: the model settings by the arch's config dataclass alone
(its fields are the model keys, with their types, choices and ranges: ``models.fields``), batch
divisible by micro-batch, embedded tasks only on the synthetic world, codebook evals only on models with
a codebook, synthetic-world fields. Every error is one line naming the key and the fix.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import re
from pathlib import Path

import jsonschema
import yaml

from common.errors import USER_ERROR, ReproError, entry_point
from evals.registry import NCM_ARCHS, find
from trainer.config import TrainConfig

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "config" / "schemas" / "config.schema.yaml"
SECTIONS = ("model", "train", "eval")
TRAINING = ("model", "train")  # the sections of a run's config and hash; ``eval`` is read by the evaluations only
PAPERS = ("conceptlm", "ncm", "dlcm")
INIT_FROM_ARCHS = ("llama", "conceptlm_llama")  # train.init_from: models/hf_llama.py
DEFAULT_PAPER = "conceptlm"


class ConfigError(ReproError, ValueError):
    """A profile is invalid; the message names the key and the fix."""


def load_profile(path: str | Path, files: bool = True) -> dict:
    """The validated profile at ``path`` (``files=False``: without checking that its local corpus files exist,
    for reading which experiments it holds on a machine without them)."""
    path = Path(path)
    return validate(with_parents(_read_yaml(path), path.parent, str(path)), str(path), files)


@entry_point
def main(argv: list[str] | None = None) -> int:
    """``python -m workflows.experiments PROFILE``: check a profile before Snakemake reads it (file
    missing, YAML syntax with line and column, empty, schema and semantics), one line on error."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m workflows.experiments PROFILE.yaml", file=sys.stderr)
        return USER_ERROR
    profile = load_profile(argv[0])
    check_tables()
    n_runs = sum(len(exp["seeds"]) for exp in resolve(profile).values())
    print(f"{argv[0]}: profile {profile['profile']!r}, {len(profile['experiments'])} entries, {n_runs} runs")
    return 0


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


def read_profile(path: Path) -> dict:
    """A profile file read strictly (duplicate keys and YAML syntax named with line and column): the same
    reading for ``make``'s pre-check and the Snakefile, whose own YAML loader lets a duplicate key win."""
    return _read_yaml(Path(path))


def _read_yaml(path: Path) -> dict:
    if not path.is_file():
        raise ConfigError(f"{path}: no such profile; see config/ for the available ones")
    try:
        config = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{path}: not valid YAML ({where}{problem}); fix the syntax there") from e
    if config is None or config == {}:
        raise ConfigError(f"{path}: the profile is empty; give profile, corpus, tokenizer, defaults and experiments "
                          "(see config/default.yaml)")
    return config


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (YAML would keep the last silently)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice in one mapping",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def with_parents(config: dict, folder: Path, source: str = "config", seen: tuple = ()) -> dict:
    """The profile with its ``extends: <file>`` chain applied (the file is relative to ``folder``). The
    child wins: mappings merge key by key, except ``corpus`` and ``tokenizer``, which are replaced whole;
    ``experiments`` merge by id (a known id is replaced by the child's entry, new ids are appended); any
    other value is replaced. The child must name itself (``profile``): its outputs go to results/<profile>/. A scale
    profile (config/small.yaml)
    thus reuses the embedded grid and restates only corpus, tokenizer, defaults and the sizes."""
    if not isinstance(config, dict) or "extends" not in config:
        return config
    if not isinstance(config["extends"], str):
        raise ConfigError(f"{source}: extends: give one profile file name, e.g. extends: default.yaml")
    if config.get("profile") in (None, "embedded"):
        raise ConfigError(f"{source}: profile: a profile that extends another needs its own name (not 'embedded'): "
                          "its outputs go to results/<profile>/")
    parent_path = _parent_path(config, folder)
    if parent_path in seen:
        raise ConfigError(f"{source}: extends chain returns to {parent_path.name}; remove the cycle")
    parent = with_parents(_read_yaml(parent_path), parent_path.parent, str(parent_path), seen + (parent_path,))
    return _merge(parent, {k: v for k, v in config.items() if k != "extends"})


def _parent_path(config: dict, folder: Path) -> Path:
    """The file a profile's ``extends:`` names, relative to the profile's folder."""
    return (folder / config["extends"]).resolve()


def profile_chain(path: str | Path) -> list[Path]:
    """The profile file and every file its ``extends:`` chain reads (validated profiles only: no cycle)."""
    chain = [Path(path).resolve()]
    while isinstance((config := _read_yaml(chain[-1]) or {}).get("extends"), str):
        chain.append(_parent_path(config, chain[-1].parent))
    return chain


_REPLACED_WHOLE = ("corpus", "tokenizer")  # a new corpus or tokenizer keeps nothing of the old one


def _merge(parent, child, path: tuple[str, ...] = ()):
    """``child`` over ``parent`` (see ``with_parents``); ``path``: the keys from the profile's top level.
    ``corpus`` and ``tokenizer`` are replaced whole wherever they are (a dataset's too); only the top-level
    ``experiments`` merge by id (a scaling law's ``experiments`` is a plain list)."""
    if isinstance(parent, dict) and isinstance(child, dict) and path[-1:] not in [(k,) for k in _REPLACED_WHOLE]:
        return {**parent, **{k: _merge(parent[k], v, path + (k,)) if k in parent else v for k, v in child.items()}}
    if path == ("experiments",) and isinstance(parent, list) and isinstance(child, list):
        patches = {entry.get("id"): entry for entry in child if isinstance(entry, dict)}
        known = {entry.get("id") for entry in parent if isinstance(entry, dict)}
        return ([patches.get(entry.get("id"), entry) for entry in parent]
                + [entry for entry in child if not isinstance(entry, dict) or entry.get("id") not in known])
    return child


def _schema() -> dict:
    """The profile schema, its entries of ``evals`` those of the registry (``evals/registry.py``)."""
    from evals.registry import item_schema

    schema = yaml.safe_load(SCHEMA_PATH.read_text())
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
    corpus's files must exist)."""
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
    _check_local_tasks(config, experiments, source)
    kernel_benchmarks(config, {**experiments, **scaling_laws(config, experiments, source)}, source)
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


_RELATIVE = re.compile(r"^[+-][0-9]+$")


def _set_dotted(settings: dict, key: str, value) -> None:
    """Set ``model.n_layer``-style keys; a string "+2" / "-1" adds to the value inherited so far (PM is
    Base + 2 token layers at every size, ConceptLM §4.1; Table 5 adds 6 and 10)."""
    section, field = key.split(".", 1)
    if isinstance(value, str) and _RELATIVE.match(value):
        current = settings[section].get(field)
        if not isinstance(current, int) or isinstance(current, bool):
            raise ConfigError(f"{key}: {value!r} is relative, but {key} has no integer value to add it to; "
                              "set it in defaults or in a base experiment")
        value = current + int(value)
    settings[section][field] = copy.deepcopy(value)


_PLACEHOLDER = re.compile(r"\{([a-z_0-9.]+)\}")
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def expand_sweeps(entries: list[dict], source: str = "config") -> list[dict]:
    """Entries with ``sweep: {key: [v0, v1, ...]}`` become one entry per position i, with every key set
    to its i-th value (zipped, not a product) and the ``{key}`` placeholders of the id filled in."""
    out = []
    for entry in entries:
        if "sweep" not in entry:
            if _PLACEHOLDER.search(entry["id"]):
                raise ConfigError(f"{source}: experiments[{entry['id']}]: {{...}} placeholders need a sweep")
            out.append(entry)
            continue
        sweep, where = entry["sweep"], f"{source}: experiments[{entry['id']}]"
        lengths = {len(values) for values in sweep.values()}
        if len(lengths) > 1:
            raise ConfigError(f"{where}: sweep lists have lengths {sorted(lengths)}; give every key as many values")
        names = _PLACEHOLDER.findall(entry["id"])
        if not names or set(names) - set(sweep):
            raise ConfigError(f"{where}: the id must name each experiment with {{key}} placeholders of sweep keys "
                              f"({', '.join(sweep)})")
        for i in range(lengths.pop()):
            values = {key: values[i] for key, values in sweep.items()}
            exp_id = _PLACEHOLDER.sub(lambda m: str(values[m[1]]).lower(), entry["id"])  # noqa: B023 (used here)
            if not _ID.match(exp_id):
                raise ConfigError(f"{where}: sweep gives the id {exp_id!r}; ids use a-z, 0-9, '_', '.', '-'")
            rest = {k: v for k, v in entry.items() if k not in ("id", "sweep", "overrides")}
            if "upstream" in rest:  # a generator per swept tokenizer: upstream: tok_{model.n_scales}
                rest["upstream"] = _PLACEHOLDER.sub(lambda m: str(values[m[1]]).lower() if m[1] in values else m[0],  # noqa: B023
                                                    rest["upstream"])
            out.append({**rest, "id": exp_id, "overrides": {**entry.get("overrides", {}), **values}})
    return out


def resolve(config: dict, source: str = "config") -> dict[str, dict]:
    """``{id: {"id", "model", "train", "eval", "seeds", "evals"}}`` with sweeps expanded and bases and
    overrides applied. ``evals`` is inherited from the base unless set; ``seeds`` belongs to the entry
    (default [0]), so extra seeds of a reference row do not multiply the ablations built on it."""
    entries: dict[str, dict] = {}
    for entry in expand_sweeps(config["experiments"], source):
        if entry["id"] in entries:
            raise ConfigError(f"{source}: experiments: id {entry['id']!r} appears twice; ids must be unique")
        entries[entry["id"]] = entry

    def chain(exp_id: str) -> list[dict]:
        seen, out = [], []
        while exp_id is not None:
            if exp_id not in entries:
                raise ConfigError(f"{source}: experiments[{out[-1]['id']}]: base {exp_id!r} is not an experiment id")
            if exp_id in seen:
                raise ConfigError(f"{source}: experiments[{seen[0]}]: base chain {' -> '.join(seen + [exp_id])} "
                                  "is a cycle")
            seen.append(exp_id)
            out.append(entries[exp_id])
            exp_id = entries[exp_id].get("base")
        return out[::-1]

    resolved = {}
    for exp_id in entries:
        lineage = chain(exp_id)
        settings = {s: copy.deepcopy(config["defaults"][s]) for s in SECTIONS}
        inherited = {"evals": ["ppl"], "paper": DEFAULT_PAPER, "upstream": None, "data": config["corpus"]["id"]}
        for entry in lineage:
            for key, value in entry.get("overrides", {}).items():
                try:
                    _set_dotted(settings, key, value)
                except ConfigError as e:
                    raise ConfigError(f"{source}: experiments[{entry['id']}].overrides: {e}") from None
            inherited = {key: entry.get(key, value) for key, value in inherited.items()}
        try:  # every training setting written out, the typed defaults included (trainer/config.py)
            settings["train"] = TrainConfig.resolve(settings["train"])
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{source}: experiments[{exp_id}]: {e}") from None
        seeds = entries[exp_id].get("seeds", [0])
        resolved[exp_id] = {"id": exp_id, **settings, "seeds": list(seeds), "evals": list(inherited["evals"]),
                            "paper": inherited["paper"], "upstream": inherited["upstream"], "data": inherited["data"]}
        if inherited["data"] not in datasets(config, source):
            raise ConfigError(f"{source}: experiments[{exp_id}]: data {inherited['data']!r} is not a dataset; use the "
                              f"corpus id {config['corpus']['id']!r} or an id of datasets "
                              f"({', '.join(config.get('datasets', {})) or 'none'})")
    for exp in resolved.values():
        _attach_upstream(exp, resolved, source)
    return resolved


def _upstream_model(up: dict, field: str, arch: str, spec_name: str, resolved: dict, source: str, chain: tuple) -> dict:
    """The model settings an upstream experiment hands down: a ``arch`` run (NCM's tokenizer) gives its
    own; an earlier stage of the same model (NCM's generator on target-side text) gives its ``field``."""
    if up["model"].get("arch") == spec_name:
        if up["id"] in chain:
            raise ConfigError(f"{source}: experiments[{up['id']}]: upstream chain {' -> '.join(chain + (up['id'],))} "
                              "is a cycle")
        _attach_upstream(up, resolved, source, chain + (up["id"],))
        return up["model"][field]
    return up["model"]


def _attach_upstream(exp: dict, resolved: dict, source: str, chain: tuple = ()) -> None:
    """An experiment trained on top of another run (``upstream: <id>``): the upstream's first seed is
    the run it builds on (one frozen stage-1 model shared by every seed of stage 2, as NCM trains one
    tokenizer), and the model field the registry names (NCM: ``model.tokenizer``) receives the
    upstream's model settings. ``exp["upstream"]`` becomes ``{"experiment", "seed"}``."""
    from models.registry import get_spec

    where = f"{source}: experiments[{exp['id']}]"
    try:
        spec = get_spec(exp["model"].get("arch", ""))
    except ValueError:
        spec = None  # an unknown arch is reported by the semantic checks
    up_id = exp["upstream"]
    if isinstance(up_id, dict):  # attached already (an earlier stage, reached from a later one)
        return
    if up_id is None:
        if spec is not None and spec.upstream is not None:
            raise ConfigError(f"{where}: model.arch={spec.name} trains on top of a {spec.upstream[1]} run; set "
                              f"upstream: <id of a {spec.upstream[1]} experiment>")
        return
    if up_id not in resolved:
        raise ConfigError(f"{where}: upstream {up_id!r} is not an experiment id; name the "
                          f"{spec.upstream[1] if spec and spec.upstream else 'stage-1'} experiment it builds on")
    if spec is None or spec.upstream is None:
        raise ConfigError(f"{where}: upstream: model.arch={exp['model'].get('arch')} does not build on another run; "
                          "drop upstream (only archs such as ncm take one)")
    field, arch = spec.upstream
    upstream = resolved[up_id]
    if upstream["model"].get("arch") not in (arch, spec.name):
        raise ConfigError(f"{where}: upstream {up_id!r} has model.arch={upstream['model'].get('arch')}; "
                          f"{spec.name} builds on a {arch} run or on an earlier {spec.name} run")
    handed = _upstream_model(upstream, field, arch, spec.name, resolved, source, chain + (exp["id"],))
    if exp["model"].get(field) is not None:
        raise ConfigError(f"{where}: model.{field} is set, and upstream {up_id!r} fills it with that run's model "
                          f"settings; drop the model.{field} override")
    window = exp["model"].get("seq_len", 0) - exp["model"].get("prefix_len", 0)
    if handed.get("seq_len") != window:
        raise ConfigError(f"{where}: upstream {up_id!r} has a window of {handed.get('seq_len')} tokens and this "
                          f"experiment's target window is {window} (model.seq_len - model.prefix_len); give both the "
                          "same window (on paired data: set model.prefix_len to the dataset's source_len) or build on "
                          "another upstream")
    exp["model"][field] = copy.deepcopy(handed)
    exp["upstream"] = {"experiment": up_id, "seed": upstream["seeds"][0]}


def _check_semantics(config: dict, exp: dict) -> None:
    from models.registry import get_spec, model_config
    from trainer.train import world_size_problem

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
    unknown = sorted(set(train.get("loss_weights", {})) - set(spec.build.loss_names(typed)))
    if unknown:
        raise ConfigError(f"train.loss_weights.{unknown[0]}: {model['arch']} has no loss {unknown[0]!r}; "
                          f"its losses are {', '.join(spec.build.loss_names(typed))}")
    weights = {name: train.get("loss_weights", {}).get(name, 1.0)
               for name in getattr(spec.build, "trained_losses", spec.build.loss_names)(typed)}
    if not any(weights.values()):
        raise ConfigError(f"train.loss_weights: every loss {model['arch']} computes under these model settings "
                          f"weighs 0 ({weights}), so nothing trains; "
                          "give one a positive weight (or switch a loss back on)")
    if train.get("init_from") and model["arch"] not in INIT_FROM_ARCHS:
        raise ConfigError(f"train.init_from: a LlamaForCausalLM loads into {' and '.join(INIT_FROM_ARCHS)} only, "
                          f"not model.arch={model['arch']}; drop init_from or use a Llama arch")
    if train.get("parallel") == "fsdp":
        from trainer.distributed import fsdp_problem

        problem = fsdp_problem(spec.build, typed)
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
    from evals.genppl.sample import parse_eval, sampler_kind, truncates
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
        from evals.mechanisms import applies

        if not applies(arch):
            raise ConfigError(f"evals: mechanisms checks a concept path and model.arch={arch} has none; drop "
                              "'mechanisms' or use a conceptlm_*, contextlm_*, dlcm_*, ncm_tokenizer or ncm arch")
    if "recon" in evals and arch not in NCM_ARCHS:
        raise ConfigError(f"evals: recon measures an NCM tokenizer's reconstruction and model.arch={arch} has none; "
                          "drop 'recon' or use arch ncm_tokenizer / ncm")
    generative = {name: parse_eval(name) for name in evals if find(name).name == "genppl"}
    if not generative:
        return
    kind = sampler_kind(spec.build)
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
    source_len + target_len; token LMs, ncm and mdlm_* take the source as a prefix, ``model.prefix_len``
    = source_len) or as its targets only (model.seq_len = target_len); the main corpus has no source."""
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
    from evals.genppl.sample import sampler_kind

    kind = sampler_kind(spec.build)
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


LAW_DEFAULTS = {"holdout": [], "fit_from": 0.2, "n_boot": 200, "identify_rel_tol": 0.25, "identify_draws": 3}


def scaling_laws(config: dict, experiments: dict, source: str = "config") -> dict[str, dict]:
    """The profile's ``scaling_laws`` by id with defaults filled in and their grids resolved to experiment
    ids (patterns expanded in profile order): ``{"paper", "law", "experiments", "holdout", "fit_from",
    "n_boot"}``. Each grid experiment needs the ``boundaries`` evaluation (N, P, R of its runs)."""
    from fnmatch import fnmatchcase

    from evals.scaling_law import grid_problem

    laws = {}
    for law_id, entry in config.get("scaling_laws", {}).items():
        where = f"{source}: scaling_laws.{law_id}"
        if law_id in experiments:
            raise ConfigError(f"{where}: the id is an experiment's; a law writes results/runs/<id>/: rename it")
        grid = [e for e in experiments if any(fnmatchcase(e, pattern) for pattern in entry["experiments"])]
        unmatched = [p for p in entry["experiments"] if not any(fnmatchcase(e, p) for e in experiments)]
        if unmatched:
            raise ConfigError(f"{where}.experiments: {unmatched[0]!r} names no experiment of the profile")
        lacking = [e for e in grid if "boundaries" not in experiments[e]["evals"]]
        if lacking:
            raise ConfigError(f"{where}.experiments: {lacking[0]} has no boundaries evaluation, which gives the law "
                              "its N, P and R; add boundaries to its evals")
        stray = [e for e in entry.get("holdout", []) if e not in grid]
        if stray:
            raise ConfigError(f"{where}.holdout: {stray[0]} is not in the law's grid")
        fitted = [e for e in grid if e not in entry.get("holdout", [])]
        problem = grid_problem(_law_shape(experiments[e]["model"]) for e in fitted)
        if problem:
            raise ConfigError(f"{where}.experiments: {problem} (the runs left after the hold-out, counted from "
                              "their weight matrices); add experiments or hold fewer out")
        fit_from = entry.get("fit_from", LAW_DEFAULTS["fit_from"])
        from trainer.metrics import validation_tokens

        tokens = {e: validation_tokens(experiments[e], fit_from) for e in fitted}
        n_d, n_points = (len(set().union(*tokens.values())),
                         sum(len(t) * len(experiments[e]["seeds"]) for e, t in tokens.items()))
        if n_d < 3 or n_points <= 11:
            raise ConfigError(f"{where}: the fitted runs log {n_points} validation losses at {n_d} token count(s) from "
                              f"fit_from={fit_from:g} of training on; the law needs 3 token counts and 12 points: "
                              "lower train.eval_interval of the grid's runs or fit_from")
        laws[law_id] = {**LAW_DEFAULTS, **entry, "experiments": grid}
    return laws


def _law_shape(model: dict) -> tuple[float, float, float]:
    """(N, P, R) of a DLCM experiment from its weight matrices (``models.dlcm.matrix_params``; biases and
    norms left out): enough to tell whether a law's grid varies what the law needs."""
    from models.dlcm import matrix_params
    from models.registry import model_config

    _, cfg = model_config({k: v for k, v in model.items() if k != "seq_len"}, vocab_size=257, seq_len=model["seq_len"])
    m = matrix_params(cfg)
    n = m["token_side"] + m["concept"]
    return float(n), m["concept"] / n, float(cfg.target_ratio)


def kernel_benchmarks(config: dict, taken: dict, source: str = "config") -> dict[str, dict]:
    """The profile's ``kernel_benchmarks`` by id with defaults filled in (``evals.kernel_latency``): each a
    result folder of its own, ``results/runs/<id>/seed0/eval/kernel.json``; ``taken``: the ids of the
    experiments and scaling laws, which it may not reuse."""
    from evals.kernel_latency import KERNEL_DEFAULTS, row_id

    kernels = {}
    for kernel_id, entry in config.get("kernel_benchmarks", {}).items():
        where = f"{source}: kernel_benchmarks.{kernel_id}"
        if kernel_id in taken:
            raise ConfigError(f"{where}: the id is an experiment's or a law's; "
                              "a benchmark writes results/runs/<id>/: rename it")
        settings = {**KERNEL_DEFAULTS, **entry}
        for i, row in enumerate(settings["rows"]):
            if row["hidden"] % settings["heads"]:
                raise ConfigError(f"{where}.rows[{i}].hidden: {row['hidden']} is not divisible by heads "
                                  f"{settings['heads']}; pick a multiple")
        ids = [row_id(row["seq_len"], row["hidden"]) for row in settings["rows"]]
        if len(set(ids)) < len(ids):
            raise ConfigError(f"{where}.rows: {max(ids, key=ids.count)} is listed twice; drop one")
        kernels[kernel_id] = settings
    return kernels


def genppl_settings(config: dict) -> dict:
    """The profile's ``genppl`` section with its defaults filled in (``evals.genppl.sample.SETTINGS_DEFAULTS``)."""
    from evals.genppl.sample import with_defaults

    return with_defaults(config.get("genppl", {}))


def local_tasks(config: dict, source: str = "config") -> dict | None:
    """The profile's local copies of real tasks (``local_tasks``): ``{task: {path, format, ...}}`` with
    absolute paths (``evals.tasks.local_data.read_config``); None without ``local_tasks``."""
    entry = config.get("local_tasks")
    if entry is None:
        return None
    from evals.harness.errors import HarnessError
    from evals.tasks.local_data import read_config

    if not Path(entry["manifest"]).is_file():
        raise ConfigError(f"{source}: local_tasks.manifest: {entry['manifest']} not found (relative paths are to the "
                          "working directory); give the path of a local-data manifest (evals/tasks/local_data.yaml)")
    try:
        return read_config(entry["manifest"], entry.get("root"))
    except HarnessError as error:
        raise ConfigError(f"{source}: local_tasks: {error}") from None


def _check_local_tasks(config: dict, experiments: dict, source: str) -> None:
    """Every local copy exists and matches its sha256, and each real-task evaluation an experiment lists has
    at least one task with a copy: found now, not when the evaluation job starts."""
    local = local_tasks(config, source)
    if local is None:
        return
    from evals.harness.errors import HarnessError
    from evals.harness.suites import load_suites
    from evals.tasks.local_data import verify

    try:
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
            from models.hf_gpt2 import gpt2_mismatch
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


def _leaves(tree, prefix: str = ""):
    """(dotted key, value) of every leaf of nested mappings."""
    for key, value in tree.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def datasets(config: dict, source: str = "config") -> dict[str, dict]:
    """Every dataset of the profile by id: the main corpus (``corpus``, ``tokenizer``; no layout) and each
    entry of ``datasets`` (paired examples). Each is ``{"corpus" (with its id), "tokenizer" (the
    mapping), "tokenizer_of" (the dataset whose tokenizer file it uses: itself, or the one it names),
    "layout" (None for the main corpus)}``; ``results/data/<id>/`` holds its files."""
    main = config["corpus"]["id"]
    out = {main: {"corpus": config["corpus"], "tokenizer": config["tokenizer"], "tokenizer_of": main, "layout": None}}
    entries = config.get("datasets", {})
    for ds_id, entry in entries.items():
        where = f"{source}: datasets.{ds_id}"
        if ds_id in (main, "corpus"):
            raise ConfigError(f"{where}: the id {ds_id!r} names the main corpus; give the paired dataset another id")
        tok, of = entry["tokenizer"], ds_id
        if isinstance(tok, str):
            if tok in (main, "corpus"):
                tok, of = config["tokenizer"], main
            elif tok in entries and isinstance(entries[tok]["tokenizer"], dict):
                tok, of = entries[tok]["tokenizer"], tok
            else:
                raise ConfigError(f"{where}.tokenizer: {tok!r} is not a dataset with its own tokenizer; name the main "
                                  f"corpus (corpus, or its id {main}), a dataset whose tokenizer is a mapping, or give "
                                  "a mapping")
        out[ds_id] = {"corpus": {"id": ds_id, **entry["corpus"]}, "tokenizer": tok, "tokenizer_of": of,
                      "layout": dict(entry["layout"])}
    return out


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


def explicit_model(model: dict) -> dict:
    """The model settings with every default of the registry's config written out, so that a
    default changed in code changes the run's config hash (and Snakemake re-runs it); a diagnostic switch
    left off is not (``models.fields.written_out``)."""
    from models.fields import written_out
    from models.registry import model_config

    fields = {k: v for k, v in model.items() if k != "seq_len"}
    _, typed = model_config(fields, vocab_size=257, seq_len=model["seq_len"])  # vocab comes from the data
    return {"arch": model["arch"], **{f.name: getattr(typed, f.name) for f in dataclasses.fields(typed)
                                      if f.name != "vocab_size" and written_out(f, getattr(typed, f.name))}}


def run_config(config: dict, exp_id: str, seed: int) -> dict:
    """The full settings of one training run: what its config hash covers (with ``upstream``: the
    experiment and seed of the run it builds on). The ``eval`` settings are not among them: the DAG hands
    them to the evaluations (``eval.batch_size``: lm-eval's batch), so editing them re-trains nothing."""
    from models.registry import get_spec

    experiments = resolve(config)
    if exp_id not in experiments:
        raise ConfigError(f"unknown experiment {exp_id!r}; the profile defines {sorted(experiments)}")
    exp = experiments[exp_id]
    data = datasets(config)[exp["data"]]
    run = {"id": exp_id, "seed": seed, "corpus": data["corpus"], "tokenizer": data["tokenizer"],
           **{s: exp[s] for s in TRAINING}, "model": explicit_model(exp["model"])}
    if data["layout"] is not None:  # paired examples: source_len + target_len tokens per window
        run["layout"] = dict(data["layout"])
    if exp["upstream"] is not None:  # the stage-1 run this one builds on, and its model with every default
        field = get_spec(exp["model"]["arch"]).upstream[0]
        run["model"][field] = explicit_model(exp["model"][field])
        run["upstream"] = dict(exp["upstream"])
    return run


if __name__ == "__main__":
    raise SystemExit(main())
