"""A drop-in for the `wandb` calls of training code, writing a runlines log (docs/compat.md).

`import runlines.compat.wandb as wandb`, or `install()` for code that does `import wandb`
itself. `init()` opens a runlines `Run` in `<dir or ./runs>/<project>/`; `log()` gathers values
until a commit, as W&B does, then writes one record per event of the commit: `train/loss` is
the field `loss` of the event `train`, a key without `/` a field of the event `metrics`.

Only the calls listed in docs/compat.md exist: any other raises an AttributeError that names
it, never a silent no-op.
"""

from __future__ import annotations

import atexit
import dataclasses
import fnmatch
import importlib
import inspect
import os
import random
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal

from runlines import _layout
from runlines.compat import _finder
from runlines.compat._keys import DEFAULT_EVENT, column_of, split_key
from runlines.compat._media import Audio, Histogram, Image, Media, Table, is_media, log_media
from runlines.errors import FieldError, RunlinesWarning, RunStateError
from runlines.fields import Vocabulary
from runlines.run import Run as _Run

__all__ = [
    "Artifact",
    "Audio",
    "Config",
    "ConfigError",
    "Histogram",
    "Image",
    "Run",
    "RunDisabled",
    "Summary",
    "Table",
    "alert",
    "config",
    "define_metric",
    "finish",
    "init",
    "install",
    "log",
    "run",
    "summary",
    "termerror",
    "termlog",
    "termwarn",
    "uninstall",
    "watch",
]

__version__: Final = "0.31.0"  # the wandb release whose calls this drop-in follows
_DOCS: Final = "docs/compat.md"
_GOALS: Final = {"minimize": "min", "maximize": "max"}
_SUMMARIES: Final = frozenset({"min", "max", "mean", "first", "last", "best", "none"})
# events runlines writes itself: a key naming one (`system/gpu`) goes to `<event>_`
_OWN_EVENTS: Final = _layout.LIFECYCLE_EVENTS | {
    _layout.SYSTEM, _layout.STALL, _layout.STALL_END, _layout.NONFINITE, _layout.WARNING,
    _layout.LOG, _layout.SUMMARY, _layout.DEFINE_METRIC, "run_info", "config", "alert",
}  # fmt: skip
# the types of values a commit writes as fields, decided at their first sight (by is_media:
# never a media value, a list or a tuple), so that a commit's check of a value is one lookup
_FIELD_TYPES: Final[set[type]] = set()
_PLANS_AT_MOST: Final = 1024  # sets of keys whose commit is planned; others take the general path
_ADJECTIVES: Final = (
    "amber", "bold", "brisk", "calm", "crisp", "dainty", "eager", "fancy", "gentle", "glad",
    "hardy", "jolly", "keen", "lively", "lucky", "misty", "noble", "proud", "quiet", "rosy",
    "sandy", "silent", "sunny", "swift", "tidy", "vivid", "warm", "wise", "young", "zesty",
)  # fmt: skip
_NOUNS: Final = (
    "brook", "butterfly", "cloud", "dawn", "dew", "dream", "field", "fire", "flower", "forest",
    "frost", "glade", "grass", "haze", "hill", "lake", "leaf", "meadow", "moon", "night",
    "pine", "rain", "river", "sea", "shadow", "sky", "snow", "star", "sun", "wave",
)  # fmt: skip


class ConfigError(ValueError):
    """A config key set again to another value without `allow_val_change=True`."""


def _missing(owner: str, name: str) -> AttributeError:
    msg = (
        f"{owner} has no {name!r}: the runlines drop-in covers the calls listed in {_DOCS}; "
        "use the real wandb for this one (init(..., tee=True) forwards every call to it)"
    )
    return AttributeError(msg)


@dataclasses.dataclass(frozen=True, slots=True)
class _Definition:
    """One define_metric() call: a key or a glob of keys."""

    name: str
    step_metric: str | None
    step_sync: bool
    summary: tuple[str, ...]
    goal: str | None  # "min" or "max"

    def matches(self, key: str) -> bool:
        return key == self.name or ("*" in self.name and fnmatch.fnmatchcase(key, self.name))


@dataclasses.dataclass(frozen=True, slots=True)
class _Key:
    """How the values of one key are written: its event, field, step metric and summaries."""

    event: str
    field: str
    step_key: str | None  # the key whose value is the record's step
    step_sync: bool
    summary: tuple[str, ...]
    declared: bool  # a step metric or summaries: the commit's slower path


class RunDisabled:
    """W&B's stand-in run of `mode="disabled"`, which integrations check for; the drop-in's
    disabled run is a `Run` that writes nothing, so no value is one of these."""


class Artifact:
    """`wandb.Artifact`: files under a *name* and *type*; `log_artifact()` registers each as an
    `artifact` record (path, size, sha256: the files stay where they are)."""

    def __init__(
        self,
        name: str,
        type: str,
        description: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.description = description
        self.metadata = dict(metadata or {})
        self.files: list[tuple[str, str]] = []  # (local path, name in the artifact)

    def __getattr__(self, name: str) -> Any:
        err = _missing("wandb.Artifact", name)
        raise err

    def add_file(
        self,
        local_path: str,
        name: str | None = None,
        is_tmp: bool | None = False,
        skip_cache: bool | None = False,
        policy: Literal["mutable", "immutable"] | None = "mutable",
        overwrite: bool = False,
    ) -> None:
        """Add the file at *local_path* (as *name*, default its own name)."""
        self.files.append((str(local_path), name or Path(local_path).name))


class Config:
    """`wandb.config`: the run's config, by attribute or item; set before the first log it is
    the config of `run_start`, after it a `config` record holds each change."""

    def __init__(self, owner: Run) -> None:
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_items", {})

    def __getattr__(self, name: str) -> Any:
        items = object.__getattribute__(self, "_items")
        if name in items:
            return items[name]
        err = _missing("wandb.config", name)
        raise err

    def __setattr__(self, name: str, value: Any) -> None:
        self.update({name: value}, allow_val_change=True)

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value}, allow_val_change=True)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> Any:
        return self._items.keys()

    def items(self) -> Any:
        return self._items.items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._items.get(key, default)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._items)

    def update(self, d: Any, allow_val_change: bool | None = None) -> None:
        """Set the keys of *d* (a mapping, a dataclass or an argparse.Namespace)."""
        changes = _as_dict(d)
        if not allow_val_change:
            for key, value in changes.items():
                if key in self._items and self._items[key] != value:
                    msg = (
                        f"config key {key!r} is {self._items[key]!r} already, not {value!r}; "
                        "pass allow_val_change=True to change it"
                    )
                    raise ConfigError(msg)
        self._items.update(changes)
        self._owner._config_changed(changes)

    def setdefaults(self, d: Any) -> None:
        """Set the keys of *d* that the config does not hold yet."""
        self.update({k: v for k, v in _as_dict(d).items() if k not in self._items})


class Summary:
    """`wandb.summary`: each key's last logged value, or the one set here; the values set here
    and the define_metric(summary=...) ones are the `summary` record that finish() writes."""

    def __init__(self, owner: Run) -> None:
        self._owner = owner
        self._set: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        if key in self._set:
            return self._set[key]
        return self._owner._last[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._set[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._set or key in self._owner._last

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:
        return list(dict.fromkeys([*self._owner._last, *self._set]))

    def items(self) -> list[tuple[str, Any]]:
        return [(key, self[key]) for key in self.keys()]

    def get(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        return default

    def update(self, d: Mapping[str, Any]) -> None:
        self._set.update(d)

    def declared(self) -> dict[str, Any]:
        """Return the `summary` record's values, by runs() column."""
        values: dict[str, Any] = {}
        for key, stats in self._owner._stats.items():
            for stat, value in stats.items():
                values[f"{column_of(key)}.{stat}"] = value
        for key, value in self._set.items():
            values.update(_flat(column_of(key), value))
        return values


class Run:
    """`wandb.run`: a runlines `Run` behind W&B's calls. The log opens at the first write,
    so that the config set after init() is in `run_start`."""

    def __init__(
        self,
        *,
        project: str,
        name: str,
        directory: Path,
        config: Any,
        resume: Literal["auto", "allow", "never", "must"],
        info: dict[str, Any],
        disabled: bool,
        tee: ModuleType | None,
    ) -> None:
        self.project = project
        self.name = name
        self.id = info.get("wandb_id") or name
        self._directory = directory
        self._resume: Literal["auto", "allow", "never", "must"] = resume
        self._info = info
        self._disabled = disabled
        self._tee = tee
        self._run: _Run | None = None
        self._step = 0
        self._pending: dict[str, Any] = {}
        self._keys: dict[str, _Key] = {}
        # a commit's keys -> its one record (event, fields), or None: the general path
        self._plans: dict[tuple[str, ...], tuple[str, dict[str, str]] | None] = {}
        self._definitions: list[_Definition] = []
        self._step_keys: set[str] = set()
        self._goals_written: set[str] = set()
        self._last: dict[str, Any] = {}
        self._stats: dict[str, dict[str, Any]] = {}
        self._counts: dict[str, int] = {}
        self._said_watch = False
        self._finished = False
        self._opening = True  # init's own config goes to run_start
        self.config = Config(self)
        self.summary = Summary(self)
        if config is not None:
            self.config.update(config)
        self._opening = False

    def __getattr__(self, name: str) -> Any:
        err = _missing("wandb.run", name)
        raise err

    @property
    def dir(self) -> str:
        """The folder of the run's log: `<dir>/<project>`."""
        return str(self._directory)

    @property
    def step(self) -> int:
        """The step the next commit gets."""
        return self._step

    @property
    def path(self) -> Path | None:
        """The runlines log, once it is open."""
        return None if self._run is None else self._run.path

    # -- writing ------------------------------------------------------------------------------

    def log(
        self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None
    ) -> None:
        """Gather *data* into the current step; commit it unless *step* is given or commit=False.

        A *step* past the current one commits what is gathered first; one before it is
        ignored, with a warning, as W&B does.
        """
        if step is None and commit is None and not self._pending and self._tee is None:
            step = self._step  # the common call: one commit of *data*, at the next step
            self._step = step + 1
            if data and not self._disabled:
                self._write_row(data, step)
            return
        if self._tee is not None:
            self._tee.log(_for_tee(self._tee, data), step=step, commit=commit)
        if step is not None and step != self._step:
            if step < self._step:
                termwarn(
                    f"Tried to log to step {step} that is less than the current step "
                    f"{self._step}. Steps must be monotonically increasing, so this data "
                    "will be ignored."
                )
                return
            if self._pending:
                self._commit()
            self._step = step
        self._pending.update(data)
        if commit or (commit is None and step is None):
            self._commit()

    def _commit(self) -> None:
        row, self._pending = self._pending, {}
        step = self._step
        self._step += 1
        if not self._disabled and row:
            self._write_row(row, step)

    def _write_row(self, row: Mapping[str, Any], step: int) -> None:
        """Write one commit: a record per event, each with `step`, then its media values."""
        run = self._run if self._run is not None else self._open()
        layout = tuple(row)
        try:
            plan = self._plans[layout]
        except KeyError:
            plan = self._plan(layout, run)
        if plan is not None:  # one event's fields, none declared: one record, if no media
            event, field_of = plan
            fields: dict[str, Any] = {"step": step}
            plain = _FIELD_TYPES
            for key, value in row.items():
                if type(value) not in plain and not _is_field(value):
                    break
                fields[field_of[key]] = value
            else:
                run.log(event, **fields)
                self._last.update(row)
                return
        self._write_records(row, step, run)

    def _plan(self, layout: tuple[str, ...], run: _Run) -> tuple[str, dict[str, str]] | None:
        """Return the one record a commit of these keys is, (event, field of each key), or
        None: the keys are several events' or declared ones. Decided once per set of keys."""
        wheres = [self._keys.get(key) or self._resolve(key, run) for key in layout]
        plan = None
        if len({w.event for w in wheres}) == 1 and not any(w.declared for w in wheres):
            plan = (wheres[0].event, {key: w.field for key, w in zip(layout, wheres, strict=True)})
        if len(self._plans) < _PLANS_AT_MOST:
            self._plans[layout] = plan
        return plan

    def _write_records(self, row: Mapping[str, Any], step: int, run: _Run) -> None:
        """Write a commit of several events, declared keys or media: a record per event, then
        each media value at the step of its key's records."""
        keys = self._keys
        records: dict[str, dict[str, Any]] = {}
        stepped: dict[str, _Key] = {}  # event -> the key that gives its step
        media: list[tuple[str, _Key, Any]] = []
        for key, value in row.items():
            where = keys.get(key)
            if where is None:
                where = self._resolve(key, run)
            if type(value) not in _FIELD_TYPES and not _is_field(value):
                media.append((key, where, value))
                continue
            fields = records.get(where.event)
            if fields is None:
                fields = records[where.event] = {"step": step}
            fields[where.field] = value
            if where.declared:
                if where.step_key is not None and where.event not in stepped:
                    stepped[where.event] = where
                if where.summary:
                    self._count(key, value, where.summary)
        self._last.update(row)
        for event, where in stepped.items():
            records[event]["step"] = self._step_of(where, row, step)
        takers = [*stepped.values(), *(where for _, where, _ in media)]
        if takers:
            self._drop_step_records(records, takers, row)
        for event, fields in records.items():
            run.log(event, **fields)
        for key, where, value in media:
            log_media(run, key, value, self._step_of(where, row, step))

    def _step_of(self, where: _Key, row: Mapping[str, Any], step: int) -> Any:
        """Return a record's step: its step metric's value (the last one with step_sync)."""
        if where.step_key is None:
            return step
        if where.step_key in row:
            return row[where.step_key]
        if where.step_sync and where.step_key in self._last:
            return self._last[where.step_key]
        return step

    def _drop_step_records(
        self, records: dict[str, dict[str, Any]], takers: list[_Key], row: Mapping[str, Any]
    ) -> None:
        """Leave out a record that holds only step metrics that another record, or a media
        value, of the commit takes as its step."""
        for event in list(records):
            keys = {self._key_of(event, field) for field in records[event] if field != "step"}
            used = {w.step_key for w in takers if w.event != event and w.step_key in row}
            if keys <= used:
                del records[event]

    def _key_of(self, event: str, field: str) -> str:
        return field if event == DEFAULT_EVENT else f"{event}/{field}"

    def _resolve(self, key: str, run: _Run) -> _Key:
        """Return how *key* is written, and write its goal's `define_metric` record first."""
        event, field = split_key(key)
        if event in _OWN_EVENTS:
            event = f"{event}_"
        found = self._definition_of(key)
        step_key = None if found is None or found.step_metric == key else found.step_metric
        where = _Key(
            event,
            field,
            step_key,
            found.step_sync if found is not None else False,
            found.summary if found is not None else (),
            step_key is not None or (found is not None and bool(found.summary)),
        )
        self._keys[key] = where
        if found is not None and found.goal is not None:
            column = f"{event}.{field}"
            if column not in self._goals_written:
                run.log(_layout.DEFINE_METRIC, metric=key, column=column, goal=found.goal)
                self._goals_written.add(column)
        return where

    def _definition_of(self, key: str) -> _Definition | None:
        """Return the definition of *key*: its own, else the last glob that matches it."""
        for definition in reversed(self._definitions):
            if definition.name == key:
                return definition
        for definition in reversed(self._definitions):
            if definition.matches(key):
                return definition
        return None

    def _count(self, key: str, value: Any, wanted: tuple[str, ...]) -> None:
        if type(value) not in (int, float):
            return
        stats = self._stats.setdefault(key, {})
        count = self._counts[key] = self._counts.get(key, 0) + 1
        for stat in wanted:
            old = stats.get(stat)
            if stat == "min" or (stat == "best" and self._goal_of(key) == "min"):
                stats[stat] = value if old is None else min(old, value)
            elif stat in ("max", "best"):
                stats[stat] = value if old is None else max(old, value)
            elif stat == "mean":
                stats[stat] = value if old is None else old + (value - old) / count
            elif stat == "first":
                stats.setdefault(stat, value)
            elif stat == "last":
                stats[stat] = value

    def _goal_of(self, key: str) -> str | None:
        found = self._definition_of(key)
        return None if found is None else found.goal

    def _open(self) -> _Run:
        self._run = _Run(
            self.name,
            self._directory,
            config=self.config.as_dict(),
            stdout=False,
            resume=self._resume,
            vocabulary=Vocabulary(aliases={}),  # the names are the tracker's: none drifts
        )
        self.name = self._run.name  # a finished run's name is taken: `<name>-2`
        self._run.log("run_info", **self._info)
        self._tag_and_note()
        atexit.register(self._at_exit)  # runs before the run's own close at exit (LIFO)
        return self._run

    def _tag_and_note(self) -> None:
        """Give init()'s tags and notes to the run's notes file, where runs() and the
        dashboard read them (`runlines tag`); one that runlines refuses is said, not fatal."""
        run = self._run
        assert run is not None
        tags, notes = self._info.get("tags") or [], self._info.get("notes")
        calls: list[tuple[Any, Any]] = [(t, run.tag) for t in tags] + [(notes, run.note)]
        for what, call in calls:
            if not what:
                continue
            try:
                call(what)
            except (FieldError, OSError) as err:
                warnings.warn(
                    f"wandb.init(): {err}; it stays in the run_info record",
                    RunlinesWarning,
                    stacklevel=2,
                )

    def _at_exit(self) -> None:
        """Write what is gathered and the summary of a run never finished; its run_end is
        left to the run, which knows how the process ended (an uncaught error: failed)."""
        if self._finished or self._run is None or self._run.closed:
            return
        self._finished = True
        try:
            if self._pending:
                self._commit()
            self._write_summary(self._run)
        except Exception as err:  # the job is ending: say so, never raise from atexit
            termwarn(f"the runlines log could not take the run's last values: {err!r}")

    def _config_changed(self, changes: dict[str, Any]) -> None:
        if self._tee is not None and not self._opening:
            self._tee.config.update(changes, allow_val_change=True)
        if self._run is not None and changes and not self._disabled:
            self._run.log("config", config=changes)

    # -- the other calls ----------------------------------------------------------------------

    def define_metric(
        self,
        name: str,
        step_metric: str | None = None,
        step_sync: bool | None = None,
        summary: str | None = None,
        goal: str | None = None,
    ) -> None:
        """Declare how *name* (a key, or a glob with `*`) is stepped, summarized and ranked.

        *step_metric*: the key whose value is the step of its records (step_sync, default on:
        its last value when a commit lacks it). *summary*: "min,max,mean,first,last,best" of
        its values, in the `summary` record. *goal*: "minimize" or "maximize", which way is
        better, for runs() and the dashboard.
        """
        if self._tee is not None:
            _tee_define_metric(self._tee, name, step_metric, step_sync, summary, goal)
        if goal is not None and goal not in _GOALS:
            msg = f"define_metric goal must be 'minimize' or 'maximize', got {goal!r}"
            raise ValueError(msg)
        wanted = tuple(s.strip() for s in summary.split(",")) if summary else ()
        bad = [s for s in wanted if s not in _SUMMARIES]
        if bad:
            msg = f"define_metric summary takes {', '.join(sorted(_SUMMARIES))}; got {bad}"
            raise ValueError(msg)
        sync = step_metric is not None if step_sync is None else step_sync
        self._definitions.append(
            _Definition(
                name,
                step_metric,
                sync,
                tuple(s for s in wanted if s != "none"),
                _GOALS.get(goal or ""),
            )
        )
        if step_metric is not None:
            self._step_keys.add(step_metric)
        self._plans.clear()
        seen = [key for key in self._keys if self._definitions[-1].matches(key)]
        for key in seen:  # written again from the definitions; a goal's record goes first
            del self._keys[key]
            if self._run is not None:
                self._resolve(key, self._run)

    def finish(self, exit_code: int | None = None, quiet: bool | None = None) -> None:
        """Commit what is gathered, write the `summary` record and close the log."""
        if self._finished:
            return
        self._finished = True
        if self._tee is not None:
            self._tee.finish(exit_code=exit_code)
        if self._pending:
            self._commit()
        _forget(self)
        if self._disabled:
            return
        run = self._run if self._run is not None else self._open()
        self._write_summary(run)
        if exit_code:
            run.__exit__(SystemExit, SystemExit(exit_code), None)  # run_end: failed, exit_code
        else:
            run.close()

    def _write_summary(self, run: _Run) -> None:
        declared = self.summary.declared()
        if declared:
            run.log(_layout.SUMMARY, values=declared)

    def alert(self, title: str, text: str, level: str | None = None) -> None:
        """Write an `alert` record with *title*, *text* and *level* (default "INFO")."""
        if self._tee is not None:
            self._tee.alert(title=title, text=text, level=level)
        if not self._disabled:
            run = self._run if self._run is not None else self._open()
            run.log("alert", title=title, text=text, level=str(level or "INFO"))

    def log_artifact(
        self,
        artifact_or_path: Artifact | str | os.PathLike[str],
        name: str | None = None,
        type: str | None = None,
        aliases: list[str] | None = None,
        tags: list[str] | None = None,
    ) -> Artifact:
        """Register each file of *artifact_or_path* (an Artifact, or a file's path) as an
        `artifact` record named by its type, with the artifact's name, aliases and metadata."""
        if self._tee is not None:
            self._tee.log_artifact(
                _for_tee_artifact(self._tee, artifact_or_path), name, type, aliases, tags
            )
        artifact = artifact_or_path
        if not isinstance(artifact, Artifact):
            path = Path(artifact)
            artifact = Artifact(name or path.name, type or "unspecified")
            artifact.add_file(str(path))
        if not self._disabled:
            run = self._run if self._run is not None else self._open()
            extra: dict[str, Any] = {"aliases": list(aliases or [])}
            extra["metadata"] = artifact.metadata
            for local, inside in artifact.files:
                run.artifact(
                    artifact.type, path=local, artifact=artifact.name, file=inside, **extra
                )
        return artifact

    def watch(self, *args: Any, **kwargs: Any) -> None:
        """Log nothing: the drop-in has no gradient histograms; says so once."""
        if self._tee is not None:
            self._tee.watch(*args, **kwargs)
        if not self._said_watch:
            self._said_watch = True
            termwarn(f"wandb.watch() logs nothing with the runlines drop-in ({_DOCS})")

    def _label(self, **kwargs: Any) -> None:
        """Take W&B's usage label (the HF Trainer sets one): the log has no place for it."""

    def __repr__(self) -> str:
        return f"<runlines.compat.wandb.Run {self.name!r} in {str(self._directory)!r}>"


class _BeforeInit:
    """`wandb.config` and `wandb.summary` before init(): every use says to call init()."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        msg = f"call wandb.init() before using wandb.{self._name}.{attr}"
        raise RunStateError(msg)

    def __getitem__(self, key: str) -> Any:
        return self.__getattr__("__getitem__")

    def __setitem__(self, key: str, value: Any) -> None:
        self.__getattr__("__setitem__")


run: Run | None = None
config: Config | _BeforeInit = _BeforeInit("config")
summary: Summary | _BeforeInit = _BeforeInit("summary")


def init(
    project: str | None = None,
    name: str | None = None,
    config: Any = None,
    dir: str | os.PathLike[str] | None = None,
    id: str | None = None,
    resume: bool | str | None = None,
    tags: list[str] | tuple[str, ...] | None = None,
    notes: str | None = None,
    group: str | None = None,
    job_type: str | None = None,
    mode: str | None = None,
    reinit: bool | str | None = None,
    entity: str | None = None,
    anonymous: str | None = None,
    *,
    tee: bool = False,
) -> Run:
    """Start a run whose log is `<dir or ./runs>/<project>/<name>.jsonl` (docs/compat.md).

    *name* defaults to *id*, else a W&B-like `<adjective>-<noun>-<n>`; *project* to
    $WANDB_PROJECT, else "uncategorized". *resume* "allow"/"auto"/True continues a run of the
    name, "must" requires one, "never" refuses one. mode="disabled" writes nothing. *entity*
    goes to the `run_info` record; *anonymous* changes nothing (nothing is uploaded). With
    *tee*, every call is also made on the real wandb, with the same arguments.
    """
    current = run
    if current is not None:
        if reinit in (None, False, "return_previous", "default"):
            return current
        current.finish()
    if mode not in (None, "online", "offline", "disabled", "shared"):
        msg = f"mode must be 'online', 'offline', 'disabled' or 'shared', got {mode!r}"
        raise ValueError(msg)
    project = project or os.environ.get("WANDB_PROJECT") or "uncategorized"
    directory = Path(dir if dir is not None else "runs") / project
    real = _real_wandb() if tee else None
    if real is not None:
        real.init(
            project=project, name=name, config=_as_dict(config) if config is not None else None,
            dir=dir, id=id, resume=resume, tags=tags, notes=notes, group=group,
            job_type=job_type, mode=mode, reinit=reinit,
            **{k: v for k, v in (("entity", entity), ("anonymous", anonymous)) if v is not None},
        )  # fmt: skip
    info: dict[str, Any] = {"project": project, "entity": entity, "wandb_id": id}
    info["tags"] = list(tags) if tags else None
    info.update(notes=notes, group=group, job_type=job_type)
    started = Run(
        project=project,
        name=name or id or _generated_name(directory),
        directory=directory,
        config=config,
        resume=_resume_of(resume),
        info={k: v for k, v in info.items() if v is not None},
        disabled=mode == "disabled",
        tee=real,
    )
    _remember(started)
    return started


def log(data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
    """`wandb.log`: see `Run.log`."""
    (run or _current("log")).log(data, step, commit)


def define_metric(
    name: str,
    step_metric: str | None = None,
    step_sync: bool | None = None,
    summary: str | None = None,
    goal: str | None = None,
) -> None:
    """`wandb.define_metric`: see `Run.define_metric`."""
    _current("define_metric").define_metric(
        name, step_metric=step_metric, step_sync=step_sync, summary=summary, goal=goal
    )


def finish(exit_code: int | None = None, quiet: bool | None = None) -> None:
    """`wandb.finish`: end the current run, if there is one."""
    if run is not None:
        run.finish(exit_code=exit_code)


def alert(title: str, text: str, level: str | None = None) -> None:
    """`wandb.alert`: an `alert` record."""
    _current("alert").alert(title, text, level)


def watch(*args: Any, **kwargs: Any) -> None:
    """`wandb.watch`: logs nothing (says so once)."""
    _current("watch").watch(*args, **kwargs)


def termlog(string: str = "", newline: bool = True, repeat: bool = True) -> None:
    """Print *string* on stderr, as `wandb: <string>`."""
    sys.stderr.write(f"wandb: {string}" + ("\n" if newline else ""))


def termwarn(string: str, repeat: bool = True) -> None:
    """Print a warning line on stderr."""
    termlog(f"WARNING {string}")


def termerror(string: str, repeat: bool = True) -> None:
    """Print an error line on stderr."""
    termlog(f"ERROR {string}")


def install() -> None:
    """Make `import wandb` (and `wandb.sdk.lib`, `wandb.wandb_run`, its version) give this
    drop-in."""
    _finder.install("wandb", sys.modules[__name__])


def uninstall() -> None:
    """Undo install(): `import wandb` finds the real package again."""
    _finder.uninstall("wandb")


def __getattr__(name: str) -> Any:
    err = _missing("runlines.compat.wandb", name)
    raise err


# -- helpers ----------------------------------------------------------------------------------


def _current(call: str) -> Run:
    if run is None:
        msg = f"call wandb.init() before wandb.{call}()"
        raise RunStateError(msg)
    return run


def _remember(started: Run) -> None:
    global run, config, summary
    run, config, summary = started, started.config, started.summary


def _forget(ended: Run) -> None:
    global run, config, summary
    if run is ended:
        run, config, summary = None, _BeforeInit("config"), _BeforeInit("summary")


def _resume_of(resume: bool | str | None) -> Literal["auto", "allow", "never", "must"]:
    if resume in (None, False):
        return "auto"
    if resume in (True, "allow", "auto"):
        return "allow"
    if resume in ("never", "must"):
        return resume  # type: ignore[return-value]
    msg = f"resume must be True, False, 'allow', 'auto', 'must' or 'never', got {resume!r}"
    raise ValueError(msg)


def _generated_name(directory: Path) -> str:
    """Return `<adjective>-<noun>-<n>`, n the run's number in its project folder."""
    number = len(list(directory.glob(f"*{_layout.LOG_SUFFIX}"))) + 1 if directory.is_dir() else 1
    pick = random.SystemRandom()
    return f"{pick.choice(_ADJECTIVES)}-{pick.choice(_NOUNS)}-{number}"


def _as_dict(value: Any) -> dict[str, Any]:
    """Return a config given as a mapping, a dataclass or an argparse.Namespace as a dict."""
    if isinstance(value, Mapping):
        return dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "__dict__") and type(value).__name__ == "Namespace":
        return dict(vars(value))
    msg = f"a config must be a mapping, a dataclass or an argparse.Namespace, got {value!r:.80}"
    raise TypeError(msg)


def _is_field(value: Any) -> bool:
    """Return whether *value* is a field of its record, not a media value. Its type decides
    from its first sight on; a list or a tuple is looked into each time."""
    if is_media(value):
        return False
    if not isinstance(value, list | tuple):
        _FIELD_TYPES.add(type(value))
    return True


def _flat(column: str, value: Any) -> dict[str, Any]:
    """Return *value* under *column*, a nested mapping's keys dotted below it."""
    if not isinstance(value, Mapping):
        return {column: value}
    flat: dict[str, Any] = {}
    for key, inner in value.items():
        flat.update(_flat(f"{column}.{key}", inner))
    return flat


def _real_wandb() -> ModuleType:
    """Return the real wandb package, for tee=True."""
    if _finder.is_installed("wandb"):
        msg = (
            "init(tee=True) needs the real wandb as `wandb`, and install() made `import wandb` "
            "give the drop-in; use `import runlines.compat.wandb as wandb` without install()"
        )
        raise RuntimeError(msg)
    try:
        return importlib.import_module("wandb")
    except ImportError as err:
        msg = "init(tee=True) forwards every call to the real wandb: pip install wandb"
        raise ImportError(msg) from err


def _tee_define_metric(real: ModuleType, name: str, *options: Any) -> None:
    """Call the real define_metric with the options given; `goal` only where it has one
    (wandb 0.31 dropped it)."""
    names = ("step_metric", "step_sync", "summary", "goal")
    kwargs = {k: v for k, v in zip(names, options, strict=True) if v is not None}
    if "goal" not in inspect.signature(real.run.define_metric).parameters:
        kwargs.pop("goal", None)
    real.run.define_metric(name, **kwargs)


def _for_tee_artifact(real: ModuleType, artifact: Artifact | str | os.PathLike[str]) -> Any:
    """Return *artifact* made again as the real wandb's, or the path as it is."""
    if not isinstance(artifact, Artifact):
        return artifact
    made = real.Artifact(artifact.name, artifact.type, artifact.description, artifact.metadata)
    for local, inside in artifact.files:
        made.add_file(local, name=inside)
    return made


def _for_tee(real: ModuleType, data: Mapping[str, Any]) -> dict[str, Any]:
    """Return *data* with the drop-in's media values made again as the real wandb's."""
    out = dict(data)
    for key, value in data.items():
        if isinstance(value, Media):
            args, kwargs = value.given
            out[key] = getattr(real, type(value).__name__)(*args, **kwargs)
    return out
