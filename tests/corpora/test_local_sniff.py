"""corpora.sources.local_file_problem accepts what the local readers read (review31)."""
import json

from corpora.sources import _stream, _texts, local_file_problem


def test_utf8_bom_jsonl_is_accepted_and_read(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"text": f"doc {i}"}) for i in range(3)) + "\n", encoding="utf-8-sig")
    assert local_file_problem(path) is None
    rows = list(_texts(_stream("json", None, "train", data_files={"train": str(path)}), "text", str(path)))
    assert [row["text"] for row in rows] == ["doc 0", "doc 1", "doc 2"]
