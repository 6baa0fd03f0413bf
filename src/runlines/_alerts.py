"""Alerts from outside the job (`runlines watch`): runs' events sent to a person, once each.

`Watcher` follows every log of its sources with the one follower (`reading._follow`) and feeds
each log's `RunSummary`; a pass finds the events: a `stall` or `nonfinite` record, a run that
ended failed, terminated or interrupted (ok when asked), a run that died (no `run_end`
and its lock free: `reading._files.is_locked`), and a record that crossed a metric rule
(`Rule`, `--when`: once per run, attempt and rule). Each event goes to each target once: the
state file keeps, per target, the keys of the events sent (run id, attempt, kind, record
number), so a restarted watcher sends nothing twice. A target that fails is retried with
backoff, said on stderr, and tried again at the next pass with the rest of its alerts of
this pass; it never stops the others. Past
*per_minute* alerts to a target, the rest of a pass go as one summary (`held`).

Watchers may share one state file: each sends to a target under the file's lock (`.lock`
beside it), having read what the others sent and when, and writes the merge back by an atomic
rename; so an alert goes once overall, and the rate limit's window is theirs together.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import math
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import filelock

from runlines import _layout
from runlines._layout import RUN_END, RUN_START, is_log_name
from runlines.errors import ReadError
from runlines.reading._files import is_locked
from runlines.reading._follow import LogFollower
from runlines.reading._rules import json_ready
from runlines.reading._summary import RunSummary

__all__ = ["BAD_ENDS", "Alert", "Rule", "Target", "Watcher", "parse_target"]

BAD_ENDS: Final = frozenset({"failed", "terminated", "interrupted"})
TIMEOUT_S: Final = 10.0
RETRIES: Final = 3
BACKOFF_S: Final = 0.5  # doubled after each failed try
PER_MINUTE: Final = 20  # alerts to one target a minute; more are summed up in one
RATE_WINDOW_S: Final = 60.0
STATE_WAIT_S: Final = 120.0  # another watcher holds the state lock at most for a pass's sends


@dataclass
class Alert:
    """One event of one run: what a target is sent, as `as_json()`."""

    kind: str  # died, ended, stall, nonfinite, when; held: a rate limit's summary
    run: str
    log: str
    attempt: int
    key: str  # what the state file keeps: the same event always has the same key
    message: str
    status: str | None = None
    record: dict[str, Any] | None = None
    rule: str | None = None  # a `when` alert's rule, as given

    def as_json(self) -> dict[str, Any]:
        """Return the body: `text` (Slack) and `content` (Discord) hold the message."""
        body: dict[str, Any] = {
            "text": self.message,
            "content": self.message,
            "kind": self.kind,
            "run": self.run,
            "log": self.log,
            "attempt": self.attempt,
            "status": self.status,
        }
        if self.record is not None:
            body["record"] = self.record
        if self.rule is not None:
            body["rule"] = self.rule
        return body


class Target:
    """Where alerts go: `cmd:COMMAND`, `file:PATH` or an `http(s)://` URL."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.label = spec  # what messages name it by
        self.id = spec  # what the state file keeps it by
        if spec.startswith("cmd:") and spec[4:].strip():
            self.kind, self.where = "cmd", spec[4:]
        elif spec.startswith("file:") and spec[5:]:
            self.kind, self.where = "file", spec[5:]
        elif spec.startswith(("http://", "https://")):
            self.kind, self.where = "http", spec
            # a webhook's path and query are its secret: said and kept only as a digest
            parts = urllib.parse.urlsplit(spec)
            digest = hashlib.sha256(spec.encode()).hexdigest()[:16]
            self.label = f"{parts.scheme}://{parts.netloc}/…"
            self.id = f"{parts.scheme}://{parts.netloc}/#{digest}"
        else:
            msg = (
                f"unknown --notify target {spec!r}; give cmd:COMMAND, file:PATH, "
                "or an http:// or https:// URL"
            )
            raise ReadError(msg)

    def send(self, alert: Alert, *, timeout_s: float = TIMEOUT_S) -> None:
        """Send *alert* once; raise OSError (or a subclass) when it did not arrive."""
        body = json_ready(alert.as_json())
        data = json.dumps(body, default=str, allow_nan=False).encode()
        if self.kind == "file":
            with open(self.where, "ab") as out:  # one write: lines of two watchers never mix
                out.write(data + b"\n")
        elif self.kind == "cmd":
            done = subprocess.run(
                self.where, shell=True, input=data, timeout=timeout_s, capture_output=True
            )
            if done.returncode != 0:
                error = done.stderr.decode(errors="replace").strip()[-200:]
                msg = f"exited with status {done.returncode}" + (f": {error}" if error else "")
                raise OSError(msg)
        else:
            headers = {"Content-Type": "application/json", "User-Agent": "runlines-watch"}
            request = urllib.request.Request(self.where, data=data, headers=headers)
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                response.read()


_COMPARE: Final[dict[str, Callable[[float, float], bool]]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}
_KINDS: Final[dict[str, Callable[[float], bool]]] = {
    "nan": math.isnan,
    "inf": math.isinf,
    "nonfinite": lambda v: not math.isfinite(v),
}
_RULE_FORMS: Final = (
    '"EVENT.FIELD OP NUMBER" (OP one of > >= < <= == !=) or "EVENT.FIELD is nan|inf|nonfinite", '
    'e.g. "eval.loss > 2" or "train_step.loss is nan"'
)


@dataclass(frozen=True)
class Rule:
    """A metric rule (`--when`): a field of one event compared with a number, or a NaN test."""

    text: str
    event: str
    field: str
    test: Callable[[float], bool]

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Return the rule *text* says; raise ReadError naming the forms for one it does not."""
        words = text.split()
        if len(words) == 3 and "." in words[0].strip("."):
            event, field = words[0].split(".", 1)
            op, operand = words[1], words[2]
            if op == "is" and operand.lower() in _KINDS:
                return cls(" ".join(words), event, field, _KINDS[operand.lower()])
            compare = _COMPARE.get(op)
            try:
                bound = float(operand)
            except ValueError:
                bound = math.nan
            if compare is not None and not math.isnan(bound):
                return cls(" ".join(words), event, field, lambda v: compare(v, bound))
        msg = f"cannot read the rule {text!r}; write {_RULE_FORMS}"
        raise ReadError(msg)

    def value(self, record: dict[str, Any]) -> float | None:
        """Return the number the rule tests in *record* (one of its event), or None."""
        value: Any = record.get(self.field)
        if value is None and "." in self.field:  # a nested field: `eval.metrics.loss`
            value = record
            for part in self.field.split("."):
                value = value.get(part) if isinstance(value, dict) else None
        if type(value) not in (int, float):  # a bool is no metric
            return None
        return float(value)

    def matches(self, record: dict[str, Any]) -> float | None:
        """Return the value when *record* crosses the rule, else None."""
        if record.get("event") != self.event:
            return None
        value = self.value(record)
        if value is None or not self.test(value):
            return None
        return value


def parse_target(spec: str) -> Target:
    """Return the `Target` *spec* names; raise ReadError for one no target reads."""
    return Target(spec)


@dataclass
class _Followed:
    """One log file followed: its follower, summary, and where the records are."""

    path: Path
    follower: LogFollower
    summary: RunSummary
    run_id: str | None = None
    number: int = 0  # records read from the file's start
    restarts: int = 0


class Watcher:
    """The runs of *sources* (folders and log files) watched; `poll()` sends the new alerts.

    *targets* each get every alert once; *state* is the JSON file that keeps what was sent,
    and when, for every watcher that shares it. *ok* alerts on runs that ended ok too. *alive*
    says whether a log's writer holds its lock. At most *per_minute* alerts (0: no limit) go
    to one target a minute, by *clock* (wall-clock seconds: the window is in the state file);
    the others of a pass are held back and summed up in one `held` alert. *sleep* waits
    between tries; *stderr* hears about targets that failed.
    """

    def __init__(
        self,
        sources: Sequence[str | os.PathLike[str]],
        targets: Sequence[Target],
        state: str | os.PathLike[str],
        *,
        ok: bool = False,
        rules: Sequence[Rule] = (),
        retries: int = RETRIES,
        timeout_s: float = TIMEOUT_S,
        alive: Callable[[Path], bool] = is_locked,
        per_minute: int = PER_MINUTE,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        stderr: Any = None,
    ) -> None:
        self.sources = [Path(source) for source in sources]
        self.targets = list(targets)
        self.state_path = Path(state)
        self.ok = ok
        self.rules = list(rules)
        self.retries = retries
        self.timeout_s = timeout_s
        self.alive = alive
        self.per_minute = per_minute
        self.sleep = sleep
        self.clock = clock
        self.stderr = stderr
        self.logs: dict[Path, _Followed] = {}
        # never removed: a watcher waiting on it would hold a lock that a third one, finding
        # no file there, could take too
        self._lock = filelock.FileLock(f"{self.state_path}.lock", timeout=STATE_WAIT_S)
        self.sent: dict[str, set[str]] = {}
        self._times: dict[str, list[float]] = {}  # per target: when its last alerts went
        self._unsent: dict[str, Alert] = {}  # found, not yet sent to every target: next pass
        self._merge_state()

    def _merge_state(self) -> None:
        """Add what the state file says was sent to what this watcher knows; take its times."""
        sent, times = self._read_state()
        for spec, keys in sent.items():
            self.sent.setdefault(spec, set()).update(keys)
        self._times.update(times)  # the file's: each watcher saves a send at once, under the lock

    def _read_state(self) -> tuple[dict[str, set[str]], dict[str, list[float]]]:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}, {}
        except (OSError, ValueError) as err:
            msg = (
                f"cannot read the watch state file {self.state_path}: {err}; "
                "fix or delete it (a deleted one sends every event again)"
            )
            raise ReadError(msg) from err
        if not isinstance(data, dict):
            return {}, {}
        sent, times = data.get("sent"), data.get("times")
        sent = sent if isinstance(sent, dict) else {}
        times = times if isinstance(times, dict) else {}
        return (
            {str(spec): set(map(str, keys)) for spec, keys in sent.items()},
            {
                str(spec): [float(t) for t in stamps if type(t) in (int, float)]
                for spec, stamps in times.items()
                if isinstance(stamps, list)
            },
        )

    def _save_state(self) -> None:
        """Write the state file whole, by a rename; called under the state lock."""
        body = {
            "sent": {spec: sorted(keys) for spec, keys in self.sent.items()},
            "times": self._times,
        }
        part = self.state_path.with_name(self.state_path.name + f".{os.getpid()}.part")
        part.write_text(json.dumps(body, indent=1))
        os.replace(part, self.state_path)  # a watcher killed mid-write keeps the old state

    def poll(self) -> list[Alert]:
        """Read what every log gained, send the alerts not sent yet; return those new.

        An alert that a target did not get (down, or the state file locked too long) is
        tried again at the next pass; it is returned only by the pass that found it.
        """
        self._discover()
        found: dict[str, Alert] = {}
        for followed in self.logs.values():
            try:
                alerts = self._read(followed)
            except (OSError, ReadError) as err:  # deleted meanwhile, another user's
                self._say(f"skipped {followed.path}: {err}")
                continue
            for alert in alerts:
                found.setdefault(alert.key, alert)  # a rule crossed twice in one pass: once
        waiting = [a for a in {**self._unsent, **found}.values() if not self._sent_everywhere(a)]
        new = self._send(waiting) if waiting else []
        self._unsent = {a.key: a for a in waiting if not self._sent_everywhere(a)}
        return [alert for alert in new if alert.key in found]

    def _sent_everywhere(self, alert: Alert) -> bool:
        return all(alert.key in self.sent.get(target.id, ()) for target in self.targets)

    def _discover(self) -> None:
        for source in self.sources:
            if source.is_dir():
                paths = sorted(p for p in source.iterdir() if is_log_name(p.name) and p.is_file())
            elif source.exists():
                paths = [source]
            else:
                paths = []
            for path in paths:
                if path not in self.logs:
                    self.logs[path] = _Followed(path, LogFollower(path), RunSummary(path))

    def _read(self, followed: _Followed) -> list[Alert]:
        records = followed.follower.poll()
        if followed.follower.restarts != followed.restarts:  # replaced: read from its start
            followed.restarts = followed.follower.restarts
            followed.summary, followed.number = RunSummary(followed.path), 0
        summary, alerts = followed.summary, []
        for record in records:
            followed.number += 1
            event = record.get("event")
            if event == RUN_START and summary.attempts and summary.ended is None:
                alerts.append(self._alert(followed, "died", "died", None))  # the attempt before
            summary.add(record)
            if event == RUN_START and isinstance(record.get("id"), str):
                followed.run_id = record["id"]
            if event in (_layout.STALL, _layout.NONFINITE):
                alerts.append(self._record_alert(followed, str(event), record))
            elif event == RUN_END and (summary.ended in BAD_ENDS or self.ok):
                alerts.append(self._alert(followed, "ended", str(summary.ended), record))
            for rule in self.rules:
                value = rule.matches(record)
                if value is not None:
                    alerts.append(self._rule_alert(followed, rule, value, record))
        open_attempt = summary.ended is None and summary.records > 0 and summary.shaped
        if open_attempt and not self.alive(followed.path):  # a torn last line is no sign of life
            alerts.append(self._alert(followed, "died", "died", None))
        return alerts

    def _name(self, followed: _Followed) -> str:
        return followed.summary.run or followed.path.name.removesuffix(".jsonl")

    def _base_key(self, followed: _Followed) -> str:
        return f"{followed.run_id or followed.path.resolve()}/{max(1, followed.summary.attempts)}"

    def _alert(
        self, followed: _Followed, kind: str, status: str, record: dict[str, Any] | None
    ) -> Alert:
        run, attempt = self._name(followed), max(1, followed.summary.attempts)
        if kind == "died":
            message = f"run {run} died (attempt {attempt}): no run_end, and its lock is free"
        else:
            message = f"run {run} ended {status} (attempt {attempt})"
            if record is not None and record.get("exc_type"):
                message += f": {record['exc_type']}: {record.get('exc_message', '')}"
        key = f"{self._base_key(followed)}/{kind}"
        return Alert(kind, run, str(followed.path), attempt, key, message, status, record)

    def _record_alert(self, followed: _Followed, kind: str, record: dict[str, Any]) -> Alert:
        run, attempt = self._name(followed), max(1, followed.summary.attempts)
        if kind == _layout.STALL:
            message = f"run {run} stalled: no record for {record.get('idle_s', '?')} s"
        else:
            what = f"{record.get('of_event', '?')}.{record.get('field', '?')}"
            message = f"run {run} logged {record.get('value', '?')} as {what}"
            if record.get("step") is not None:
                message += f" at step {record['step']}"
        key = f"{self._base_key(followed)}/{kind}/{followed.number}"
        status = followed.summary.ended
        return Alert(kind, run, str(followed.path), attempt, key, message, status, record)

    def _rule_alert(
        self, followed: _Followed, rule: Rule, value: float, record: dict[str, Any]
    ) -> Alert:
        run, attempt = self._name(followed), max(1, followed.summary.attempts)
        step = f" at step {record['step']}" if record.get("step") is not None else ""
        message = f"run {run}: {rule.text} ({rule.event}.{rule.field} = {value!r}{step})"
        key = f"{self._base_key(followed)}/when/{rule.text}"  # once per run, attempt and rule
        return Alert(
            "when", run, str(followed.path), attempt, key, message, None, record, rule=rule.text
        )

    def _send(self, alerts: list[Alert]) -> list[Alert]:
        """Send each target the alerts it was not sent; return those no watcher had sent."""
        taken = {alert.key for alert in alerts}  # those every target had, from any watcher
        for target in self.targets:
            try:
                with self._lock:
                    self._merge_state()  # what the other watchers sent meanwhile
                    sent = self.sent.setdefault(target.id, set())
                    taken &= sent
                    self._send_to(target, [a for a in alerts if a.key not in sent])
            except filelock.Timeout:
                taken &= self.sent.get(target.id, set())  # as this watcher last knew
                self._say(
                    f"the watch state file {self.state_path} has been locked by another watcher "
                    f"for {self._lock.timeout:g} s; alerts to {target.label} wait for the next pass"
                )
        return [alert for alert in alerts if alert.key not in taken]

    def _send_to(self, target: Target, alerts: list[Alert]) -> None:
        """Send *alerts* to *target*, within its rate limit; called under the state lock."""
        sent = self.sent[target.id]
        now = self.clock()
        times = [t for t in self._times.get(target.id, ()) if t > now - RATE_WINDOW_S]
        self._times[target.id] = times
        held: dict[str, Alert] = {}
        for alert in alerts:
            if alert.key in sent or alert.key in held:
                continue  # a rule crossed twice in one pass: once per run, attempt and rule
            if self.per_minute and len(times) >= self.per_minute:
                held[alert.key] = alert
            elif self._try(target, alert):
                times.append(now)
                sent.add(alert.key)
                self._save_state()  # at once: a watcher killed next sends it no more
            else:  # down: the rest wait for the next pass, not each for its retries
                held = {}
                break
        if held and self._try(target, self._held(list(held.values()))):
            sent.update(held)  # the summary stands for them
            self._save_state()

    def _held(self, held: list[Alert]) -> Alert:
        """Return the one alert that says which alerts the rate limit held back."""
        kinds = Counter(alert.kind for alert in held)
        runs = sorted({alert.run for alert in held})
        shown = ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
        message = (
            f"{len(held)} more alerts held back (at most {self.per_minute} a minute): {shown}, "
            f"of run{'s' if len(runs) > 1 else ''} {', '.join(runs[:10])}"
            + (f" and {len(runs) - 10} more" if len(runs) > 10 else "")
        )
        record = {"held": len(held), "kinds": dict(kinds), "runs": runs}
        key = f"held/{self.clock()}"
        return Alert("held", ", ".join(runs), "", 0, key, message, None, record)

    def _try(self, target: Target, alert: Alert) -> bool:
        wait = BACKOFF_S
        for tried in range(self.retries + 1):
            try:
                target.send(alert, timeout_s=self.timeout_s)
            except (
                OSError,
                http.client.HTTPException,
                subprocess.SubprocessError,
                ValueError,
            ) as err:
                reason = f"{type(err).__name__}: {err}"
                if isinstance(err, urllib.error.HTTPError):
                    reason = f"HTTP {err.code} {err.reason}"
                    err.close()  # its response: unclosed, Python 3.14 warns when it is collected
                if tried == self.retries:
                    tries = f"{tried + 1} tr{'y' if tried == 0 else 'ies'}"
                    self._say(
                        f"could not notify {target.label} of {alert.kind} of run {alert.run} "
                        f"after {tries} ({reason}); trying again at the next pass"
                    )
                    return False
                self.sleep(wait)
                wait *= 2
            else:
                return True
        return False

    def _say(self, text: str) -> None:
        print(f"runlines: warning: {text}", file=self.stderr or sys.stderr)
