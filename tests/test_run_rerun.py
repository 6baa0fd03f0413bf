"""resume="auto", the default: a rerun after an `ok` end is a new run, a restart continues.

The racing launches and the ranks of one launch are in tests/reliability/test_reruns_racing.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runlines import Run
from runlines._logfile import config_change


def starts(path: Path) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == "run_start"]


def kill(path: Path) -> None:
    """Make the log's last attempt one that died: its run_end is cut off, as by kill -9."""
    lines = path.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["event"] == "run_end"
    path.write_bytes(b"".join(lines[:-1]))


class TestRerun:
    def test_a_rerun_after_an_ok_end_is_a_new_run_with_the_next_free_name(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("b", tmp_path, stdout=False, config={"lr": 1e-3}):
            pass
        capsys.readouterr()

        with Run("b", tmp_path, stdout=False, config={"lr": 1e-2}) as second:
            second.log("step", step=1)

        assert (second.name, second.attempt) == ("b-2", 1)
        assert second.path == tmp_path / "b-2.jsonl"
        assert {r["run"] for r in map(json.loads, second.path.read_text().splitlines())} == {"b-2"}
        assert [s["config"] for s in starts(tmp_path / "b.jsonl")] == [{"lr": 1e-3}]
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"run 'b' ended ok in '{tmp_path}': this launch is a new run, 'b-2'" in err
        assert "resume='allow'" in err

    def test_each_rerun_takes_the_next_name(self, tmp_path: Path) -> None:
        names = []
        for _ in range(3):
            with Run("b", tmp_path, stdout=False) as run:
                names.append(run.name)

        assert names == ["b", "b-2", "b-3"]

    def test_allow_extends_the_finished_run(self, tmp_path: Path) -> None:
        with Run("b", tmp_path, stdout=False):
            pass

        with Run("b", tmp_path, stdout=False, resume="allow") as second:
            pass

        assert (second.name, second.attempt) == ("b", 2)

    def test_a_run_another_process_writes_is_not_joined(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A second launch while the first still runs is a run of its own."""
        code = f"""
            import sys
            from runlines import Run
            with Run("b", {str(tmp_path)!r}, stdout=False):
                print("ready", flush=True)
                sys.stdin.readline()
        """
        child = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        try:
            with Run("b", tmp_path, stdout=False) as second:
                pass
        finally:
            child.communicate("\n", timeout=60)

        assert (second.name, second.attempt) == ("b-2", 1)
        assert [s["attempt"] for s in starts(tmp_path / "b.jsonl")] == [1]
        err = capsys.readouterr().err
        assert "run 'b' is being written by another process in " in err
        assert "resume='allow'" not in err


class TestRestart:
    @pytest.mark.parametrize(
        "error", [ValueError("boom"), KeyboardInterrupt()], ids=["failed", "interrupted"]
    )
    def test_a_run_that_did_not_end_ok_is_continued(
        self, tmp_path: Path, error: BaseException
    ) -> None:
        with pytest.raises(type(error)), Run("b", tmp_path, stdout=False):
            raise error

        with Run("b", tmp_path, stdout=False) as second:
            pass

        assert (second.name, second.attempt) == ("b", 2)

    def test_a_run_that_died_is_continued(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("b", tmp_path, stdout=False):
            pass
        kill(tmp_path / "b.jsonl")
        capsys.readouterr()

        with Run("b", tmp_path, stdout=False, resume_step=3) as second:
            pass

        assert (second.name, second.attempt) == ("b", 2)
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "continuing run 'b' in " in err
        assert "as attempt 2" in err

    def test_the_newest_rerun_is_the_one_a_restart_continues(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for _ in range(2):
            with Run("b", tmp_path, stdout=False):
                pass
        kill(tmp_path / "b-2.jsonl")
        capsys.readouterr()

        with Run("b", tmp_path, stdout=False) as third:
            pass

        assert (third.name, third.attempt) == ("b-2", 2)
        assert "continuing run 'b-2', the newest run launched as 'b'," in capsys.readouterr().err

    def test_an_older_run_that_died_is_left_alone(self, tmp_path: Path) -> None:
        with Run("b", tmp_path, stdout=False):
            pass
        kill(tmp_path / "b.jsonl")
        with Run("b-2", tmp_path, stdout=False):
            pass  # a newer run, which ended ok

        with Run("b", tmp_path, stdout=False) as run:
            pass

        assert (run.name, run.attempt) == ("b-3", 1)

    def test_a_users_value_that_looks_like_a_run_end_is_no_end(self, tmp_path: Path) -> None:
        with Run("b", tmp_path, stdout=False) as run:
            run.log("note", meta={"event": "run_end", "status": "ok"})
            run.log("note", meta={"event": "run_start", "attempt": 7})
        kill(tmp_path / "b.jsonl")

        with Run("b", tmp_path, stdout=False) as second:
            pass

        assert (second.name, second.attempt) == ("b", 2)


class TestConfig:
    def test_an_attempt_without_config_keeps_the_runs_config(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("b", tmp_path, stdout=False, config={"lr": 0.1, "nan": float("nan")}):
            pass
        kill(tmp_path / "b.jsonl")
        capsys.readouterr()

        with Run("b", tmp_path, stdout=False):
            pass

        first, second = starts(tmp_path / "b.jsonl")
        assert second["config"] == first["config"]
        assert second["config"]["lr"] == 0.1
        assert second.get("_nonfinite") == first.get("_nonfinite")
        assert "no config= given, the run's config is kept" in capsys.readouterr().err

    def test_the_stderr_line_names_what_changed(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        before = {"lr": 0.001, "optim": {"name": "adam", "beta": 0.9}, "dropout": 0.1}
        with Run("b", tmp_path, stdout=False, config=before):
            pass
        kill(tmp_path / "b.jsonl")
        capsys.readouterr()

        after = {"lr": 0.01, "optim": {"name": "adam", "beta": 0.9}, "warmup": 100}
        with Run("b", tmp_path, stdout=False, config=after):
            pass

        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert "as attempt 2; config: +warmup, -dropout, lr 0.001 -> 0.01 " in err

    def test_an_unchanged_config_says_so(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("b", tmp_path, stdout=False, config={"lr": 0.1, "api_key": "sk-1"}):
            pass
        kill(tmp_path / "b.jsonl")
        capsys.readouterr()

        with Run("b", tmp_path, stdout=False, config={"lr": 0.1, "api_key": "sk-1"}):
            pass

        assert "; config unchanged " in capsys.readouterr().err  # compared redacted, as logged

    def test_a_long_change_is_shortened(self) -> None:
        previous = {"config": {f"key{n}": n for n in range(50)}}
        given = {f"key{n}": n + 1 for n in range(50)}

        text = config_change(previous, given, given, None)

        assert text.startswith("; config: key0 0 -> 1, key1 1 -> 2, ")
        assert len(text) < 200
        shown = text.count(" -> ")
        assert text.endswith(f", ... ({50 - shown} more)")
