"""Hostile logs for the readers and the CLI: a clear error or a warning, never a traceback or a
hang.

`iter_events` and `load` either return records (with a RunlinesWarning for what they skipped)
or raise a RunlinesError. Each CLI command returns 0, or non-zero with exactly one
`runlines: error:` line on stderr and nothing but `runlines:` lines there. The commands that
could hang run in a subprocess with a timeout.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _cli_driver import COMMANDS
from _reliability import examples, finish, spawn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runlines
from runlines import Run, RunlinesError, RunlinesWarning
from runlines.cli import main

_HANG_S = 60  # a reader of the 101 MiB log takes a few seconds; one that takes a minute hangs


def _record(ts: float = 1.0, event: str = "step", **fields: Any) -> bytes:
    return json.dumps({"ts": ts, "event": event, "run": "h", **fields}).encode()


def _garbage() -> bytes:
    return random.Random(7).randbytes(200_000)


HOSTILE: dict[str, Callable[[], bytes]] = {
    "empty": lambda: b"",
    "blank_lines": lambda: b"\n\n   \n\t\n",
    "binary_garbage": _garbage,
    "json_array_lines": lambda: b'[{"ts":1,"event":"a","run":"x"}]\n[1,2,3]\n',
    "json_scalars": lambda: b'1\n"x"\nnull\ntrue\n',
    "no_newline_at_end": lambda: _record(1.0, step=1) + b"\n" + _record(2.0, step=2),
    "nul_bytes": lambda: _record(step=1) + b"\n\0\0\0\n\0" + _record(step=2) + b"\n",
    "utf16": lambda: (_record(step=1) + b"\n" + _record(step=2) + b"\n").decode().encode("utf-16"),
    "utf8_bom": lambda: b"\xef\xbb\xbf" + _record(step=1) + b"\n",
    "crlf": lambda: _record(step=1) + b"\r\n" + _record(step=2) + b"\r\n",
    "invalid_utf8": lambda: b'{"ts":1,"event":"a\xff\xfe","run":"x"}\n' + _record(step=1) + b"\n",
    "lone_surrogate_escape": lambda: b'{"ts":1,"event":"\\ud800","run":"x","step":1}\n',
    "nan_literals": lambda: b'{"ts":1,"event":"step","run":"x","loss":NaN,"lr":-Infinity}\n',
    "huge_numbers": lambda: b'{"ts":1e400,"event":"step","run":"x","step":' + b"9" * 400 + b"}\n",
    "no_event_field": lambda: b'{"a":1}\n{"b":2}\n',
    "odd_types": lambda: b"\n".join(
        [
            _record("x", "run_start", attempt=1e300, config=[1], argv="train.py", pid=[1]),  # type: ignore[arg-type]
            json.dumps({"ts": 1e20, "event": ["a"], "run": None, "step": {"a": 1}}).encode(),
            _record(-1e20, "run_end", status=["x"], spans={"a": [1], "b": {"count": "x"}}),
            _record(3.0, "artifact", name=["n"], bytes=-5, path=None, sha256=7),
            _record(4.0, "span", name="x", duration_s="slow", loss=True),
            _record(5.0, "step", step=True, loss="high", _nonfinite={"/loss": "NaN", "/x/9": 1}),
            b"",
        ]
    ),
    "deep_nesting": lambda: (
        b'{"ts":1,"event":"a","run":"x","v":'
        + b"[" * 100_000
        + b"]" * 100_000
        + b"}\n"
        + _record(step=1)
        + b"\n"
    ),
    "duplicate_keys": lambda: b'{"ts":1,"event":"a","run":"x","step":1,"step":"two"}\n',
    "step_and_metric_equal": lambda: _record(step=1, loss=0.5) + b"\n",
}

_COMMANDS = COMMANDS


def _cli(args: list[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; return (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


def check_cli_result(args: list[str], status: int, err: str) -> None:
    """0 with no error line, or 1 or 2 with exactly one; nothing but runlines: lines."""
    lines = err.splitlines()
    assert all(line.startswith("runlines: ") for line in lines), f"{args}: {err[-2000:]}"
    errors = [line for line in lines if line.startswith("runlines: error:")]
    if status == 0:
        assert errors == [], args
    else:
        assert status in (1, 2), args
        assert len(errors) == 1, f"{args}: {err}"


def check_readers(path: Path) -> None:
    """iter_events and load return records or raise a RunlinesError, nothing else."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RunlinesWarning)
        for read in (lambda: list(runlines.iter_events(path)), lambda: runlines.load(path)):
            try:
                read()
            except RunlinesError as err:
                said = str(err)
            else:
                said = "read"
            assert said


def check_every_command(path: Path) -> None:
    for template in _COMMANDS:
        args = [part.format(log=path, dir=path.parent) for part in template]
        status, _, err = _cli(args)
        check_cli_result(args, status, err)


@pytest.fixture(scope="module", name="driven")
def _driven(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Every reader and command on every hostile log, in one subprocess with a timeout."""
    root = tmp_path_factory.mktemp("hostile")
    for name, make in HOSTILE.items():
        (root / name).mkdir()
        (root / name / f"{name}.jsonl").write_bytes(make())
    (root / "folder_named_like_a_log" / "fake.jsonl").mkdir(parents=True)
    code, out, err = finish(spawn("_cli_driver.py", str(root)), timeout_s=_HANG_S)
    assert code == 0, err
    results: dict[str, list[dict[str, Any]]] = {}
    for line in out.splitlines():
        result = json.loads(line)
        results.setdefault(result["file"].removesuffix(".jsonl"), []).append(result)
    return results


@pytest.mark.parametrize("name", [*HOSTILE, "fake"])
def test_hostile_log_gives_a_clear_error_or_a_warning(
    driven: dict[str, list[dict[str, Any]]], name: str
) -> None:
    results = driven[name]

    assert len(results) == 2 + len(_COMMANDS)
    for result in results:
        assert result["crash"] is None, f"{result['args']}:\n{result['crash']}"
        if result["status"] is not None:
            check_cli_result(result["args"], result["status"], result["err"])


def test_folder_named_like_a_log_is_refused_clearly(tmp_path: Path) -> None:
    folder = tmp_path / "logs" / "fake.jsonl"
    folder.mkdir(parents=True)

    with pytest.raises(RunlinesError, match="folder"):
        list(runlines.iter_events(folder))
    with pytest.raises(RunlinesError):
        runlines.load(folder)
    for command in (["show", str(folder)], ["tail", str(folder)]):
        status, _, err = _cli(command)
        check_cli_result(command, status, err)
        assert status == 1


def test_a_fifo_named_like_a_log_never_hangs_the_cli(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)

    for command in (["show", str(fifo)], ["tail", str(fifo)], ["ls", str(tmp_path)]):
        child = subprocess.Popen(
            [sys.executable, "-m", "runlines", *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        code, _, err = finish(child)
        check_cli_result(command, code, err)


# -- a line over 100 MB -------------------------------------------------------------------------

_BIG_TEXT_BYTES = 101 * (1 << 20)


def write_big_line_log(path: Path) -> None:
    """A record, a 101 MiB record, a record with no newline: written in 1 MiB pieces."""
    with path.open("wb") as file:
        file.write(_record(1.0, step=1) + b"\n")
        file.write(b'{"ts":2.0,"event":"step","run":"h","step":2,"blob":"')
        piece = b"0123456789abcdef" * (1 << 16)
        for _ in range(_BIG_TEXT_BYTES // len(piece)):
            file.write(piece)
        file.write(b'"}\n')
        file.write(_record(3.0, step=3))


_MEASURED = """
import sys, warnings
warnings.simplefilter("ignore")
what, path = sys.argv[1], sys.argv[2]
if what == "cli":
    from runlines.cli import main
    status = main(sys.argv[3:])
else:
    import runlines
    rows = len(list(runlines.iter_events(path))) if what == "iter" else len(runlines.load(path))
    print(rows)
    status = 0
# VmHWM: this program's own peak (ru_maxrss would count the parent's size at the fork)
peak = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(peak, file=sys.stderr)
sys.exit(status)
"""


def _measured(what: str, path: Path, *args: str) -> tuple[int, str, int]:
    """Run a reader in a fresh process; return (status, stdout, peak RSS in MiB)."""
    child = subprocess.Popen(
        [sys.executable, "-c", _MEASURED, what, str(path), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    code, out, err = finish(child, timeout_s=_HANG_S)
    peak_kb = int(err.strip().splitlines()[-1])
    return code, out, peak_kb // 1024


@pytest.fixture(scope="module", name="big_log")
def _big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    write_big_line_log(path)
    return path


@pytest.mark.parametrize("reader", ["iter", "load", "show", "tail"])
def test_a_line_over_100_mb_is_read_whole_in_bounded_memory(big_log: Path, reader: str) -> None:
    """Peak memory stays under 8x the file: the reader holds the file, the line, the record."""
    path = big_log
    size_mb = path.stat().st_size >> 20

    if reader in ("iter", "load"):
        code, out, peak_mb = _measured(reader, path)
        assert out.strip() == "3"
    else:
        code, out, peak_mb = _measured("cli", path, reader, str(path))
        assert "step" in out
    assert code == 0
    print(f"{reader}: peak {peak_mb} MiB for a {size_mb} MiB log")
    assert peak_mb < 8 * size_mb, f"{reader} peaked at {peak_mb} MiB for a {size_mb} MiB log"


@settings(max_examples=examples(20, 200), deadline=None)
@given(sizes=st.lists(st.integers(min_value=0, max_value=200_000), min_size=1, max_size=6))
def test_last_records_reads_lines_longer_than_a_block_backwards(sizes: list[int]) -> None:
    """`tail` and `ls` read from the end in 64 KiB blocks; a line may span many of them."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.jsonl"
        lines = [_record(float(i), step=i, text="x" * size) for i, size in enumerate(sizes)]
        path.write_bytes(b"\n".join(lines) + b"\n")

        records = runlines.reading.last_records(path)

        assert [r["step"] for r in records] == list(range(len(sizes)))
        assert [len(r["text"]) for r in records] == sizes


# -- a property: records with hostile values in the fields the CLI reads ------------------------

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_KNOWN = [
    "ts", "event", "run", "step", "loss", "status", "attempt", "resume_step", "config", "argv",
    "host", "pid", "git_commit", "git_dirty", "spans", "name", "duration_s", "bytes", "path",
    "sha256", "exc_type", "exc_message", "rank", "signal", "_nonfinite", "epoch", "exit_code",
]  # fmt: skip
_events = st.sampled_from(["run_start", "run_end", "step", "span", "artifact", "signal", "eval"])
_hostile_records = st.dictionaries(
    st.sampled_from(_KNOWN), _json_values | _events | st.floats(), min_size=1, max_size=8
)


@settings(
    max_examples=examples(30, 500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(records=st.lists(_hostile_records, min_size=1, max_size=6))
def test_records_with_hostile_field_values_never_crash_the_readers_or_the_cli(
    records: list[dict[str, Any]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "h.jsonl"
        lines = [json.dumps(r, allow_nan=True).encode() for r in records]
        path.write_bytes(b"\n".join(lines) + b"\n")

        check_readers(path)
        check_every_command(path)


def _torn_real_log(directory: Path) -> Path:
    """A log written by Run whose last line a crash tore."""
    with Run("r", directory, stdout=False, on_nonfinite="ignore") as run:
        for step in range(5):
            run.log("step", step=step, loss=math.nan if step == 3 else 1.0 / (step + 1))
    data = run.path.read_bytes()
    run.path.write_bytes(data[: len(data) - 10])
    return run.path


@pytest.mark.parametrize(
    "template",
    [
        ["show", "{log}"],
        ["tail", "{log}"],
        ["tail", "{log}", "--event", "step"],
        ["compare", "{log}", "--metric", "loss"],
        ["ls", "{dir}"],
    ],
    ids=" ".join,
)
def test_every_command_reads_a_torn_real_log_and_succeeds(
    tmp_path: Path, template: list[str]
) -> None:
    """The reference for the hostile cases: a real log torn by a crash is a normal input."""
    path = _torn_real_log(tmp_path)
    args = [part.format(log=path, dir=tmp_path) for part in template]

    status, out, err = _cli(args)

    check_cli_result(args, status, err)
    assert status == 0, err
    assert out


def test_compare_a_metric_by_itself_is_a_clear_error(tmp_path: Path) -> None:
    args = ["compare", str(_torn_real_log(tmp_path)), "--metric", "step"]

    status, _, err = _cli(args)

    assert status == 1
    assert "metric and by are both 'step'" in err


def test_tail_n_0_of_a_real_log_prints_nothing_and_succeeds(tmp_path: Path) -> None:
    status, out, err = _cli(["tail", "-n", "0", str(_torn_real_log(tmp_path))])

    assert (status, out, err) == (0, "", "")
