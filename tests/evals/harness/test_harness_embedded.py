"""Embedded tasks: deterministic from the world seed, well-formed, long-range by construction, and
loadable by lm-eval as versioned local tasks."""
from __future__ import annotations

import json

import pytest

from corpora.synthetic import WorldConfig, generate_split
from evals.tasks.embedded import TASKS, build_embedded_tasks, task_versions
from workflows.cli import main as cli_main

SMALL_WORLD = {"train_docs": 10, "valid_docs": 5, "test_docs": 60}  # as embedded_dir (tests/evals/harness/conftest.py)


def rows(folder, task):
    return [json.loads(line) for line in (folder / f"{task}.jsonl").read_text().splitlines()]


def test_same_seed_same_bytes_other_seed_other_items(embedded_dir, tmp_path):
    again = build_embedded_tasks(SMALL_WORLD, 0, tmp_path / "again", n_items=24, n_ppl_docs=8)
    for task in TASKS:
        assert (embedded_dir / f"{task}.jsonl").read_bytes() == (tmp_path / "again" / f"{task}.jsonl").read_bytes()
    assert again["tasks"]["embedded_cloze"]["sha256"] == json.loads(
        (embedded_dir / "manifest.json").read_text())["tasks"]["embedded_cloze"]["sha256"]
    other = build_embedded_tasks(SMALL_WORLD, 1, tmp_path / "other", n_items=24, n_ppl_docs=8)
    assert other["tasks"]["embedded_cloze"]["sha256"] != again["tasks"]["embedded_cloze"]["sha256"]


def test_items_are_long_range_and_consistent_with_the_documents(embedded_dir):
    docs = {d["id"]: d for d in generate_split(WorldConfig(**SMALL_WORLD), "test", 0)}
    cloze = rows(embedded_dir, "embedded_cloze")
    assert len(cloze) == 24 and len({r["id"] for r in cloze}) == 24
    for r in cloze:
        word = r["target"].strip()
        assert r["target"][:1].isspace() and word.isalpha()
        assert docs[r["doc_id"]]["text"].startswith(r["context"] + r["target"])
        assert word in r["context"]  # the answer is in the passage...
        last = r["context"].rsplit(".", 2)[-2:]  # ...but not in the sentence or the one before it
        assert word not in "".join(last).split()
    choice = rows(embedded_dir, "embedded_choice")
    assert len(choice) == 24 and len({r["label"] for r in choice}) > 1
    for r in choice:
        gold = r["endings"][r["label"]]
        assert docs[r["doc_id"]]["text"].startswith(r["context"] + gold)
        assert len(set(r["endings"])) == 4
        for ending in r["endings"]:  # distractors differ from the gold sentence in one word (and its article)
            diff = [(a, b) for a, b in zip(ending.split(" "), gold.split(" ")) if a != b]
            assert len(ending.split(" ")) == len(gold.split(" ")) and len(diff) <= (0 if ending == gold else 2)
    ppl = rows(embedded_dir, "embedded_ppl")
    assert [r["text"] for r in ppl] == [d["text"] for d in list(docs.values())[:8]]


def test_tasks_load_in_lm_eval_with_versions(embedded_dir):
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(embedded_dir), include_defaults=False)
    loaded = tm.load(list(TASKS))["tasks"]
    assert set(loaded) == set(TASKS)
    for name, task in loaded.items():
        assert task.config.metadata["version"] == task_versions()[name] == 1.0
        assert len(list(task.eval_docs)) == (8 if name == "embedded_ppl" else 24)
    doc = next(iter(loaded["embedded_choice"].eval_docs))
    assert loaded["embedded_choice"].doc_to_choice(doc) == doc["endings"]


def test_cli_refuses_a_real_corpus(tmp_path, capsys):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"corpus": {"id": "tinystories", "source": "hf"}}))
    assert cli_main(["world-tasks", "--settings", str(settings), "--out", str(tmp_path / "t")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "synthetic" in err and "\n" not in err
    settings.write_text(json.dumps({"corpus": {"id": "w", "source": "synthetic", "seed": 3, "synthetic": SMALL_WORLD}}))
    assert cli_main(["world-tasks", "--settings", str(settings), "--out", str(tmp_path / "t"), "--n-items", "5",
                     "--n-ppl-docs", "3"]) == 0
    assert json.loads((tmp_path / "t" / "manifest.json").read_text())["seed"] == 3


@pytest.mark.parametrize("bad", [{"test_docs": 0}, {"no_such_field": 1}])
def test_bad_world_config_is_one_line(tmp_path, bad):
    from evals.harness.errors import HarnessError

    with pytest.raises(HarnessError, match="corpus.synthetic"):
        build_embedded_tasks(bad, 0, tmp_path)
