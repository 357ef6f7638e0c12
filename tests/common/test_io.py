"""Atomic writes: a failed or interrupted write leaves the previous file intact and says so; nothing the
suite writes bypasses ``common.io.atomic_write`` but the listed exceptions."""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest
import torch

from common.io import WriteError, atomic_write_json, atomic_write_text


def _disk_full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_disk_full_keeps_previous_file(tmp_path, monkeypatch):
    target = tmp_path / "result.json"
    atomic_write_json(target, {"old": 1})
    monkeypatch.setattr(os, "fsync", _disk_full)
    with pytest.raises(WriteError, match=r"result.json: the disk is full: free space and re-run"):
        atomic_write_text(target, "new")
    assert target.read_text().strip().startswith("{")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary left behind


def test_a_parent_that_is_a_file_is_one_line_naming_the_path(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(WriteError, match=r"could not write .*afile/a\.json: .*; give a path in a writable folder") as e:
        atomic_write_json(tmp_path / "afile" / "a.json", {"a": 1})
    assert "\n" not in str(e.value) and (tmp_path / "afile").read_text() == "x"


def test_disk_full_during_checkpoint_keeps_earlier_ones(tiny_data, run_cfg, tmp_path, monkeypatch):

    from trainer import checkpoint
    from trainer.train import Trainer

    trainer = Trainer(run_cfg, tiny_data["tokens"], tmp_path)
    trainer.run(stop_after=4)
    monkeypatch.setattr(checkpoint, "save_file", _disk_full)
    with pytest.raises(WriteError, match="disk is full.*earlier checkpoints are intact"):
        trainer.checkpoint(8)
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["step-000004"]


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    """An exception half-way through the block (text, binary, or a library writing by name) replaces nothing."""
    from safetensors.torch import save_file

    from common.io import atomic_write
    from trainer.checkpoint import save_weights

    target = tmp_path / "out.txt"
    atomic_write_text(target, "old\n")
    for mode, data in (("w", "new, half"), ("wb", b"new, half")):
        with pytest.raises(RuntimeError, match="interrupted"):
            with atomic_write(target, mode) as f:
                f.write(data)
                raise RuntimeError("interrupted")
        assert target.read_text() == "old\n"
    weights = tmp_path / "model.safetensors"
    save_weights({"w": torch.ones(2)}, weights)
    before = weights.read_bytes()

    def half_then_fail(tensors, name):
        save_file(tensors, name)
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        with atomic_write(weights, "wb") as f:
            half_then_fail({"w": torch.zeros(2)}, f.name)
    assert weights.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "out.txt"]


def test_a_killed_writer_leaves_the_old_file_and_its_debris_is_removable(tmp_path):
    """SIGKILL mid-write (no clean-up runs): the target is the old file; ``remove_debris`` clears the temporary."""
    import subprocess
    import sys
    import textwrap

    from common.io import remove_debris

    target = tmp_path / "train.jsonl"
    atomic_write_text(target, "old\n")
    script = textwrap.dedent(f"""
        import os, signal
        from common.io import atomic_write
        with atomic_write({str(target)!r}) as f:
            f.write("new, half")
            f.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert subprocess.run([sys.executable, "-c", script]).returncode == -9
    assert target.read_text() == "old\n"
    assert len(list(tmp_path.glob(".train.jsonl.*.tmp"))) == 1
    remove_debris(tmp_path, target.name)
    assert [p.name for p in tmp_path.iterdir()] == ["train.jsonl"]


def test_the_writer_keeps_bytes_permissions_and_refuses_other_modes(tmp_path):
    from common.io import atomic_write

    text = "line\r\nünïcode\n"
    atomic_write_text(tmp_path / "t.txt", text)
    assert (tmp_path / "t.txt").read_bytes() == text.encode()  # no newline translation
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "t.txt").stat().st_mode & 0o777 == 0o666 & ~mask
    with pytest.raises(ValueError, match="use one of"):
        with atomic_write(tmp_path / "a.txt", "a"):
            pass


def test_the_settings_writer_cli_writes_stdin_byte_for_byte(tmp_path):
    """The Snakemake rules' settings files (``WRITE_JSON``): the params' text and a newline, unchanged."""
    import subprocess
    import sys

    text = '{"b": [1, 2], "a": "\\u00e9"}\n'
    out = tmp_path / "sub" / "config.json"
    run = subprocess.run([sys.executable, "-m", "common.io", str(out)], input=text.encode(), capture_output=True)
    assert run.returncode == 0, run.stderr
    assert out.read_bytes() == text.encode()
    assert [p.name for p in out.parent.iterdir()] == ["config.json"]


# Every write call of the suite goes through common.io.atomic_write; these are the exceptions, each with why.
# (path, text of the call) -> reason. An entry that no longer matches anything fails the test too.
RAW_WRITES_ALLOWED = {
    ("trainer/metrics.py", 'open(self.path, "a")'):
        "append-only training log, one JSON line per logged step; started atomically, and a resumed run restarts it "
        "from its checkpoint's copy",
    ("workflows/cli.py", 'open(os.environ[ERROR_FILE], "a")'):
        "each rank appends its one error line to the launcher's error file",
    ("trainer/checkpoint.py", "save_file(tensors, f.name)"): "safetensors writes by name, inside atomic_write",
    ("trainer/checkpoint.py", "os.replace(tmp, final)"):
        "a checkpoint folder, every file written by atomic_write, renamed into place after its marker (OLMo)",
    ("trainer/checkpoint.py", "os.replace(ckpt_root, stale)"): "moves a stale ckpt/ folder aside (a rename)",
    ("trainer/distributed.py", "dcp.save("):
        "torch.distributed.checkpoint writes each rank's shards into the checkpoint's temporary folder, committed by "
        "trainer.checkpoint",
    ("evals/genppl/export.py", ".save_pretrained(tmp)"):
        "transformers writes the judge folder: built in a temporary folder, checked, then renamed into place",
    ("evals/genppl/export.py", "os.replace(tmp, out_dir)"): "the judge folder renamed into place",
    ("evals/harness/hf_reference.py", ".save_pretrained(out_dir)"):
        "the transformers reference arm of the parity test and a benchmark, in their temporary folders",
    ("reports/plotting.py", ".savefig(buffer"): "into an in-memory buffer; the bytes go through write_atomic",
    ("tables/render.py", ".to_csv(index=False"): "no path: pandas returns the CSV page as text, written atomically",
    ("workflows/smoke.py", "save_pretrained(folder)"):
        "transformers writes a smoke-mode stand-in into a staging folder that smoke._folder renames into place",
    ("workflows/smoke.py", "dest.rename(old)"): "the previous stand-in folder moved aside before the new one lands",
    ("workflows/smoke.py", "staging.rename(dest)"): "a stand-in folder renamed into place",
    ("workflows/smoke.py", "staged.rename(folder)"): "a stand-in folder renamed into the hub cache's snapshots/",
}
RAW_WRITE = re.compile("|".join((
    r"\bopen\([^)]*['\"][wax]b?\+?['\"]", r"\.open\(\s*['\"][wax]", r"\.write_(text|bytes)\(", r"\bjson\.dump\(",
    r"\btorch\.save\(", r"\bsave_file\(", r"\bnp\.save", r"\.savefig\(", r"\.to_csv\(", r"\.tofile\(",
    r"\.save_pretrained\(", r"\bdcp\.save\(", r"\bos\.(replace|rename)\(", r"\.rename\(", r"\bmkstemp\(",
    r"NamedTemporaryFile\(", r"\.touch\(", r"\bshutil\.copy(file|2)?\(", r"\bgzip\.open\(",
    r"memmap\([^)]*mode=['\"][wr]\+")))
SOURCES = ("benchmarks", "common", "corpora", "evals", "models", "reports", "tables", "trainer", "workflows")


def test_nothing_the_suite_writes_bypasses_the_atomic_writer():
    root = Path(__file__).resolve().parents[2]
    files = [p for folder in SOURCES for p in sorted((root / folder).rglob("*")) if p.suffix in (".py", ".smk")]
    files.append(root / "Snakefile")
    hits = [(p.relative_to(root).as_posix(), line.strip()) for p in files if p != root / "common" / "io.py"
            for line in p.read_text().splitlines() if RAW_WRITE.search(line)]
    unexplained = [(path, line) for path, line in hits
                   if not any(path == allowed and call in line for allowed, call in RAW_WRITES_ALLOWED)]
    assert not unexplained, f"write through common.io.atomic_write (or allow with a reason): {unexplained}"
    stale = [key for key in RAW_WRITES_ALLOWED if not any(key[0] == path and key[1] in line for path, line in hits)]
    assert not stale, f"allowed raw writes that no longer exist: {stale}"
