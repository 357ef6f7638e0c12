"""Where documents come from: the synthetic world, a Hugging Face corpus by name, or local files.

Every source ends as the same artifact, ``{train,valid,test}.jsonl`` (one ``{"text": ...}`` per
line, plus ``logprob`` and ``concepts`` for the synthetic world) and a ``manifest.json`` with the
sha256, document count and — when the source knows it — the exact oracle NLL of every split.

Real corpora are streamed through ``datasets``; corpora without a validation or test split have
them carved from the head of the training stream (the first ``n_test`` documents are test, the
next ``n_valid`` are valid, training starts after them), so no document is in two splits.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

from common.errors import ReproError

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class HFCorpus:
    path: str
    name: str | None
    text_field: str
    splits: dict  # our split -> the dataset's split; missing ones are carved from train


HF_CORPORA = {
    "openwebtext": HFCorpus("Skylion007/openwebtext", None, "text", {"train": "train"}),
    # the Pile without its copyrighted subsets (EleutherAI/pile is no longer distributed): a deviation
    "pile": HFCorpus("monology/pile-uncopyrighted", None, "text",
                     {"train": "train", "valid": "validation", "test": "test"}),
    "tinystories": HFCorpus("roneneldan/TinyStories", None, "text", {"train": "train", "valid": "validation"}),
    "lm1b": HFCorpus("lm1b", None, "text", {"train": "train", "test": "test"}),
    "wikitext103": HFCorpus("Salesforce/wikitext", "wikitext-103-raw-v1", "text",
                            {"train": "train", "valid": "validation", "test": "test"}),
}
LOCAL_FORMATS = {".txt": "text", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class CorpusError(ReproError, RuntimeError):
    """A corpus cannot be read: unknown name, missing file, wrong format."""


def _stream(path: str, name: str | None, split: str, local_key: str = "corpus.local", **kwargs) -> Iterator[dict]:
    import datasets

    try:
        return iter(datasets.load_dataset(path, name, split=split, streaming=True, **kwargs))
    except (FileNotFoundError, ConnectionError, OSError, ValueError) as e:
        raise CorpusError(f"cannot open {path}{'/' + name if name else ''} split {split!r}: {e}. Offline? "
                          f"Point {local_key} at downloaded files instead") from e


def _rows(rows: Iterator[dict], where: str) -> Iterator[dict]:
    """``rows``, with a file that turns out unreadable part-way (binary, not UTF-8, malformed) one ``CorpusError``."""
    try:
        yield from rows
    except (ValueError, OSError) as e:  # UnicodeDecodeError, pyarrow's ArrowInvalid, a datasets generation error
        cause = e.__cause__ or e.__context__ or e
        raise CorpusError(f"{where}: cannot be read ({type(cause).__name__}: {str(cause).splitlines()[0][:160]}); "
                          "give UTF-8 text, jsonl or parquet") from None


def _texts(rows: Iterator[dict], field: str, where: str) -> Iterator[dict]:
    for row in _rows(rows, where):
        if field not in row:
            raise CorpusError(f"{where}: rows have no field {field!r} (fields: {sorted(row)}); set corpus.text_field")
        text = row[field]
        if text is not None and not isinstance(text, str):
            raise CorpusError(f"{where}: field {field!r} holds a {type(text).__name__}, not text; give strings "
                              "or set corpus.text_field")
        if text and text.strip():
            yield {"text": text}


def hub_source(spec, cfg: dict) -> tuple[str, str | None]:
    """(path, config name) that ``datasets.load_dataset`` reads a hub set from: the hub's, or ``cfg["mirror"]``,
    a local folder with the set's files in the hub's layout (a cluster without network, smoke mode)."""
    return (cfg["mirror"], None) if cfg.get("mirror") else (spec.path, spec.name)


def hf_documents(cfg: dict) -> dict[str, Iterator[dict]]:
    """Documents per split of a named HF corpus, limited by ``cfg['max_docs'][split]``."""
    if cfg["name"] not in HF_CORPORA:
        raise CorpusError(f"corpus.hf.name={cfg['name']!r} is unknown; choose one of {sorted(HF_CORPORA)}")
    spec = HF_CORPORA[cfg["name"]]
    field = cfg.get("text_field", spec.text_field)
    limit = cfg["max_docs"]
    path, name = hub_source(spec, cfg)
    native = {s: _texts(_stream(path, name, hf_split), field, path) for s, hf_split in spec.splits.items()}
    out = carve(native, limit)
    return {s: islice(out[s], limit[s]) for s in SPLITS}


CARVE = {"valid": 1000, "test": 1000}  # documents carved for a local corpus's missing split (corpus.local.carve)


def carve(native: dict[str, Iterator[dict]], counts: dict[str, int]) -> dict[str, Iterator[dict]]:
    """Every split: the source's own, or, for a missing valid / test split, ``counts[split]`` documents
    carved from the head of train (test first, then valid; train starts after them: no document is in two
    splits)."""
    train = native["train"]
    out = {split: native[split] if split in native else iter(list(islice(train, counts[split])))
           for split in ("test", "valid")}
    return {"train": train, **out}


SNIFF_BYTES = 1 << 16  # what local_file_problem reads of a file: its format shows in its first lines


def local_file_problem(path: str | Path) -> str | None:
    """Why a local corpus file cannot be read, judged from its size, extension and first bytes (None when it
    looks readable): cheap enough to run before any job, whatever the file's size."""
    path = Path(path).expanduser()
    if not path.is_file():
        return "no such file; fix the path (relative paths start at the working directory)"
    size = path.stat().st_size
    if size == 0:
        return "the file is empty; point it at a file with documents"
    if path.suffix not in LOCAL_FORMATS:
        return f"unsupported extension {path.suffix!r}; use one of {sorted(LOCAL_FORMATS)}"
    with open(path, "rb") as f:
        head = f.read(SNIFF_BYTES)
    if path.suffix == ".parquet":
        with open(path, "rb") as f:
            f.seek(max(size - 4, 0))
            tail = f.read(4)
        if head[:4] == b"PAR1" and tail != b"PAR1":
            return "a truncated parquet file (no PAR1 footer: an interrupted copy or download?); copy it again"
        return None if head[:4] == b"PAR1" else ("not a parquet file (it does not start with PAR1); "
                                                 "give a parquet file or rename it")
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "UTF-16 text, not UTF-8; convert it (iconv -f UTF-16 -t UTF-8)"
    if b"\x00" in head:
        return "a binary file (NUL bytes), not text; give UTF-8 text, jsonl or parquet"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3 or len(head) == size:  # not a character cut by the end of the sniffed bytes
            return (f"not UTF-8 (byte {e.start}: {head[e.start:e.start + 1]!r}); convert it "
                    "(iconv -f <its encoding> -t UTF-8) or give UTF-8 text")
        text = head[:e.start].decode("utf-8")
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark (Windows exports): the readers skip it
    if path.suffix == ".jsonl":
        lines = text.splitlines() if len(head) == size else text.splitlines()[:-1]  # the last may be cut
        first = next((line for line in lines if line.strip()), None)
        if first is not None:
            try:
                row = json.loads(first)
            except ValueError:
                return "its first line is not JSON; give one JSON object per line"
            if not isinstance(row, dict):
                return "its first line is not a JSON object; give one object per line ({\"text\": ...})"
    return None


def local_documents(cfg: dict) -> dict[str, Iterator[dict]]:
    """Documents per split from local text / jsonl / parquet files (absolute or relative paths); a valid or
    test file not given is carved from the head of train (``carve``: documents, default ``CARVE``)."""
    out = {}
    for split in (split for split in SPLITS if split in cfg):
        path = Path(cfg[split]).expanduser().resolve()
        problem = local_file_problem(path)
        if problem:
            raise CorpusError(f"corpus.local.{split}={cfg[split]}: {problem}")
        fmt = LOCAL_FORMATS[path.suffix]
        kwargs = {"sample_by": cfg.get("sample_by", "paragraph")} if fmt == "text" else {}
        rows = _stream(fmt, None, "train", data_files={"train": str(path)}, **kwargs)
        out[split] = _texts(rows, cfg.get("text_field", "text"), str(path))
    return carve(out, {**CARVE, **cfg.get("carve", {})})


def synthetic_documents(cfg: dict, seed: int) -> dict[str, Iterator[dict]]:
    from corpora.synthetic import WorldConfig, generate_split

    try:
        world = WorldConfig(**cfg)
    except TypeError as e:
        raise CorpusError(f"corpus.synthetic: {e}") from e
    return {s: generate_split(world, s, seed) for s in SPLITS}


def split_path(corpus_dir: Path, split: str) -> Path:
    """The jsonl file of ``split``, refused when missing."""
    path = Path(corpus_dir) / f"{split}.jsonl"
    if not path.is_file():
        raise CorpusError(f"{path}: corpus split missing; run the 'corpus' rule to create it")
    return path


def document_spans(corpus_dir: Path, split: str, every: int) -> list[tuple[int, int, int]]:
    """``(start byte, end byte, first line)`` of consecutive runs of ``every`` documents of ``split``
    (one run for an empty split), for ``read_documents``."""
    bounds, lines = [(0, 1)], 0
    with open(split_path(corpus_dir, split), "rb") as f:
        for _ in f:
            lines += 1
            if lines % every == 0:
                bounds.append((f.tell(), lines + 1))
        end = f.tell()
    if bounds[-1][0] != end or len(bounds) == 1:
        bounds.append((end, lines + 1))
    return [(a, b, first) for (a, first), (b, _) in zip(bounds, bounds[1:])]


def read_documents(corpus_dir: Path, split: str, span: tuple[int, int, int] | None = None) -> Iterator[dict]:
    """The documents of ``split``, or of one ``document_spans`` span of it."""
    path = split_path(corpus_dir, split)
    start, end, first = span or (0, None, 1)
    with open(path, "rb") as f:
        f.seek(start)
        for i, line in enumerate(iter(lambda: f.readline() if end is None or f.tell() < end else b"", b""), first):
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                raise CorpusError(f"{path}:{i}: not valid JSON ({e}); delete {path.parent} and re-run 'corpus'") from e
