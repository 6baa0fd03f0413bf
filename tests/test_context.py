"""What run_start records of the environment, and git at a bounded cost."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from runlines import Run, _context

GIT = ["git", "-c", "user.email=a@b.c", "-c", "user.name=t"]


def run_start(path: Path) -> dict[str, object]:
    record: dict[str, object] = json.loads(path.read_text().splitlines()[0])
    return record


def make_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "train.py").write_text("lr = 1\n")
    subprocess.run([*GIT, "-C", str(path), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "init"], check=True)
    return path


class TestEnvironment:
    def test_versions_of_imported_packages_only(self) -> None:
        torch = SimpleNamespace(
            __version__="2.13.0",
            version=SimpleNamespace(cuda="12.8"),
            cuda=SimpleNamespace(is_initialized=lambda: False),
        )
        modules = {"torch": torch, "numpy": SimpleNamespace(__version__="2.3.1")}

        info = _context.describe_environment(modules)

        assert info["packages"] == {"torch": "2.13.0", "numpy": "2.3.1"}
        assert info["cuda"] == "12.8"
        assert "cudnn" not in info  # asking would load cuDNN before the program does

    def test_run_start_holds_the_packages_this_process_imported(self, run_dir: Path) -> None:
        import numpy as np

        with Run("r", run_dir, stdout=False):
            pass

        packages = run_start(run_dir / "r.jsonl")["packages"]
        assert isinstance(packages, dict)
        assert packages["numpy"] == np.__version__
        assert "transformers" not in packages or "transformers" in sys.modules


class TestGit:
    def test_a_dirty_tree_saves_its_diff_with_its_hash(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        repo = make_repo(tmp_path / "repo")
        (repo / "train.py").write_text("lr = 2\n")
        monkeypatch.chdir(repo)

        with Run("r", run_dir, stdout=False):
            pass

        start = run_start(run_dir / "r.jsonl")
        assert start["git_dirty"] is True
        diff = (run_dir / str(start["git_diff"])).read_bytes()
        assert b"-lr = 1\n+lr = 2\n" in diff
        assert start["git_diff_sha256"] == hashlib.sha256(diff).hexdigest()
        assert str(start["git_diff"]).startswith("r.artifacts/")
        subprocess.run(["git", "checkout", "train.py"], check=True, cwd=repo)
        subprocess.run(["git", "apply", str(run_dir / str(start["git_diff"]))], check=True)
        assert (repo / "train.py").read_text() == "lr = 2\n"  # the diff applies

    def test_a_clean_tree_saves_nothing(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(make_repo(tmp_path / "repo"))

        with Run("r", run_dir, stdout=False):
            pass

        start = run_start(run_dir / "r.jsonl")
        assert start["git_dirty"] is False
        assert "git_diff" not in start
        assert not (run_dir / "r.artifacts").exists()

    def test_a_slow_git_is_bounded_and_the_note_says_what_is_missing(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """`git diff` as slow as in a huge repository: the run opens within the bound."""
        repo = make_repo(tmp_path / "repo")
        real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout
        fake = tmp_path / "bin" / "git"
        fake.parent.mkdir()
        fake.write_text(
            f'#!/bin/sh\nif [ "$1" = diff ]; then exec sleep 30; fi\nexec {real_git.strip()} "$@"\n'
        )
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.chdir(repo)

        started = time.monotonic()
        with Run("r", run_dir, stdout=False):
            opened_s = time.monotonic() - started

        start = run_start(run_dir / "r.jsonl")
        assert opened_s < _context.GIT_TIMEOUT_S + 2.0  # not the 30 s of the slow git
        assert len(str(start["git_commit"])) == 40
        assert "git_dirty" not in start
        assert start["git_note"] == (
            f"git did not answer within {_context.GIT_TIMEOUT_S} s: "
            "the dirty flag and the diff not recorded"
        )

    def test_a_diff_over_the_limit_is_not_saved(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_context, "GIT_DIFF_MAX_BYTES", 10)

        fields = _context.save_diff(b"x" * 11, tmp_path / "r.artifacts")

        assert fields == {"git_note": "the diff of the dirty tree is 11 bytes, over 10: not saved"}
        assert not (tmp_path / "r.artifacts").exists()

    def test_outside_a_repository_nothing_is_recorded(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)

        with Run("r", run_dir, stdout=False):
            pass

        assert not any(k.startswith("git") for k in run_start(run_dir / "r.jsonl"))
