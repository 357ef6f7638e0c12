"""Smoke mode: a full-scale profile's whole DAG, every rule, experiment kind and evaluation, on a 2-core
CPU in minutes, before the first real run on a GPU node.

``python -m workflows.smoke PROFILE... [--run]`` writes, per profile, to ``results/smoke/<profile>-smoke/``:

* ``profile.yaml``: the profile shrunk by the rule below, named ``<profile>-smoke`` (its results go to
  ``results/<profile>-smoke/``), everything else as the profile says: model families, experiment kinds,
  evaluations, ``precision``, ``compile``, ``parallel`` and ``init_from``;
* ``hub/``: a Hugging Face hub cache holding, under the hub names the profile uses, small random
  stand-ins: its pretrained tokenizers (a byte-level BPE of ``VOCAB`` tokens trained on synthetic text), its
  Gen. PPL judges (a 2-layer GPT-2 with that tokenizer) and its ``init_from`` checkpoint (a Llama of the
  shrunk shape); the jobs load them by name through ``transformers`` offline, as they load the real ones.
  A tokenizer, judge or checkpoint given as a local folder gets the same stand-in in a folder of its own;
* ``datasets/``: per hub corpus or paired set, a local copy in the hub's layout (``<split>.jsonl`` with the
  dataset's own fields) read through ``corpus.hf.mirror`` / ``pairs.mirror``, i.e. by the same
  ``datasets.load_dataset`` call; a local corpus file gets a stand-in at a path of its own;
* ``tasks/``: a ``local_tasks`` manifest with a few documents of every lm-eval task of the profile's
  suites that has a local format (``evals/tasks/local_data.py``); the others are reported unavailable.

``--run`` then runs Snakemake on each (``workflows/profiles/local``; every run trains on 2 gloo processes
under torchrun, DDP or the profile's FSDP) and checks that every paper table of the profile has its cells
filled (``results/smoke/summary.json``).

The shrink rule: per width field (``d_model``, ``d_concept``, ``mlp_hidden``, ``concept_mlp_hidden``) the
profile's distinct values, in order, become 32, 48, 64, ... (sizes stay distinct and ordered: a law's
points stay apart, swept ids unique; a base, upstream, law grid or judge naming a renamed run follows it);
every head or segment count 2, grouped key/value heads 1; depths, ratios, schedules, code books and chunk
sizes stay; a window on a document stream at most ``SEQ`` tokens (a paired set's layout fixes its window: it stays); one
seed per
experiment. Training (``_train_value``): ``STEPS`` steps of 2 micro-batches of 2 sequences per process, a
log line and a validation every step, a checkpoint and a weight snapshot (where the profile takes them)
every 2; in defaults, overrides and sweeps alike, as evaluation sizes (``EVAL``). Data: ``DOCS`` documents
per split, ``PAIRS`` pairs, ``BOARDS`` Sudoku boards per tier; evaluation: 4 windows, samples, examples or
task documents. A kernel benchmark times its smallest row only. What the rule leaves invalid is refused
with the profile check's one line, naming the key, before any job.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from common.errors import ReproError, entry_point
from tables.build import NOT_MEASURED, NOT_RUN, RESULTS_MISSING
from workflows.experiments import ConfigError, _read_yaml, expand_sweeps, resolve, validate, with_parents

ROOT = Path(__file__).resolve().parents[1]
WIDTHS = ("d_model", "d_concept", "mlp_hidden", "concept_mlp_hidden")
HEADS = ("n_head", "concept_heads", "n_segments")
KV_HEADS = ("n_kv_head", "concept_kv_heads")
SEQ = 256
STEPS = 4
MICRO = 2
DOCS = {"train": 400, "valid": 40, "test": 40}
PAIRS = {"train": 64, "valid": 8, "test": 8}
BOARDS = {"train": 16, "valid": 4, "test": 4}
VOCAB = 512
EOT = "<|endoftext|>"
SUFFIX = {"cpu": "smoke", "cuda": "smoke-gpu"}  # the results folder: results/<profile>-<suffix>/
GPU_SLOTS = 4  # smoke jobs at a time on one GPU
PROCESSES = {"cpu": 2, "cuda": 1}  # training processes per run: DDP / FSDP on 2 gloo ranks; one on the GPU


class SmokeError(ReproError, ValueError):
    """A profile smoke mode cannot shrink or stand in for."""


# --- the shrink rule ----------------------------------------------------------------------------------
def ladder(config: dict) -> dict[str, dict[int, int]]:
    """Per width field, the profile's distinct values (defaults, overrides, sweeps) in order -> 32, 48, 64, ...:
    sizes stay distinct and ordered (a scaling law's points stay apart, swept ids stay unique)."""
    found: dict[str, set[int]] = {field: set() for field in WIDTHS}

    def note(field, value):
        if field in found and isinstance(value, int) and not isinstance(value, bool):
            found[field].add(value)

    for field, value in config["defaults"]["model"].items():
        note(field, value)
    for entry in config.get("experiments", []):
        for key, value in (entry.get("overrides") or {}).items():
            note(key.removeprefix("model."), value)
        for key, values in (entry.get("sweep") or {}).items():
            for value in values if isinstance(values, list) else []:
                note(key.removeprefix("model."), value)
    return {field: {v: 32 + 16 * i for i, v in enumerate(sorted(values))} for field, values in found.items()}


def shrink_model(model: dict, widths: dict[str, dict[int, int]], prefix: str = "", paired: bool = False) -> dict:
    """Model settings (keys ``<prefix><field>``) under the shrink rule; values that are not plain numbers
    (relative ``+2``, None) stay."""
    out = dict(model)
    for key, value in model.items():
        field = key[len(prefix):] if key.startswith(prefix) else None
        if field is None or isinstance(value, bool) or not isinstance(value, int):
            continue
        if field in WIDTHS:
            out[key] = widths[field][value]
        elif field in HEADS:
            out[key] = 2
        elif field in KV_HEADS:
            out[key] = 1
        elif field == "seq_len" and not paired:
            out[key] = min(value, SEQ)
    return out


def _train_value(key: str, value, procs: int):
    """A training setting under the rule: ``STEPS`` steps of 2 micro-batches of ``MICRO`` sequences per
    process, a log line and a validation every step, a checkpoint and a weight snapshot (where the profile
    takes them) every 2; the rest (precision, compile, parallel, init_from, lr and its schedule's shape) as
    given."""
    fixed = {"steps": STEPS, "batch_size": 2 * MICRO * procs, "micro_batch_size": MICRO, "eval_interval": 1,
             "log_interval": 1, "checkpoint_interval": 2, "eval_batches": 1, "warmup_steps": 1}
    if key == "snapshot_interval":
        return 2 if value else value  # DLCM's boundaries over training still read snapshots
    return fixed.get(key, value)


EVAL = {"batch_size": 2, "limit": 4}  # evaluation: a few windows, documents, samples per task


def _value(key: str, value, widths: dict, paired: bool, procs: int):
    """A dotted setting (``model.*``, ``train.*``, ``eval.*``) of an override or a sweep under the rule."""
    section, _, field = key.partition(".")
    if section == "model":
        return shrink_model({field: value}, widths, paired=paired)[field]
    if section == "train":
        return _train_value(field, value, procs)
    if section == "eval":
        return EVAL.get(field, value)
    return value


def shrink_train(train: dict, procs: int) -> dict:
    """Training defaults under the rule (``_train_value``)."""
    out = {key: _train_value(key, value, procs) for key, value in train.items()}
    return {**out, **{key: _train_value(key, None, procs) for key in
                      ("steps", "batch_size", "micro_batch_size", "eval_interval", "log_interval",
                       "checkpoint_interval", "eval_batches", "warmup_steps")}}


def _shrink_entry(entry: dict, widths: dict, paired: bool, procs: int, out: Path) -> dict:
    entry = copy.deepcopy(entry)
    if "overrides" in entry:
        entry["overrides"] = {key: _value(key, value, widths, paired, procs)
                              for key, value in (entry["overrides"] or {}).items()}
        if isinstance(entry["overrides"].get("train.init_from"), str):
            entry["overrides"]["train.init_from"] = _local_checkpoint(entry["overrides"]["train.init_from"], out)
    if entry.get("seeds"):
        entry["seeds"] = entry["seeds"][:1]
    for key, values in (entry.get("sweep") or {}).items():
        if isinstance(values, list):
            entry["sweep"][key] = [_value(key, v, widths, paired, procs) for v in values]
    return entry


def renamed(before: list[dict], after: list[dict]) -> dict[str, str]:
    """The experiment ids a sweep names by a shrunk value: original id -> smoke id."""
    pairs = zip(expand_sweeps(copy.deepcopy(before)), expand_sweeps(copy.deepcopy(after)))
    return {old["id"]: new["id"] for old, new in pairs if old["id"] != new["id"]}


def _paired(entry: dict, by_id: dict, datasets: dict) -> bool:
    """Whether an experiment trains on a paired set (``data``, its own or a ``base``'s): its window stays."""
    seen = set()
    while entry is not None and entry["id"] not in seen:
        if entry.get("data"):
            return "pairs" in datasets.get(entry["data"], {}).get("corpus", {}) or \
                "sudoku" in datasets.get(entry["data"], {}).get("corpus", {})
        seen.add(entry["id"])
        entry = by_id.get(entry.get("base"))
    return False


def shrink(config: dict, out: Path, device: str = "cpu") -> dict:
    """The merged profile ``config`` (``extends`` applied) shrunk by the rule, its hub corpora, local files and
    real tasks pointed at the stand-ins under ``out`` (written by ``write_standins``); named for ``device``
    (results of a CPU and of a GPU smoke run never mix)."""
    config = copy.deepcopy(config)
    procs = PROCESSES[device]
    config["description"] = f"smoke mode of {config['profile']} on {device} (workflows/smoke.py)"
    config["profile"] = f"{config['profile']}-{SUFFIX[device]}"
    config["scale"] = "reduced"  # values are never judged at the paper's scale here
    config["corpus"] = _shrink_corpus(config["corpus"], out)
    config["tokenizer"] = _local_tokenizer(config["tokenizer"], out)
    for ds_id, ds in (config.get("datasets") or {}).items():
        ds["corpus"] = _shrink_pairs(ds_id, ds["corpus"], out)
        if "tokenizer" in ds:
            ds["tokenizer"] = _local_tokenizer(ds["tokenizer"], out)
    defaults = config["defaults"]
    widths = ladder(config)
    defaults["model"] = shrink_model(defaults["model"], widths)
    defaults["train"] = shrink_train(defaults["train"], procs)
    if isinstance(defaults["train"].get("init_from"), str):
        defaults["train"]["init_from"] = _local_checkpoint(defaults["train"]["init_from"], out)
    defaults["eval"] = {**defaults.get("eval", {}), **EVAL}
    by_id = {e["id"]: e for e in config.get("experiments", [])}
    original, datasets = config.get("experiments", []), config.get("datasets") or {}
    config["experiments"] = [_shrink_entry(e, widths, _paired(e, by_id, datasets), procs, out) for e in original]
    ids = renamed(original, config["experiments"])
    for entry in config["experiments"]:  # references to an id the rule renamed
        for key in ("base", "upstream"):
            if entry.get(key) in ids:
                entry[key] = ids[entry[key]]
    if "genppl" in config:
        config["genppl"].update(samples=4, batch_size=2, judge_batch_size=2)
        config["genppl"]["judges"] = [_local_judge(ids.get(j, j), out) for j in config["genppl"].get("judges", [])]
    config["conditional"] = {**config.get("conditional", {}), "examples": 4, "batch_size": 2}
    for law in (config.get("scaling_laws") or {}).values():
        law.update(n_boot=2, identify_draws=1)
        for key in ("experiments", "holdout"):
            if isinstance(law.get(key), list):
                law[key] = [ids.get(i, i) for i in law[key]]
    for bench in (config.get("kernel_benchmarks") or {}).values():  # the smallest row, at its size (rows are
        bench["rows"] = [min(bench["rows"], key=lambda row: (row["seq_len"], row["hidden"]))]  # named by it)
        bench.update(rounds=2, warmup=0)
    if _real_tasks(config):
        config["local_tasks"] = {"manifest": str(out / "tasks" / "manifest.yaml")}
    return config


def _shrink_corpus(corpus: dict, out: Path) -> dict:
    corpus = copy.deepcopy(corpus)
    if corpus["source"] == "hf":
        corpus["hf"].update(max_docs=dict(DOCS), mirror=str(out / "datasets" / corpus["hf"]["name"]))
    elif corpus["source"] == "local":
        local = corpus["local"]
        for split in ("train", "valid", "test"):
            if split in local:
                local[split] = str(out / "corpora" / corpus["id"] / f"{split}.jsonl")
        local.pop("sample_by", None)
        local["text_field"] = "text"
        local["carve"] = {"valid": DOCS["valid"], "test": DOCS["test"]}
    else:
        corpus.setdefault("synthetic", {}).update(train_docs=DOCS["train"], valid_docs=DOCS["valid"],
                                                   test_docs=DOCS["test"])
    return corpus


def _is_folder(name: str) -> bool:
    """A tokenizer, judge or checkpoint given as a local folder, as the jobs tell (not a hub id)."""
    from common.hub import looks_like_folder

    return looks_like_folder(name)


def _local_judge(judge: str, out: Path) -> str:
    """A Gen. PPL judge given as a local folder -> its stand-in's folder; a hub name (the hub cache) or one
    of the profile's runs (exported by the workflow) stays."""
    return str(out / "judges" / _slug(judge)) if _is_folder(judge) else judge


def _local_tokenizer(tokenizer, out: Path):
    """A pretrained tokenizer given as a local folder -> its stand-in's folder; hub names stay (the hub cache
    stands in for them)."""
    if isinstance(tokenizer, dict) and tokenizer.get("kind") == "pretrained" and _is_folder(tokenizer["name"]):
        return {**tokenizer, "name": str(out / "tokenizers" / _slug(tokenizer["name"]))}
    return tokenizer


def _local_checkpoint(source: str, out: Path) -> str:
    """An ``init_from`` given as a local folder -> its stand-in's folder; a hub name stays (the hub cache)."""
    return str(out / "checkpoints" / _slug(source)) if _is_folder(source) else source


def _slug(name: str) -> str:
    return re.sub(r"[^\w.-]+", "_", name).strip("_.")


def _shrink_pairs(ds_id: str, corpus: dict, out: Path) -> dict:
    corpus = copy.deepcopy(corpus)
    if corpus["source"] == "sudoku":
        corpus["sudoku"]["n"] = dict(BOARDS)
        corpus["sudoku"].pop("external", None)
        corpus["sudoku"].pop("external_n", None)
        return corpus
    pairs = corpus["pairs"]
    pairs["n"] = dict(PAIRS)
    if pairs["task"] in ("xsum", "wmt14_deen"):
        pairs.pop("local", None)
        pairs["mirror"] = str(out / "datasets" / pairs["task"])
    return corpus


def _real_tasks(config: dict) -> dict[str, int]:
    """The lm-eval tasks of the real-task evaluations the profile's experiments list: {task: most shots}."""
    from evals.harness.suites import load_suites
    from evals.registry import BY_NAME

    suites = load_suites()
    names = {e for exp in config.get("experiments", []) for e in exp.get("evals", [])}
    tasks: dict[str, int] = {}
    for name in names:
        spec = BY_NAME.get(name)
        for entry in suites[spec.suite]["tasks"] if spec is not None and spec.real_tasks else []:
            tasks[entry["task"]] = max(tasks.get(entry["task"], 0), entry.get("num_fewshot") or 0)
    return tasks


# --- stand-ins ----------------------------------------------------------------------------------------
def world_texts(n: int, seed: int = 0) -> list[str]:
    """``n`` documents of the synthetic world (its default settings): English-like text for every stand-in."""
    from corpora.synthetic import WorldConfig, generate_split

    docs = generate_split(WorldConfig(train_docs=n, valid_docs=1, test_docs=1), "train", seed=seed)
    return [next(docs)["text"] for _ in range(n)]


def write_standins(config: dict, out: Path, texts: list[str]) -> None:
    """Every stand-in the shrunk ``config`` reads (module docstring) but the tasks (``write_tasks``), with
    the ``texts`` of the synthetic world."""
    _write_corpus(config["corpus"], texts, out)
    for ds in (config.get("datasets") or {}).values():
        pairs = ds["corpus"].get("pairs") or {}
        if pairs.get("mirror"):
            _write_pairs(pairs["task"], Path(pairs["mirror"]), texts)
    hub, tokenizer = out / "hub", _train_tokenizer(texts)
    for name in _hub_tokenizers(config):
        _snapshot(hub, name, lambda folder: _write_tokenizer(folder, tokenizer))
    for tok in _pretrained(config):
        if _is_folder(tok["name"]):
            _folder(Path(tok["name"]), lambda folder: _write_tokenizer(folder, tokenizer))
    runs = {e["id"] for e in expand_sweeps(copy.deepcopy(config["experiments"]))}
    for judge in (config.get("genppl") or {}).get("judges", []):
        if judge in runs:
            continue
        if _is_folder(judge):
            _folder(Path(judge), lambda folder: _write_judge(folder, tokenizer))
        else:
            _snapshot(hub, judge, lambda folder: _write_judge(folder, tokenizer))
    checkpoints = {}  # init_from -> the checkpoint's shape: the shallowest of the runs it starts (the others
    for exp in resolve(validate(copy.deepcopy(config), "the smoke profile", files=False)).values():  # add layers)
        source = exp["train"].get("init_from")
        if source and (source not in checkpoints or exp["model"]["n_layer"] < checkpoints[source]["n_layer"]):
            checkpoints[source] = exp["model"]
    for source, model in checkpoints.items():
        if _is_folder(source):
            _folder(Path(source), lambda folder, model=model: _write_llama(folder, model, tokenizer))
        else:
            _snapshot(hub, source, lambda folder, model=model: _write_llama(folder, model, tokenizer))


def _write_text(path: Path, text: str) -> None:
    """Atomic, and only when the content changes: a re-run keeps the stand-ins' times, so Snakemake's time
    trigger does not rebuild a corpus from an unchanged stand-in file."""
    from common.io import atomic_write_text

    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)


def _write_jsonl(path: Path, rows) -> None:
    _write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def _write_corpus(corpus: dict, texts: list[str], out: Path) -> None:
    if corpus["source"] == "hf":
        from corpora.sources import HF_CORPORA

        spec = HF_CORPORA[corpus["hf"]["name"]]
        field = corpus["hf"].get("text_field", spec.text_field)
        mirror, start = Path(corpus["hf"]["mirror"]), 0
        carved = sum(DOCS[split] for split in DOCS if split not in spec.splits)  # cut from the head of train
        for ours, theirs in spec.splits.items():
            n = DOCS[ours] + (carved if ours == "train" else 0)
            _write_jsonl(mirror / f"{theirs}.jsonl", ({field: t} for t in texts[start:start + n]))
            start += n
    elif corpus["source"] == "local":
        start = 0
        for split in ("train", "valid", "test"):
            if split in corpus["local"]:
                _write_jsonl(Path(corpus["local"][split]), ({"text": t} for t in texts[start:start + DOCS[split]]))
                start += DOCS[split]


def _write_pairs(task: str, mirror: Path, texts: list[str]) -> None:
    from corpora.pairs import HF_PAIRS

    spec = HF_PAIRS[task]
    for i, (ours, theirs) in enumerate(spec.splits.items()):
        rows = []
        for text in texts[i * PAIRS["train"]:(i + 1) * PAIRS["train"]][:PAIRS[ours]]:
            source, target = text, " ".join(text.split()[:12])
            row: dict = {}
            for dotted, value in ((spec.source, source), (spec.target, target)):
                node = row
                *parents, leaf = dotted.split(".")
                for part in parents:
                    node = node.setdefault(part, {})
                node[leaf] = value
            rows.append(row)
        _write_jsonl(mirror / f"{theirs}.jsonl", rows)


def _pretrained(config: dict) -> list[dict]:
    """The pretrained tokenizers the profile loads (its own, its paired sets')."""
    toks = [config["tokenizer"], *(ds.get("tokenizer") for ds in (config.get("datasets") or {}).values())]
    return [tok for tok in toks if isinstance(tok, dict) and tok.get("kind") == "pretrained"]


def _hub_tokenizers(config: dict) -> set[str]:
    """The hub ids of the pretrained tokenizers the profile loads by name."""
    from corpora.tokenization import PRETRAINED

    return {PRETRAINED.get(tok["name"], tok["name"]) for tok in _pretrained(config) if not _is_folder(tok["name"])}


def _train_tokenizer(texts: list[str]):
    """A byte-level BPE of ``VOCAB`` tokens on ``texts``, with <|endoftext|>, as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOT, bos_token=EOT, unk_token=EOT, pad_token=EOT)


def _write_tokenizer(folder: Path, tokenizer) -> None:
    """A tokenizer repository: the tokenizer and a config.json (transformers' AutoTokenizer reads one)."""
    from transformers import GPT2Config

    tokenizer.save_pretrained(folder)
    GPT2Config(vocab_size=len(tokenizer), bos_token_id=tokenizer.eos_token_id,
               eos_token_id=tokenizer.eos_token_id).save_pretrained(folder)


def _folder(dest: Path, write) -> Path:
    """``write(folder)`` into a staging folder beside ``dest``, then renamed into place (nothing half-written
    is ever read as a stand-in); an unchanged stand-in keeps its folder."""
    staging = dest.with_name(f".{dest.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    write(staging)
    if dest.is_dir() and _digest(dest) == _digest(staging):
        shutil.rmtree(staging)
        return dest
    old = dest.with_name(f".{dest.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    if dest.is_dir():
        dest.rename(old)
    staging.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest


def _digest(folder: Path) -> str:
    digest = hashlib.sha1()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _snapshot(hub: Path, repo_id: str, write) -> Path:
    """``write(folder)`` into the hub cache layout of ``repo_id`` (refs/main -> snapshots/<commit>/), the commit
    a hash of the files written: a changed stand-in is a new revision, as on the hub."""
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    staged = _folder(repo / "staged", write)
    folder = repo / "snapshots" / _digest(staged)
    if folder.is_dir():
        shutil.rmtree(staged)
    else:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staged.rename(folder)
    _write_text(repo / "refs" / "main", folder.name)
    return folder


def _write_judge(folder: Path, tokenizer) -> None:
    """A random 2-layer GPT-2 with the stand-in tokenizer, in place of a Gen. PPL judge."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=1024, n_embd=32, n_layer=2, n_head=2,
                               bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
                    ).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _write_llama(folder: Path, model: dict, tokenizer) -> None:
    """A random Llama of the shrunk shape with the stand-in tokenizer, in place of an ``init_from`` checkpoint."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    rope = {"rope_type": "default", "rope_theta": model.get("rotary_base", 10000.0)}
    if model.get("rope_scaling"):
        rope = {**model["rope_scaling"], "rope_theta": model.get("rotary_base", 10000.0)}
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=model["d_model"], num_hidden_layers=model["n_layer"],
                         num_attention_heads=model["n_head"],
                         num_key_value_heads=model.get("n_kv_head") or model["n_head"],
                         intermediate_size=model.get("mlp_hidden") or 4 * model["d_model"],
                         max_position_embeddings=max(model["seq_len"],
                                                     int(rope.get("factor", 1)
                                                         * rope.get("original_max_position_embeddings", 0))),
                         rms_norm_eps=model.get("norm_eps", 1e-5),
                         rope_parameters=rope, tie_word_embeddings=False, attention_bias=bool(model.get("bias", False)),
                         mlp_bias=bool(model.get("bias", False)))
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def _task_rows(task: str, words: list[str], i: int) -> dict:
    """Row ``i`` of a stand-in for lm-eval task ``task`` in the columns of the HF dataset lm-eval loads."""
    pick = lambda k, n=6: " ".join(words[(i * 7 + k) % len(words):][:n]) or "a word"
    if task.startswith("lambada"):
        return {"text": pick(0, 12)}
    if task == "piqa":
        return {"goal": pick(0), "sol1": pick(1), "sol2": pick(2), "label": i % 2}
    if task.startswith("arc_"):
        return {"id": str(i), "question": pick(0), "choices": {"text": [pick(k) for k in range(4)],
                                                               "label": list("ABCD")}, "answerKey": "ABCD"[i % 4]}
    if task == "hellaswag":
        return {"ind": i, "activity_label": "Story", "ctx_a": pick(0), "ctx_b": "then", "ctx": pick(0) + " then",
                "endings": [pick(k) for k in range(1, 5)], "label": str(i % 4), "source_id": "", "split": "val",
                "split_type": "indomain"}
    if task == "winogrande":
        return {"sentence": pick(0) + " _ " + pick(1), "option1": pick(2, 1), "option2": pick(3, 1),
                "answer": str(1 + i % 2)}
    if task == "boolq":
        return {"question": pick(0), "passage": pick(1, 20), "label": i % 2, "idx": i}
    if task == "openbookqa":
        return {"id": str(i), "question_stem": pick(0), "choices": {"text": [pick(k) for k in range(4)],
                                                                    "label": list("ABCD")}, "answerKey": "ABCD"[i % 4]}
    if task == "wikitext":
        return {"page": f" = {pick(0, 2)} = \n\n " + pick(1, 40) + " \n"}
    raise KeyError(task)


def _write_tasks(tasks: dict[str, int], folder: Path, texts: list[str]) -> None:
    """A local_tasks manifest with rows of every task in ``tasks`` ({task: shots}) that has a local format:
    the evaluated documents and, apart from them, the few-shot examples."""
    from evals.tasks.local_data import LOCAL_TASKS

    words = " ".join(texts[:50]).split()
    entries = {}
    for task, shots in sorted(tasks.items()):
        if task in LOCAL_TASKS:
            rows = (_task_rows(task, words, i) for i in range(EVAL["limit"] + shots + 2))
            _write_jsonl(folder / f"{task}.jsonl", rows)
            entries[task] = {"path": f"{task}.jsonl", "exact": False, "note": "smoke-mode stand-in"}
    _write_text(folder / "manifest.yaml", yaml.safe_dump({"root": str(folder), "tasks": entries}, sort_keys=False))


# --- the check ----------------------------------------------------------------------------------------
NOT_THE_PROFILES = ("", NOT_RUN)  # cells with no reproduction, or rows another profile runs


def check_tables(tables: Path) -> tuple[dict[str, dict], list[str]]:
    """Per paper table of a smoke run's ``tables`` folder: its cells of rows the profile runs, how many hold a
    value, and why the others do not; and the problems (a cell whose results are missing, a table of the
    profile with no value at all)."""
    summary, problems = {}, []
    for path in sorted(tables.glob("*/table*.json")):
        records = json.loads(path.read_text())["records"]
        ours = [r for r in records if r["verdict"] not in NOT_THE_PROFILES]
        if not ours:
            continue
        filled = [r for r in ours if r["reproduced_mean"] not in ("", None)]
        empty: dict[str, int] = {}
        for r in ours:
            if r["reproduced_mean"] in ("", None):
                empty[r["verdict"]] = empty.get(r["verdict"], 0) + 1
        name = f"{path.parent.name}/{path.stem}"
        summary[name] = {"cells": len(ours), "filled": len(filled), "empty": empty}
        problems += [f"{name}: {n} cell(s): {why}" for why, n in empty.items() if why == RESULTS_MISSING]
        if not filled and set(empty) != {NOT_MEASURED}:  # quantities these runs do not measure (per-document-
            problems.append(f"{name}: none of its {len(ours)} cells of this profile's rows holds a value")  # type)
    if not summary:
        problems.append(f"{tables}: no paper table has a row this profile runs")
    return summary, problems


# --- the command --------------------------------------------------------------------------------------
def prepare(profile: Path, out: Path | None = None, device: str = "cpu") -> tuple[Path, dict]:
    """Check the profile as the workflow does, write its smoke profile and stand-ins; return (the smoke
    profile's path, its config). A profile the workflow would refuse, or one the rule leaves invalid, is a
    ``SmokeError`` (one line) before anything is written."""
    profile = Path(profile)
    try:
        original = with_parents(_read_yaml(profile), profile.parent, str(profile))
        validate(copy.deepcopy(original), str(profile), files=False)
    except ConfigError as error:
        raise SmokeError(str(error)) from None
    out = (out or ROOT / "results" / "smoke" / f"{original['profile']}-{SUFFIX[device]}").resolve()
    config, texts = shrink(original, out, device), world_texts(sum(DOCS.values()))
    tasks = _real_tasks(config)
    if tasks:  # the manifest first: the profile check reads it
        _write_tasks(tasks, out / "tasks", texts)
    try:
        validate(copy.deepcopy(config), f"{profile} in smoke mode", files=False)
    except ConfigError as error:
        raise SmokeError(f"smoke mode cannot shrink {profile}: {error}") from None
    write_standins(config, out, texts)
    validate(copy.deepcopy(config), f"{profile} in smoke mode")  # its files now exist
    config.pop("extends", None)
    path = out / "profile.yaml"
    _write_text(path, yaml.safe_dump(config, sort_keys=False))
    return path, config


def command(path: Path, config: dict, cores: int = 2, workdir: Path = ROOT, device: str = "cpu",
            targets: list[str] = ()) -> list[str]:
    """The Snakemake command line of the smoke run of ``path`` (results under ``workdir/results/``): on the
    CPU the local profile, training on ``PROCESSES`` gloo ranks; on CUDA the GPU profile with ``GPU_SLOTS``
    jobs sharing the first GPU (the shrunk models take megabytes). ``--keep-going``: one failing job does
    not hide the others'."""
    profile = ROOT / "workflows" / "profiles" / ("local" if device == "cpu" else "gpu")
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), *targets, "-d", str(workdir),
           "--cores", str(cores), "--configfile", str(path), "--profile", str(profile), "--keep-going"]
    if device != "cpu":
        return cmd + ["--resources", f"gpu={GPU_SLOTS}"]
    return cmd + ["--set-resources", f"pretrain:gpu={PROCESSES[device]}"]


def environment(out: Path, device: str = "cpu") -> dict:
    """The jobs' environment (``os.environ`` with these): the stand-in hub cache, offline, and the host's own
    CPU kernels. The AVX2 pin that makes CPU results identical across hosts (``common.provenance.HOST_PINS``)
    would refuse bf16 autocast under torch.compile on a CPU with AVX-512 (oneDNN's bf16 packing needs it); a
    smoke run's numbers are not compared across hosts. Inductor's compile cache is the smoke runs' own
    (``inductor-<device>/`` beside the profiles' folders, shared by them: a shape two profiles share compiles
    once): its key does not hold the kernel instruction set, and a kernel compiled under another one
    corrupts memory when reused."""
    import torch

    env = {"HF_HUB_CACHE": str(out / "hub"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TORCHINDUCTOR_CACHE_DIR": str(out.parent / f"inductor-{device}")}
    if device == "cpu":
        env["ATEN_CPU_CAPABILITY"] = torch.backends.cpu.get_cpu_capability().lower()
    return env


def shell_line(env: dict, cmd: list[str]) -> str:
    """What to type to run it by hand."""
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(cmd)


def run(profile: Path, out: Path | None = None, cores: int = 2, workdir: Path = ROOT, device: str = "cpu",
        targets=None) -> dict:
    """Prepare and run the smoke mode of ``profile``; return its summary (tables, problems, wall time).
    ``targets(config)``: the result files to make instead of the whole DAG (no table check then)."""
    start = time.monotonic()
    path, config = prepare(profile, out, device)
    wanted = list(targets(config)) if targets else []  # relative to the working directory
    cmd, env = command(path, config, cores, workdir, device, wanted), environment(path.parent, device)
    print(shell_line(env, cmd), flush=True)
    code = subprocess.run(cmd, cwd=ROOT, env={**os.environ, **env}).returncode
    tables, problems = {}, [f"snakemake exited with {code} (failed jobs: its log, .snakemake/log/)"] if code else []
    if not targets:
        tables, more = check_tables(workdir / "results" / config["profile"] / "tables")
        problems += more if not code else []
    return {"profile": str(profile), "smoke_profile": str(path), "results": f"results/{config['profile']}",
            "wall_s": round(time.monotonic() - start), "tables": tables, "problems": problems}


@entry_point
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workflows.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("profiles", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, default=None, help="the stand-ins' folder (one profile only)")
    parser.add_argument("--run", action="store_true", help="run Snakemake on each, check its tables")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=ROOT, help="Snakemake's working directory (results/ in it)")
    parser.add_argument("--summary", type=Path, default=None,
                        help="the runs' summary (JSON; default with --run: WORKDIR/results/smoke/summary.json)")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    if args.out and len(args.profiles) > 1:
        print("error: --out names one profile's stand-ins folder; give one profile with it", file=sys.stderr)
        return 2
    errors = []
    for profile in args.profiles:  # every profile checked before the first runs
        try:
            path, config = prepare(profile, args.out)
        except ReproError as error:
            errors.append(f"error: {error}")
            continue
        if not args.run:
            print(shell_line(environment(path.parent), command(path, config, args.cores, workdir)))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    if not args.run:
        return 0
    summaries = [run(profile, args.out, args.cores, workdir) for profile in args.profiles]
    for summary in summaries:
        print(f"{summary['profile']}: {summary['wall_s']} s, {summary['results']}")
        for name, row in summary["tables"].items():
            gaps = "; ".join(f"{n} {why[:80]}" for why, n in row["empty"].items())
            print(f"  {name}: {row['filled']} of {row['cells']} cells filled" + (f" (empty: {gaps})" if gaps else ""))
        for problem in summary["problems"]:
            print(f"error: {summary['profile']}: {problem}", file=sys.stderr)
    from common.io import atomic_write_json

    atomic_write_json(args.summary or workdir / "results" / "smoke" / "summary.json", summaries)
    return 1 if any(summary["problems"] for summary in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
