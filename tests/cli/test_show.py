"""`runlines show RUN`: a run found by file or name, its start, attempts, events, config, ranks."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

import runlines
from _logs import T0, line, train, write
from runlines import Run
from runlines.cli import main


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


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

    def test_show_json_lists_last_values_per_event_and_every_attempt(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = write(
            tmp_path / "r.jsonl",
            line("run_start", run="r", attempt=1),
            line("train_step", run="r", step=1, loss=0.1, n=3),
            line("run_end", run="r", status="failed", exc_type="OSError"),
            line("run_start", run="r", ts=T0 + 9, attempt=2),
            line("eval", run="r", ts=T0 + 10, step=1, loss=0.2),
            line("run_end", run="r", ts=T0 + 11, status="ok"),
        )

        assert main(["show", "--json", str(log)]) == 0

        shown = json.loads(capsys.readouterr().out)
        assert [(a["attempt"], a["status"]) for a in shown["attempts"]] == [
            (1, "failed"),
            (2, "ok"),
        ]
        assert {(v["event"], v["field"]): v["value"] for v in shown["last"]} == {
            ("train_step", "loss"): 0.1,
            ("eval", "loss"): 0.2,
        }

    def test_show_keeps_a_long_config_short(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config = {f"key{i:02d}": i for i in range(30)}
        log = write(tmp_path / "c.jsonl", line("run_start", run="c", config=config))

        assert main(["show", str(log)]) == 0
        short = capsys.readouterr().out
        assert main(["show", "--config", str(log)]) == 0

        assert "key25" not in short
        assert "... 10 more" in short
        assert "key29" in capsys.readouterr().out


def test_show_counts_what_load_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(
        tmp_path / "r.jsonl",
        line("run_start", run="r", attempt=1),
        *(line("train", run="r", step=s, loss=1.0) for s in (1, 2, 3, 4)),
        line("run_start", run="r", attempt=2, resume_step=2),
        *(line("train", run="r", step=s, loss=0.5) for s in (3, 4)),
        line("run_start", run="r", attempt=3),
        line("train", run="r", step=1, loss=0.1),
    )

    assert main(["show", "--json", str(log)]) == 0

    shown = json.loads(capsys.readouterr().out)
    assert shown["counts"]["train"] == len(runlines.load(log, event="train")) == 4
    assert shown["superseded"] == {"train": 3}
