"""Local-file mode for real tasks: lm-eval's own task definitions, the data from local files.

On an offline cluster a user lists, per task, a local copy of its data (``evals/tasks/local_data.yaml``
is the one for the development machine's copies, docs/sources.md, "Local copies of real data")::

    root: /data/eval                       # relative paths below resolve against root (root: against the CWD)
    tasks:
      piqa: {path: piqa/valid.jsonl, labels: piqa/valid-labels.lst, format: piqa_original}
      arc_easy: {path: arc/ARC-Easy-Test.parquet}          # format hf (default): the HF dataset's columns

``prepare_local_tasks`` validates every file (a missing file, a row without the fields of its format,
a wrong label: one-line ``HarnessError`` naming file and line, before any evaluation), converts the
formats that are not the HF dataset's own into its columns (``data/<task>.jsonl``), and writes one
YAML per task that **includes the upstream lm-eval task YAML** (prompt, choices, metrics, version
and preprocessing functions unchanged, from the installed lm-eval) and only overrides where the data
comes from (``dataset_path: json`` + absolute ``data_files``). Task names stay the upstream ones, so
results carry the usual keys (``piqa/acc``).

Formats (``hf`` = the columns of the dataset lm-eval loads from the hub; jsonl, json or parquet):

=============== ==================== ===================================================================
task            formats              notes
=============== ==================== ===================================================================
lambada_openai  hf, llmfoundry       hf: ``{text}`` (EleutherAI/lambada_openai); llmfoundry: context +
                                     ' ' + continuation
lambada_standard hf                  ``{text}`` (lambada)
piqa            hf, piqa_original,   piqa_original: the authors' valid.jsonl + valid-labels.lst
                llmfoundry           (``labels:``); llmfoundry strips 'Question: ' and whitespace
arc_easy,       hf, ai2, llmfoundry  ai2: AllenAI's ARC jsonl (question.stem, question.choices);
arc_challenge                        llmfoundry: query 'Question: ...', choices, gold
hellaswag       hf, llamacpp         llamacpp: 6 lines per item (llama.cpp perplexity --hellaswag);
                                     APPROXIMATE: that format keeps ctx = ctx_a + ' ' + ctx_b, the
                                     split is guessed (a trailing lower-case clause is ctx_b, which
                                     lm-eval capitalises) and its bracket clean-up differs slightly
winogrande      hf, llmfoundry       llmfoundry: context_options, continuation, gold (exact: the
                                     choices are the two context options)
boolq           hf, boolq_original   boolq_original: google-research BoolQ (answer true/false or
                                     "True"/"False"); hf = super_glue boolq (label 0/1)
openbookqa      hf, llmfoundry       llmfoundry: query = question_stem, choices, gold
wikitext        hf, raw, tokens      hf: ``{page}`` (EleutherAI/wikitext_document_level, wikitext-2-raw-v1);
                                     raw: ``wiki.test.raw`` of WikiText-2 or -103 raw (the same test
                                     articles), cut into pages as that dataset is (a page starts at a
                                     level-1 heading line ``= Title =``); tokens: ``wiki.test.tokens``,
                                     the tokenized variant (``<unk>``, ``@-@``): same pages, NOT
                                     comparable (``comparable: false`` in the result)
=============== ==================== ===================================================================

Each task's source in the result (``details.local_data``) carries the file's sha256, its rows, and
``exact``: true only when the format is lossless, the rows are as many as lm-eval's split has
(``LocalTask.rows``) and the manifest does not say ``exact: false``; ``comparable`` is false for a copy
whose metric means something else (the tokenized WikiText). A manifest entry may give ``sha256``: a
file that no longer matches it is refused (``verify``), before any evaluation.
"""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

from common.io import atomic_write_json, atomic_write_text, sha256_file
from evals.harness.errors import HarnessError

EXAMPLE_CONFIG = Path(__file__).resolve().parent / "local_data.yaml"


class BadRow(Exception):
    """A row that does not fit its format (turned into a one-line HarnessError with file and line)."""


def _need(row: dict, fields: dict[str, type | tuple]) -> None:
    if not isinstance(row, dict):
        raise BadRow(f"expected a JSON object, got {type(row).__name__}")
    for name, kind in fields.items():
        if name not in row:
            raise BadRow(f"missing field {name!r}")
        if not isinstance(row[name], kind) or isinstance(row[name], bool) and kind is int:
            raise BadRow(f"field {name!r} is {type(row[name]).__name__}, expected {getattr(kind, '__name__', kind)}")


def _choices_dict(row: dict, key: str = "choices") -> None:
    c = row[key]
    if not (isinstance(c, dict) and isinstance(c.get("text"), list) and isinstance(c.get("label"), list)
            and len(c["text"]) == len(c["label"]) > 1):
        raise BadRow(f"field {key!r} must be {{text: [...], label: [...]}} of equal lengths")


def _gold(row: dict, n: int) -> int:
    _need(row, {"gold": int})
    if not 0 <= row["gold"] < n:
        raise BadRow(f"gold={row['gold']} is not an index into {n} choices")
    return row["gold"]


def _strip_prefix(text: str, prefix: str) -> str:
    if not text.startswith(prefix):
        raise BadRow(f"query does not start with {prefix!r}")
    return text[len(prefix):]


# ----------------------------------------------------------------------------- validators (hf)
def _hf_lambada(row):
    _need(row, {"text": str})
    if " " not in row["text"].strip():
        raise BadRow("text has no last word to predict")


def _hf_piqa(row):
    _need(row, {"goal": str, "sol1": str, "sol2": str, "label": int})
    if row["label"] not in (0, 1):
        raise BadRow(f"label={row['label']} must be 0 or 1")


def _hf_arc(row):
    _need(row, {"question": str, "choices": dict, "answerKey": str})
    _choices_dict(row)
    if row["answerKey"] not in row["choices"]["label"]:
        raise BadRow(f"answerKey {row['answerKey']!r} is not among the choice labels {row['choices']['label']}")


def _hf_hellaswag(row):
    _need(row, {"activity_label": str, "ctx_a": str, "ctx_b": str, "endings": list, "label": (str, int)})
    if not 0 <= int(row["label"]) < len(row["endings"]):
        raise BadRow(f"label={row['label']} is not an index into the endings")


def _hf_winogrande(row):
    _need(row, {"sentence": str, "option1": str, "option2": str, "answer": str})
    if "_" not in row["sentence"] or row["answer"] not in ("1", "2"):
        raise BadRow("sentence needs a '_' blank and answer must be '1' or '2'")


def _hf_boolq(row):
    _need(row, {"passage": str, "question": str, "label": int})
    if row["label"] not in (0, 1):
        raise BadRow(f"label={row['label']} must be 0 (no) or 1 (yes)")


def _hf_openbookqa(row):
    _need(row, {"question_stem": str, "choices": dict, "answerKey": str})
    _choices_dict(row)
    if row["answerKey"].lstrip() not in row["choices"]["label"]:
        raise BadRow(f"answerKey {row['answerKey']!r} is not among the choice labels")


# ----------------------------------------------------------------------------- converters
def _lambada_llmfoundry(row):
    _need(row, {"context": str, "continuation": str})
    return {"text": row["context"].rstrip(" ") + " " + row["continuation"].strip()}


def _piqa_llmfoundry(row):
    _need(row, {"query": str, "choices": list})
    gold = _gold(row, len(row["choices"]))
    if len(row["choices"]) != 2:
        raise BadRow("piqa needs 2 choices")
    return {"goal": _strip_prefix(row["query"], "Question: ").rstrip("\n"), "sol1": row["choices"][0],
            "sol2": row["choices"][1], "label": gold}


def _arc_llmfoundry(row):
    _need(row, {"query": str, "choices": list})
    gold = _gold(row, len(row["choices"]))
    labels = [chr(ord("A") + i) for i in range(len(row["choices"]))]
    question = _strip_prefix(row["query"], "Question: ")
    question = question[:-len("\nAnswer:")] if question.endswith("\nAnswer:") else question
    return {"question": question, "choices": {"text": row["choices"], "label": labels}, "answerKey": labels[gold]}


def _arc_ai2(row):
    _need(row, {"question": dict, "answerKey": str})
    q = row["question"]
    if not (isinstance(q.get("stem"), str) and isinstance(q.get("choices"), list) and q["choices"]):
        raise BadRow("question must be {stem, choices: [{text, label}, ...]}")
    out = {"id": row.get("id", ""), "question": q["stem"],
           "choices": {"text": [c["text"] for c in q["choices"]], "label": [c["label"] for c in q["choices"]]},
           "answerKey": row["answerKey"]}
    _hf_arc(out)
    return out


def _winogrande_llmfoundry(row):
    _need(row, {"context_options": list, "continuation": str})
    options = row["context_options"]
    if len(options) != 2 or not all(isinstance(o, str) for o in options):
        raise BadRow("context_options must be two strings")
    gold = _gold(row, 2)
    n = 0
    while n < min(map(len, options)) and options[0][n] == options[1][n]:
        n += 1
    # lm-eval's choices are sentence[:blank] + option: any split of the shared prefix gives the same strings
    return {"sentence": options[0][:n] + "_ " + row["continuation"], "option1": options[0][n:],
            "option2": options[1][n:], "answer": str(gold + 1)}


def _boolq_original(row):
    _need(row, {"question": str, "passage": str})
    answer = row.get("answer", row.get("label"))
    if isinstance(answer, str) and answer.lower() in ("true", "false"):
        answer = answer.lower() == "true"
    if not isinstance(answer, bool):
        raise BadRow(f"answer must be true/false, got {answer!r}")
    return {"question": row["question"], "passage": row["passage"], "label": int(answer), "idx": row.get("idx", 0)}


def _openbookqa_llmfoundry(row):
    _need(row, {"query": str, "choices": list})
    gold = _gold(row, len(row["choices"]))
    labels = [chr(ord("A") + i) for i in range(len(row["choices"]))]
    return {"id": row.get("id", ""), "question_stem": row["query"],
            "choices": {"text": row["choices"], "label": labels}, "answerKey": labels[gold]}


def _hellaswag_llamacpp(lines: list[str], path: Path) -> list[dict]:
    if len(lines) % 6:
        raise HarnessError(f"{path}: {len(lines)} lines, not a multiple of 6; the llamacpp hellaswag format is "
                           "6 lines per item (context, gold index, 4 endings)")
    rows = []
    for i in range(0, len(lines), 6):
        head, gold, endings = lines[i], lines[i + 1].strip(), lines[i + 2:i + 6]
        if ": " not in head or gold not in ("0", "1", "2", "3"):
            raise HarnessError(f"{path}:{i + 1}: expected 'activity label: context' then a gold index 0-3 on "
                               f"line {i + 2}; is this the llamacpp hellaswag format?")
        label, ctx = head.split(": ", 1)
        cut = ctx.rfind(". ")
        tail = ctx[cut + 2:] if cut >= 0 else ""
        ctx_a, ctx_b = (ctx[:cut + 1], tail) if tail[:1].islower() else (ctx, "")
        rows.append({"ind": i // 6, "activity_label": label, "ctx_a": ctx_a, "ctx_b": ctx_b, "ctx": ctx,
                     "endings": endings, "label": gold, "source_id": "", "split": "val", "split_type": ""})
    return rows


def _piqa_original(rows: list[dict], path: Path, spec: dict) -> list[dict]:
    labels_path = spec.get("labels")
    if not labels_path:
        raise HarnessError(f"local data for piqa: format piqa_original needs 'labels: <valid-labels.lst>' "
                           f"beside {path}")
    labels_path = Path(labels_path)
    if not labels_path.is_file():
        raise HarnessError(f"{labels_path}: labels file not found (local data for piqa)")
    labels = [x.strip() for x in labels_path.read_text().splitlines() if x.strip()]
    if len(labels) != len(rows):
        raise HarnessError(f"{labels_path}: {len(labels)} labels for {len(rows)} rows of {path}")
    out = []
    for i, (row, label) in enumerate(zip(rows, labels), 1):
        if label not in ("0", "1"):
            raise HarnessError(f"{labels_path}:{i}: label {label!r} must be 0 or 1")
        out.append({**row, "label": int(label)})
    return out


def _hf_wikitext(row):
    _need(row, {"page": str})
    if not row["page"].strip():
        raise BadRow("empty page")


def wikitext_pages(lines: list[str]) -> list[dict]:
    """WikiText's lines cut into articles as EleutherAI/wikitext_document_level does: a page starts at a
    level-1 heading (`` = Title = ``; ``= = Section = =`` lines are not); pages keep their lines as they are."""
    pages, current = [], []
    for line in lines:
        heading = line.replace("= = =", "===").replace("= =", "==").strip()
        if heading.startswith("= ") and heading.endswith(" =") and current:
            pages.append("\n".join(current))
            current = []
        current.append(line)
    pages.append("\n".join(current))
    return [{"page": page} for page in pages if page.strip()]


@dataclass(frozen=True)
class LocalTask:
    upstream: str                       # path under lm_eval/tasks/
    split: str                          # the split lm-eval evaluates (test or validation)
    hf: Callable                        # validator of the HF columns
    converters: dict[str, Callable] = field(default_factory=dict)   # format -> row converter
    approximate: tuple[str, ...] = ()   # formats that lose or change something (exact: false)
    rows: int | None = None             # documents of lm-eval's split: another count is not the canonical set
    not_comparable: dict[str, str] = field(default_factory=dict)    # format -> why its metric means another thing
    text_formats: tuple[str, ...] = ()  # formats read as lines of text, not records


_TOKENIZED = ("the tokenized WikiText (<unk> for rare words, ' @-@ ' for hyphens), whose word perplexity is not "
              "that of lm-eval's wikitext (raw text): give wiki.test.raw for a comparable number")
# rows: the documents of the split lm-eval evaluates (its HF dataset), so a subset or a different copy says so
LOCAL_TASKS: dict[str, LocalTask] = {
    "lambada_openai": LocalTask("lambada/lambada_openai.yaml", "test", _hf_lambada, {"llmfoundry": _lambada_llmfoundry},
                                rows=5153),
    "lambada_standard": LocalTask("lambada/lambada_standard.yaml", "test", _hf_lambada, rows=5153),
    "piqa": LocalTask("piqa/piqa.yaml", "validation", _hf_piqa,
                      {"llmfoundry": _piqa_llmfoundry, "piqa_original": None}, approximate=("llmfoundry",), rows=1838),
    "arc_easy": LocalTask("arc/arc_easy.yaml", "test", _hf_arc, {"ai2": _arc_ai2, "llmfoundry": _arc_llmfoundry},
                          rows=2376),
    "arc_challenge": LocalTask("arc/arc_challenge.yaml", "test", _hf_arc,
                               {"ai2": _arc_ai2, "llmfoundry": _arc_llmfoundry},
                               rows=1172),
    "hellaswag": LocalTask("hellaswag/hellaswag.yaml", "validation", _hf_hellaswag, {"llamacpp": None},
                           approximate=("llamacpp",), rows=10042),
    "winogrande": LocalTask("winogrande/default.yaml", "validation", _hf_winogrande,
                            {"llmfoundry": _winogrande_llmfoundry},
                            rows=1267),
    "boolq": LocalTask("super_glue/boolq/default.yaml", "validation", _hf_boolq, {"boolq_original": _boolq_original},
                       rows=3270),
    "openbookqa": LocalTask("openbookqa/openbookqa.yaml", "test", _hf_openbookqa,
                            {"llmfoundry": _openbookqa_llmfoundry},
                            rows=500),
    "wikitext": LocalTask("wikitext/wikitext.yaml", "test", _hf_wikitext, {"raw": None, "tokens": None},
                          approximate=("tokens",), rows=62, not_comparable={"tokens": _TOKENIZED},
                          text_formats=("raw", "tokens")),
}
_SUFFIX_BUILDER = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}  # csv: column types are guessed


def lm_eval_tasks_dir() -> Path:
    spec = importlib.util.find_spec("lm_eval")
    if spec is None or spec.origin is None:
        raise HarnessError("lm_eval is not installed; pip install 'lm-eval[hf]'")
    return Path(spec.origin).parent / "tasks"


def upstream_version(yaml_path: Path):
    """``metadata.version`` of an upstream task YAML (following ``include``), without importing lm-eval."""
    class Loader(yaml.SafeLoader):
        pass
    Loader.add_constructor("!function", lambda loader, node: None)
    cfg = yaml.load(yaml_path.read_text(), Loader=Loader)  # noqa: S506 (SafeLoader subclass)
    version = (cfg.get("metadata") or {}).get("version")
    if version is None and cfg.get("include"):
        return upstream_version(yaml_path.parent / cfg["include"])
    return version


def read_config(path: str | Path, root: str | Path | None = None) -> dict[str, dict]:
    """``{task: {path, format, labels}}`` with absolute paths, from a local-data YAML."""
    path = Path(path)
    try:
        cfg = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise HarnessError(f"{path}: cannot read local-data config ({e.__class__.__name__})") from e
    if not isinstance(cfg, dict) or not isinstance(cfg.get("tasks"), dict):
        raise HarnessError(f"{path}: a local-data config is {{root: DIR, tasks: {{task: {{path, format}}}}}}")
    base = Path(root if root is not None else cfg.get("root", ".")).expanduser()
    out = {}
    for task, spec in cfg["tasks"].items():
        if task not in LOCAL_TASKS:
            raise HarnessError(f"{path}: task {task!r} has no local-file mode; supported: {sorted(LOCAL_TASKS)}")
        spec = {"path": spec} if isinstance(spec, str) else dict(spec or {})
        unknown = set(spec) - {"path", "format", "labels", "sha256", "exact", "note"}
        if "path" not in spec or unknown:
            raise HarnessError(f"{path}: tasks.{task} needs 'path' (and optionally 'format', 'labels', 'sha256', "
                               f"'exact', 'note'); unknown keys {sorted(unknown)}")
        sha = spec.get("sha256")
        if sha is not None and not (isinstance(sha, str) and len(sha) == 64
                                    and all(c in "0123456789abcdef" for c in sha)):
            raise HarnessError(f"{path}: tasks.{task}.sha256 must be the file's 64 lower-case hex digits, quoted "
                               f"(got {sha!r}); `sha256sum FILE` prints it")
        formats = ["hf", *LOCAL_TASKS[task].converters]
        if spec.get("format", "hf") not in formats:
            raise HarnessError(f"{path}: tasks.{task}.format {spec['format']!r} is unknown; use one of {formats}")
        if spec.get("exact", False) is not False:
            raise HarnessError(f"{path}: tasks.{task}.exact: only 'exact: false' may be given (a copy you know to "
                               "differ from the canonical set); exactness is otherwise worked out from format and rows")
        for key in ("path", "labels"):
            if key in spec:
                spec[key] = str((base / spec[key]).resolve())
        spec.setdefault("format", "hf")
        out[task] = spec
    return out


def verify(config: dict[str, dict], where: str = "local data") -> None:
    """Every file of a local-data config exists and matches the sha256 its entry gives (a one-line error
    naming the file and the fix); cheap enough to run when a profile is checked."""
    for task, spec in config.items():
        for key in ("path", "labels"):
            if key in spec and not Path(spec[key]).is_file():
                raise HarnessError(f"{where}: {spec[key]}: file of task {task} not found; fix tasks.{task}.{key} or "
                                   "the manifest's root")
        if spec.get("sha256") and sha256_file(spec["path"]) != spec["sha256"]:
            raise HarnessError(f"{where}: {spec['path']}: sha256 {sha256_file(spec['path'])[:12]}... differs from the "
                               f"manifest's {spec['sha256'][:12]}... (tasks.{task}.sha256): the file changed; restore "
                               "it, or put its new sha256 in the manifest")


def _read_rows(path: Path, fmt: str, task: str) -> list:
    if not path.is_file():
        raise HarnessError(f"{path}: local data file for {task} not found")
    if fmt == "llamacpp":
        return path.read_text(encoding="utf-8").splitlines()
    if fmt in LOCAL_TASKS[task].text_formats:  # lines as the HF loading script splits them
        return path.read_text(encoding="utf-8").split("\n")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq
        try:
            return pq.read_table(path).to_pylist()
        except Exception as e:
            raise HarnessError(f"{path}: not a readable parquet file ({e.__class__.__name__}) "
                               f"(local data for {task})") from e
    text = path.read_text(encoding="utf-8")
    if suffix == ".json" and text.lstrip().startswith("["):
        return json.loads(text)
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            raise HarnessError(f"{path}:{i}: not JSON lines (local data for {task}, format {fmt}); give a .jsonl, "
                               ".json or .parquet file, or the right 'format'") from None
    return rows


def _exactness(local: LocalTask, fmt: str, rows: int, spec: dict) -> dict:
    """``exact`` (the canonical set, losslessly), ``comparable`` (the task's metric) and why not."""
    why = []
    if fmt in local.approximate:
        why.append(f"format {fmt} is approximate (evals/tasks/local_data.py)")
    if local.rows is not None and rows != local.rows:
        why.append(f"{rows} documents where lm-eval's {local.split} split has {local.rows}")
    if spec.get("exact") is False:
        why.append(spec.get("note") or "the manifest says exact: false")
    out = {"exact": not why, "comparable": fmt not in local.not_comparable}
    if why or fmt in local.not_comparable:
        out["why"] = ", and ".join(why + ([local.not_comparable[fmt]] if fmt in local.not_comparable else []))
    return out


def prepare_local_tasks(config: dict[str, dict], out_dir: str | Path, tasks: list[str] | None = None) -> dict:
    """Validate and (where needed) convert every configured task's data; write the task YAMLs into
    ``out_dir`` (an lm-eval include path) and ``manifest.json``; return the manifest."""
    out_dir = Path(out_dir).resolve()
    upstream_root = lm_eval_tasks_dir()
    wanted = config if tasks is None else {t: config[t] for t in tasks if t in config}
    verify(wanted)
    manifest = {}
    for task, spec in wanted.items():
        local, fmt, src = LOCAL_TASKS[task], spec["format"], Path(spec["path"])
        if fmt != "hf" and fmt not in local.converters:
            raise HarnessError(f"local data for {task}: unknown format {fmt!r}; use one of "
                               f"{['hf', *sorted(local.converters)]}")
        rows = _read_rows(src, fmt, task)
        if not rows:
            raise HarnessError(f"{src}: empty (local data for {task})")
        if fmt == "llamacpp":
            rows = _hellaswag_llamacpp(rows, src)
        elif fmt in local.text_formats:
            rows = wikitext_pages(rows)
        elif fmt == "piqa_original":
            rows = _piqa_original(rows, src, spec)
        converter = local.converters.get(fmt)
        converted = []
        for i, row in enumerate(rows, 1):
            try:
                row = converter(row) if converter else row
                local.hf(row)
            except BadRow as e:
                raise HarnessError(f"{src}:{i}: {e} (local data for {task}, format {fmt}: "
                                   f"see evals/tasks/local_data.py)") from None
            converted.append(row)
        if fmt == "hf":
            data, builder = src, _SUFFIX_BUILDER.get(src.suffix.lower())
            if builder is None:
                raise HarnessError(f"{src}: unsupported file type {src.suffix!r} for {task}; use .jsonl, .json "
                                   "or .parquet")
        else:
            data, builder = out_dir / "data" / f"{task}.jsonl", "json"
            atomic_write_text(data, "".join(json.dumps(r, sort_keys=True) + "\n" for r in converted))
        upstream = upstream_root / local.upstream
        if not upstream.is_file():
            raise HarnessError(f"{upstream}: upstream task YAML missing from the installed lm-eval")
        split = local.split
        source = {"file": str(src), "sha256": sha256_file(src), "format": fmt, "rows": len(converted),
                  **_exactness(local, fmt, len(converted), spec)}
        if spec.get("labels"):
            source.update(labels=spec["labels"], labels_sha256=sha256_file(spec["labels"]))
        cfg = {"include": str(upstream), "task": task, "dataset_path": builder, "dataset_name": None,
               "dataset_kwargs": {"data_files": {split: str(data)}},
               "training_split": None, "validation_split": split if split == "validation" else None,
               "test_split": split if split == "test" else None, "fewshot_split": None,
               "metadata": {"version": upstream_version(upstream), "local_data": source}}
        header = (f"# Generated by evals/tasks/local_data.py: lm-eval's {local.upstream} on local data "
                  f"({fmt} format{'; converted to the HF columns' if fmt != 'hf' else ''}); do not edit.\n")
        atomic_write_text(out_dir / f"{task}.yaml", header + yaml.safe_dump(cfg, sort_keys=False, width=1000))
        manifest[task] = {**source, "data_files": str(data), "upstream": local.upstream}
    atomic_write_json(out_dir / "manifest.json", manifest)
    return manifest
