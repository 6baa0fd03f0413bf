"""Import MLflow runs (a `mlruns/` folder or a SQLite database) as runlines logs (docs/compat.md).

Read through MLflow's own client (`MlflowClient(tracking_uri=...)`: `search_experiments`,
`search_runs`, `get_metric_history`). Each run becomes one log, `<experiment>/<run name>`:
params are its config, each metric value a record at its step and time, tags a `run_info`
record and the run's tags in its notes file, MLflow's status its `run_end` status.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import orjson

from runlines import _context, _encoding, _notes
from runlines.compat._keys import split_key
from runlines.errors import FieldError, RunlinesError
from runlines.importers._common import ImportedRun, Staging, bookends, clean_name, write_log

_PIP: Final = "pip install 'runlines[import-mlflow]'"
try:  # this module is the door: imported only when an import of MLflow runs runs
    from mlflow.entities import ViewType
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient
except ImportError as err:
    msg = f"runlines import mlflow needs MLflow's client: {_PIP}"
    raise ImportError(msg) from err

__all__ = ["MlflowImportError", "import_mlflow"]

_SOURCE: Final = "mlflow"
_SQLITE: Final = "sqlite:///"
# MLflow's status -> the run_end status; RUNNING and SCHEDULED have no run_end (docs/compat.md)
_STATUSES: Final = {"FINISHED": "ok", "FAILED": "failed", "KILLED": "terminated"}
_NOTE_TAG: Final = "mlflow.note.content"  # the run's description in MLflow's UI
_SYSTEM_TAGS: Final = "mlflow."
_PAGE: Final = 1000


class MlflowImportError(RunlinesError, ValueError):
    """An MLflow store that cannot be imported: not a store, or one MLflow refuses."""


def import_mlflow(source: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[ImportedRun]:
    """Import every active run of the MLflow store *source* as a log in *out*.

    *source* is a tracking folder (`mlruns/`, or `file:///...`) or a SQLite database
    (`sqlite:///path.db`). A run imported before, unchanged (the same sha256), is left as it is.

    Raises:
        MlflowImportError: *source* is no MLflow store, MLflow refuses it (another version),
            or a log of that name in *out* came from elsewhere. Nothing is written then.
    """
    uri, where = _tracking_uri(source)
    with _reading(where):  # everything read first: an error of MLflow's writes nothing
        client = MlflowClient(tracking_uri=uri)
        runs = [(experiment, name, run, _history(client, run))
                for experiment, name, run in _runs(client)]  # fmt: skip
    if not runs:
        msg = f"{where} holds no MLflow runs (no active run in any experiment); check it"
        raise MlflowImportError(msg)
    results: list[ImportedRun] = []
    with Staging(Path(out), MlflowImportError) as staging:
        for experiment, name, run, history in runs:
            digest = _sha256(_canonical(run, history))
            log = _context.log_path(staging.out / experiment, name, None)
            stage = staging.claim(log, digest, f"MLflow run {run.info.run_id} of {where}")
            if stage is None:
                results.append(ImportedRun(run.info.run_id, log, written=False))
                continue
            result = _import_run(uri, experiment, name, run, history, digest, stage)
            result.path = log
            results.append(result)
        staging.commit()
    return results


# -- the store -----------------------------------------------------------------------------------


def _tracking_uri(source: str | os.PathLike[str]) -> tuple[str, str]:
    """(the tracking URI for MlflowClient, the store as said in messages), checked first.

    MLflow's client creates what it does not find (a database, a default experiment): a
    source that is not already a store is refused here, before the client sees it.
    """
    text = os.fspath(source)
    if text.startswith(_SQLITE):
        path = Path(text.removeprefix(_SQLITE))
        _check_database(path)
        return f"{_SQLITE}{path.resolve()}", str(path)
    if text.startswith("sqlite:"):
        msg = f"{text}: a SQLite store is sqlite:///<path> (three slashes, then the path)"
        raise MlflowImportError(msg)
    path = Path(text.removeprefix("file://"))
    if not path.is_dir():
        msg = (
            f"{path} is not a folder; give an MLflow tracking folder (mlruns/) or a SQLite "
            "database as sqlite:///path.db"
        )
        raise MlflowImportError(msg)
    if not any(p.name == "meta.yaml" for p in path.glob("*/meta.yaml")):
        msg = (
            f"{path} is not an MLflow tracking folder: no <experiment>/meta.yaml in it; "
            "give the mlruns/ folder itself, or a SQLite store as sqlite:///path.db"
        )
        raise MlflowImportError(msg)
    return path.resolve().as_uri(), str(path)


def _check_database(path: Path) -> None:
    if not path.is_file():
        msg = f"{path} is no file; give the MLflow database as sqlite:///path.db"
        raise MlflowImportError(msg)
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        ) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as err:
        msg = f"{path} is not a SQLite database ({err}); give an MLflow one as sqlite:///path.db"
        raise MlflowImportError(msg) from err
    if not {"experiments", "runs", "alembic_version"} <= tables:
        msg = f"{path} is a SQLite database but not MLflow's (no experiments, runs tables)"
        raise MlflowImportError(msg)


@contextlib.contextmanager
def _reading(where: str) -> Iterator[None]:
    """MLflow's refusals as an MlflowImportError; its file store allowed while reading.

    MLflow 3 refuses to open a file store unless MLFLOW_ALLOW_FILE_STORE is set (the store is
    in maintenance mode for writing); an import only reads it. MLflow's deprecation warnings
    (SQLAlchemy's) are its own, not the caller's: they are not shown.
    """
    before = os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        with warnings.catch_warnings():
            # MLflow's own deprecations (SQLAlchemy's, the file store's): not the user's code
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            yield
    except MlflowException as err:
        msg = f"MLflow cannot read {where}: {err.message}; nothing was imported"
        raise MlflowImportError(msg) from err
    except Exception as err:  # MLflow's reading of a store it does not expect (a bad meta.yaml)
        msg = f"MLflow cannot read {where}: {type(err).__name__}: {err}; nothing was imported"
        raise MlflowImportError(msg) from err
    finally:
        if before is None:
            os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)
        else:
            os.environ["MLFLOW_ALLOW_FILE_STORE"] = before


def _runs(client: Any) -> Iterator[tuple[str, str, Any]]:
    """(experiment folder, log name, run) of every active run, oldest first per experiment."""
    for experiment in client.search_experiments(view_type=ViewType.ACTIVE_ONLY):
        found: list[Any] = []
        token = None
        while True:
            page = client.search_runs(
                [experiment.experiment_id],
                run_view_type=ViewType.ACTIVE_ONLY,
                max_results=_PAGE,
                order_by=["attributes.start_time ASC"],
                page_token=token,
            )
            found.extend(page)
            token = page.token
            if not token:
                break
        folder = clean_name(experiment.name, fallback=f"experiment-{experiment.experiment_id}")
        names = [clean_name(run.info.run_name or run.info.run_id) for run in found]
        for run, name in zip(found, names, strict=True):
            if names.count(name) > 1:  # MLflow allows one name twice: each keeps its id
                name = clean_name(f"{name}-{run.info.run_id[:8]}")
            yield folder, name, run


def _history(client: Any, run: Any) -> dict[str, list[tuple[int, int, float]]]:
    """Each metric's (step, timestamp in ms, value), in MLflow's order."""
    run_id = run.info.run_id
    return {
        key: [(m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, key)]
        for key in sorted(run.data.metrics)
    }


def _canonical(run: Any, history: dict[str, list[tuple[int, int, float]]]) -> dict[str, Any]:
    """What the import reads of *run*: its sha256 says whether it changed since."""
    info = run.info
    return {
        "run_id": info.run_id,
        "experiment_id": info.experiment_id,
        "run_name": info.run_name,
        "status": info.status,
        "start_time": info.start_time,
        "end_time": info.end_time,
        "params": dict(run.data.params),
        "tags": dict(run.data.tags),
        "metrics": {key: [list(m) for m in values] for key, values in history.items()},
    }


def _sha256(data: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


# -- one run -------------------------------------------------------------------------------------


def _import_run(
    uri: str,
    experiment: str,
    name: str,
    run: Any,
    history: dict[str, list[tuple[int, int, float]]],
    digest: str,
    stage: Path,
) -> ImportedRun:
    """Write *run* as `<stage>/<name>.jsonl`, and its tags as its notes file."""
    info, tags = run.info, dict(run.data.tags)
    result = ImportedRun(info.run_id, stage, written=True)
    records = _records(name, history)
    times = [r["ts"] for r in records]
    first = info.start_time / 1000 if info.start_time else min(times, default=0.0)
    last = info.end_time / 1000 if info.end_time else max(times, default=first)
    source = {
        "tool": _SOURCE,
        "uri": uri,
        "experiment": run.info.experiment_id,
        "run_id": info.run_id,
        "sha256": digest,
    }
    config = {key: _param(value) for key, value in sorted(run.data.params.items())}
    status = _STATUSES.get(info.status)
    start, end = bookends(name, first, last, source, config, status)
    run_info = {
        "ts": first,
        "event": "run_info",
        "run": name,
        "experiment": experiment,
        "mlflow_run_id": info.run_id,
        "mlflow_status": info.status,
        "tags": tags,
    }
    if status is None:
        result.note = f"{info.status} in MLflow: imported without a run_end"
    lines = [_encoding.encode_line_safe(run_info)]
    lines += [_encoding.encode_line_safe(r) for r in records]
    log = stage / f"{name}.jsonl"
    write_log(log, start, lines, end)
    result.records = len(records)
    _write_notes(log, tags, result)
    return result


def _records(name: str, history: dict[str, list[tuple[int, int, float]]]) -> list[dict[str, Any]]:
    """One record per (time, step, event): the metrics MLflow logged together, together."""
    grouped: dict[tuple[int, int, str], dict[str, Any]] = {}
    for key, values in history.items():
        event, field = split_key(key)
        for step, stamp, value in values:
            record = grouped.get((stamp, step, event))
            if record is None:
                record = grouped[(stamp, step, event)] = {
                    "ts": stamp / 1000,
                    "event": event,
                    "run": name,
                    "step": step,
                }
            record[field] = value
    return [grouped[key] for key in sorted(grouped)]


def _param(text: str) -> Any:
    """A param (MLflow keeps its str()) as the int, float or bool it was, else as the text."""
    for parse in (int, float):
        try:
            value = parse(text)
        except ValueError:
            continue
        if str(value) == text and math.isfinite(value):  # "nan" stays the text "nan"
            return value
    return {"True": True, "False": False}.get(text, text)


def _write_notes(log: Path, tags: dict[str, str], result: ImportedRun) -> None:
    """The user's tags as runlines tags (`key=value`), the MLflow note as a note."""
    for key, value in sorted(tags.items()):
        if key == _NOTE_TAG:
            if value:
                _notes.note(log, value)
            continue
        if key.startswith(_SYSTEM_TAGS):
            continue  # MLflow's own (user, source, run name): in the run_info record
        try:
            _notes.tag(log, f"{key}={value}" if value else key)
        except FieldError:
            key = "tags (not a runlines tag: in run_info only)"
            result.skipped[key] = result.skipped.get(key, 0) + 1
