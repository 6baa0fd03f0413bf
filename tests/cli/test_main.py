"""`runlines` itself: help, version, usage errors, number options, a bad log as one error line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from _logs import line, raw, write
from runlines._version import __version__
from runlines.cli import main


class TestMain:
    def test_help_lists_the_commands(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--help"]) == 0

        out = capsys.readouterr().out
        for command in ("ls", "show", "tail", "compare", "plot", "which"):
            assert command in out

    def test_version_prints_the_package_version(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["--version"]) == 0

        assert capsys.readouterr().out.startswith(f"runlines {__version__}, C fast path: ")

    def test_no_command_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main([]) == 2

        assert "runlines: error:" in capsys.readouterr().err

    def test_unknown_option_is_a_usage_error(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["tail", "-n", "lots", "x"]) == 2

        assert "expected a count of records" in capsys.readouterr().err

    def test_python_dash_m_runlines_runs_the_command(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "runlines", "--version"], capture_output=True, text=True
        )

        assert done.returncode == 0
        assert done.stdout.startswith(f"runlines {__version__}, C fast path: ")


class TestNumberOptions:
    """A port or an interval out of range is a usage error that names the range (exit 2)."""

    @pytest.mark.parametrize("port", ["80000", "65536", "-1", "8000.5", "http", ""])
    def test_serve_refuses_a_port_out_of_range(
        self,
        port: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.chdir(tmp_path)

        assert main(["serve", f"--port={port}"]) == 2

        err = capsys.readouterr().err
        expected = "expected a port number from 0 to 65535 (0 picks a free one)"
        assert f"runlines serve: error: argument --port: {expected}, got {port!r}" in err
        assert "Traceback" not in err

    @pytest.mark.parametrize(
        "argv",
        [
            ["top", "--interval=0", "--once"],
            ["top", "--interval=-1", "--once"],
            ["top", "--interval=nan", "--once"],
            ["top", "--interval=soon", "--once"],
            ["tail", "-f", "--poll=-1", "x"],
            ["tail", "-f", "--poll=inf", "x"],
        ],
    )
    def test_an_interval_out_of_range_is_a_usage_error(
        self, argv: list[str], capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(argv) == 2

        option = argv[1].split("=")[0] if argv[0] == "top" else "--poll"
        assert f"argument {option}: expected seconds between 0.05 and 3600, got " in (
            capsys.readouterr().err
        )


class TestHostileInputs:
    @pytest.mark.parametrize("command", ["show", "tail"])
    def test_empty_file_is_an_error_or_nothing(
        self, command: str, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "e.jsonl")

        status = main([command, str(log)])

        captured = capsys.readouterr()
        if command == "show":
            assert status == 1
            assert "has no records: it is empty" in captured.err
        else:
            assert (status, captured.out) == (0, "")

    @pytest.mark.parametrize("command", ["show", "tail"])
    def test_binary_garbage_is_a_clear_error(
        self, command: str, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "g.jsonl", bytes(range(256)) * 50)

        assert main([command, str(log)]) == 1

        err = capsys.readouterr().err
        assert err.startswith("runlines: error:")
        assert "Traceback" not in err

    def test_json_arrays_are_skipped_with_a_warning(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "a.jsonl", line("x", run="a", n=1), raw([1, 2, 3]))

        assert main(["show", str(log)]) == 0

        assert "runlines: warning:" in capsys.readouterr().err

    def test_a_file_of_records_without_event_is_not_a_runlines_log(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "o.jsonl", raw({"a": 1}))

        assert main(["show", str(log)]) == 1

        err = capsys.readouterr().err
        assert "is not a runlines log: none of its records has a text 'event'" in err

    def test_last_line_without_newline_is_shown(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "n.jsonl", line("a", run="n"), line("b", run="n").rstrip())

        assert main(["tail", str(log)]) == 0

        assert [row.split()[1] for row in capsys.readouterr().out.splitlines()] == ["a", "b"]

    def test_a_very_long_line_is_shortened_on_screen(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "l.jsonl", line("big", run="l", text="x" * 2_000_000))

        assert main(["tail", str(log)]) == 0
        assert main(["show", str(log)]) == 0

        assert len(capsys.readouterr().out.splitlines()[0]) < 200
