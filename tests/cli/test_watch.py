"""`runlines watch`: one alert per event, to every target, never twice across restarts."""

from __future__ import annotations

import http.server
import io
import json
import math
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import filelock
import pytest

import _watch_racer
from _logs import line, write
from runlines import Run
from runlines._alerts import Target, Watcher
from runlines.cli import main
from runlines.errors import NonfiniteWarning


def _alerts(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(text) for text in path.read_text().splitlines()]


def _watch(tmp_path: Path, *args: str) -> int:
    state = str(tmp_path / "state.json")
    return main(["watch", str(tmp_path / "runs"), "--state", state, "--once", *args])


def test_a_sigkilled_run_gives_one_died_alert(
    tmp_path: Path, receiver: tuple[str, list[dict[str, Any]], list[int]]
) -> None:
    url, bodies, _ = receiver
    runs = tmp_path / "runs"
    child = textwrap.dedent(
        f"""
        import sys, time
        from runlines import Run
        run = Run("killed", {str(runs)!r}, stdout=False)
        run.log("train_step", step=1, loss=0.5)
        print("ready", flush=True)
        time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, env=env)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        out = tmp_path / "alerts.jsonl"
        assert _watch(tmp_path, "--notify", f"file:{out}", "--notify", url) == 0
        assert _alerts(out) == []  # alive: its lock is held
        assert bodies == []
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    assert _watch(tmp_path, "--notify", f"file:{out}", "--notify", url) == 0
    assert _watch(tmp_path, "--notify", f"file:{out}", "--notify", url) == 0

    (alert,) = _alerts(out)
    assert bodies == [alert]
    assert (alert["kind"], alert["run"], alert["attempt"]) == ("died", "killed", 1)
    assert "died" in alert["text"]
    assert alert["content"] == alert["text"]


def test_a_failed_run_a_stall_and_a_nonfinite_each_alert_once(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with pytest.raises(ZeroDivisionError), Run("broken", runs, stdout=False) as run:
        with pytest.warns(NonfiniteWarning):
            run.log("train_step", step=1, loss=math.nan)
        1 / 0  # noqa: B018
    write(
        runs / "stuck.jsonl",
        line("run_start", run="stuck", id="s1", attempt=1),
        line("stall", run="stuck", idle_s=600.0),
        line("run_end", run="stuck", status="ok"),
    )
    write(runs / "fine.jsonl", line("run_start", run="fine"), line("run_end", run="fine"))
    out = tmp_path / "alerts.jsonl"

    assert _watch(tmp_path, "--notify", f"file:{out}") == 0
    first = _alerts(out)
    assert _watch(tmp_path, "--notify", f"file:{out}") == 0  # a restarted watcher

    assert _alerts(out) == first
    kinds = sorted((a["run"], a["kind"], a["status"]) for a in first)
    assert kinds == [
        ("broken", "ended", "failed"),
        ("broken", "nonfinite", None),
        ("stuck", "stall", None),
    ]
    (ended,) = (a for a in first if a["kind"] == "ended")
    assert "ZeroDivisionError" in ended["text"]
    (nan,) = (a for a in first if a["kind"] == "nonfinite")
    assert (nan["record"]["of_event"], nan["record"]["field"]) == ("train_step", "loss")


def test_ok_runs_alert_only_when_asked(tmp_path: Path) -> None:
    write(tmp_path / "runs" / "fine.jsonl", line("run_start", run="fine"), line("run_end"))
    out = tmp_path / "alerts.jsonl"

    assert _watch(tmp_path, "--notify", f"file:{out}") == 0
    assert _alerts(out) == []
    assert _watch(tmp_path, "--notify", f"file:{out}", "--ok") == 0
    assert [(a["kind"], a["status"]) for a in _alerts(out)] == [("ended", "ok")]


def test_a_died_attempt_before_a_resume_alerts_once(tmp_path: Path) -> None:
    log = write(
        tmp_path / "runs" / "resumed.jsonl",
        line("run_start", run="resumed", id="a", attempt=1),
        line("train_step", run="resumed", step=1, loss=1.0),
        line("run_start", run="resumed", id="b", attempt=2),
        line("run_end", run="resumed", status="ok"),
    )
    out = tmp_path / "alerts.jsonl"
    watcher = Watcher([log], [Target(f"file:{out}")], tmp_path / "state.json")

    assert [(a.kind, a.attempt) for a in watcher.poll()] == [("died", 1)]
    assert watcher.poll() == []
    assert len(_alerts(out)) == 1


def test_a_cmd_target_gets_the_alert_on_stdin(tmp_path: Path) -> None:
    write(
        tmp_path / "runs" / "x.jsonl", line("run_start", run="x"), line("run_end", status="failed")
    )
    got = tmp_path / "got.json"

    assert _watch(tmp_path, "--notify", f"cmd:cat > {got}") == 0

    assert json.loads(got.read_text())["status"] == "failed"


class _Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]]
    failures: list[int]  # how many posts still get a 500

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.failures[0] > 0:
            self.failures[0] -= 1
            self.send_response(500)
        else:
            self.bodies.append(body)
            self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(name="receiver")
def _receiver() -> Iterator[tuple[str, list[dict[str, Any]], list[int]]]:
    bodies: list[dict[str, Any]] = []
    failures = [0]
    handler = type("Handler", (_Receiver,), {"bodies": bodies, "failures": failures})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", bodies, failures
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_webhook_gets_a_json_post_and_a_500_is_retried(
    tmp_path: Path, receiver: tuple[str, list[dict[str, Any]], list[int]]
) -> None:
    url, bodies, failures = receiver
    failures[0] = 2
    log = write(tmp_path / "x.jsonl", line("run_start", run="x"), line("run_end", status="failed"))
    waits: list[float] = []
    watcher = Watcher([log], [Target(url)], tmp_path / "state.json", sleep=waits.append)

    watcher.poll()

    assert [(b["run"], b["kind"], b["status"]) for b in bodies] == [("x", "ended", "failed")]
    assert waits == [0.5, 1.0]  # backoff doubles


def test_a_failing_target_does_not_stop_the_others_and_is_tried_again(
    tmp_path: Path,
    receiver: tuple[str, list[dict[str, Any]], list[int]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, bodies, failures = receiver
    failures[0] = 100
    log = write(
        tmp_path / "x.jsonl",
        line("run_start", run="x"),
        line("stall", run="x", idle_s=600.0),
        line("run_end", status="failed"),
    )
    out = tmp_path / "alerts.jsonl"
    targets = [Target("cmd:exit 3"), Target(url), Target(f"file:{out}")]
    watcher = Watcher([log], targets, tmp_path / "state.json", retries=1, sleep=lambda _: None)

    watcher.poll()

    assert [a["kind"] for a in _alerts(out)] == ["stall", "ended"]
    assert bodies == []
    err = capsys.readouterr().err
    assert err.count("could not notify cmd:exit 3") == 1  # down: its next alert waits
    assert failures[0] == 100 - 2  # one alert, tried twice; the next waits for the next pass
    assert "status 3" in err
    assert "/hook" not in err  # a webhook's path is its secret
    assert f"could not notify {url.removesuffix('hook')}…" in err
    assert "HTTP 500" in err
    failures[0] = 0
    again = Watcher([log], targets[1:], tmp_path / "state.json")
    again.poll()  # the webhook gets it now; the file does not again
    assert "/hook" not in (tmp_path / "state.json").read_text()
    assert [b["kind"] for b in bodies] == ["stall", "ended"]
    assert len(_alerts(out)) == 2


def test_a_bad_target_is_a_usage_error_that_names_the_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _watch(tmp_path, "--notify", "slack") == 1
    assert "cmd:COMMAND, file:PATH" in capsys.readouterr().err


def test_a_threshold_rule_and_a_nan_rule_each_alert_once_per_run(tmp_path: Path) -> None:
    write(
        tmp_path / "runs" / "diverged.jsonl",
        line("run_start", run="diverged", id="d1", attempt=1),
        line("eval", run="diverged", step=1, loss=1.5),
        line("eval", run="diverged", step=2, loss=2.5),
        line("eval", run="diverged", step=3, loss=3.5),
        line("train_step", run="diverged", step=3, loss=math.nan),
        line("train_step", run="diverged", step=4, loss=math.nan),
        line("run_end", run="diverged", status="ok"),
    )
    out = tmp_path / "alerts.jsonl"
    rules = ("--when", "eval.loss > 2", "--when", "train_step.loss is nan")

    assert _watch(tmp_path, "--notify", f"file:{out}", *rules) == 0
    assert _watch(tmp_path, "--notify", f"file:{out}", *rules) == 0

    got = [(a["kind"], a["rule"], a["record"]["step"]) for a in _alerts(out)]
    assert got == [("when", "eval.loss > 2", 2), ("when", "train_step.loss is nan", 3)]
    assert _alerts(out)[1]["record"]["loss"] == "NaN"  # strict JSON, as --json writes it


@pytest.mark.parametrize("rule", ["eval.loss >", "loss > 2", "eval.loss ~ 2", "eval.loss is big"])
def test_a_rule_no_form_reads_is_an_error_that_shows_the_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rule: str
) -> None:
    out = tmp_path / "alerts.jsonl"

    assert _watch(tmp_path, "--notify", f"file:{out}", "--when", rule) == 1
    assert "EVENT.FIELD OP NUMBER" in capsys.readouterr().err


def test_past_the_rate_limit_the_rest_go_as_one_summary_then_flow_again(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for n in range(5):
        write(
            runs / f"r{n}.jsonl", line("run_start", run=f"r{n}"), line("run_end", status="failed")
        )
    out = tmp_path / "alerts.jsonl"
    now = [1000.0]
    watcher = Watcher(
        [runs], [Target(f"file:{out}")], tmp_path / "state.json", per_minute=2, clock=lambda: now[0]
    )

    watcher.poll()
    first = _alerts(out)
    assert [a["kind"] for a in first] == ["ended", "ended", "held"]
    assert first[2]["record"] == {"held": 3, "kinds": {"ended": 3}, "runs": ["r2", "r3", "r4"]}
    assert first[2]["text"].startswith("3 more alerts held back (at most 2 a minute)")
    assert watcher.poll() == []  # the held ones were said: never again

    write(runs / "r5.jsonl", line("run_start", run="r5"), line("run_end", status="failed"))
    now[0] += 61.0
    watcher.poll()
    assert [(a["kind"], a["run"]) for a in _alerts(out)[3:]] == [("ended", "r5")]


def test_a_missing_source_is_an_error_for_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nowhere.jsonl")
    state = str(tmp_path / "state.json")

    assert main(["watch", missing, "--notify", "file:x", "--state", state, "--once"]) == 1
    assert "no such log or folder" in capsys.readouterr().err


def test_a_watcher_restarted_mid_run_sends_only_what_is_new(tmp_path: Path) -> None:
    log = write(
        tmp_path / "runs" / "live.jsonl",
        line("run_start", run="live", id="l1", attempt=1),
        line("nonfinite", run="live", of_event="train_step", field="loss", step=3, value="NaN"),
    )
    out = tmp_path / "alerts.jsonl"
    alive = {log: True}
    state = tmp_path / "state.json"

    first = Watcher([log.parent], [Target(f"file:{out}")], state, alive=alive.__getitem__)
    assert [a.kind for a in first.poll()] == ["nonfinite"]
    with log.open("ab") as more:
        more.write(line("stall", run="live", idle_s=900.0))
    restarted = Watcher([log.parent], [Target(f"file:{out}")], state, alive=alive.__getitem__)
    assert [a.kind for a in restarted.poll()] == ["stall"]
    alive[log] = False  # its process is gone, no run_end
    assert [a.kind for a in restarted.poll()] == ["died"]

    assert [a["kind"] for a in _alerts(out)] == ["nonfinite", "stall", "died"]


_RACE_TIMEOUT_S = 120.0
_RACING_RUNS = 15


def _race(tmp_path: Path, args: list[list[str]]) -> None:
    """Run one watcher process per entry of *args* (its CLI arguments) at once, on one state."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(args), timeout=_RACE_TIMEOUT_S)
    runs, state = str(tmp_path / "runs"), str(tmp_path / "state.json")
    workers = [
        context.Process(target=_watch_racer.watcher, args=(runs, state, own, barrier))
        for own in args
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(_RACE_TIMEOUT_S)
        if process.is_alive():
            process.kill()
    assert [p.exitcode for p in workers] == [0] * len(workers)


def _failed_runs(tmp_path: Path) -> set[str]:
    """Write _RACING_RUNS failed runs, each with a stall; return their alerts' keys."""
    for n in range(_RACING_RUNS):
        write(
            tmp_path / "runs" / f"r{n}.jsonl",
            line("run_start", run=f"r{n}", id=f"id{n}", attempt=1),
            line("stall", run=f"r{n}", idle_s=900.0),
            line("run_end", run=f"r{n}", status="failed"),
        )
    return {f"id{n}/1/{kind}" for n in range(_RACING_RUNS) for kind in ("stall/2", "ended")}


def _sent(path: Path) -> list[tuple[str, str]]:
    return sorted((a["run"], a["kind"]) for a in _alerts(path))


def test_watchers_racing_on_one_state_file_send_each_alert_once_and_lose_no_entry(
    tmp_path: Path,
) -> None:
    workers = 6
    keys = _failed_runs(tmp_path)
    shared = tmp_path / "shared.jsonl"
    own = [tmp_path / f"own{n}.jsonl" for n in range(workers)]
    args = [["--notify", f"file:{shared}", "--notify", f"file:{path}"] for path in own]

    _race(tmp_path, [[*each, "--per-minute", "0"] for each in args])

    expected = sorted((f"r{n}", kind) for n in range(_RACING_RUNS) for kind in ("ended", "stall"))
    assert _sent(shared) == expected  # once overall, though every watcher found each
    assert [_sent(path) for path in own] == [expected] * workers
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["sent"] == {f"file:{path}": sorted(keys) for path in [shared, *own]}


# a target that takes a while (a Python start) per alert: the watchers' passes overlap
_APPEND = "import sys; open(sys.argv[1], 'ab').write(sys.stdin.buffer.read() + b'\\n')"


def test_watchers_racing_on_one_state_file_share_one_rate_limit(tmp_path: Path) -> None:
    _failed_runs(tmp_path)
    out = tmp_path / "alerts.jsonl"
    slow = f"cmd:{shlex.quote(sys.executable)} -c {shlex.quote(_APPEND)} {shlex.quote(str(out))}"

    _race(tmp_path, [["--notify", slow, "--per-minute", "5"]] * 6)

    sent = _alerts(out)
    assert [a["kind"] == "held" for a in sent] == [False] * 5 + [True]
    assert sent[5]["record"]["held"] == 2 * _RACING_RUNS - 5


def test_a_restarted_watcher_keeps_the_rate_limits_window(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for n in range(2):
        write(
            runs / f"r{n}.jsonl", line("run_start", run=f"r{n}"), line("run_end", status="failed")
        )
    out, state = tmp_path / "alerts.jsonl", tmp_path / "state.json"
    now = [1000.0]
    Watcher([runs], [Target(f"file:{out}")], state, per_minute=2, clock=lambda: now[0]).poll()
    for n in range(2, 4):
        write(
            runs / f"r{n}.jsonl", line("run_start", run=f"r{n}"), line("run_end", status="failed")
        )

    now[0] += 30.0
    Watcher([runs], [Target(f"file:{out}")], state, per_minute=2, clock=lambda: now[0]).poll()

    assert [a["kind"] for a in _alerts(out)] == ["ended", "ended", "held"]


def test_a_state_lock_held_too_long_is_said_and_the_alerts_wait_for_the_next_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = write(
        tmp_path / "runs" / "r.jsonl", line("run_start", run="r"), line("run_end", status="failed")
    )
    out, state, said = tmp_path / "alerts.jsonl", tmp_path / "state.json", io.StringIO()
    monkeypatch.setattr("runlines._alerts.STATE_WAIT_S", 0.05)
    watcher = Watcher([log], [Target(f"file:{out}")], state, stderr=said)

    with filelock.FileLock(f"{state}.lock"):  # another watcher, in the middle of its sends
        assert [a.kind for a in watcher.poll()] == ["ended"]
    assert (_alerts(out), "locked by another watcher" in said.getvalue()) == ([], True)

    assert watcher.poll() == []  # found by the pass before, sent by this one
    assert [a["kind"] for a in _alerts(out)] == ["ended"]


def test_an_alert_a_target_missed_goes_at_the_same_watchers_next_pass(
    tmp_path: Path, receiver: tuple[str, list[dict[str, Any]], list[int]]
) -> None:
    url, bodies, failures = receiver
    failures[0] = 2  # the first try and its retry
    log = write(tmp_path / "x.jsonl", line("run_start", run="x"), line("run_end", status="failed"))
    waits: list[float] = []
    watcher = Watcher([log], [Target(url)], tmp_path / "state.json", retries=1, sleep=waits.append)

    assert [a.kind for a in watcher.poll()] == ["ended"]
    assert bodies == []

    assert watcher.poll() == []
    assert [b["kind"] for b in bodies] == ["ended"]
    assert watcher.poll() == []
    assert len(bodies) == 1
