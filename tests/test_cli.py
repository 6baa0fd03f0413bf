"""The `runlines` command, driven in-process: ls, show, tail, compare, plot, which."""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from filelock import FileLock
from freezegun import freeze_time

from _logs import T0, line, raw, refuse_to_open, train, write
from _optional import skip_without
from runlines import Run
from runlines._version import __version__
from runlines.cli import _tail, follow, main
from runlines.cli._terminal import printable, printable_lines


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


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


class TestLs:
    def test_lists_a_finished_run(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        with (
            freeze_time("2026-05-01 12:00:00") as frozen,
            Run("base", run_dir, stdout=False) as run,
        ):
            for step in (1, 2, 3):
                frozen.tick(60)
                run.log("train_step", step=step, loss=1 / step)

        assert main(["ls", str(run_dir)]) == 0

        header, row = capsys.readouterr().out.strip().splitlines()
        assert header.split() == [
            "RUN",
            "STATUS",
            "ATTEMPTS",
            "STARTED",
            "DURATION",
            "STEP",
            "METRIC",
        ]
        started = _when(datetime(2026, 5, 1, 12, tzinfo=UTC).timestamp())
        assert row.split() == [
            *("base", "ok", "1", *started.split(), "3m00s", "3", "train_step.loss=0.333333")
        ]

    @pytest.mark.parametrize("how", ["denied", "deleted"])
    def test_a_log_that_cannot_be_read_is_named_once_and_left_out(
        self,
        how: str,
        run_dir: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        train(run_dir, "a", range(1, 3))
        theirs = train(run_dir, "b", range(1, 3))
        train(run_dir, "c", range(1, 3))
        refuse_to_open(monkeypatch, theirs, how)

        assert main(["ls", str(run_dir)]) == 0

        captured = capsys.readouterr()
        assert [row.split()[0] for row in captured.out.splitlines()[1:]] == ["a", "c"]
        (warning,) = captured.err.splitlines()
        assert warning.startswith(f"runlines: warning: left out {theirs}: it cannot be read (")

    def test_counts_attempts_and_shows_failed(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "f", range(1, 3))
        with (
            pytest.raises(ZeroDivisionError),
            Run("f", run_dir, stdout=False, resume="allow") as run,
        ):
            run.log("train_step", step=3, loss=0.1)
            _ = 1 / 0

        assert main(["ls", str(run_dir)]) == 0

        row = capsys.readouterr().out.splitlines()[1].split()
        assert row[:3] == ["f", "failed", "2"]

    def test_open_run_is_running(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        with Run("live", run_dir, stdout=False) as run:
            run.log("train_step", step=1, loss=0.5)

            assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["live", "running"]

    def test_held_lock_without_run_end_is_running(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(
            run_dir / "held.jsonl",
            line("run_start", run="held", attempt=1),
            line("train_step", run="held", step=1),
        )

        with FileLock(f"{log}.lock"), freeze_time(datetime.fromtimestamp(T0 + 10, UTC)):
            assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["held", "running"]

    def test_held_lock_and_silence_is_stalled(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "quiet.jsonl", line("run_start", run="quiet", attempt=1))

        with FileLock(f"{log}.lock"), freeze_time(datetime.fromtimestamp(T0 + 61, UTC)):
            assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["quiet", "stalled"]

    def test_no_run_end_and_no_lock_is_died_with_last_record_time(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(
            run_dir / "gone.jsonl",
            line("run_start", run="gone", attempt=1),
            line("train_step", run="gone", ts=T0 + 90, step=7, loss=0.3),
        )

        assert main(["ls", str(run_dir)]) == 0

        row = capsys.readouterr().out.splitlines()[1]
        assert f"died (last record {_when(T0 + 90)})" in row
        assert "loss=0.3" in row
        assert not (run_dir / "gone.jsonl.lock").exists()  # the probe creates no lock file

    def test_released_lock_file_is_died(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(run_dir / "gone.jsonl", line("run_start", run="gone", attempt=1))
        (run_dir / "gone.jsonl.lock").touch()

        assert main(["ls", str(run_dir)]) == 0

        assert "died" in capsys.readouterr().out
        assert log.exists()

    def test_rank_files_are_one_run(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in ("0", "1"):
            monkeypatch.setenv("RANK", rank)
            train(run_dir, "ddp", range(1, 3))

        assert main(["ls", str(run_dir)]) == 0

        rows = capsys.readouterr().out.splitlines()[1:]
        assert len(rows) == 1
        assert rows[0].startswith("ddp (2 ranks)")

    def test_metric_without_loss_is_the_first_numeric_field(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write(run_dir / "acc.jsonl", line("eval", run="acc", step=4, accuracy=0.75, split="val"))

        assert main(["ls", str(run_dir)]) == 0

        assert "accuracy=0.75" in capsys.readouterr().out

    def test_a_file_that_is_no_log_is_skipped_with_a_warning(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "good", range(1, 3))
        write(run_dir / "junk.jsonl", b"\x00\x01 not json\n" * 5)

        assert main(["ls", str(run_dir)]) == 0

        captured = capsys.readouterr()
        assert [row.split()[0] for row in captured.out.splitlines()[1:]] == ["good"]
        assert "runlines: warning: left out" in captured.err
        assert "junk.jsonl: it is not a runlines log" in captured.err

    def test_empty_log_is_listed(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        write(run_dir / "new.jsonl")

        assert main(["ls", str(run_dir)]) == 0

        assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["new", "died"]

    def test_folder_without_logs_is_an_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["ls", str(tmp_path)]) == 1

        err = capsys.readouterr().err
        assert err.startswith("runlines: error: ")
        assert "has no *.jsonl logs" in err
        assert err.count("\n") == 1

    def test_lists_the_runs_of_several_sources(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        train(tmp_path / "a", "base", range(1, 3))
        train(tmp_path / "a", "wide", range(1, 4))
        train(tmp_path / "b", "base", range(1, 5))
        solo = train(tmp_path / "c", "solo", range(1, 2))
        train(tmp_path, "named", range(1, 6))
        monkeypatch.chdir(tmp_path)

        assert main(["ls", "a", "b", str(solo), "named"]) == 0

        header, *rows = capsys.readouterr().out.splitlines()
        assert header.split()[:2] == ["RUN", "STATUS"]
        # the same name in two folders is labelled by its folder, as in one folder's subfolders
        assert [(r.split()[0], r.split()[6]) for r in rows] == [
            ("a/base", "2"),
            ("wide", "3"),
            ("b/base", "4"),
            ("solo", "1"),
            ("named", "5"),
        ]

    def test_json_of_several_sources_lists_each_log_once(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        one = train(tmp_path / "a", "one", range(1, 3))
        two = train(tmp_path / "b", "two", range(1, 4))

        assert main(["ls", "--json", str(tmp_path / "a"), str(tmp_path / "b"), str(one)]) == 0

        rows = json.loads(capsys.readouterr().out)
        assert [(r["run"], r["path"], r["step"]) for r in rows] == [
            ("one", str(one), 2),
            ("two", str(two), 3),
        ]

    def test_a_missing_source_is_an_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(tmp_path / "a", "one", range(1, 3))

        assert main(["ls", str(tmp_path / "a"), str(tmp_path / "nope")]) == 1

        assert capsys.readouterr().err == (
            f"runlines: error: no such log or folder: {tmp_path / 'nope'}; "
            "pass a folder of logs or a .jsonl log file\n"
        )

    def test_a_folder_whose_logs_are_all_in_subfolders_suggests_r(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(tmp_path / "exp1", "base", range(1, 3))
        train(tmp_path / "exp2" / "deep", "wide", range(1, 3))
        (tmp_path / "notes.txt").write_text("no log")

        assert main(["ls", str(tmp_path)]) == 1

        err = capsys.readouterr().err
        assert err == (
            f"runlines: error: {tmp_path} has no *.jsonl logs of its own, but its subfolders "
            f"hold 2 (exp1/base.jsonl, 1 more); list them with: runlines ls -r {tmp_path}\n"
        )
        assert main(["ls", "-r", str(tmp_path)]) == 0  # the suggestion works
        rows = capsys.readouterr().out.splitlines()[1:]
        assert [row.split()[0] for row in rows] == ["base", "wide"]


class TestShow:
    @pytest.fixture(name="full_run")
    def _full_run(self, run_dir: Path) -> Path:
        checkpoint = run_dir / "ckpt.pt"
        write(checkpoint, b"weights")
        with Run("full", run_dir, stdout=False, config={"lr": 0.1, "opt": {"name": "adam"}}) as run:
            for step in (1, 2):
                with run.span("step"):
                    run.log("train_step", step=step, loss=1 / step)
            run.log("eval", step=2, split="val", accuracy=0.9)
            run.artifact("ckpt", path=checkpoint, step=2)
        return run_dir / "full.jsonl"

    @pytest.mark.parametrize(("argv", "shown"), [(1.0, "1.0"), ("train.py", "train.py")])
    def test_a_run_start_whose_argv_is_not_a_list_shows_it_as_it_is(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], argv: object, shown: str
    ) -> None:
        log = write(run_dir / "odd.jsonl", line("run_start", run="odd", argv=argv))
        assert main(["show", str(log)]) == 0
        assert re.search(rf"^command +{re.escape(shown)}$", capsys.readouterr().out, re.M)

    def test_prints_start_status_events_spans_artifacts_and_last_values(
        self, full_run: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["show", str(full_run)]) == 0

        out = capsys.readouterr().out
        for expected in (
            "run       full",
            "status    ok",
            "attempts  1",
            "opt.name  adam",
            "train_step      2",
            "  step      2",
            "ckpt",
            "loss        0.5     2",
            "accuracy    0.9     2",
        ):
            assert expected in out, expected
        assert "SPAN" in out
        assert "SHA256" in out

    def test_finds_a_run_by_name_in_the_current_folder(
        self, full_run: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(full_run.parent)

        assert main(["show", "full"]) == 0

        assert "run       full" in capsys.readouterr().out

    def test_shows_each_rank(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in ("0", "1"):
            monkeypatch.setenv("RANK", rank)
            train(run_dir, "ddp", range(1, 4))

        assert main(["show", str(run_dir / "ddp.jsonl")]) == 0

        out = capsys.readouterr().out
        assert f"rank 1 ({run_dir / 'ddp.rank1.jsonl'}): ok" in out

    def test_failed_run_shows_its_error(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with pytest.raises(FloatingPointError), Run("nan", run_dir, stdout=False):
            raise FloatingPointError("loss is nan")

        assert main(["show", str(run_dir / "nan.jsonl")]) == 0

        out = capsys.readouterr().out
        assert "status    failed" in out
        assert "error     FloatingPointError: loss is nan" in out

    def test_died_run_shows_its_last_record(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(
            run_dir / "d.jsonl",
            line("run_start", run="d", attempt=1),
            line("x", run="d", ts=T0 + 5),
        )

        assert main(["show", str(log)]) == 0

        out = capsys.readouterr().out
        assert "status       died" in out
        assert f"last record  {_when(T0 + 5)}" in out

    def test_unknown_run_is_one_error_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)

        assert main(["show", "nope"]) == 1

        err = capsys.readouterr().err
        assert err == (
            "runlines: error: no run 'nope': there is no file nope, and no nope.jsonl in "
            f"{tmp_path}, in runs/ or in a subfolder; pass a log file, or a run name from the "
            "folder that holds its log (list them: runlines ls)\n"
        )

    @pytest.mark.parametrize(
        "layout",
        [
            ["exp1/base", "exp2/deep/wide"],  # every log in a subfolder
            ["exp1/base", "exp2/base", "exp3/other"],  # one name in two folders: labelled
            ["sweep/a/x/base", "sweep/a/y/base"],  # labels relative to their common folder
            ["top", "runs/lr/base"],
        ],
    )
    def test_finds_each_run_ls_r_lists_by_the_name_it_shows(
        self,
        layout: list[str],
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        for where in layout:
            folder, _, name = f"./{where}".rpartition("/")
            train(tmp_path / folder, name, range(1, 3))
        monkeypatch.chdir(tmp_path)
        assert main(["ls", "-r", "--json"]) == 0
        listed = {row["run"]: row["path"] for row in json.loads(capsys.readouterr().out)}
        assert len(listed) == len(layout)

        for name, path in listed.items():
            assert main(["show", "--json", name]) == 0, capsys.readouterr().err
            assert Path(json.loads(capsys.readouterr().out)["path"]) == Path(path)

    def test_finds_a_run_by_the_run_name_its_records_hold(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        log = write(
            tmp_path / "copied.jsonl",
            line("run_start", run="orig", attempt=1),
            line("train_step", run="orig", step=1, loss=0.5),
        )
        monkeypatch.chdir(tmp_path)
        assert main(["ls"]) == 0
        assert capsys.readouterr().out.splitlines()[1].split()[0] == "orig"

        assert main(["show", "orig"]) == 0

        assert re.search(rf"^log +{log.name}$", capsys.readouterr().out, re.M)

    def test_finds_a_distributed_run_in_a_subfolder_with_its_ranks(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        monkeypatch.setenv("WORLD_SIZE", "2")
        for rank in ("0", "1"):
            monkeypatch.setenv("RANK", rank)
            train(tmp_path / "exp", "ddp", range(1, 4))
        monkeypatch.chdir(tmp_path)

        assert main(["show", "ddp"]) == 0
        out = capsys.readouterr().out
        assert "log       exp/ddp.jsonl" in out
        assert "rank 1 (exp/ddp.rank1.jsonl): ok" in out

        assert main(["show", "ddp.rank1"]) == 0  # a rank file by its own name
        assert "log       exp/ddp.rank1.jsonl" in capsys.readouterr().out

    def test_a_name_two_logs_have_is_an_error_that_lists_them(
        self,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        train(tmp_path / "exp1", "base", range(1, 3))
        train(tmp_path / "exp2", "base", range(1, 3))
        monkeypatch.chdir(tmp_path)

        assert main(["show", "base"]) == 1

        assert capsys.readouterr().err == (
            f"runlines: error: run 'base' is ambiguous: 2 logs under {tmp_path} are named so "
            "(exp1/base.jsonl, exp2/base.jsonl); pass the log file of the one you mean\n"
        )

    def test_a_folder_is_not_a_run(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        run_dir.mkdir()

        assert main(["show", str(run_dir)]) == 1

        assert "is a folder; pass one log file" in capsys.readouterr().err


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


class TestControlCharacters:
    """What a log holds is printed with its control characters escaped, never obeyed."""

    # OSC 52 (sets the clipboard), the window title, clear screen, a C1 CSI, a bidi override
    CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
    TITLE = "\x1b]0;pwned\x07"
    CLEAR = "\x1b[2J"

    def hostile_log(self, run_dir: Path) -> Path:
        note = f"{self.TITLE}\x9b2J\u202eevil\r\n"
        config = {f"lr{self.CLEAR}": 1, "note": note}
        return write(
            run_dir / "h.jsonl",
            line("run_start", run=f"h{self.TITLE}", attempt=1, config=config),
            line(f"train{self.CLIPBOARD}", run="h", note=note, **{f"loss{self.CLEAR}": 0.5}),
        )

    @staticmethod
    def assert_escaped(text: str) -> None:
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", text), repr(text)
        assert "\\x1b]52;c;" in text

    def test_each_kind_of_control_character_is_written_as_its_escape(self) -> None:
        text = "a\x00\t\n\r\x1b\x7f\x85\x9b\u061c\u200f\u2028\u202e\u2066\u2069é€"

        assert printable(text) == (
            "a\\x00\\t\\n\\r\\x1b\\x7f\\x85\\x9b\\u061c\\u200f\\u2028\\u202e\\u2066\\u2069é€"
        )
        assert printable_lines("a\x1b\nb\r") == "a\\x1b\nb\\r"

    @pytest.mark.parametrize("command", [["show"], ["tail"], ["ls"]])
    def test_show_tail_and_ls_escape_names_and_values(
        self, command: list[str], run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = self.hostile_log(run_dir)
        target = run_dir if command == ["ls"] else log
        if command == ["ls"]:
            write(run_dir / f"x{self.CLIPBOARD}.jsonl", line("run_start", run="x"))

        assert main([*command, str(target)]) == 0

        out = capsys.readouterr().out
        self.assert_escaped(out)
        if command != ["ls"]:
            assert "\\x1b]0;pwned\\x07\\x9b2J\\u202eevil\\r\\n" in out

    def test_tail_follow_escapes_appended_records(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(run_dir / "f.jsonl", line("run_start", run="f"))
        appended = line(f"eval{self.CLIPBOARD}", run="f", split=self.TITLE)
        monkeypatch.setattr(_tail, "_sleep", _writer(log, [appended]))

        assert main(["tail", "-f", "-n", "0", str(log)]) == 0

        self.assert_escaped(capsys.readouterr().out)

    def test_an_error_naming_events_escapes_them(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = self.hostile_log(run_dir)

        assert main(["tail", "--event", "nope", str(log)]) == 1

        self.assert_escaped(capsys.readouterr().err)

    def test_diff_escapes_config_keys(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = write(run_dir / "a.jsonl", line("run_start", run="a", config={self.CLIPBOARD: 1}))
        b = write(run_dir / "b.jsonl", line("run_start", run="b", config={self.CLIPBOARD: 2}))

        assert main(["diff", str(a), str(b)]) == 0

        self.assert_escaped(capsys.readouterr().out)

    def test_which_escapes_the_artifact_path(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        weights = run_dir / f"model{self.CLIPBOARD}.bin"
        with Run("w", run_dir, stdout=False) as run:
            weights.write_bytes(b"weights")
            run.artifact("model", path=weights)

        assert main(["which", str(weights)]) == 0

        self.assert_escaped(capsys.readouterr().out)


class TestTail:
    def test_prints_the_last_n_records_aligned(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = train(run_dir, "t", range(1, 6))

        assert main(["tail", "-n", "3", str(log)]) == 0

        rows = capsys.readouterr().out.splitlines()
        assert [r.split()[1] for r in rows] == ["train_step", "train_step", "run_end"]
        assert "step=5 loss=0.2" in rows[1]
        assert len({r.index(r.split()[2]) for r in rows}) == 1  # fields start in one column

    def test_event_filter(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = train(run_dir, "t", range(1, 6), evals=True)

        assert main(["tail", "--event", "eval", str(log)]) == 0

        assert [r.split()[1] for r in capsys.readouterr().out.splitlines()] == ["eval", "eval"]

    def test_unknown_event_lists_the_events(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = train(run_dir, "t", range(1, 3))

        assert main(["tail", "--event", "evl", str(log)]) == 1

        assert (
            "has event 'evl'; its events: run_end, run_start, train_step" in capsys.readouterr().err
        )

    def test_follow_prints_records_appended_by_a_restarted_attempt(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(
            run_dir / "live.jsonl",
            line("run_start", run="live", attempt=1),
            line("train_step", run="live", step=1),
        )
        appends = [
            line("train_step", run="live", step=2) + b'{"ts": 3, "event": "train_st',
            b"\n" + line("run_start", run="live", attempt=2, resume_step=1),
            line("train_step", run="live", step=2, loss=0.25)[:20],
            line("train_step", run="live", step=2, loss=0.25)[20:],
        ]
        monkeypatch.setattr(_tail, "_sleep", _writer(log, appends))

        assert main(["tail", "-f", "-n", "1", str(log)]) == 0

        captured = capsys.readouterr()
        assert [r.split()[1] for r in captured.out.splitlines()] == [
            "train_step",
            "train_step",
            "run_start",
            "train_step",
        ]
        assert "loss=0.25" in captured.out.splitlines()[-1]
        assert "runlines: warning:" in captured.err
        assert "not a complete JSON object" in captured.err

    def test_follow_finds_a_run_in_a_subfolder_and_refuses_an_ambiguous_name(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = train(tmp_path / "exp1", "base", range(1, 3))
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(_tail, "_sleep", _writer(log, [line("train_step", run="base", step=9)]))

        assert main(["tail", "-f", "-n", "1", "base"]) == 0
        captured = capsys.readouterr()
        assert [r.split()[1] for r in captured.out.splitlines()] == ["run_end", "train_step"]
        assert "step=9" in captured.out.splitlines()[-1]
        assert "waiting" not in captured.err

        train(tmp_path / "exp2", "base", range(1, 3))
        assert main(["tail", "-f", "base"]) == 1  # not a wait for ./base.jsonl
        assert "run 'base' is ambiguous: 2 logs" in capsys.readouterr().err

    def test_follow_filters_events_and_stops_when_asked(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(run_dir / "f.jsonl", line("a", run="f"))
        out = io.StringIO()
        stops = iter([False] * 3)
        appends = [line("b", run="f"), line("a", run="f", n=2)]
        monkeypatch.setattr(_tail, "_sleep", _writer(log, appends, stop=False))

        follow(
            log,
            out,
            events={"a"},
            offset=log.stat().st_size,
            should_stop=lambda: next(stops, True),
        )

        assert [r.split()[1] for r in out.getvalue().splitlines()] == ["a"]
        assert "n=2" in out.getvalue()

    @pytest.mark.parametrize(
        ("argv", "named"),
        [
            (["tail", "f.jsonl"], "f.jsonl"),
            (["tail", "f"], "f.jsonl"),
            (["tail", "-f", "f.jsonl"], "f.jsonl"),
            (["tail", "-f", "f"], "f.jsonl"),
            (["tail", "-f", "g"], "runs/g.jsonl"),
        ],
    )
    def test_a_fifo_named_like_a_log_is_refused_not_waited_for(
        self,
        argv: list[str],
        named: str,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        (tmp_path / "runs").mkdir()
        os.mkfifo(tmp_path / "f.jsonl")
        os.mkfifo(tmp_path / "runs" / "g.jsonl")
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(_tail, "_sleep", _writer(tmp_path / "unused.jsonl", []))  # a wait ends

        assert main(argv) == 1

        assert capsys.readouterr().err == (
            f"runlines: error: {named} is a FIFO, not a regular file; pass a folder of logs or a "
            ".jsonl log file\n"
        )

    def test_follow_starts_over_when_the_file_is_replaced(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(run_dir / "r.jsonl", line("old", run="r"), line("old", run="r"))
        out = io.StringIO()
        stops = iter([False] * 2)
        monkeypatch.setattr(_tail, "_sleep", lambda _s: write(log, line("new", run="r")))

        follow(log, out, offset=log.stat().st_size, should_stop=lambda: next(stops, True))

        assert out.getvalue().split()[1] == "new"

    def test_follow_starts_over_when_the_file_is_rewritten_longer_in_place(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        log = write(run_dir / "r.jsonl", line("old", run="r", n=0), line("old", run="r", n=1))
        out = io.StringIO()
        stops = iter([False] * 2)
        rewrite = b"".join(line("new", run="r", n=n) for n in range(10, 15))
        monkeypatch.setattr(_tail, "_sleep", lambda _s: log.write_bytes(rewrite))

        follow(log, out, offset=log.stat().st_size, should_stop=lambda: next(stops, True))

        assert [row.split()[-1] for row in out.getvalue().splitlines()] == [
            f"n={n}" for n in range(10, 15)
        ]


def _writer(log: Path, appends: list[bytes], *, stop: bool = True) -> object:
    """Return a fake sleep that appends the next chunk to *log*; then Ctrl-C (or nothing)."""
    pending = list(appends)

    def sleep(_seconds: float) -> None:
        if not pending:
            if stop:
                raise KeyboardInterrupt
            return
        with log.open("ab") as out:
            out.write(pending.pop(0))

    return sleep


class TestCompare:
    def test_prints_one_column_per_run(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        train(run_dir, "a", range(1, 4))
        train(run_dir, "b", range(1, 3))

        assert (
            main(
                ["compare", str(run_dir / "a.jsonl"), str(run_dir / "b.jsonl"), "--metric", "loss"]
            )
            == 0
        )

        assert capsys.readouterr().out.splitlines() == [
            "step         a    b",
            "   1         1    1",
            "   2       0.5  0.5",
            "   3  0.333333    -",
        ]

    def test_run_names_and_by(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        train(run_dir, "a", range(1, 25))
        monkeypatch.chdir(run_dir)

        assert main(["compare", "a", "--metric", "loss", "--by", "epoch", "--agg", "max"]) == 0

        assert capsys.readouterr().out.splitlines()[1].split() == ["0", "1"]

    def test_unknown_metric_is_one_error_line(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = train(run_dir, "a", range(1, 3))

        assert main(["compare", str(log), "--metric", "acc"]) == 1

        err = capsys.readouterr().err
        assert err.startswith("runlines: error: metric 'acc' is in no record; numeric fields: ")
        assert err.count("\n") == 1


class TestPlot:
    def test_writes_a_png(self, run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        skip_without("matplotlib")
        train(run_dir, "a", range(1, 20))
        train(run_dir, "b", range(1, 15))
        target = run_dir / "loss.png"

        assert main(["plot", str(run_dir), "--metric", "loss", "-o", str(target)]) == 0

        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert capsys.readouterr().out == f"wrote {target} (loss by step, 2 runs)\n"

    def test_without_matplotlib_says_what_to_install(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        train(run_dir, "a", range(1, 3))
        monkeypatch.setitem(sys.modules, "matplotlib", None)

        assert main(["plot", str(run_dir), "--metric", "loss", "-o", str(run_dir / "x.png")]) == 1

        assert capsys.readouterr().err == (
            "runlines: error: plotting needs matplotlib: pip install 'runlines[plot]'\n"
        )


class TestWhich:
    @pytest.fixture(name="checkpoint")
    def _checkpoint(self, run_dir: Path) -> Path:
        checkpoint = write(run_dir / "ckpt-3.pt", b"\x00weights" * 1000)
        train(run_dir, "w", range(1, 3))
        with Run("w", run_dir, stdout=False, resume_step=2, resume="allow") as run:
            run.log("train_step", step=3, loss=0.1)
            run.artifact("ckpt", path=checkpoint, step=3)
        return checkpoint

    def test_a_log_that_cannot_be_read_is_named_and_the_others_searched(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        weights = run_dir / "model.bin"
        with Run("w", run_dir, stdout=False) as run:
            weights.write_bytes(b"weights")
            run.artifact("model", path=weights)
        theirs = train(run_dir, "theirs", range(1, 3))
        refuse_to_open(monkeypatch, theirs, "denied")

        assert main(["which", str(weights)]) == 0

        captured = capsys.readouterr()
        assert captured.out.startswith("run w  attempt 1")
        assert f"left out {theirs}: it cannot be read (Permission denied)" in captured.err

    def test_finds_the_run_that_registered_a_file(
        self, checkpoint: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["which", str(checkpoint)]) == 0

        out = capsys.readouterr().out
        assert out.startswith("run w  attempt 2  step 3  artifact 'ckpt'  path ckpt-3.pt  log ")

    def test_finds_a_copy_moved_elsewhere_by_content(
        self, checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        copy = write(tmp_path / "elsewhere" / "deep" / "model.bin", checkpoint.read_bytes())

        assert main(["which", str(copy)]) == 1
        assert main(["which", str(copy), str(checkpoint.parent)]) == 0

        captured = capsys.readouterr()
        assert "no run registered a file with sha256" in captured.err
        assert "run w  attempt 2" in captured.out

    def test_finds_it_from_a_subfolder_of_the_logs(
        self, checkpoint: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        copy = write(checkpoint.parent / "w.artifacts" / "again.pt", checkpoint.read_bytes())

        assert main(["which", str(copy)]) == 0

        assert "artifact 'ckpt'" in capsys.readouterr().out

    def test_missing_file_is_an_error(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["which", str(run_dir / "nope.pt")]) == 1

        assert "no such file" in capsys.readouterr().err


def test_nan_metric_prints_as_nan(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Run("n", run_dir, stdout=False, on_nonfinite="ignore") as run:
        run.log("train_step", step=1, loss=math.nan)

    assert main(["tail", "-n", "1", "--event", "train_step", str(run_dir / "n.jsonl")]) == 0

    assert "loss=nan" in capsys.readouterr().out
