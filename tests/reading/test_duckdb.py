"""runlines.sql: SQL over logs with DuckDB (query, connect, load_duckdb, export), its commands."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import math
import random
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

import runlines.sql
from _optional import needs
from runlines import Run
from runlines.cli._query import add_commands
from runlines.errors import FieldError, ReadError, RunlinesWarning
from runlines.reading import load
from runlines.sql import QueryError, connect, export, load_duckdb, query

MEAN_LOSS = "SELECT run, epoch, avg(loss) AS loss FROM records WHERE event = 'train_step' GROUP BY run, epoch ORDER BY run, epoch"  # noqa: E501


def write_runs(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write a folder of real runs that exercises every decoding rule; return the folder.

    baseline: two attempts, the second resumed from step 4, an inf loss and a NaN loss.
    sweep: other fields (grad_norm, a note, a nested config), then a torn last line.
    ddp: two ranks, one file each.
    """
    quiet: dict[str, Any] = {"stdout": False, "on_nonfinite": "ignore"}  # counts are as logged
    with Run("baseline", directory, config={"lr": 0.1, "layers": [2, 4]}, **quiet) as run:
        for step in range(1, 7):
            run.log("train_step", epoch=step // 3, step=step, loss=1.0 / step)
        run.log("train_step", epoch=2, step=7, loss=math.inf)
    with Run("baseline", directory, resume_step=4, resume="allow", **quiet) as run:
        for step in range(5, 9):
            loss = math.nan if step == 8 else 0.5 / step
            run.log("train_step", epoch=step // 3, step=step, loss=loss)
        run.log("eval", step=8, accuracy=0.9, scores={"top1": 0.9, "top5": -math.inf})
    with Run("sweep", directory, stdout=False, config={"lr": 0.3, "note": "wide"}) as run:
        for step in range(1, 5):
            run.log("train_step", epoch=step // 3, step=step, loss=2.0 / step, grad_norm=step * 1.5)
        run.log("note", text="halfway", tags=["a", "b"])
    with (directory / "sweep.jsonl").open("ab") as log:
        log.write(b'{"ts": 1767225600.0, "event": "train_step", "run": "sweep", "st')
    monkeypatch.setenv("WORLD_SIZE", "2")
    with contextlib.ExitStack() as stack:  # the ranks open together, as torchrun starts them:
        opened = []  # a rank 1 opened after its rank 0 ended waits 30 s for it (_logfile)
        for rank in (0, 1):
            monkeypatch.setenv("RANK", str(rank))
            opened.append(stack.enter_context(Run("ddp", directory, stdout=False)))
        for rank, run in enumerate(opened):
            for step in range(1, 4):
                run.log("train_step", epoch=0, step=step, loss=float(rank + step))
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    return directory


@pytest.fixture(name="runs", scope="module")
def _runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield write_runs(tmp_path_factory.mktemp("runs"), monkeypatch)


def _load(*sources: Path, **options: Any) -> pd.DataFrame:
    with pytest.warns(RunlinesWarning, match="skipped 1 line"):
        return load(*sources, **options)


@needs("duckdb")
class TestQuery:
    def test_mean_loss_per_run_and_epoch(self, runs: Path) -> None:
        result = query(MEAN_LOSS, runs)

        losses = {(r.run, r.epoch): r.loss for r in result.itertuples()}
        assert losses[("sweep", 0)] == pytest.approx((2.0 + 1.0) / 2)
        assert losses[("ddp", 0)] == pytest.approx((1 + 2 + 3 + 2 + 3 + 4) / 6)
        assert losses[("baseline", 1)] == pytest.approx((1 / 3 + 1 / 4 + 0.5 / 5) / 3)
        assert math.isnan(losses[("baseline", 2)])  # 0.5/6, 0.5/7 and the NaN of step 8

    def test_aggregates_equal_those_of_load(self, runs: Path) -> None:
        frame = _load(runs, event="train_step").dropna(subset=["loss"])
        expected = frame.groupby(["run", "epoch"]).loss.agg(["mean", "count", "max"]).reset_index()

        result = query(
            "SELECT run, epoch, avg(loss) AS mean, count(loss) AS count, max(loss) AS max "
            "FROM records WHERE event = 'train_step' AND NOT isnan(loss) GROUP BY ALL ORDER BY ALL",
            runs,
        )

        assert result.run.tolist() == expected.run.tolist()
        assert result.epoch.tolist() == expected.epoch.tolist()
        assert result["count"].tolist() == expected["count"].tolist()
        for column in ("mean", "max"):
            pd.testing.assert_series_equal(result[column], expected[column], check_dtype=False)

    def test_view_has_load_columns_and_rank_and_attempt(self, runs: Path) -> None:
        frame = _load(runs)

        result = query("SELECT * FROM records", runs)

        assert set(result.columns) == set(frame.columns)
        assert list(result.columns[:5]) == ["ts", "event", "run", "rank", "attempt"]
        assert len(result) == len(frame)

    def test_nonfinite_floats_are_restored(self, runs: Path) -> None:
        result = query(
            "SELECT step, loss FROM records WHERE run = 'baseline' AND step IN (7, 8) "
            "AND event = 'train_step' ORDER BY attempt, step",
            runs,
            superseded=True,
        )

        assert result.loss[0] == math.inf  # step 7 of attempt 1
        assert math.isnan(result.loss[2])  # step 8 of attempt 2
        assert query("SELECT count(*) AS n FROM records WHERE isnan(loss)", runs).n[0] == 1

    def test_superseded_records_are_dropped(self, runs: Path) -> None:
        sql = "SELECT attempt, step FROM records WHERE run = 'baseline' AND event = 'train_step'"

        kept = query(sql + " ORDER BY attempt, step", runs)
        every = query(sql + " ORDER BY attempt, step", runs, superseded=True)

        pairs = list(zip(kept.attempt, kept.step, strict=True))
        assert pairs == [(1, s) for s in range(1, 5)] + [(2, s) for s in range(5, 9)]
        assert len(every) == len(kept) + 3  # steps 5, 6 and 7 of attempt 1

    def test_torn_last_line_is_skipped(self, runs: Path) -> None:
        result = query("SELECT event, step FROM records WHERE run = 'sweep'", runs)

        assert len(result) == 1 + 4 + 1 + 1  # run_start, steps, note, run_end
        assert result.event.notna().all()

    def test_rank_files_merge_into_their_run(self, runs: Path) -> None:
        result = query(
            "SELECT rank, count(*) AS n FROM records WHERE run = 'ddp' GROUP BY rank ORDER BY rank",
            runs,
        )

        assert result.to_dict("list") == {"rank": [0, 1], "n": [5, 5]}

    def test_fields_that_differ_across_runs_are_all_there(self, runs: Path) -> None:
        result = query(
            "SELECT run, count(grad_norm) AS g, count(config) AS c FROM records "
            "GROUP BY run ORDER BY run",
            runs,
        )

        assert result.to_dict("list") == {
            "run": ["baseline", "ddp", "sweep"],
            "g": [0, 0, 4],
            "c": [2, 2, 1],  # each run_start has one, {} when none was given
        }
        config = query("SELECT config.note AS note FROM records WHERE run = 'sweep'", runs)
        assert config.note.dropna().tolist() == ["wide"]

    def test_a_field_seen_only_in_a_records_deep_in_a_file_is_kept(self, tmp_path: Path) -> None:
        with Run("long", tmp_path, stdout=False) as run:
            for step in range(30_000):
                run.log("train_step", step=step)
            run.log("train_step", step=30_000, rare=1.5)

        result = query("SELECT sum(rare) AS rare FROM records", tmp_path)

        assert result.rare[0] == 1.5

    def test_a_log_appended_to_is_read_again(self, tmp_path: Path) -> None:
        with Run("live", tmp_path, stdout=False) as run:
            run.log("train_step", step=1)
        assert "fresh" not in query("SELECT * FROM records", tmp_path).columns

        with Run("live", tmp_path, stdout=False, resume="allow") as run:
            run.log("train_step", step=2, fresh=True)

        result = query("SELECT attempt, fresh FROM records WHERE fresh", tmp_path)
        assert result.attempt.tolist() == [2]

    def test_a_record_without_ts_is_kept_and_a_torn_line_is_not(self, tmp_path: Path) -> None:
        (tmp_path / "hand.jsonl").write_bytes(
            b'{"ts": 1.0, "event": "a", "run": "hand"}\n{"step": 3}\n{"ts": 2.0, "ev\n'
        )

        result = query("SELECT run, event, step FROM records ORDER BY step NULLS FIRST", tmp_path)

        assert result.run.tolist() == ["hand", "hand"]  # the file names the run
        assert result.step.tolist()[1] == 3

    def test_an_empty_log_has_no_records(self, tmp_path: Path) -> None:
        (tmp_path / "empty.jsonl").write_bytes(b"")

        assert query("SELECT count(*) AS n FROM records", tmp_path).n.tolist() == [0]

    def test_bad_sql_names_the_view(self, runs: Path) -> None:
        with pytest.raises(QueryError, match=r"DuckDB refused the SQL: .*view 'records'"):
            query("SELECT loss FROM runs", runs)

    def test_sql_comes_first(self, runs: Path) -> None:
        with pytest.raises(TypeError, match="SQL first"):
            query(runs, "SELECT 1")  # type: ignore[arg-type]

    def test_a_missing_source_is_a_read_error(self, tmp_path: Path) -> None:
        with pytest.raises(ReadError, match="no such log"):
            query("SELECT 1", tmp_path / "nope.jsonl")

    def test_field_names_differing_only_in_case_keep_the_commonest(self, tmp_path: Path) -> None:
        lines = [{"ts": 1.0, "event": "e", "run": "x", "loss": 1.0}] * 2 + [
            {"ts": 2.0, "event": "e", "run": "x", "Loss": 5.0}
        ]
        (tmp_path / "x.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))

        with pytest.warns(RunlinesWarning, match="'Loss' are left out"):
            result = query("SELECT * FROM records", tmp_path)

        assert "loss" in result.columns
        assert "Loss" not in result.columns

    def test_connect_keeps_the_view_for_several_queries(self, runs: Path) -> None:
        con = connect(runs)
        try:
            runs_seen = con.sql("SELECT count(DISTINCT run) FROM records").fetchall()
            steps = con.sql("SELECT max(step) FROM records").fetchall()
        finally:
            con.close()

        assert runs_seen == [(3,)]
        assert steps == [(8,)]

    def test_spills_to_the_system_temp_folder_not_the_working_folder(self, runs: Path) -> None:
        con = connect(runs)
        try:
            folder = con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0]
        finally:
            con.close()

        assert Path(folder).parent == Path(tempfile.gettempdir())


@needs("duckdb")
class TestAttemptsInFileOrder:
    """Attempts come from where run_start records are in a file, read by several threads."""

    def test_every_record_gets_the_attempt_of_the_run_start_before_it(self, tmp_path: Path) -> None:
        rng = random.Random(7)
        for index in range(6):
            lines, attempt = [], 0
            size = rng.randint(20_000, 60_000)
            starts = {0, *rng.sample(range(1, size), 3)} if index % 2 else set()
            for line in range(size):
                if line in starts:
                    attempt += 1
                    lines.append({"ts": 1.0, "event": "run_start", "run": "r", "attempt": attempt})
                else:
                    lines.append({"ts": 1.0, "event": "s", "step": line, "expect": attempt or 1})
            path = tmp_path / f"r{index}.jsonl"
            path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
        con = connect(tmp_path)
        try:
            con.execute("SET threads = 4")
            wrong, total = con.sql(
                "SELECT count(*) FILTER (WHERE attempt <> expect), count(*) FROM records "
                "WHERE event = 's'"
            ).fetchall()[0]
        finally:
            con.close()

        assert total > 100_000
        assert wrong == 0


@needs("duckdb")
class TestLoadDuckdb:
    @pytest.mark.parametrize(
        "options",
        [
            {},
            {"superseded": True},
            {"event": "train_step"},
            {"event": ["train_step", "eval"], "columns": ["step", "loss", "rank", "attempt"]},
        ],
        ids=["all", "superseded", "one-event", "events-and-columns"],
    )
    def test_equals_load(self, runs: Path, options: dict[str, Any]) -> None:
        expected = _load(runs, **options)

        frame = load_duckdb(runs, **options)

        assert sorted(frame.columns) == sorted(expected.columns)
        pd.testing.assert_frame_equal(frame, expected[frame.columns])

    def test_nested_nonfinite_values_are_restored(self, runs: Path) -> None:
        frame = load_duckdb(runs, event="eval")

        assert frame.scores.tolist() == [{"top1": 0.9, "top5": -math.inf}]

    def test_unknown_event_lists_the_events(self, runs: Path) -> None:
        with pytest.raises(FieldError, match=r"'train_stp' \(did you mean 'train_step'\?\)"):
            load_duckdb(runs, event="train_stp")

    def test_unknown_column_lists_the_fields(self, runs: Path) -> None:
        with pytest.raises(FieldError, match=r"no record has field 'los' \(did you mean"):
            load_duckdb(runs, columns=["los"])


@needs("duckdb")
class TestExport:
    def test_one_parquet_file_reads_back_with_pandas(self, runs: Path, tmp_path: Path) -> None:
        columns = ["run", "rank", "attempt", "ts", "event", "step", "loss", "grad_norm", "text"]
        expected = query("SELECT * FROM records ORDER BY run, rank, attempt, ts", runs)

        path = export(runs, output=tmp_path / "runs.parquet")

        frame = pd.read_parquet(path).sort_values(["run", "rank", "attempt", "ts"])
        assert sorted(frame.columns) == sorted(expected.columns)
        pd.testing.assert_frame_equal(
            frame[columns].reset_index(drop=True), expected[columns], check_dtype=False
        )
        assert frame.config.dropna().tolist()[-1] == {"lr": 0.3, "layers": None, "note": "wide"}

    def test_partitioned_by_run_writes_a_folder_per_run(self, runs: Path, tmp_path: Path) -> None:
        path = export(runs, output=tmp_path / "runs", partition_by_run=True, superseded=True)

        assert sorted(p.name for p in path.iterdir()) == ["run=baseline", "run=ddp", "run=sweep"]
        frame = pd.read_parquet(path)
        assert frame.groupby("run", observed=True).size().to_dict() == {
            "baseline": 16,
            "ddp": 10,
            "sweep": 7,
        }
        assert math.isinf(frame.loss.max())

    def test_refuses_a_folder_that_is_not_empty(self, runs: Path, tmp_path: Path) -> None:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "keep.txt").write_text("mine")

        with pytest.raises(FileExistsError, match="not an empty folder"):
            export(runs, output=tmp_path / "out", partition_by_run=True)


def _cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="runlines")
    add_commands(parser.add_subparsers(required=True))
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


class TestCommands:
    @needs("duckdb")
    def test_query_prints_an_aligned_table(
        self, runs: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert (
            _cli(
                "query",
                "SELECT run, count(*) AS n FROM records GROUP BY run ORDER BY run",
                str(runs),
            )
            == 0
        )

        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split() == ["run", "n"]
        assert [line.split() for line in lines[1:]] == [
            ["baseline", "13"],
            ["ddp", "10"],
            ["sweep", "7"],
        ]
        assert len({len(line) for line in lines}) == 1

    @needs("duckdb")
    def test_query_escapes_control_characters_of_names_and_values(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        log = tmp_path / "h.jsonl"
        record = {"ts": 1.0, "event": "note\x1b]0;t\x07", "run": "h", "text": "\x1b[2Jx\u202e"}
        log.write_bytes(orjson.dumps(record) + b"\n")
        sql = 'SELECT event, text, 1 AS "n\x1b[2J" FROM records'

        assert _cli("query", sql, str(log)) == 0

        out = capsys.readouterr().out
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", out), repr(out)
        lines = out.splitlines()
        assert lines[0].split() == ["event", "text", "n\\x1b[2J"]
        assert lines[1].split() == ["note\\x1b]0;t\\x07", "\\x1b[2Jx\\u202e", "1"]

    @needs("duckdb")
    @pytest.mark.parametrize("suffix", [".csv", ".parquet"])
    def test_query_writes_csv_or_parquet(self, runs: Path, tmp_path: Path, suffix: str) -> None:
        out = tmp_path / f"losses{suffix}"

        assert _cli("query", MEAN_LOSS, str(runs), "-o", str(out)) == 0

        frame = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
        assert frame.columns.tolist() == ["run", "epoch", "loss"]
        assert len(frame) == len(query(MEAN_LOSS, runs))

    @needs("duckdb")
    def test_export_writes_parquet(
        self, runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert _cli("export", str(runs), "-o", str(tmp_path / "all.parquet")) == 0

        assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'all.parquet'}"
        assert len(pd.read_parquet(tmp_path / "all.parquet")) == 30

    @needs("duckdb")
    def test_export_partitioned_by_run(self, runs: Path, tmp_path: Path) -> None:
        assert _cli("export", str(runs), "-o", str(tmp_path / "p"), "--partition-by-run") == 0

        assert (tmp_path / "p" / "run=ddp").is_dir()

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["query", "SELEC 1"], "DuckDB refused the SQL: .*view 'records'"),
            (["query", "SELECT 1", "-o", "x.xlsx"], r"must end in \.csv or \.parquet"),
            (["export", "-o", "{tmp}/x.parquet", "{tmp}/missing"], "no such log"),
        ],
        ids=["bad-sql", "bad-suffix", "missing-source"],
    )
    @needs("duckdb")
    def test_errors_are_one_line_without_traceback(
        self,
        runs: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
        argv: list[str],
        message: str,
    ) -> None:
        argv = [a.format(tmp=tmp_path) for a in argv]
        if argv[0] == "query":
            argv.insert(2, str(runs))

        assert _cli(*argv) == 1

        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert err.startswith("runlines: error: ")
        assert re.search(message, err)

    def test_without_duckdb_it_says_what_to_install(
        self, runs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setitem(sys.modules, "duckdb", None)

        assert _cli("query", "SELECT 1", str(runs)) == 1

        assert "pip install 'runlines[duckdb]'" in capsys.readouterr().err


@needs("duckdb")
@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("connect()", lambda log: runlines.sql.connect(log)),
        ("query()", lambda log: runlines.sql.query("SELECT 1", log)),
        (
            "query_to_file()",
            lambda log: runlines.sql.query_to_file("SELECT 1", log, output="o.csv"),
        ),
        ("export()", lambda log: runlines.sql.export(log, output="o.parquet")),
        ("load_duckdb()", lambda log: runlines.sql.load_duckdb(log)),
        ("load_duckdb()", lambda log: load(log, engine="duckdb")),
    ],
    ids=["connect", "query", "query_to_file", "export", "load_duckdb", "load"],
)
def test_each_reader_names_the_extra_when_duckdb_goes_after_the_engine_was_imported(
    runs: Path, monkeypatch: pytest.MonkeyPatch, name: str, call: Callable[[Path], object]
) -> None:
    importlib.import_module("runlines.reading._duckdb")
    monkeypatch.setitem(sys.modules, "duckdb", None)

    with pytest.raises(
        ImportError, match=re.escape(f"{name} needs DuckDB: pip install 'runlines[duckdb]'")
    ):
        call(runs)


@needs("duckdb")
def test_the_view_is_the_one_runlines_sql_names(runs: Path) -> None:
    with contextlib.closing(connect(runs)) as con:
        found = con.execute(f"SELECT count(*) FROM {runlines.sql.VIEW}").fetchone()

    assert runlines.sql.VIEW == importlib.import_module("runlines.reading._duckdb").VIEW
    assert found is not None
    assert found[0] == len(query("SELECT * FROM records", runs)) > 0


def test_import_runlines_does_not_import_duckdb() -> None:
    code = "import sys, runlines, runlines.sql, runlines.cli._query; print('duckdb' in sys.modules)"

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "False"
