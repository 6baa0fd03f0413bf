"""`runlines tag`, `untag` and `note`: records in `<name>.notes.jsonl`, never in the log.

runs(), `ls`, `show` and the dashboard's rows show them; a torn or foreign line in the notes
file is passed over; racing taggers and the run's own writer lose and tear nothing.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path

import orjson
import pytest

import _tag_racer
import runlines
from _logs import train, write
from runlines import _notes
from runlines._layout import notes_path
from runlines.cli import main
from runlines.errors import FieldError, ReadError
from runlines.reading import find_logs

_TIMEOUT_S = 120


@pytest.fixture(name="log")
def _log(run_dir: Path) -> Path:
    return train(run_dir, "base", range(1, 4))


def _records(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_tag_untag_and_note_append_records_beside_the_log_and_leave_it_alone(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = log.read_bytes()

    assert main(["tag", str(log), "baseline", "best"]) == 0
    assert main(["untag", str(log), "best"]) == 0
    assert main(["note", str(log), "lr too high"]) == 0

    assert log.read_bytes() == before
    records = _records(log.with_name("base.notes.jsonl"))
    assert [(r["op"], r.get("tags"), r.get("text")) for r in records] == [
        ("tag", ["baseline", "best"], None),
        ("untag", ["best"], None),
        ("note", None, "lr too high"),
    ]
    assert all(isinstance(r["ts"], float) for r in records)
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{log}: tags baseline, best", f"{log}: tags baseline", f"{log}: 1 note"]


def test_a_run_name_finds_its_log_as_show_does(
    log: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(log.parent)

    assert main(["tag", "base", "x"]) == 0

    assert _notes.read_notes(log).tags == ["x"]


def test_runs_has_tags_and_notes_columns_after_the_key_columns(run_dir: Path, log: Path) -> None:
    other = train(run_dir, "other", range(1, 3))
    runlines.tag(log, "baseline", "keep")
    runlines.untag(log, "keep")
    runlines.tag(log, "keep", "baseline")  # a tag it has keeps its place
    runlines.note(log, "first")
    runlines.note(log, "second")

    frame = runlines.runs(run_dir).set_index("run")

    assert list(frame.columns[6:8]) == ["tags", "notes"]
    assert frame.loc["base", "tags"] == ["baseline", "keep"]
    assert frame.loc["base", "notes"] == ["first", "second"]
    assert frame.loc["other", "tags"] == []
    assert frame.loc["other", "notes"] == []
    assert not notes_path(other).exists()


def test_run_tag_and_note_write_the_side_file_while_the_run_writes_its_log(run_dir: Path) -> None:
    with runlines.Run("live", run_dir, stdout=False) as run:
        run.log("train_step", step=1, loss=0.5)
        run.tag("sweep-3")
        run.note("started from the step-1000 checkpoint")
        run.log("train_step", step=2, loss=0.4)

    found = _notes.read_notes(run.path)
    assert found.tags == ["sweep-3"]
    assert [n["text"] for n in found.notes] == ["started from the step-1000 checkpoint"]
    events = [r["event"] for r in _records(run.path)]
    assert events == ["run_start", "train_step", "train_step", "run_end"]


def test_a_finished_run_can_be_tagged_through_run(run_dir: Path) -> None:
    run = runlines.Run("done", run_dir, stdout=False)
    run.close()

    run.tag("late")

    assert _notes.read_notes(run.path).tags == ["late"]


def test_a_rank_file_has_its_runs_notes(run_dir: Path, log: Path) -> None:
    rank = write(run_dir / "base.rank1.jsonl", b"")

    assert notes_path(rank) == notes_path(log) == run_dir / "base.notes.jsonl"


def test_show_prints_the_tags_and_notes_and_its_json_has_them(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runlines.tag(log, "baseline")
    runlines.note(log, "a note")

    assert main(["show", str(log)]) == 0
    text = capsys.readouterr().out
    assert main(["show", "--json", str(log)]) == 0
    shown = json.loads(capsys.readouterr().out)

    assert "tags      baseline" in text
    assert "notes\n  WRITTEN" in text
    assert "a note" in text
    assert shown["tags"] == ["baseline"]
    assert [n["text"] for n in shown["notes"]] == ["a note"]


def test_ls_shows_a_tags_column_when_a_run_has_tags_and_json_has_both(
    run_dir: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ls", str(run_dir)]) == 0
    untagged = capsys.readouterr().out
    runlines.tag(log, "baseline", "v2")
    runlines.note(log, "why")

    assert main(["ls", str(run_dir)]) == 0
    tagged = capsys.readouterr().out
    assert main(["ls", "--json", str(run_dir)]) == 0
    rows = json.loads(capsys.readouterr().out)

    assert "TAGS" not in untagged
    assert "TAGS" in tagged.splitlines()[0]
    assert "baseline, v2" in tagged
    assert (rows[0]["tags"], rows[0]["notes"]) == (["baseline", "v2"], ["why"])


def test_the_notes_file_is_no_log_of_any_view(
    run_dir: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runlines.tag(log, "baseline")

    assert [found.path.name for found in find_logs(run_dir)] == ["base.jsonl"]
    assert main(["ls", "-r", str(run_dir.parent)]) == 0  # no warning of a foreign JSONL
    assert len(runlines.runs(run_dir)) == 1


def test_no_run_may_be_named_like_a_notes_file(run_dir: Path) -> None:
    with pytest.raises(FieldError, match=r"not ending in '\.rank<N>' or '\.notes'"):
        runlines.Run("base.notes", run_dir, stdout=False)


@pytest.mark.parametrize("bad", ["", "two words", "a,b", "x" * 101, "tab\there"])
def test_a_bad_tag_is_refused_and_nothing_is_written(
    log: Path, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tag", str(log), "good", bad]) == 1

    assert "without whitespace or commas" in capsys.readouterr().err
    assert not notes_path(log).exists()


def test_a_note_over_one_atomic_append_is_refused(log: Path) -> None:
    with pytest.raises(FieldError, match="over the 4095 one atomic append allows"):
        runlines.note(log, "x" * 5000)
    with pytest.raises(FieldError, match="non-empty"):
        runlines.note(log, "  ")

    assert not notes_path(log).exists()


def test_tagging_a_missing_log_says_so(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ReadError, match="no such log"):
        runlines.tag(run_dir / "gone.jsonl", "x")
    assert main(["tag", str(run_dir / "gone.jsonl"), "x"]) == 1
    assert "runlines: error:" in capsys.readouterr().err


def test_torn_and_foreign_lines_are_passed_over_and_runs_still_reads(log: Path) -> None:
    good = b'{"ts": 1.0, "op": "tag", "tags": ["kept"]}\n'
    write(
        notes_path(log),
        good,
        b"not json\n",
        b'["a list"]\n',
        b'{"ts": 2.0, "op": "tag", "tags": "not-a-list"}\n',
        b'{"ts": 3.0, "op": "retag", "tags": ["x"]}\n',
        b'{"ts": 4.0, "op": "note", "text": 5}\n',
        b'{"ts": 5.0, "op": "note", "text": "valid"}\n',
        b'{"ts": 6.0, "op": "tag", "tags": ["to',  # torn: the writer died mid-line
    )

    frame = runlines.runs(log)

    assert frame.loc[0, "tags"] == ["kept"]
    assert frame.loc[0, "notes"] == ["valid"]


def test_an_append_after_a_torn_line_starts_a_line_of_its_own(log: Path) -> None:
    write(notes_path(log), b'{"ts": 1.0, "op": "tag", "tags": ["a"]}\n{"ts": 2.0, "op": "ta')

    runlines.tag(log, "b")

    assert _notes.read_notes(log).tags == ["a", "b"]


def test_a_fifo_named_like_the_notes_file_is_refused_without_blocking(log: Path) -> None:
    os.mkfifo(notes_path(log))

    with pytest.raises(ReadError, match="no regular file"):
        runlines.tag(log, "x")

    assert runlines.runs(log).loc[0, "tags"] == []


def test_read_notes_sees_an_append_made_after_it_last_read(log: Path) -> None:
    runlines.tag(log, "a")
    assert _notes.read_notes(log).tags == ["a"]

    runlines.tag(log, "b")

    assert _notes.read_notes(log).tags == ["a", "b"]


def test_threads_tagging_at_once_lose_no_record(log: Path) -> None:
    def tag_many(worker: int) -> None:
        for call in range(50):
            runlines.tag(log, f"t{worker}-{call}")

    threads = [threading.Thread(target=tag_many, args=(worker,)) for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(_records(notes_path(log))) == 400
    assert len(_notes.read_notes(log).tags) == 400


def test_tag_calls_racing_in_processes_with_the_runs_writer_tear_and_lose_nothing(
    run_dir: Path,
) -> None:
    workers = 8
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(workers + 1, timeout=_TIMEOUT_S)
    opened = context.Event()
    log = run_dir / "race.jsonl"
    writer = context.Process(target=_tag_racer.writer, args=(str(run_dir), "race", opened, barrier))
    writer.start()
    assert opened.wait(_TIMEOUT_S), "the run's writer did not open its run"
    taggers = [
        context.Process(target=_tag_racer.tagger, args=(worker, str(log), barrier))
        for worker in range(workers)
    ]
    for process in taggers:
        process.start()
    for process in [writer, *taggers]:
        process.join(_TIMEOUT_S)
        if process.is_alive():
            process.kill()
    assert [p.exitcode for p in [writer, *taggers]] == [0] * (workers + 1)

    records = _records(notes_path(log))  # every line whole: orjson refuses a torn one
    calls = _tag_racer.CALLS
    assert len(records) == 2 * workers * calls
    notes = {r["text"] for r in records if r["op"] == "note"}
    expected = {_tag_racer.note_text(w, c) for w in range(workers) for c in range(calls)}
    assert notes == expected
    tags = _notes.read_notes(log).tags
    assert set(tags) == {"shared"} | {f"w{w}-{c}" for w in range(workers) for c in range(calls)}
    events = [r["event"] for r in _records(log)]  # the log holds the writer's records only
    assert events == ["run_start", *["train_step"] * _tag_racer.RECORDS, "run_end"]
