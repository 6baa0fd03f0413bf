"""`runlines import wandb`: a run of the real wandb (offline) imported, against the drop-in
running the same script: the same values at the same steps."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import runlines
from _optional import skip_without
from compat._wandb_files import child_env, history
from runlines.cli import main
from runlines.reading import iter_events

skip_without("wandb")

from runlines.importers.wandb import WandbImportError, import_wandb  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

OWN = ("ts", "event", "run", "step")


# Training code written for wandb: steps, a commit=False, a given step, a summary, tags.
SCRIPT = """
import wandb
run = wandb.init(project="proj", name="same", dir=".", config={"lr": 0.1, "layers": 3},
                 tags=["baseline", "v2"], notes="first try")
for step in range(4):
    wandb.log({"train/loss": 1.0 / (step + 1), "lr": 0.1 * step})
wandb.log({"eval/acc": 0.5}, commit=False)
wandb.log({"eval/loss": 0.25})
wandb.log({"train/loss": 0.1, "train/grad": 2.0}, step=9)
wandb.summary["best"] = 3
run.finish()
"""


def run_script(directory: Path, wandb: str) -> None:
    """Run SCRIPT in its own process in *directory*, `import wandb` giving module *wandb*.

    Its own process: the run's file is whole once wandb's service has ended with it (in this
    process, finish() may return before wandb-core has written the file).
    """
    directory.mkdir(parents=True)
    code = SCRIPT.replace("import wandb", f"import {wandb} as wandb")
    env = child_env(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(directory))
    subprocess.run([sys.executable, "-c", code], cwd=directory, env=env, check=True)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real wandb's and the drop-in's runs of SCRIPT: `real/` and `dropin/`."""
    root = tmp_path_factory.mktemp("wandb-runs")
    run_script(root / "real", "wandb")
    run_script(root / "dropin", "runlines.compat.wandb")
    return root


@pytest.fixture
def real(written: Path, tmp_path: Path) -> Path:
    """A copy of the real wandb's offline run folder of SCRIPT (a test may damage it)."""
    copy = tmp_path / "real"
    shutil.copytree(written / "real", copy, symlinks=True)
    return run_dir(copy)


@pytest.fixture
def dropin_log(written: Path) -> Path:
    return written / "dropin" / "proj" / "same.jsonl"


def run_dir(directory: Path) -> Path:
    (found,) = (directory / "wandb").glob("offline-run-*")
    return found


def values(log: Path) -> list[tuple[str, int, str, Any]]:
    return sorted(
        (r["event"], r["step"], key, value)
        for r in iter_events(log)
        if r["event"] in ("train", "eval", "metrics")
        for key, value in r.items()
        if key not in OWN
    )


def records(log: Path, event: str) -> list[dict[str, Any]]:
    return [r for r in iter_events(log) if r["event"] == event]


def test_the_import_has_the_drop_ins_values_at_the_same_steps(
    real: Path, dropin_log: Path, tmp_path: Path
) -> None:
    (result,) = import_wandb(real, tmp_path / "runs")

    assert result.path == tmp_path / "runs" / "proj" / "same.jsonl"
    imported = values(result.path)
    assert imported == values(dropin_log)
    assert ("train", 9, "grad", 2.0) in imported
    assert len(imported) == 12


def test_records_keep_the_runs_times(real: Path, tmp_path: Path) -> None:
    (result,) = import_wandb(real, tmp_path / "runs")

    rows = history(real)
    times = {row["_step"]: row["_timestamp"] for row in rows}
    for record in records(result.path, "train"):
        assert record["ts"] == times[record["step"]]
    (start,) = records(result.path, "run_start")
    assert start["ts"] <= min(times.values())
    (end,) = records(result.path, "run_end")
    assert (end["status"], end["ts"]) == ("ok", max(times.values()))


def test_config_summary_tags_and_notes_are_the_drop_ins(
    real: Path, dropin_log: Path, tmp_path: Path
) -> None:
    (result,) = import_wandb(real, tmp_path / "runs")

    ours = runlines.runs(tmp_path / "runs" / "proj").iloc[0]
    theirs = runlines.runs(dropin_log.parent).iloc[0]
    for column in ("config.lr", "config.layers", "metrics.best", "train.loss", "eval.acc"):
        assert ours[column] == theirs[column], column
    assert list(ours["tags"]) == list(theirs["tags"]) == ["baseline", "v2"]
    assert list(ours["notes"]) == list(theirs["notes"]) == ["first try"]
    (summary,) = records(result.path, "summary")
    (dropped_in,) = records(dropin_log, "summary")
    assert summary["values"] == dropped_in["values"] == {"metrics.best": 3}
    (start,) = records(result.path, "run_start")
    assert start["imported_from"]["tool"] == "wandb"
    assert len(start["imported_from"]["sha256"]) == 64


def test_importing_twice_is_a_no_op_and_says_so(
    real: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "runs")
    assert main(["import", "wandb", str(real), "-o", out]) == 0
    assert "proj/same.jsonl: 10 records" in capsys.readouterr().out
    before = (tmp_path / "runs" / "proj" / "same.jsonl").read_bytes()

    assert main(["import", "wandb", str(tmp_path / "real" / "wandb"), "-o", out]) == 0

    assert "already imported" in capsys.readouterr().out
    assert (tmp_path / "runs" / "proj" / "same.jsonl").read_bytes() == before


def flip_a_byte(data: bytes) -> bytes:
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # a crc fails
    return bytes(flipped)


@pytest.mark.parametrize(
    ("damage", "said"),
    [(flip_a_byte, "corrupt"), (lambda data: data[:-3], "incomplete"), (lambda _: b"x" * 64, "")],
    ids=["flipped-byte", "truncated", "not-a-run-file"],
)
def test_a_damaged_run_file_imports_nothing(
    real: Path, tmp_path: Path, damage: Any, said: str
) -> None:
    (file,) = real.glob("*.wandb")
    file.write_bytes(damage(file.read_bytes()))

    with pytest.raises(WandbImportError, match=f"wandb's reader .* refuses .*{said}"):
        import_wandb(real, tmp_path / "runs")

    assert not (tmp_path / "runs").exists()


def test_a_folder_without_a_run_file_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()

    status = main(["import", "wandb", str(tmp_path / "empty"), "-o", str(tmp_path / "r")])

    assert status == 1
    assert "no W&B run file (*.wandb) in" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
