"""Reproduced numbers: result JSONs under ``results/runs/{experiment}/seed{seed}/eval/{eval}.json``.

Files follow ``config/schemas/result.schema.json`` (the foundation contract); a
file that does not is an error naming it.  A missing or empty results folder is
not an error: every cell is then "not reproduced".
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean, stdev

from common.errors import ReproError
from common.io import config_hash

from .validation import DataError, schema, validate

Metric = tuple[str, str, str]  # (experiment, eval, metric key)
RESULT_SCHEMA = Path(__file__).resolve().parents[1] / "config" / "schemas" / "result.schema.json"
_SEED = re.compile(r"^seed(\d+)$")


@dataclass(frozen=True)
class Reproduced:
    """Mean and sample standard deviation over the seeds found (std is None for one seed), the
    experiments the values came from (for a value computed by a paper's formula, those of its inputs),
    the corpora those runs were trained on (``corpus_label``) and what makes the evaluation data other
    than the paper's (a local copy that is not the canonical set, or measures another thing)."""

    per_seed: dict[int, float]
    experiments: tuple[str, ...] = ()
    corpora: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    orders: dict[int, str] = field(default_factory=dict, compare=False)  # seed -> data order (``data_order``)

    @property
    def n(self) -> int:
        return len(self.per_seed)

    @property
    def mean(self) -> float:
        return fmean(self.per_seed.values())

    @property
    def std(self) -> float | None:
        return stdev(self.per_seed.values()) if self.n > 1 else None


RUNS_INDEX = "index.json"
SYNTHETIC = "synthetic world"
PAIR_TASKS = {"translate": "synthetic translation pairs", "summary": "synthetic summary pairs"}


def corpus_label(corpus: dict) -> str:
    """What a run was trained on, as the tables name it (a run config's ``corpus``): the synthetic world,
    a Hugging Face corpus's name (openwebtext, lm1b, ...; pile-uncopyrighted for ``pile``), a local corpus's ``name``
    (default: its train
    file's stem), a pair task (xsum, wmt14_deen; the world's pairs) or generated Sudoku puzzles."""
    source = corpus.get("source")
    if source == "hf":  # the Pile is no longer distributed: its uncopyrighted part stands in (corpora/sources.py)
        return {"pile": "pile-uncopyrighted"}.get(corpus["hf"]["name"], corpus["hf"]["name"])
    if source == "local":
        return corpus["local"].get("name") or Path(corpus["local"]["train"]).stem
    if source == "pairs":
        return PAIR_TASKS.get(corpus["pairs"]["task"], corpus["pairs"]["task"])
    if source == "sudoku":
        return "generated sudoku"
    return SYNTHETIC if source == "synthetic" else "an unrecorded corpus"


def data_order(config: dict) -> str:
    """What fixes the windows a run reads and their order (``trainer.data.WindowOrder``: the seed, the
    token stream of its corpus and tokenizer, the window length and the batch): two runs with equal
    signatures saw the same data in the same order, so their seed-to-seed noise is shared (common random
    numbers) and a difference between them is tested paired.  Empty when the config does not say."""
    model, train = config.get("model") or {}, config.get("train") or {}
    parts = [config.get("seed"), config.get("corpus"), config.get("tokenizer"), model.get("seq_len"),
             train.get("batch_size")]
    if any(part is None for part in parts):
        return ""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def profile_facts(root: Path) -> dict:
    """The profile's ``scale`` (paper | reduced) and main corpus, from ``root/index.json`` (written by the
    workflow); a hand-made folder without one is taken as reduced scale."""
    index = root / RUNS_INDEX
    try:
        facts = json.loads(index.read_text()).get("profile", {}) if index.is_file() else {}
    except (json.JSONDecodeError, AttributeError) as error:
        raise DataError(index, None, "profile",
                        f"unreadable run index ({error}); re-run snakemake to rewrite it") from None
    return {"scale": "reduced", "corpus": None, **facts}


def _caveats(result: dict, key: str) -> list[str]:
    """Why the data behind ``key`` (``<task>/<metric>``) is not the canonical set: a document limit, a local
    copy that is not exact or not comparable; none for the canonical data. A result may state its own
    (``details.caveats``: what makes its measurement other than the paper's)."""
    details = result.get("details") if isinstance(result.get("details"), dict) else {}
    stated = [str(c) for c in details.get("caveats") or []]  # a result's own (evals/kernel_latency.py: device, pass)
    task = key.split("/", 1)[0]
    if task not in (details.get("tasks") or {}):
        return stated
    out = [f"lm-eval tasks limited to {details['limit']} documents each"] if details.get("limit") else []
    local = details["tasks"][task].get("local_data")
    if local and not (local.get("exact", True) and local.get("comparable", True)):
        out.append(f"{task}: local copy, {local.get('why') or 'not the canonical set'}")
    return stated + out


def run_folders(root: Path) -> list[Path]:
    """The run folders ``root/{experiment}/seed{k}`` to read: those of the profile, listed in
    ``root/index.json`` (written by the workflow's ``runs_index`` rule), so a run dropped from the
    profile is never read again; every folder found when there is no index (a hand-made folder)."""
    return sorted(listed_runs(root))


def profile_runs(root: Path) -> dict[str, list[str] | None]:
    """experiment -> the evaluations this profile runs for it (None: every one found), from the runs index; a
    listed run whose folder is gone still counts (its results are missing, not another profile's)."""
    current: dict[str, list[str] | None] = {}
    for run, evals in listed_runs(root, existing=False).items():
        known = current.get(run.parent.name, [])
        current[run.parent.name] = None if evals is None or known is None else sorted({*known, *evals})
    return current


def common_orders(seeds, inputs) -> dict[int, str]:
    """seed -> data order of a value computed from several ``Reproduced`` inputs, for the seeds where every
    input read the same data in the same order (one run's metrics; across runs, only if they share it)."""
    out = {}
    for seed in seeds:
        signatures = {reproduced.orders.get(seed, "") for reproduced in inputs}
        if len(signatures) == 1 and "" not in signatures:
            out[seed] = signatures.pop()
    return out


def first_seed_result(root: Path, experiment: str, eval_name: str) -> Path | None:
    """The result file ``eval_name`` of the lowest seed of ``experiment`` among the runs and evaluations to
    read (``listed_runs``; seed 0 when it exists), for figures that read a result's details; None when there is none."""
    by_seed: dict[int, Path] = {}
    for run, evals in listed_runs(root).items():
        path = run / "eval" / f"{eval_name}.json"
        seed = run.name.removeprefix("seed")
        if (run.parent.name == experiment and path.is_file() and seed.isdigit()
                and (evals is None or eval_name in evals)):
            by_seed[int(seed)] = path
    return by_seed[min(by_seed)] if by_seed else None


def listed_runs(root: Path, existing: bool = True) -> dict[Path, list[str] | None]:
    """Run folder -> the evaluations to read (None: every one found); ``existing``: only folders that exist."""
    if not root.is_dir():
        return {}
    index = root / RUNS_INDEX
    if not index.is_file():
        return {path: None for path in root.glob("*/seed*") if path.is_dir()}
    try:
        listed = json.loads(index.read_text())["runs"]
        runs = listed if isinstance(listed, dict) else dict.fromkeys(listed)
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
        raise DataError(index, None, "runs",
                        f"unreadable run index ({error}); re-run snakemake to rewrite it") from None
    return {root / run: evals for run, evals in runs.items() if not existing or (root / run).is_dir()}


def result_files(root: Path) -> list[Path]:
    """The result JSONs to read: the listed evaluations of the listed runs (an evaluation dropped from an
    experiment's ``evals`` is not read, though its old file stays on disk)."""
    files = []
    for run, evals in sorted(listed_runs(root).items()):
        found = sorted(run.glob("eval/*.json"))
        files += found if evals is None else [path for path in found if path.stem in evals]
    return files


class StaleResultsError(ReproError):
    """A result was made with another config than the profile resolves its run to today."""


def _read_json(path: Path) -> dict | None:
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _bindings_differ(root: Path, run: str, result: dict, expected: dict) -> list[str]:
    """What a result no longer matches of the files its run was made from: ``checkpoint`` (the result scored
    other weights than the run's final/), ``data`` (the run trained on other token files than the profile's
    dataset holds now: ``expected["tokens"]``, its manifest) and ``upstream`` (it built on other weights than
    its upstream run holds now: ``expected["upstream"]``, a run folder name). [] without a run manifest."""
    manifest = _read_json(root / run / "final" / "manifest.json")
    if manifest is None:
        return []
    differ = []
    scored = (result.get("provenance") or {}).get("checkpoint_sha256")
    if scored and scored != manifest.get("model_sha256"):
        differ.append("checkpoint")
    tokens = _read_json(expected["tokens"]) if expected.get("tokens") else None
    if tokens is not None:
        now = {"tokenizer_sha256": tokens.get("tokenizer_sha256"),
               "splits": {split: entry.get("sha256") for split, entry in (tokens.get("splits") or {}).items()}}
        if now != {key: (manifest.get("data") or {}).get(key) for key in now}:
            differ.append("data")
    upstream = _read_json(root / expected["upstream"] / "final" / "manifest.json") if expected.get("upstream") else None
    if upstream is not None and (manifest.get("upstream") or {}).get("model_sha256") != upstream.get("model_sha256"):
        differ.append("upstream")
    return differ


def stale_results(root: Path, expected: dict[str, dict]) -> dict[str, str]:
    """Run ("<experiment>/seed<k>") -> "<run folder> (<what> differ)" for the runs whose results were made with
    another config than ``expected`` (``run -> {"hash", "sections", "tokens", "upstream"}``, from the profile
    as parsed now: the differing sections), or from other weights, token data or upstream weights than the
    folders hold now (``_bindings_differ``)."""
    stale: dict[str, str] = {}
    for path in result_files(root):
        run = f"{path.parts[-4]}/{path.parts[-3]}"
        if run not in expected or run in stale:
            continue
        result = _read_json(path)
        if result is None:
            continue  # load_results names a malformed file
        differ = []
        if (result.get("provenance") or {}).get("config_hash") != expected[run]["hash"]:
            recorded, sections = result.get("config") or {}, expected[run].get("sections", {})
            differ = sorted(key for key in recorded.keys() | sections.keys()
                            if key not in recorded or sections.get(key) != config_hash(recorded[key])) or ["config"]
        differ += _bindings_differ(root, run, result, expected[run])
        if differ:
            stale[run] = f"{root / run} ({', '.join(differ)} differ)"
    return stale


def check_fresh(root: Path, expected: dict[str, dict] | None, allow_stale: bool = False) -> dict[str, str]:
    """The stale runs (``stale_results``); unless ``allow_stale``, refused in one line naming the runs, the
    differing sections and the fix. ``expected`` None: nothing to check (a hand-made folder)."""
    stale = stale_results(root, expected) if expected else {}
    if stale and not allow_stale:
        texts, first = list(stale.values()), root / next(iter(stale))
        raise StaleResultsError(
            f"{len(texts)} run(s) hold results of another config or other files than the profile's: "
            f"{'; '.join(texts[:3])}"
            + (f"; and {len(texts) - 3} more" if len(texts) > 3 else "")
            + f"; re-run them (snakemake --forcerun {first}/config.json, or delete the run folder), or build the "
            "tables with the tables rule's arguments and --allow-stale to show them marked stale")
    return stale


def nonfinite_metrics(root: Path) -> dict[Metric, list[int]]:
    """(experiment, eval, key) -> the seeds whose value is NaN or infinite (a diverged run): left out of the
    means, and said so in the cells (``tables/build.py``)."""
    out: dict[Metric, list[int]] = {}
    for path in result_files(root):
        match = _SEED.match(path.parts[-3])
        try:
            metrics = json.loads(path.read_text()).get("metrics") or {}
        except (json.JSONDecodeError, AttributeError):
            continue  # load_results names a malformed file
        for key, value in metrics.items() if match else ():
            if isinstance(value, float) and not math.isfinite(value):
                out.setdefault((path.parts[-4], path.stem, key), []).append(int(match[1]))
    return out


RESULT_COLUMNS = ["experiment", "seed", "eval", "metric", "value", "corpus", "caveats", "order"]


def results_frame(root: Path):
    """Every finite metric of every result file of the runs to read (``run_folders``) as a ``pandas.DataFrame``,
    one row per run x seed x metric: ``experiment, seed, eval, metric, value``, the corpus its run trained on
    (``corpus_label``), the caveats of its data (a tuple) and its data order (``data_order``; "" when the
    config does not say). Each file is checked against the result schema and its path first."""
    import pandas as pd

    rows = []
    for path in result_files(root):
        experiment, seed_dir = path.parts[-4], path.parts[-3]
        match = _SEED.match(seed_dir)
        if not match:
            continue
        try:
            result = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise DataError(path, error.lineno, "(json)", error.msg) from None
        validate(result, schema(str(RESULT_SCHEMA)), path)
        expected = {"experiment": experiment, "seed": int(match[1]), "eval": path.stem}
        for name, value in expected.items():
            if result[name] != value:
                raise DataError(path, None, name, f"{result[name]!r} differs from the path ({value!r})")
        corpus = corpus_label((result.get("config") or {}).get("corpus") or {"source": None})
        order = data_order(result.get("config") or {})
        rows += [(experiment, int(match[1]), path.stem, key, float(value), corpus, tuple(_caveats(result, key)), order)
                 for key, value in result["metrics"].items() if value is not None and math.isfinite(value)]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def load_results(root: Path) -> dict[Metric, Reproduced]:
    """``results_frame`` grouped over seeds: (experiment, eval, metric) -> its values by seed, with the corpora
    of its runs, the caveats of its data and the seeds' data orders (groups in the order the files are read)."""
    frame = results_frame(root)
    out = {}
    for (experiment, eval_name, key), group in frame.groupby(["experiment", "eval", "metric"], sort=False):
        seeds, orders = group["seed"].tolist(), group["order"].tolist()
        out[experiment, eval_name, key] = Reproduced(
            dict(zip(seeds, group["value"].tolist())), (experiment,), tuple(sorted(set(group["corpus"]))),
            tuple(sorted(set().union(*group["caveats"]))), {seed: order for seed, order in zip(seeds, orders) if order})
    return out
