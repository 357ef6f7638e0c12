"""The provenance block's code state: dirty means the working tree is not the commit, an untracked
profile included; ignored files (results/, .venv) are not a change of code."""
import subprocess

import pytest

from common import provenance


def git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("results/\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "default.yaml").write_text("profile: embedded\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")
    monkeypatch.setattr(provenance, "_ROOT", tmp_path)
    return tmp_path


def test_a_clean_tree_and_ignored_outputs_are_not_dirty(repo):
    (repo / "results").mkdir()
    (repo / "results" / "x.json").write_text("{}")
    commit, dirty = provenance.git_state()
    assert len(commit) == 40 and not dirty


def test_an_untracked_profile_is_dirty(repo):
    (repo / "config" / "mine.yaml").write_text("profile: mine\n")
    assert provenance.git_state()[1]


def test_an_edited_file_is_dirty(repo):
    (repo / "config" / "default.yaml").write_text("profile: edited\n")
    assert provenance.git_state()[1]


def test_outside_git_is_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "_ROOT", tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.git_state() == ("unknown", False)
