"""corpora.sources.local_file_problem accepts what the local readers read."""
import json

from corpora.sources import _stream, _texts, local_file_problem


def test_utf8_bom_jsonl_is_accepted_and_read(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"text": f"doc {i}"}) for i in range(3)) + "\n", encoding="utf-8-sig")
    assert local_file_problem(path) is None
    rows = list(_texts(_stream("json", None, "train", data_files={"train": str(path)}), "text", str(path)))
    assert [row["text"] for row in rows] == ["doc 0", "doc 1", "doc 2"]


def test_truncated_parquet_and_non_text_field_are_one_line(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from corpora.sources import CorpusError, local_documents

    pq.write_table(pa.table({"text": [f"doc {i}" for i in range(100)]}), tmp_path / "good.parquet")
    data = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[:len(data) // 2])
    assert local_file_problem(tmp_path / "good.parquet") is None
    assert "truncated parquet" in local_file_problem(tmp_path / "cut.parquet")
    (tmp_path / "num.jsonl").write_text('{"text": 5}\n')
    with pytest.raises(CorpusError, match="holds a int, not text"):
        list(local_documents({"train": str(tmp_path / "num.jsonl")})["train"])


def test_utf16_is_named_as_such(tmp_path):
    (tmp_path / "t.txt").write_text("hello world\n" * 5, encoding="utf-16")
    assert local_file_problem(tmp_path / "t.txt").startswith("UTF-16 text, not UTF-8")
