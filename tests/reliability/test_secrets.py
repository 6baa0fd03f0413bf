"""Security: no secret reaches any sink, files follow the umask, artifacts stay in their folder,
and nothing read from a log is ever executed or unpickled.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import logging
import os
import pickle
import shutil
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _secrets import KEYED, SECRET_KEYS, SHAPES, leaks, sentence

import runlines
from _optional import skip_without
from runlines import FieldError, Run
from runlines.cli import main

SRC = Path(runlines.__file__).resolve().parent


def _strings(value: Any) -> Iterator[str]:
    """Yield every string in a parsed record, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def assert_no_leak(where: str, text: str) -> None:
    """Assert that *text* holds no secret, also once each JSON line in it is parsed."""
    assert leaks(text) == [], f"secrets in {where}"
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a console line, or a line of another program
        assert leaks("\n".join(_strings(record))) == [], f"secrets in {where} (parsed)"


def _secret_argv() -> list[str]:
    argv = ["train.py", "--token", KEYED, f"--api-key={KEYED}", f"HF_TOKEN={KEYED}"]
    argv += [f"db.password={KEYED}", "--lr", "3e-4"]
    return argv + [text for text, _ in SHAPES.values()]


def _push_every_secret_through_every_path(run: Run) -> None:
    logger = logging.getLogger("reliability.secrets")
    for label, (text, _) in SHAPES.items():
        words = sentence(label)
        run.log("note", text=words, nested={"a": [words, (words,), {words}], "b": {"c": words}})
        run.log("note", **dict.fromkeys(SECRET_KEYS, KEYED), step=1)
        with run.span("upload", url=words, token=KEYED, target=label):
            pass
        run.artifact(f"notes-{label}", {"ok": 1}, note=words, api_key=KEYED)
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn(words, UserWarning, stacklevel=1)
        logger.warning("connecting with %s", text)
        try:
            raise ValueError(words)
        except ValueError:
            logger.exception("upload of %s failed", label)


@pytest.mark.usefixtures("fast_path")
@pytest.mark.parametrize("console", ["json", "pretty"])
def test_no_secret_reaches_any_sink_from_any_path(
    run_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    console: str,
) -> None:
    monkeypatch.setattr(sys, "argv", _secret_argv())
    shown: list[str] = []  # what Python would print for the warnings: the capture passes them on
    monkeypatch.setattr(warnings, "showwarning", lambda message, *args: shown.append(str(message)))
    texts = [text for text, _ in SHAPES.values()]
    config = {
        **dict.fromkeys(SECRET_KEYS, KEYED),
        "notes": texts,
        "nested": {"deep": [{"x": text} for text in texts]},
    }

    with (
        pytest.raises(RuntimeError),
        Run("r", run_dir, config=config, console=console, capture="all") as run,  # type: ignore[arg-type]
    ):
        _push_every_secret_through_every_path(run)
        try:
            raise KeyError(sentence("jwt"))
        except KeyError as cause:
            error = RuntimeError(sentence("github_token"))
            error.add_note(sentence("pem_private_key"))
            raise error from cause

    captured = capsys.readouterr()
    assert_no_leak("the log file", run.path.read_text())
    assert_no_leak("stdout", captured.out)
    ours = [line for line in captured.err.splitlines() if line.startswith("runlines:")]
    assert_no_leak("runlines' stderr lines", "\n".join(ours))
    records = list(runlines.iter_events(run.path))
    events = [r["event"] for r in records]
    for event, count in {"note": 2, "span": 1, "artifact": 1, "warning": 1, "log": 2}.items():
        assert events.count(event) == count * len(SHAPES), event
    start, end = records[0], records[-1]
    assert start["config"]["password"] == start["argv"][2] == "[redacted]"
    assert (end["status"], end["exc_type"]) == ("failed", "RuntimeError")
    assert "KeyError" in end["traceback"]  # the cause and the note were written, redacted
    assert len(shown) == len(SHAPES)  # the program's own warnings still reach their handler
    if console == "pretty":
        assert "note " in captured.out
        assert "text=" in captured.out


@pytest.mark.usefixtures("fast_path")
def test_a_secret_in_a_span_name_is_redacted(run_dir: Path) -> None:
    """A span named after what it does: `with run.span(f"download {url}")`."""
    url = SHAPES["url_password"][0]

    with Run("r", run_dir, stdout=False) as run:
        for _ in range(2):  # the second of each name is the C path's, if on
            with run.span(f"download {url}"):
                pass

        @run.span(f"upload {SHAPES['huggingface_token'][0]}")
        def upload() -> None:
            pass

        upload()
        upload()

    assert_no_leak("the log file", run.path.read_text())
    assert len([r for r in runlines.iter_events(run.path) if r["event"] == "span"]) == 4


@pytest.mark.usefixtures("fast_path")
def test_redaction_off_is_the_only_way_a_secret_is_written(run_dir: Path) -> None:
    """The control: the corpus is caught by redaction, not missed by the leak check."""
    with Run("r", run_dir, stdout=False, redact=False) as run:
        for label in SHAPES:
            run.log("note", text=sentence(label), password=KEYED)

    assert sorted(leaks(run.path.read_text())) == sorted([*SHAPES, "keyed"])


# -- files and the umask ------------------------------------------------------------------------


@pytest.mark.usefixtures("fast_path")
@pytest.mark.parametrize("umask", [0o027, 0o077])
def test_log_and_artifact_files_follow_the_umask(
    tmp_path: Path, umask: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_without("torch")
    import pandas as pd
    import torch

    monkeypatch.chdir(tmp_path)  # outside any git repository: no diff of a dirty tree
    old = os.umask(umask)
    modes: dict[Path, int] = {}
    try:
        with Run("r", tmp_path / "runs" / "deep", stdout=False) as run:
            run.log("step", step=1)
            run.artifact("array", np.zeros(3))
            run.artifact("tensor", torch.zeros(3))
            run.artifact("frame", pd.DataFrame({"a": [1]}))
            for name, obj in (("json", {"a": 1}), ("text", "t"), ("bytes", b"b")):
                run.artifact(name, obj, step=2)
            modes.update((p, p.stat().st_mode) for p in (tmp_path / "runs").rglob("*"))
            shutil.rmtree(run.path.parent)  # the run re-creates its folder and log
            run.log("step", step=2)
            run.artifact("after", {"a": 2})
        modes.update((p, p.stat().st_mode) for p in (tmp_path / "runs").rglob("*"))
    finally:
        os.umask(old)

    assert len(modes) == 11  # 2 folders, log, lock, 7 artifacts; re-created ones replace theirs
    for path, mode in modes.items():
        assert mode & umask == 0, f"{path} has mode {mode & 0o777:o} under umask {umask:o}"
        assert mode & 0o002 == 0, f"{path} is world-writable"


@pytest.mark.parametrize(
    "name",
    [
        *("../../etc/x", "../x", "/etc/x", "a/b", "a\\b", "a\0b", ".hidden", "", ".", ".."),
        b"x",
        None,
        5,
    ],
)
def test_artifact_names_cannot_escape_the_artifacts_folder(tmp_path: Path, name: Any) -> None:
    run_dir = tmp_path / "runs"
    with Run("r", run_dir, stdout=False) as run:
        before = set(tmp_path.rglob("*"))
        with pytest.raises(FieldError, match="plain file name"):
            run.artifact(name, b"data")
        after = set(tmp_path.rglob("*"))

    assert after == before
    assert not Path("/etc/x").exists()


@pytest.mark.parametrize("step", [-1, True, "3", 1.5])
def test_artifact_step_must_be_a_plain_int(run_dir: Path, step: Any) -> None:
    with Run("r", run_dir, stdout=False) as run, pytest.raises(FieldError, match="step"):
        run.artifact("preds", b"data", step=step)


# -- nothing from a log is executed or unpickled ------------------------------------------------


class _Exploit:
    """Unpickling this creates the marker file: proof that something unpickled it."""

    marker = ""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (Path.touch, (Path(self.marker),))


def _poisoned_run(tmp_path: Path, marker: Path) -> tuple[Path, Path]:
    """A real run whose records and artifacts carry pickle payloads; returns (log, .npy)."""
    _Exploit.marker = str(marker)
    payload = pickle.dumps(_Exploit())
    evil_npy = tmp_path / "runs" / "evil.npy"
    evil_npy.parent.mkdir(parents=True)
    np.save(evil_npy, np.array([_Exploit()], dtype=object), allow_pickle=True)
    evil_pkl = evil_npy.with_suffix(".pkl")
    evil_pkl.write_bytes(payload)
    with Run("r", tmp_path / "runs", stdout=False, redact=False) as run:
        run.log(
            "note",
            step=1,
            loss=0.5,
            payload=payload.decode("latin-1"),
            __reduce__="os.system",
            py_object={"py/object": "os.system", "py/reduce": [{"py/function": "os.system"}]},
        )
        run.artifact("evil", path=evil_npy, step=1)
        run.artifact("evil_pickle", path=evil_pkl, step=1)
    return run.path, evil_npy


def test_reading_a_poisoned_log_never_unpickles_or_executes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "pwned"
    log, evil_npy = _poisoned_run(tmp_path, marker)
    assert not marker.exists(), "saving or registering the artifact ran the payload"

    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a reader loaded a pickle")

    for target in ("pickle.load", "pickle.loads", "numpy.load"):
        monkeypatch.setattr(target, forbidden)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        statuses = [
            main(["which", str(evil_npy), str(log.parent)]),
            main(["which", str(evil_npy.with_suffix(".pkl"))]),
            main(["show", str(log)]),
            main(["tail", str(log)]),
            main(["ls", str(log.parent)]),
            main(["compare", str(log), "--metric", "loss"]),
        ]
    runlines.load(log)
    list(runlines.iter_events(log))

    assert statuses == [0] * 6, err.getvalue()
    assert "artifact 'evil'" in out.getvalue()
    assert not marker.exists()


def _calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """Yield (dotted name, call) for every call in *tree*."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            parts = []
            func: ast.expr = node.func
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name):
                parts.append(func.id)
            yield ".".join(reversed(parts)), node


_NEVER = {"eval", "exec", "compile", "pickle.load", "pickle.loads", "torch.load", "marshal.loads"}
_NEVER |= {"dill.load", "dill.loads", "joblib.load", "pd.read_pickle", "pandas.read_pickle"}


def test_src_never_unpickles_or_evaluates_anything() -> None:
    sources = sorted(SRC.rglob("*.py"))
    assert len(sources) > 10

    for path in sources:
        text = path.read_text()
        assert "allow_pickle=True" not in text, path
        for name, call in _calls(ast.parse(text)):
            assert name not in _NEVER, f"{path}:{call.lineno} calls {name}"
            if name in ("np.load", "numpy.load"):
                allow = [k.value for k in call.keywords if k.arg == "allow_pickle"]
                assert allow, f"{path}:{call.lineno} calls np.load without allow_pickle=False"
                assert isinstance(allow[0], ast.Constant), f"{path}:{call.lineno}"
                assert allow[0].value is False, f"{path}:{call.lineno}"
            if name.endswith("yaml.load"):
                raise AssertionError(f"{path}:{call.lineno} uses yaml.load")
