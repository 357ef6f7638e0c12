"""One command-line convention (common.errors.entry_point): bad input is exit status 2 with one line
``error: ...`` on stderr, in every command line of the suite; a bug keeps its traceback."""
from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

import pytest

from common.errors import USER_ERROR, ReproError, entry_point

ROOT = Path(__file__).resolve().parents[2]

# python -m <module> [<subcommand>] <argv>: bad input each refuses before loading a model or data ({m}: a missing path)
BAD_INPUT = {
    "workflows.cli corpus": ["--settings", "{m}", "--out", "{t}/corpus"],
    "workflows.cli eval-embedded": ["--run-dir", "{t}", "--tokenizer", "{m}", "--tasks", ",", "--out", "{t}/e.json"],
    "workflows.cli lm-eval": ["--run-dir", "{t}", "--tokenizer", "{m}", "--tasks", ",", "--out", "{t}/e.json"],
    "workflows.cli eval-genppl": ["--run-dir", "{t}", "--tokenizer", "{m}", "--judge", "gpt2", "--settings", "{{",
                                  "--out", "{t}/g.json"],
    "workflows.cli eval-cond": ["--run-dir", "{t}", "--tokenizer", "{m}", "--tokens", "{t}", "--settings", "{{",
                                "--out", "{t}/c.json"],
    "workflows.cli world-tasks": ["--settings", "{m}", "--out", "{t}/tasks"],
    "workflows.cli levels": ["--settings", "{m}", "--tokenizer", "{m}", "--out", "{t}/levels.json"],
    "workflows.experiments": ["{m}"],
    "tables": ["build", "--specs", "{m}", "--out", "{t}/tables"],
    "reports": ["findings", "--tables", "{m}", "--readme", "{t}/README.md"],
    "benchmarks.gpu_throughput": ["--device", "cuda", "--out", "{t}/b.json"],  # with CUDA hidden below
    "common.io": ["{t}"],  # a folder, refused before the input is read
    "workflows.smoke": ["{m}", "--run", "--workdir", "{t}"],
    "benchmarks.gpu_check": ["--out", "{t}/g.json"],  # with CUDA hidden below
    "benchmarks.host_trace": ["--compare", "{m}", "{m}"],
    "benchmarks.mkl_free_attention": ["--rounds", "1", "--out", "{t}/a.json"],
}
# command lines without a cheap bad input: none but argparse's (a profile that does not load is a warning
# of workflows.coverage), or one-line errors that need trained runs (benchmarks.ncm_sampling)
NO_CHEAP_BAD_INPUT = {"workflows.coverage", "benchmarks.train_throughput", "benchmarks.concept_step_time",
                      "benchmarks.lmeval_throughput", "benchmarks.dlcm_attention", "benchmarks.ncm_sampling",
                      "benchmarks.compile_threshold"}
# not yet through entry_point: none
NOT_YET: set[str] = set()


def _run(module: str, argv: list[str], monkeypatch) -> int:
    """``python -m module argv``, in this process (its ``__main__`` block, as the interpreter runs it)."""
    monkeypatch.setattr(sys, "argv", [module, *argv])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    return exit_.value.code


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # runpy: the module is imported already
@pytest.mark.parametrize("module", sorted(BAD_INPUT))
def test_bad_input_is_status_2_and_one_line(module, tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = [a.format(m=tmp_path / "missing", t=tmp_path) for a in BAD_INPUT[module]]
    module, *subcommand = module.split()
    assert _run(module, subcommand + argv, monkeypatch) == USER_ERROR
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err


def test_a_bug_keeps_its_traceback_and_a_user_error_is_one_line(capsys):
    @entry_point
    def bug(argv):
        raise KeyError("not a user error")

    @entry_point
    def bad(argv):
        raise ReproError("x.yaml: two\nlines; fix x")

    with pytest.raises(KeyError):
        bug([])
    assert bad([]) == 2 and capsys.readouterr().err == "error: x.yaml: two lines; fix x\n"
    assert entry_point(lambda argv: {"a": 1})([]) == 0 and entry_point(lambda argv: 3)([]) == 3


def _main_block(path: Path) -> str:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            return ast.unparse(node)
    return ""


def test_every_command_line_exits_through_entry_point():
    """Every module run as ``python -m`` (a ``__main__`` block) calls a main wrapped by entry_point, and each
    has a bad-input case above (reports/ keeps its own matching handling: it is edited elsewhere)."""
    found = {}
    packages = [p for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"]
    for path in sorted(path for package in packages for path in package.rglob("*.py")):
        if not _main_block(path):
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__main__")
        found[module] = path
        text = path.read_text()
        wrapped = "@entry_point\ndef main(" in text or "entry_point(main)" in _main_block(path)
        assert wrapped or module in ("reports", *NOT_YET), f"{path}: decorate main with common.errors.entry_point"
        assert not (wrapped and module in NOT_YET), f"{module} is wrapped now: drop it from NOT_YET"
    assert set(found) == {key.split()[0] for key in BAD_INPUT} | NO_CHEAP_BAD_INPUT | NOT_YET


def test_every_evaluation_is_one_subcommand_and_the_rules_call_one_command_line():
    """Each evaluation of the registry is ``eval-<name>`` of ``python -m workflows.cli``, the rule writing it calls
    that subcommand, and the rules start no other module but the tables, report and file-writing stages."""
    import re

    from evals.registry import EVALUATIONS
    from workflows.cli import COMMANDS, main

    assert {f"eval-{e.name}" for e in EVALUATIONS} == {name for name in COMMANDS if name.startswith("eval-")}
    rules = "".join(path.read_text() for path in sorted((ROOT / "workflows").glob("*.smk")))
    assert set(re.findall(r"-m ([\w.]+)", rules)) == {"workflows.cli", "common.io", "workflows.coverage", "tables",
                                                      "reports"}
    kinds = rules[rules.index("def entry_kind_rule(evaluation):"):]  # one rule per entry kind, named by its e.rule
    assert "name:\n            evaluation.rule" in kinds and "{{params.cli}} eval-{evaluation.name} --settings" in kinds
    assert "for evaluation in ENTRY_KINDS:\n    entry_kind_rule(evaluation)" in kinds
    for e in EVALUATIONS:
        if e.kind is not None:
            continue
        body = rules[rules.index(f"rule {e.rule}:"):]
        body = body[:body.index("\nrule ", 1) if "\nrule " in body[1:] else len(body)]
        called = set(re.findall(r"\{params\.cli\} eval-([\w{}.]+)", body))
        assert called and (f"{e.name}" in called or any("{wildcards" in c for c in called)), (e.name, called)
    for name in COMMANDS:  # every subcommand builds its options (their modules import) and answers --help
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0


def test_settings_an_evaluation_cannot_use_are_one_line(tmp_path, capsys):
    """The settings files and JSON the DAG passes: a missing key, a list for an object, an unknown key."""
    from workflows.cli import main

    (tmp_path / "empty.json").write_text("{}")
    cases = [(["eval-law", "--settings", str(tmp_path / "empty.json"), "--out", str(tmp_path / "l.json")],
              "no 'id' in the settings"),
             (["eval-kernel", "--settings", str(tmp_path / "empty.json"), "--out", str(tmp_path / "k.json")],
              "no 'id' in the settings"),
             (["eval-genppl", "--run-dir", str(tmp_path), "--tokenizer", "t", "--judge", "j", "--settings", "[]",
               "--out", str(tmp_path / "g.json")], "is not a JSON object"),
             (["eval-genppl", "--run-dir", str(tmp_path), "--tokenizer", "t", "--judge", "j", "--settings",
               '{"samplez": 3}', "--out", str(tmp_path / "g.json")], "unknown key 'samplez' of the genppl section"),
             (["eval-cond", "--run-dir", str(tmp_path), "--tokenizer", "t", "--tokens", str(tmp_path), "--settings",
               "[1]", "--out", str(tmp_path / "c.json")], "is not a JSON object")]
    for argv, message in cases:
        assert main(argv) == USER_ERROR, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err and message in err, (argv, err)
    with pytest.raises(SystemExit) as exit_:  # an unknown option: the subcommand's own usage
        main(["eval-ppl", "--run-dir", "r", "--tokens", "t", "--out", "o", "--eval", "ppl"])
    assert exit_.value.code == 2 and "usage: python -m workflows.cli eval-ppl" in capsys.readouterr().err
