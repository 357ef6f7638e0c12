"""The per-operation trace of one training step (benchmarks/host_trace.py): identical on one host, and it
names the first operation where a different kernel set changes the numbers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import host_trace

ROOT = Path(__file__).resolve().parents[2]


def trace(tmp_path: Path, name: str, **env) -> dict:
    out = tmp_path / f"{name}.json"
    subprocess.run([sys.executable, "-m", "benchmarks.host_trace", "--models", "gpt2", "--out", str(out)],
                   cwd=ROOT, env={**os.environ, **env}, check=True, capture_output=True)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_two_traces_on_one_host_are_identical_and_a_kernel_set_shows_where_it_differs(tmp_path, capsys):
    a, b = trace(tmp_path, "a"), trace(tmp_path, "b")
    from common.provenance import host_pins
    assert {k: v for k, v in a["host"]["pins"].items() if v} == host_pins()   # the DAG's pins, applied
    ops = a["models"]["gpt2"]
    assert len(ops) > 1000 and {"backward", "optimizer"} <= {op["module"] for op in ops}
    assert host_trace.compare(a, b)["gpt2"] == {"ops": [len(ops)] * 2, "differing": 0, "first": None}
    # ATen's unvectorised kernels in place of its AVX2 ones: the first op that differs is named
    c = trace(tmp_path, "c", ATEN_CPU_CAPABILITY="default")
    first = host_trace.compare(a, c)["gpt2"]["first"]
    assert first is not None and first["op"] and first["module"] != "-"
    host_trace.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "c.json")])
    assert f"first #{first['index']} {first['op']}" in capsys.readouterr().out


def test_views_and_uninitialised_buffers_are_not_hashed():
    """Their bytes are not a function of the computation (an empty buffer's garbage, and views of it)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((func.overloadpacket.__name__, host_trace._is_view(func)))
            return func(*args, **(kwargs or {}))

    with Mode():
        x = torch.empty(4, 3)
        x[:, 0].fill_(1.0)
        (x + 1).sum()
    views = {name for name, view in seen if view}
    assert "empty" in host_trace.UNINITIALISED and {"select", "slice"} & views and "fill_" not in views
    assert not {"add", "sum"} & views


def test_compare_names_where_a_trace_ends_early_and_models_traced_once(tmp_path):
    op = lambda name, out: {"op": name, "module": "m", "shapes": [[2]], "out": [out]}  # noqa: E731
    a = {"benchmark": "host_trace", "models": {"gpt2": [op("mm", "1"), op("add", "2")], "ncm": [op("mm", "1")]}}
    b = {"benchmark": "host_trace", "models": {"gpt2": [op("mm", "1")], "dlcm": []}}
    r = host_trace.compare(a, b)
    assert r["gpt2"]["differing"] == 1 and r["gpt2"]["first"] == {"index": 1, **op("add", "2"), "only_in": "A"}
    assert r["ncm"]["only_in"] == "A" and r["dlcm"]["only_in"] == "B"
    b["models"]["gpt2"] = [op("mm", "9"), op("add", "2")]
    assert host_trace.compare(a, b)["gpt2"]["first"]["index"] == 0


def test_compare_refuses_what_is_not_a_trace_in_one_line(tmp_path):
    from benchmarks.common import BenchmarkError

    (tmp_path / "other.json").write_text(json.dumps({"benchmark": "ncm_sampling"}))
    (tmp_path / "bad.json").write_text("{not json")
    for name in ("other.json", "bad.json"):
        with pytest.raises(BenchmarkError, match="not a trace of python -m benchmarks.host_trace"):
            host_trace.main(["--compare", str(tmp_path / name), str(tmp_path / name)])


def test_traces_with_no_model_in_common_are_refused(tmp_path):
    from benchmarks.common import BenchmarkError

    for name, models in (("a", {"gpt2": []}), ("b", {"ncm": []})):
        (tmp_path / f"{name}.json").write_text(json.dumps({"benchmark": "host_trace", "models": models}))
    with pytest.raises(BenchmarkError, match="share no model"):
        host_trace.main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])


def test_the_shipped_reference_is_a_gzipped_trace_of_every_model_with_its_code(tmp_path, capsys):
    ref = host_trace.read_trace(str(host_trace.REFERENCE))
    assert sorted(ref["models"]) == sorted(host_trace.MODELS) and all(len(ops) > 500 for ops in ref["models"].values())
    assert ref["host"]["vendor"] == "AuthenticAMD" and len(ref["code"]) == 16 and len(ref["commit"]) == 40
    # the same trace, plain, against the gzipped one: equal; a trace of other code is said to be one
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({**ref, "code": "0" * 16}))
    r = host_trace.main(["--compare", str(host_trace.REFERENCE), str(plain)])
    assert all(m["differing"] == 0 for m in r.values())
    assert "ran different code" in capsys.readouterr().out


def test_the_shipped_intel_traces_are_one_commit_under_the_pins_and_under_mkl_compatible():
    folder = host_trace.REFERENCE.parent
    pinned, compatible = (host_trace.read_trace(str(folder / name)) for name in
                          ("host_trace_intel_xeon.json.gz", "host_trace_intel_xeon_mkl_compatible.json.gz"))
    assert pinned["host"]["vendor"] == compatible["host"]["vendor"] == "GenuineIntel"
    assert pinned["code"] == compatible["code"] and pinned["commit"] == compatible["commit"]
    assert (pinned["host"]["pins"]["MKL_CBWR"], compatible["host"]["pins"]["MKL_CBWR"]) == ("AVX2", "COMPATIBLE")
    assert sorted(pinned["models"]) == sorted(compatible["models"]) == sorted(host_trace.MODELS)


def test_against_refuses_a_missing_or_damaged_reference_before_tracing(tmp_path, monkeypatch):
    from benchmarks.common import BenchmarkError

    monkeypatch.setattr(host_trace, "trace", lambda a: pytest.fail("traced before the reference was read"))
    with pytest.raises(BenchmarkError, match=r"^--against .*missing\.json\.gz: no such file"):
        host_trace.main(["--against", str(tmp_path / "missing.json.gz")])
    damaged = tmp_path / "damaged.json.gz"
    damaged.write_bytes(host_trace.REFERENCE.read_bytes()[:1000])   # a cut download
    with pytest.raises(BenchmarkError, match="not a trace of python -m benchmarks.host_trace"):
        host_trace.main(["--against", str(damaged)])


def test_the_code_hash_changes_with_the_traced_code_only_not_its_comments(tmp_path):
    for folder in ("models", "trainer", "common", "tables"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.py").write_text("x = 1\n")
    before = host_trace.code_hash(tmp_path)
    (tmp_path / "tables" / "a.py").write_text("x = 2\n")        # not run by a trace
    assert host_trace.code_hash(tmp_path) == before
    (tmp_path / "models" / "a.py").write_text('"""A docstring."""\nx = 1  # a comment\n')   # words, not code
    assert host_trace.code_hash(tmp_path) == before
    (tmp_path / "models" / "a.py").write_text("x = 2\n")
    assert host_trace.code_hash(tmp_path) != before
