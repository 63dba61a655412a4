"""Provenance work a score overlaps or skips: git asked on a thread while the score runs, and the default suite's
name found without parsing the other shipped suites."""

from __future__ import annotations

import subprocess

from aegis_data.engine.config import installed_suites, load_config
from aegis_eval.protocols import provenance


def test_git_state_ahead_gives_git_state_once(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "a"], check=True)
    direct = provenance.git_state(repo)
    assert direct[0] is not None and direct[1] is False
    calls = []
    real = provenance._git_state
    monkeypatch.setattr(provenance, "_git_state", lambda root: calls.append(root) or real(root))
    provenance.git_state_ahead(repo)
    provenance.git_state_ahead(repo)  # one pending answer per checkout
    assert provenance.git_state(repo) == direct and len(calls) == 1
    (repo / "a.txt").write_text("b")  # the answer was taken: the next call asks git again
    assert provenance.git_state(repo) == (direct[0], True) and len(calls) == 2
    assert provenance.git_state(tmp_path / "not-a-repo") == (None, None)


def test_the_default_suite_is_named_without_loading_the_others(monkeypatch):
    default = load_config()
    monkeypatch.setattr(provenance, "installed_suites", lambda: (_ for _ in ()).throw(AssertionError("parsed all")))
    assert provenance.shipped_suite(default.config_hash) is default
    assert provenance.shipped_suite(default.bytes_hash) is default
    monkeypatch.setattr(provenance, "installed_suites", installed_suites)
    for suite in installed_suites():
        assert provenance.shipped_suite(suite.config_hash) is suite
    assert provenance.shipped_suite("0" * 64) is None and provenance.shipped_suite(None) is None
