"""Tokenizers and the one-time tokenisation of a corpus into memmaps.

* ``train_bpe``: byte-level BPE with HF ``tokenizers`` on the training split, vocabulary size per
  config, ``<|endoftext|>`` as the only special token (id 0).
* ``load_tokenizer``: a trained ``tokenizer.json`` or, for full-scale profiles, a pretrained one through
  ``transformers``: from a local folder (a ``tokenizer.json``, or GPT-2's ``encoder.json`` + ``vocab.bpe``)
  or by hub name (``gpt2``, ``EleutherAI/gpt-neox-20b``; needs the hub or its cache).
* ``train_chars``: one token per character of a given alphabet (Sudoku's grids: ``0``-``9`` and the
  row separator ``|``, FMLM+'s 12-token vocabulary with ``<|endoftext|>`` as its BOS / EOS), written
  as a ``tokenizer.json`` like the BPE's.
* ``tokenize_corpus``: every split once into ``{split}.bin`` laid out
  ``EOT doc_1 EOT doc_2 EOT ... doc_n EOT``, so every document and its end are predicted from the
  preceding EOT; the manifest records the token counts, the file hashes, the tokenizer hash and
  the oracle NLL carried over from the corpus manifest. Sharded across worker processes and
  resumable shard by shard (a killed job keeps its finished shards); the bytes do not depend on either.
* ``tokenize_pairs``: a paired corpus into fixed records ``source | target`` of ``source_len +
  target_len`` tokens (layout, ``manifest["layout"]``), then one EOT, so window i of the trainer's
  ``WindowOrder`` (length source_len + target_len) is exactly example i. The source is cut to
  source_len or padded with EOT; the target is followed by one EOT when it fits (a target of exactly
  target_len tokens, a Sudoku solution, has none) and padded with EOT; a longer target is cut. The
  manifest counts the cut sources and targets per split.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
from pathlib import Path
from typing import NamedTuple

import numpy as np

from common.errors import ReproError
from common.io import atomic_write, atomic_write_json, atomic_write_text, remove_debris, sha256_file
from corpora.sources import SPLITS, document_spans, read_documents

EOT = "<|endoftext|>"
PRETRAINED = {"gpt2": "gpt2", "gpt-neox": "EleutherAI/gpt-neox-20b", "pythia": "EleutherAI/pythia-160m"}


class TokenizerError(ReproError, RuntimeError):
    """A tokenizer is missing, unreadable or does not match the tokens it is used with."""


def train_bpe(corpus_dir: Path, vocab_size: int, min_frequency: int, out_path: Path) -> str:
    """Train byte-level BPE on the train split; write ``tokenizer.json``; return its sha256."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((d["text"] for d in read_documents(corpus_dir, "train")), trainer=trainer)
    atomic_write_text(out_path, tok.to_str())
    return sha256_file(out_path)


def train_chars(alphabet: str, out_path: Path) -> str:
    """A character-level ``tokenizer.json``: ``<|endoftext|>`` id 0, then each character of ``alphabet``
    in order; every character is its own token (no merges). Return its sha256."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    if len(set(alphabet)) != len(alphabet):
        raise TokenizerError(f"tokenizer.alphabet={alphabet!r} repeats a character; list each once")
    vocab = {EOT: 0, **{c: i + 1 for i, c in enumerate(alphabet)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=EOT))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([EOT])
    atomic_write_text(out_path, tok.to_str())
    return sha256_file(out_path)


class LoadedTokenizer:
    """Uniform view over a ``tokenizers.Tokenizer`` and a pretrained ``transformers`` tokenizer;
    ``spec`` = the ``load_tokenizer`` arguments, with which a worker process loads it again."""

    def __init__(self, encode_batch, decode, vocab_size: int, eot_id: int, sha256: str, spec: tuple = ()):
        self.encode_batch, self.decode = encode_batch, decode
        self.vocab_size, self.eot_id, self.sha256, self.spec = vocab_size, eot_id, sha256, spec


def load_tokenizer(tokenizer_cfg: dict, path: Path | None = None) -> LoadedTokenizer:
    if tokenizer_cfg["kind"] in ("bpe", "chars"):
        from tokenizers import Tokenizer

        if path is None or not Path(path).is_file():
            raise TokenizerError(f"{path}: tokenizer file missing; run the 'tokenizer' rule")
        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:
            raise TokenizerError(f"{path}: unreadable tokenizer ({e}); delete it and re-run 'tokenizer'") from e
        encode = (lambda texts: [e.ids for e in tok.encode_batch(texts)]) if tokenizer_cfg["kind"] == "bpe" \
            else _strict_chars(tok)
        return LoadedTokenizer(encode, tok.decode, tok.get_vocab_size(), tok.token_to_id(EOT), sha256_file(path),
                               (tokenizer_cfg, path))
    tok, sha256 = pretrained_tokenizer(tokenizer_cfg["name"])
    return LoadedTokenizer(lambda texts: tok(texts, add_special_tokens=False)["input_ids"], tok.decode,
                           len(tok), tok.eos_token_id, sha256, (tokenizer_cfg, path))


def pretrained_record(path: Path) -> str | None:
    """The tokenizer name of the record ``{"pretrained": name, ...}`` the tokenizer rule writes as a data
    folder's ``tokenizer.json`` for a pretrained tokenizer; None for any other file (a trained tokenizer)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size > 4096:
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record.get("pretrained") if isinstance(record, dict) else None


def backend_tokenizer(path: Path):
    """The ``tokenizers.Tokenizer`` behind a data folder's ``tokenizer.json``: the file itself (a trained BPE) or
    the backend of the pretrained tokenizer its record names. Encode with ``add_special_tokens=False``, as
    ``tokenize`` does."""
    from tokenizers import Tokenizer

    pretrained = pretrained_record(path)
    if pretrained is not None:
        return pretrained_tokenizer(pretrained)[0].backend_tokenizer
    try:
        return Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception
        raise TokenizerError(f"{path}: unreadable tokenizer ({str(e).splitlines()[0]}); re-run 'tokenizer'") from None


GPT2_FILES = ("encoder.json", "vocab.bpe")  # OpenAI's original GPT-2 BPE: the vocabulary and the merges


def pretrained_tokenizer(name: str):
    """``(transformers tokenizer, sha256)`` of ``tokenizer.name``: a local folder — a ``tokenizer.json``
    (GPT-NeoX's, any saved HF tokenizer; its ``tokenizer_config.json`` read when present) or GPT-2's
    ``encoder.json`` + ``vocab.bpe`` — hashed by its files, so an edited file is a new tokenizer; or a
    hub name (``gpt2``, ``gpt-neox``, ``pythia`` or any id), which needs the hub or its cache."""
    folder = Path(name).expanduser()
    if folder.is_dir():
        return _local_tokenizer(folder)
    from transformers import AutoTokenizer

    hub = PRETRAINED.get(name, name)
    try:
        return AutoTokenizer.from_pretrained(hub), "pretrained:" + hub
    except (OSError, ValueError) as e:
        raise TokenizerError(f"tokenizer {hub!r} is not available offline ({str(e).splitlines()[0]}); download it "
                             "once with network, or set tokenizer.name to a local folder (tokenizer.json, or "
                             "encoder.json + vocab.bpe)") from None


def _gpt2_bpe(folder: Path):
    """GPT-2's byte-level BPE from OpenAI's files, set up as the hub's ``gpt2`` tokenizer.json is: byte-level
    pre-tokenizer with GPT-2's regex and no prefix space, byte-level decoder, <|endoftext|> a special token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    tok = Tokenizer(models.BPE.from_file(str(folder / "encoder.json"), str(folder / "vocab.bpe")))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.decoder = decoders.ByteLevel()
    if tok.token_to_id(EOT) is None:
        raise TokenizerError(f"tokenizer.name {str(folder)!r}: no end-of-text token ({EOT}) in encoder.json; "
                             "documents need one to be separated")
    tok.add_special_tokens([EOT])
    return tok


def _local_tokenizer(folder: Path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    files = {path.name for path in folder.iterdir()}
    try:
        if "tokenizer.json" in files:
            used = ["tokenizer.json"] + [name for name in ("tokenizer_config.json", "special_tokens_map.json")
                                         if name in files]
            tok = (AutoTokenizer.from_pretrained(str(folder)) if "tokenizer_config.json" in files
                   else PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), eos_token=EOT))
        elif set(GPT2_FILES) <= files:
            used = list(GPT2_FILES)
            tok = PreTrainedTokenizerFast(tokenizer_object=_gpt2_bpe(folder), eos_token=EOT, bos_token=EOT,
                                          unk_token=EOT)
        else:
            missing = [name for name in GPT2_FILES if name not in files]
            raise TokenizerError(f"tokenizer.name {str(folder)!r}: the folder has neither tokenizer.json nor "
                                 f"encoder.json + vocab.bpe (missing {' and '.join(missing)}); add them or name "
                                 "another folder")
    except TokenizerError:
        raise
    except Exception as e:  # a truncated or foreign file (tokenizers raises a bare Exception)
        raise TokenizerError(f"tokenizer.name {str(folder)!r}: unreadable tokenizer files "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__}); replace them") from None
    if tok.eos_token is None or tok.eos_token not in tok.get_vocab():
        raise TokenizerError(f"tokenizer.name {str(folder)!r}: no end-of-text token ({EOT}) in its vocabulary; "
                             "documents need one to be separated")
    digest = hashlib.sha256("".join(f"{name}:{sha256_file(folder / name)}\n" for name in used).encode())
    return tok, "local:" + digest.hexdigest()


def _write_splits(corpus_dir: Path, tok: LoadedTokenizer, out_dir: Path, body, extra: dict | None = None) -> dict:
    """The one writer of token files: for every split, ``body(f, split, dtype)`` writes its ids to a
    temporary file and returns the split's counts; the file is synced, moved in place and hashed, and
    the manifest (tokenizer and corpus hashes, ``extra``, every split) written last, atomically."""
    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    corpus_manifest = json.loads((corpus_dir / "manifest.json").read_text())
    dtype = np.uint16 if tok.vocab_size <= 1 << 16 else np.uint32
    out_dir.mkdir(parents=True, exist_ok=True)
    splits = {}
    for split in SPLITS:
        path = out_dir / f"{split}.bin"
        remove_debris(out_dir, path.name)
        with atomic_write(path, "wb") as f:
            counts = body(f, split, dtype)
        splits[split] = {"file": path.name, "dtype": np.dtype(dtype).name, **counts, "sha256": sha256_file(path),
                         "oracle_nll": corpus_manifest["splits"][split]["oracle_nll"]}
    manifest = {"tokenizer_sha256": tok.sha256, "vocab_size": tok.vocab_size, "eot_id": tok.eot_id,
                "corpus_sha256": sha256_file(corpus_dir / "manifest.json"), **(extra or {}), "splits": splits}
    atomic_write_json(out_dir / "manifest.json", manifest)
    return manifest


def _strict_chars(tok):
    """A character tokenizer's encoder that refuses characters outside its alphabet (its WordLevel model
    would map them to <|endoftext|> in silence)."""
    alphabet = set(tok.get_vocab()) - {EOT}

    def encode(texts: list[str]) -> list[list[int]]:
        for text in texts:
            bad = set(text) - alphabet
            if bad:
                raise TokenizerError(f"character {min(bad)!r} of {text[:40]!r} is not in the tokenizer's alphabet "
                                     f"{''.join(sorted(alphabet))!r}; add it to tokenizer.alphabet or clean the corpus")
        return [e.ids for e in tok.encode_batch(texts)]

    return encode


SHARD_DOCS = 100_000  # documents per shard of tokenize_corpus: the unit of parallel work and of resuming
PARTS = ".parts"      # finished shards, beside the token files until the split is assembled
# Test hooks (tests/workflows/test_rerun.py, through Snakemake): another shard size (the bytes do not change), and
# a SIGKILL of the tokenizing process after its N-th finished shard, as a crash would. Unset in normal runs.
SHARD_DOCS_ENV, FAULT_ENV = "REPRO_SHARD_DOCS", "REPRO_SIGKILL_AFTER_SHARD"


def tokenize_corpus(corpus_dir: Path, tok: LoadedTokenizer, out_dir: Path, batch_docs: int = 1000,
                    workers: int = 1, shard_docs: int | None = None) -> dict:
    """Write ``{split}.bin`` for every split and the tokens manifest; return the manifest.

    Each split is cut into shards of ``shard_docs`` documents, tokenized by ``workers`` processes (each
    loads the tokenizer again from ``tok.spec``) into ``out_dir/.parts/``, every finished shard recorded
    with its counts, sha256 and what it was made from (the corpus split's and the tokenizer's hashes, its
    line range). A killed job keeps its finished shards: the next run re-hashes them, keeps those made
    from the same corpus and tokenizer and tokenizes the rest. The split file is the shards in order
    after the leading EOT, so its bytes (and hash) do not depend on the shard size or the worker count."""
    corpus_dir, out_dir = Path(corpus_dir), Path(out_dir)
    corpus_manifest = json.loads((corpus_dir / "manifest.json").read_text())
    parts = out_dir / PARTS
    shard_docs = shard_docs or int(os.environ.get(SHARD_DOCS_ENV, SHARD_DOCS))

    def body(f, split: str, dtype) -> dict:
        made_from = {"corpus_split_sha256": corpus_manifest["splits"][split]["sha256"], "tokenizer_sha256": tok.sha256}
        shards = [Shard(str(corpus_dir), split, span, str(parts / f"{split}-{i:05d}.bin"), np.dtype(dtype).name,
                        batch_docs, made_from) for i, span in enumerate(document_spans(corpus_dir, split, shard_docs))]
        parts.mkdir(parents=True, exist_ok=True)
        todo = [shard for shard in shards if _finished(shard) is None]
        if len(todo) < len(shards):
            print(f"{split}: {len(shards) - len(todo)} of {len(shards)} shards kept from an interrupted run",
                  flush=True)
        if workers > 1 and len(todo) > 1:
            import multiprocessing as mp

            with mp.get_context("spawn").Pool(min(workers, len(todo)), _worker_init, (tok.spec,)) as pool:
                pool.map(_tokenize_shard, todo)
        else:
            global _WORKER_TOK
            _WORKER_TOK = tok
            for shard in todo:
                _tokenize_shard(shard)
        f.write(np.array([tok.eot_id], dtype=dtype).tobytes())
        n_tokens, n_docs = 1, 0
        for shard in shards:
            record = _finished(shard, rehash=False)
            with open(shard.part, "rb") as part:
                shutil.copyfileobj(part, f, 1 << 24)
            n_tokens, n_docs = n_tokens + record["n_tokens"], n_docs + record["n_docs"]
        return {"n_tokens": n_tokens, "n_docs": n_docs}

    manifest = _write_splits(corpus_dir, tok, out_dir, body)
    shutil.rmtree(parts, ignore_errors=True)
    return manifest


class Shard(NamedTuple):
    """One unit of ``tokenize_corpus``: documents ``span`` (``corpora.sources.document_spans``) of a split,
    tokenized into ``part``; ``made_from`` = the corpus split's and the tokenizer's hashes."""
    corpus_dir: str
    split: str
    span: tuple[int, int, int]
    part: str
    dtype: str
    batch_docs: int
    made_from: dict

    def identity(self) -> dict:
        """What a finished shard's record must repeat for the shard to be kept."""
        return {"split": self.split, "span": list(self.span), "dtype": self.dtype, **self.made_from}


_WORKER_TOK: LoadedTokenizer | None = None  # a shard worker's tokenizer (loaded once per process)
_FINISHED = 0  # shards this process has finished (for the FAULT_ENV hook)


def _worker_init(spec: tuple) -> None:
    global _WORKER_TOK
    _WORKER_TOK = load_tokenizer(*spec)


def _finished(shard: Shard, rehash: bool = True) -> dict | None:
    """The record of ``shard`` when its part is finished (same identity and, with ``rehash``, bytes), else None."""
    part = Path(shard.part)
    try:
        record = json.loads(part.with_suffix(".json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if any(record.get(k) != v for k, v in shard.identity().items()) or not part.is_file():
        return None
    if rehash and sha256_file(part) != record["sha256"]:
        return None
    return record


def _tokenize_shard(shard: Shard) -> None:
    """Tokenize the shard's documents into its part (each document's ids and an EOT), then record it: the
    part is written to a temporary file, synced and moved in place before its record, so a record always
    describes a whole part."""
    tok, part = _WORKER_TOK, Path(shard.part)
    n_tokens = n_docs = 0
    remove_debris(part.parent, part.name)
    with atomic_write(part, "wb") as f:
        texts = (d["text"] for d in read_documents(Path(shard.corpus_dir), shard.split, shard.span))
        for batch in _batches(texts, shard.batch_docs):
            for ids in tok.encode_batch(batch):
                f.write(np.array(ids + [tok.eot_id], dtype=shard.dtype).tobytes())
                n_tokens += len(ids) + 1
            n_docs += len(batch)
    atomic_write_json(part.with_suffix(".json"), {**shard.identity(), "n_tokens": n_tokens, "n_docs": n_docs,
                                                  "sha256": sha256_file(part)})
    global _FINISHED
    _FINISHED += 1
    if os.environ.get(FAULT_ENV) == str(_FINISHED):
        os.kill(os.getpid(), signal.SIGKILL)


def tokenize_pairs(corpus_dir: Path, tok: LoadedTokenizer, out_dir: Path, layout: dict, batch_docs: int = 1000) -> dict:
    """Write the paired records (module docstring) of every split and the tokens manifest; return it."""
    P, L = layout["source_len"], layout["target_len"]

    def body(f, split: str, dtype) -> dict:
        cut, n_docs = {"source": 0, "target": 0}, 0
        for rows in _batches(read_documents(corpus_dir, split), batch_docs):
            sources = tok.encode_batch([r["source"] for r in rows])
            targets = tok.encode_batch([r["target"] for r in rows])
            for src, tgt in zip(sources, targets):
                cut["source"] += len(src) > P
                cut["target"] += len(tgt) > L
                f.write(np.array(_fit(src, P, tok.eot_id) + _fit(tgt + [tok.eot_id], L, tok.eot_id),
                                 dtype=dtype).tobytes())
            n_docs += len(rows)
        if n_docs == 0:
            raise TokenizerError(f"{Path(corpus_dir) / f'{split}.jsonl'}: no examples; "
                                 f"give the paired corpus a {split} split")
        f.write(np.array([tok.eot_id], dtype=dtype).tobytes())
        return {"n_tokens": n_docs * (P + L) + 1, "n_docs": n_docs, "cut_sources": cut["source"],
                "cut_targets": cut["target"]}

    return _write_splits(corpus_dir, tok, out_dir, body, {"layout": dict(layout)})


def _fit(ids: list[int], length: int, pad: int) -> list[int]:
    """``ids`` cut to ``length`` or padded with ``pad`` up to it."""
    return ids[:length] + [pad] * max(0, length - len(ids))


def _batches(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def check_tokenizer(tokens_manifest: dict, tokenizer_sha256: str, where: Path) -> None:
    if tokens_manifest["tokenizer_sha256"] != tokenizer_sha256:
        raise TokenizerError(f"{where}: tokens were made by tokenizer {tokens_manifest['tokenizer_sha256'][:12]}, "
                             f"the tokenizer given is {tokenizer_sha256[:12]}; delete {where} and re-run 'tokenize'")
