"""`runlines import mlflow`: runs written by the real mlflow (a file store and a SQLite one),
read back through `runlines.load` and `runs()`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _optional import skip_without

skip_without("mlflow")
skip_without("sqlalchemy")

import mlflow  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

import runlines  # noqa: E402
from runlines.cli import main  # noqa: E402
from runlines.importers.mlflow import MlflowImportError, import_mlflow  # noqa: E402
from runlines.reading import iter_events  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

T0 = 1_700_000_000_000  # ms, as MLflow keeps times


@pytest.fixture(params=["file", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tracking URI of a store of that kind, as mlflow's fluent API's (through the env)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # the writing side; the import asks none
    if request.param == "file":
        uri, source = (tmp_path / "mlruns").as_uri(), str(tmp_path / "mlruns")
    else:
        uri = source = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return source


@pytest.fixture(autouse=True)
def _no_run_left_open() -> Iterator[None]:
    yield
    while mlflow.active_run() is not None:
        mlflow.end_run()


def write_runs() -> None:
    """Two runs of experiment `exp`: one finished with params, metrics and tags; one failed."""
    mlflow.set_experiment("exp")
    with mlflow.start_run(run_name="base"):
        mlflow.log_params({"lr": 0.1, "opt": "sgd", "layers": 4, "eps": float("nan")})
        for step in range(3):
            mlflow.log_metric("train/loss", 1.0 / (step + 1), step=step * 10, timestamp=T0 + step)
        mlflow.log_metric("lr", 0.25, step=7, timestamp=T0 + 5000)
        mlflow.set_tag("team", "vision")
        mlflow.set_tag("mlflow.note.content", "the first try")
    with mlflow.start_run(run_name="broken"):
        mlflow.log_metric("train/loss", 9.0, step=0, timestamp=T0)
        mlflow.end_run(status="FAILED")


def records(path: Path, event: str) -> list[dict[str, Any]]:
    return [r for r in iter_events(path) if r["event"] == event]


def test_values_steps_and_times_round_trip(store: str, tmp_path: Path) -> None:
    write_runs()

    results = import_mlflow(store, tmp_path / "runs")

    assert sorted(r.path.relative_to(tmp_path / "runs").as_posix() for r in results) == [
        "exp/base.jsonl", "exp/broken.jsonl",
    ]  # fmt: skip
    frame = runlines.load(tmp_path / "runs" / "exp" / "base.jsonl", event="train")
    assert frame["step"].tolist() == [0, 10, 20]
    assert frame["loss"].tolist() == [1.0, 0.5, 1.0 / 3]
    assert frame["ts"].tolist() == [(T0 + s) / 1000 for s in range(3)]
    (lr,) = records(tmp_path / "runs" / "exp" / "base.jsonl", "metrics")
    assert (lr["ts"], lr["step"], lr["lr"]) == ((T0 + 5000) / 1000, 7, 0.25)


def test_params_are_the_config_tags_the_notes_and_status_the_end(
    store: str, tmp_path: Path
) -> None:
    write_runs()

    import_mlflow(store, tmp_path / "runs")

    table = runlines.runs(tmp_path / "runs" / "exp").set_index("run")
    assert table.loc["base", "config.lr"] == 0.1
    assert table.loc["base", "config.layers"] == 4
    assert table.loc["base", "config.opt"] == "sgd"
    assert table.loc["base", "config.eps"] == "nan"  # a text that is no finite number stays text
    assert table.loc["base", "status"] == "ok"
    assert table.loc["broken", "status"] == "failed"
    assert list(table.loc["base", "tags"]) == ["team=vision"]
    assert list(table.loc["base", "notes"]) == ["the first try"]
    (start,) = records(tmp_path / "runs" / "exp" / "base.jsonl", "run_start")
    source = start["imported_from"]
    assert source["tool"] == "mlflow"
    assert len(source["sha256"]) == 64
    (info,) = records(tmp_path / "runs" / "exp" / "base.jsonl", "run_info")
    assert info["tags"]["team"] == "vision"
    assert info["mlflow_status"] == "FINISHED"


def test_killed_is_terminated_and_running_has_no_run_end(store: str, tmp_path: Path) -> None:
    mlflow.set_experiment("exp")
    with mlflow.start_run(run_name="killed"):
        mlflow.end_run(status="KILLED")
    client = MlflowClient()
    experiment = client.get_experiment_by_name("exp")
    assert experiment is not None
    client.create_run(experiment.experiment_id, run_name="live")  # RUNNING, never ended

    results = {r.path.name: r for r in import_mlflow(store, tmp_path / "runs")}

    assert records(results["killed.jsonl"].path, "run_end")[0]["status"] == "terminated"
    assert records(results["live.jsonl"].path, "run_end") == []
    assert "RUNNING in MLflow" in results["live.jsonl"].note


def test_importing_twice_is_a_no_op_and_says_so(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_runs()
    out = str(tmp_path / "runs")
    assert main(["import", "mlflow", store, "-o", out]) == 0
    assert "exp/base.jsonl: 4 records" in capsys.readouterr().out
    before = (tmp_path / "runs" / "exp" / "base.jsonl").read_bytes()

    assert main(["import", "mlflow", store, "-o", out]) == 0

    said = capsys.readouterr().out
    assert said.count("already imported") == 2
    assert (tmp_path / "runs" / "exp" / "base.jsonl").read_bytes() == before


def test_a_folder_that_is_no_store_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("no runs")

    status = main(["import", "mlflow", str(tmp_path / "notes"), "-o", str(tmp_path / "r")])

    assert status == 1
    assert "is not an MLflow tracking folder: no <experiment>/meta.yaml" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["a.txt"]  # not written to
    assert not (tmp_path / "r").exists()


def test_a_database_that_is_not_mlflows_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE things (x)")
    before = path.read_bytes()

    with pytest.raises(MlflowImportError, match="not MLflow's"):
        import_mlflow(f"sqlite:///{path}", tmp_path / "runs")

    assert path.read_bytes() == before
    with pytest.raises(MlflowImportError, match="is no file"):
        import_mlflow(f"sqlite:///{tmp_path / 'missing.db'}", tmp_path / "runs")
    assert not (tmp_path / "missing.db").exists()


def test_a_store_mlflow_refuses_imports_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    write_runs()
    (meta,) = [p for p in (tmp_path / "mlruns").glob("*/*/meta.yaml") if "broken" in p.read_text()]
    meta.write_text("run_id: [this is not\n  a meta.yaml: of any version\n")

    with pytest.raises(MlflowImportError, match="MLflow cannot read"):
        import_mlflow(tmp_path / "mlruns", tmp_path / "runs")

    assert not (tmp_path / "runs").exists()


def test_an_old_database_schema_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    import sqlite3

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    write_runs()
    # a copy: this process's MLflow keeps the store it wrote with (its schema checked then)
    old = tmp_path / "old.db"
    old.write_bytes((tmp_path / "mlflow.db").read_bytes())
    with sqlite3.connect(old) as db:
        db.execute("UPDATE alembic_version SET version_num = '451aebb31d03'")  # MLflow 1.0's
    uri = f"sqlite:///{old}"

    with pytest.raises(MlflowImportError, match="out-of-date database schema"):
        import_mlflow(uri, tmp_path / "runs")

    assert not (tmp_path / "runs").exists()


def test_a_name_two_runs_share_gets_their_ids_and_odd_tags_stay_in_run_info(
    store: str, tmp_path: Path
) -> None:
    mlflow.set_experiment("exp")
    ids = []
    for _ in range(2):
        with mlflow.start_run(run_name="twin") as run:
            mlflow.set_tag("why", "a tag with spaces")
            ids.append(run.info.run_id)

    results = import_mlflow(store, tmp_path / "runs")

    assert sorted(r.path.name for r in results) == sorted(f"twin-{i[:8]}.jsonl" for i in ids)
    for result in results:
        assert result.skipped == {"tags (not a runlines tag: in run_info only)": 1}
        (info,) = records(result.path, "run_info")
        assert info["tags"]["why"] == "a tag with spaces"
    assert list(runlines.runs(tmp_path / "runs" / "exp")["tags"].map(list)) == [[], []]
