"""A profile's entries resolved: experiments (sweeps expanded, bases and overrides applied, the typed train
defaults written out, upstream runs attached), datasets, scaling laws, kernel benchmarks, Gen. PPL and local
task settings, and a run's config (``run_config``: what its hash covers). An experiment is ``{id, base,
overrides, seeds, evals}``; its settings are the profile's ``defaults`` (model / train / eval), then its
base's overrides (recursively), then its own (dotted keys such as ``model.n_layer: 6``); a ``sweep`` entry
stands for one experiment per listed value. Neither ``evals`` nor the ``eval`` settings are part of a
run's settings, so changing them never re-trains."""
from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path


from evals.config import EvalConfig
from trainer.config import TrainConfig
from workflows.load import ConfigError


SECTIONS = ("model", "train", "eval")


TRAINING = ("model", "train")  # the sections of a run's config and hash; ``eval`` is read by the evaluations only


PAPERS = ("conceptlm", "ncm", "dlcm")


DEFAULT_PAPER = "conceptlm"


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

    _check_defaults(config["defaults"], source)
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
            EvalConfig.of(settings["eval"])  # checked; written as given (evals/config.py)
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


def _check_defaults(defaults: dict, source: str) -> None:
    """A wrong key or value in ``defaults.train`` or ``defaults.eval`` is named there, where it was written,
    not at the first experiment that inherits it (a setting the defaults leave to the experiments is not
    missing here: each experiment is checked whole)."""
    for section, typed in (("train", TrainConfig), ("eval", EvalConfig)):
        try:
            typed.of(defaults[section])
        except (ValueError, TypeError) as e:
            if not str(e).endswith("is required; set it"):
                raise ConfigError(f"{source}: defaults: {e}") from None


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


def entry_kinds(config: dict, experiments: dict, source: str = "config") -> dict[str, dict[str, dict]]:
    """``{evaluation name: {id: settings}}``: each entry kind's profile section (``evals/registry.py``,
    ``ENTRY_KINDS``: ``scaling_laws``, ``kernel_benchmarks``) resolved by its own resolver. Each id writes
    ``results/runs/<id>/``, so it may be no experiment's and no other entry's."""
    import importlib

    from evals.registry import ENTRY_KINDS

    taken, out = {e: "an experiment's" for e in experiments}, {}
    for evaluation in ENTRY_KINDS:
        kind = evaluation.kind
        section = config.get(kind.section) or {}
        if not section:
            out[evaluation.name] = {}
            continue
        for entry_id in section:
            if entry_id in taken:
                raise ConfigError(f"{source}: {kind.section}.{entry_id}: the id is {taken[entry_id]}; each entry "
                                  "writes results/runs/<id>/: rename it")
        module, _, function = kind.resolver.partition(":")
        out[evaluation.name] = getattr(importlib.import_module(module), function)(
            section, experiments, f"{source}: {kind.section}")
        taken.update({entry_id: f"{kind.section}.{entry_id}'s too" for entry_id in section})
    return out


@dataclasses.dataclass(frozen=True)
class Entry:
    """What a profile declares that writes results: a training experiment, or an entry of an entry kind's
    section (a scaling law's fit, a kernel benchmark: ``evals/registry.py``, ``ENTRY_KINDS``). Each writes
    ``results/runs/<id>/seed<k>/eval/<name>.json`` for its seeds and result names; the Snakefile's targets
    and rules, the index the tables read (``result_index``) and the coverage of other profiles all come
    from here."""
    id: str
    kind: str                       # "experiment", or the evaluation an entry kind writes ("law", "kernel")
    paper: str
    seeds: tuple[int, ...]
    results: tuple[str, ...]        # evaluation names (evals/registry.py)
    settings: dict                  # the resolved experiment, law or benchmark

    def result_files(self, runs: str) -> list[str]:
        return [f"{runs}/{self.id}/seed{seed}/eval/{name}.json" for seed in self.seeds for name in self.results]


def as_entries(experiments: dict, kinds: dict[str, dict[str, dict]]) -> dict[str, Entry]:
    """The resolved experiments, then each entry kind's entries (``entry_kinds``), as entries; ids are unique
    across them (``entry_kinds`` refuses a taken one)."""
    out = {e: Entry(e, "experiment", exp["paper"], tuple(exp["seeds"]), tuple(exp["evals"]), exp)
           for e, exp in experiments.items()}
    for name, section in kinds.items():
        out.update({i: Entry(i, name, s["paper"], (0,), (name,), s) for i, s in section.items()})
    return out


def entries(config: dict, source: str = "config") -> dict[str, Entry]:
    """Every entry of a checked profile."""
    experiments = resolve(config, source)
    return as_entries(experiments, entry_kinds(config, experiments, source))


def result_index(entries: dict[str, Entry]) -> dict[str, list[str]]:
    """``{"<id>/seed<k>": [result names]}``: what the tables may read of a profile (nothing else reaches them)."""
    return {f"{e.id}/seed{seed}": list(e.results) for e in entries.values() for seed in e.seeds}


def genppl_settings(config: dict) -> dict:
    """The profile's ``genppl`` section with its defaults filled in (``evals.registry.SETTINGS_DEFAULTS``)."""
    from evals.registry import with_defaults

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


def run_config(config: dict, exp_id: str, seed: int, experiments: dict[str, dict] | None = None) -> dict:
    """The full settings of one training run: what its config hash covers (with ``upstream``: the
    experiment and seed of the run it builds on). The ``eval`` settings are not among them: the DAG hands
    them to the evaluations (``eval.batch_size``: lm-eval's batch), so editing them re-trains nothing.
    ``experiments``: ``resolve(config)`` where the caller holds it (the DAG asks once per run, not once per
    run and experiment)."""
    from models.registry import get_spec

    experiments = resolve(config) if experiments is None else experiments
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
