"""Local-file mode: each supported format gives lm-eval exactly the prompt, choices and target of the
HF-format row it encodes; bad files are one-line errors; the development machine's copies
(docs/sources.md, "Local copies of real data") load (skipped when that folder is absent)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.harness.errors import HarnessError
from evals.tasks.local_data import EXAMPLE_CONFIG, LOCAL_TASKS, prepare_local_tasks, read_config

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data"
ENDINGS = ["is using wrap to wrap a pair of skis.", "is ripping level tiles off.", "is holding a rubik's cube.",
           "starts pulling up roofing on a roof."]
PASSAGE = "The sky appears blue because air scatters short wavelengths more than long ones."
# task -> (HF-format row, {format: (file content, extra config)})
CASES = {
    "lambada_openai": ({"text": "she looked at the old map and pointed to the harbor"},
                       {"llmfoundry": ({"context": "she looked at the old map and pointed to the",
                                        "continuation": "harbor"}, {})}),
    "piqa": ({"goal": "open a jar", "sol1": "twist the lid", "sol2": "eat the lid", "label": 0},
             {"piqa_original": ({"goal": "open a jar", "sol1": "twist the lid", "sol2": "eat the lid"},
                                {"labels": "0\n"}),
              "llmfoundry": ({"query": "Question: open a jar\n", "choices": ["twist the lid", "eat the lid"],
                              "gold": 0}, {})}),
    "arc_easy": ({"id": "q1", "question": "Which is a fruit?", "answerKey": "B",
                  "choices": {"text": ["rock", "apple", "car"], "label": ["A", "B", "C"]}},
                 {"ai2": ({"id": "q1", "answerKey": "B", "question": {"stem": "Which is a fruit?", "choices": [
                     {"text": "rock", "label": "A"}, {"text": "apple", "label": "B"},
                     {"text": "car", "label": "C"}]}}, {}),
                  "llmfoundry": ({"query": "Question: Which is a fruit?", "choices": ["rock", "apple", "car"],
                                  "gold": 1}, {})}),
    "hellaswag": ({"activity_label": "Roof shingle removal", "ctx_a": "A man is sitting on a roof.", "ctx_b": "he",
                   "endings": ENDINGS, "label": "3"},
                  {"llamacpp": ("Roof shingle removal: A man is sitting on a roof. he\n3\n" + "\n".join(ENDINGS) + "\n",
                                {})}),
    "winogrande": ({"sentence": "Sarah was a much better surgeon than Maria so _ always got the harder cases.",
                    "option1": "Sarah", "option2": "Maria", "answer": "2"},
                   {"llmfoundry": ({"context_options": ["Sarah was a much better surgeon than Maria so Sarah",
                                                        "Sarah was a much better surgeon than Maria so Maria"],
                                    "continuation": "always got the harder cases.", "gold": 1}, {})}),
    "boolq": ({"passage": PASSAGE, "question": "is the sky blue", "label": 1, "idx": 0},
              {"boolq_original": ({"passage": PASSAGE, "question": "is the sky blue", "answer": "True",
                                   "title": "Sky"}, {})}),
    "openbookqa": ({"id": "o1", "question_stem": "Predators eat", "answerKey": "C",
                    "choices": {"text": ["lions", "humans", "bunnies", "grass"], "label": ["A", "B", "C", "D"]}},
                   {"llmfoundry": ({"query": "Predators eat", "choices": ["lions", "humans", "bunnies", "grass"],
                                    "gold": 2}, {})}),
    "wikitext": ({"page": " = Art = \n \n The art @-@ form is old . \n"},
                 {"raw": (" \n = Art = \n \n The art @-@ form is old . \n", {}),
                  "tokens": (" \n = Art = \n \n The art @-@ form is old . \n", {})}),
}
TEXT_FORMATS = ("llamacpp", "raw", "tokens")


def write(folder: Path, task: str, fmt: str, content, extra: dict) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{task}.{'txt' if fmt in TEXT_FORMATS else 'jsonl'}"
    path.write_text(content if isinstance(content, str) else json.dumps(content) + "\n")
    spec = {"path": str(path), "format": fmt}
    if "labels" in extra:
        (folder / "labels.lst").write_text(extra["labels"])
        spec["labels"] = str(folder / "labels.lst")
    return spec


def views(folder: Path, tasks: list[str]) -> dict:
    from lm_eval.tasks import TaskManager

    loaded = TaskManager(include_path=str(folder), include_defaults=False).load(tasks)["tasks"]
    out = {}
    for name, task in loaded.items():
        doc = next(iter(task.eval_docs))
        choice = task.doc_to_choice(doc) if task.OUTPUT_TYPE == "multiple_choice" else None
        out[name] = (task.doc_to_text(doc), choice, task.doc_to_target(doc), task.config.metadata["version"])
    return out


def test_every_format_gives_lm_eval_the_same_item_as_the_hf_columns(tmp_path):
    hf_cfg = {task: write(tmp_path / "hf_in", task, "hf", row, {}) for task, (row, _) in CASES.items()}
    prepare_local_tasks(hf_cfg, tmp_path / "hf_tasks")
    reference = views(tmp_path / "hf_tasks", list(CASES))
    assert reference["hellaswag"][0] == "Roof shingle removal: A man is sitting on a roof. He"
    assert reference["winogrande"][1][reference["winogrande"][0]].endswith("Maria")
    n_formats = max(len(f) for _, f in CASES.values())
    for i in range(n_formats):
        cfg = {}
        for task, (_, formats) in CASES.items():
            if i < len(formats):
                fmt, (content, extra) = list(formats.items())[i]
                cfg[task] = write(tmp_path / f"in{i}" / task, task, fmt, content, extra)
        manifest = prepare_local_tasks(cfg, tmp_path / f"tasks{i}")
        got = views(tmp_path / f"tasks{i}", list(cfg))
        for task in cfg:
            assert got[task] == reference[task], (task, cfg[task]["format"])
            assert manifest[task]["rows"] == 1 and len(manifest[task]["sha256"]) == 64
            # one document is not lm-eval's split: never the canonical set
            assert manifest[task]["exact"] is False and "1 documents where lm-eval's" in manifest[task]["why"]
            assert manifest[task]["comparable"] is (cfg[task]["format"] != "tokens")


def test_wikitext_is_cut_into_articles_at_level_one_headings():
    from evals.tasks.local_data import wikitext_pages

    text = " \n = First = \n \n Text one . \n \n = = Section = = \n More . \n = Second = \n Two . \n"
    pages = wikitext_pages(text.split("\n"))
    assert [p["page"].split("\n")[0] for p in pages] == [" = First = ", " = Second = "]
    assert "= = Section = =" in pages[0]["page"] and pages[1]["page"] == " = Second = \n Two . \n"


def test_a_changed_copy_or_a_declared_subset_is_said(tmp_path):
    spec = write(tmp_path / "in", "piqa", "hf", CASES["piqa"][0], {})
    one_line_error({"piqa": {**spec, "sha256": "0" * 64}}, tmp_path, r"piqa.jsonl: sha256 .* differs from the "
                   r"manifest's 000000000000\.\.\. \(tasks.piqa.sha256\): the file changed")
    manifest = prepare_local_tasks({"piqa": {**spec, "exact": False, "note": "our own subset"}}, tmp_path / "t")
    assert manifest["piqa"]["exact"] is False and "our own subset" in manifest["piqa"]["why"]
    for entry, match in (("{path: x.jsonl, exact: true}", "only 'exact: false' may be given"),
                         ("{path: x.jsonl, format: piqa_orignal}", r"tasks.piqa.format 'piqa_orignal' is unknown; use "
                                                                   r"one of \['hf', 'llmfoundry', 'piqa_original'\]"),
                         ("{path: x.jsonl, sha256: 1234567}", "sha256 must be the file's 64 lower-case hex digits, "
                                                              "quoted"),
                         ("{path: x.jsonl, sha256: " + "0" * 64 + "}", "sha256 must be .* quoted \\(got 0\\)")):
        (tmp_path / "cfg.yaml").write_text(f"tasks:\n  piqa: {entry}\n")
        with pytest.raises(HarnessError, match=match):
            read_config(tmp_path / "cfg.yaml")


def test_yaml_keeps_the_upstream_task_and_points_at_absolute_files(tmp_path):
    cfg = {"piqa": write(tmp_path / "in", "piqa", "hf", CASES["piqa"][0], {})}
    prepare_local_tasks(cfg, tmp_path / "tasks")
    text = (tmp_path / "tasks" / "piqa.yaml").read_text()
    assert "include: /" in text and "lm_eval/tasks/piqa/piqa.yaml" in text
    assert f"validation: {tmp_path}/in/piqa.jsonl" in text


def one_line_error(cfg, tmp_path, match):
    with pytest.raises(HarnessError, match=match) as err:
        prepare_local_tasks(cfg, tmp_path / "out")
    assert "\n" not in str(err.value)


def test_bad_local_data_is_a_one_line_error(tmp_path):
    piqa = CASES["piqa"][0]
    one_line_error({"piqa": {"path": str(tmp_path / "nope.jsonl"), "format": "hf"}}, tmp_path, "not found")
    bad = {k: v for k, v in piqa.items() if k != "sol2"}
    one_line_error({"piqa": write(tmp_path / "a", "piqa", "hf", bad, {})}, tmp_path,
                   r"piqa.jsonl:1: missing field 'sol2'")
    one_line_error({"piqa": write(tmp_path / "b", "piqa", "hf", "goal,sol1\nx,y\n", {})}, tmp_path, "not JSON lines")
    one_line_error({"piqa": write(tmp_path / "c", "piqa", "hf", {**piqa, "label": 2}, {})}, tmp_path, "label=2")
    one_line_error({"piqa": {**write(tmp_path / "d", "piqa", "hf", piqa, {}), "format": "csvish"}}, tmp_path,
                   "unknown format 'csvish'")
    one_line_error({"piqa": write(tmp_path / "e", "piqa", "piqa_original", piqa, {"labels": "0\n1\n"})}, tmp_path,
                   "2 labels for 1 rows")
    one_line_error({"hellaswag": write(tmp_path / "f", "hellaswag", "llamacpp", "x: y\n3\na\nb\n", {})}, tmp_path,
                   "not a multiple of 6")
    winogrande = CASES["winogrande"][1]["llmfoundry"][0]  # a row of another task
    one_line_error({"arc_easy": write(tmp_path / "g", "arc_easy", "llmfoundry", winogrande, {})}, tmp_path,
                   r"arc_easy.jsonl:1: missing field 'query' \(local data for arc_easy, format llmfoundry")
    (tmp_path / "cfg.yaml").write_text("tasks:\n  squadv2: {path: x.jsonl}\n")
    with pytest.raises(HarnessError, match="no local-file mode"):
        read_config(tmp_path / "cfg.yaml")


def test_config_paths_resolve_against_root(tmp_path):
    cfg = read_config(EXAMPLE_CONFIG, root=tmp_path)
    assert set(cfg) <= set(LOCAL_TASKS) and len(cfg) == 9
    assert cfg["piqa"]["path"] == str(tmp_path / "piqa" / "valid.jsonl") and cfg["piqa"]["format"] == "piqa_original"


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason='no local data copies (docs/sources.md, "Local copies of real data")')
def test_shared_data_copies_load_and_evaluate(world_run, tmp_path):
    from evals.harness.run import evaluate

    r = evaluate(world_run["run_dir"], world_run["tokenizer"], "conceptlm_zeroshot,conceptlm_ppl,dlcm_zeroshot",
                 tmp_path / "eval" / "local.json", local_data=EXAMPLE_CONFIG, local_root=SHARED, local_only=True,
                 limit=4, batch_size=8)
    for task in ("lambada_openai", "arc_easy", "arc_challenge", "piqa", "hellaswag", "winogrande", "boolq",
                 "openbookqa"):
        assert r["metrics"][f"{task}/acc"] is not None
        assert r["details"]["tasks"][task]["local_data"]["sha256"]
        assert r["details"]["tasks"][task]["n_samples"]["effective"] == 4
    assert r["metrics"]["wikitext/ppl"] > 1 and r["details"]["local_data"]["wikitext"]["comparable"] is False
    assert r["details"]["local_data"]["hellaswag"]["exact"] is False
    assert r["details"]["local_data"]["lambada_openai"]["exact"] is True
    assert {"sciq", "race", "mmlu", "commonsense_qa"} <= set(r["details"]["unavailable_tasks"])
    assert r["details"]["offline"] is True


def test_hf_columns_in_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [CASES["arc_easy"][0], {**CASES["arc_easy"][0], "id": "q2", "answerKey": "C"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "arc.parquet")
    manifest = prepare_local_tasks({"arc_easy": {"path": str(tmp_path / "arc.parquet"), "format": "hf"}},
                                   tmp_path / "tasks")
    assert manifest["arc_easy"]["rows"] == 2
    text, choices, target, _ = views(tmp_path / "tasks", ["arc_easy"])["arc_easy"]
    assert text == "Question: Which is a fruit?\nAnswer:" and choices == ["rock", "apple", "car"] and target == 1
