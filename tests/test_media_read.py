"""runlines.media() and histograms(): media records read back; their numbers are no metrics."""

from __future__ import annotations

import contextlib
import io
import json
import os
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import runlines
from _optional import needs
from runlines import Run
from runlines.cli import main
from runlines.cli._top import Top
from runlines.errors import FieldError
from test_media_write import QUIET, RGB, decode_png

MEDIA_FIELDS = {
    "width", "height", "channels", "count", "min", "max", "mean", "std", "nan", "posinf",
    "neginf", "rows", "chars", "sample_rate", "frames", "index", "bytes",
}  # fmt: skip


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def gallery(folder: Path, name: str = "gallery") -> Path:
    """A run with a loss and every media kind at steps 1 and 2; return its log."""
    with Run(name, folder, **QUIET) as run:
        for step in (1, 2):
            run.log("train_step", step=step, loss=1 / step)
            run.image("samples", RGB, step=step, caption=f"step {step}")
            run.histogram("weights", np.arange(10.0) * step, step=step, bins=5)
            run.table("preds", [{"id": 1, "score": 0.5}], step=step)
            run.text("sample", f"text {step}", step=step)
            run.audio("clip", np.zeros(16), 8000, step=step)
    return run.path


# -- media() -----------------------------------------------------------------------------------


def test_media_lists_every_record_with_its_absolute_path(tmp_path: Path) -> None:
    log = gallery(tmp_path)

    frame = runlines.media(tmp_path)

    assert list(frame.columns[:7]) == ["ts", "event", "run", "name", "step", "kind", "path"]
    assert sorted(frame["kind"].unique()) == ["audio", "histogram", "image", "table", "text"]
    assert (frame["event"] == frame["kind"]).all()
    assert len(frame) == 10
    files = frame[frame["kind"].isin(["image", "table", "audio"])]
    for path, digest in zip(files["path"], files["sha256"], strict=True):
        assert os.path.isabs(path)
        assert Path(path).is_relative_to(log.parent / "gallery.artifacts" / "media")
        assert runlines.artifacts.hash_path(path) == digest
    inline = frame[frame["kind"].isin(["histogram", "text"])]
    assert inline["path"].isna().all()


def test_images_read_back_pixel_exact_with_width_height_and_caption(tmp_path: Path) -> None:
    gallery(tmp_path)

    images = runlines.media(tmp_path, kind="image")

    assert images[["step", "width", "height", "caption"]].to_dict("records") == [
        {"step": 1, "width": 30, "height": 20, "caption": "step 1"},
        {"step": 2, "width": 30, "height": 20, "caption": "step 2"},
    ]
    for path in images["path"]:
        assert np.array_equal(decode_png(Path(path).read_bytes()), RGB)


def test_kind_and_name_filter_and_a_bad_kind_is_refused(tmp_path: Path) -> None:
    gallery(tmp_path)

    assert set(runlines.media(tmp_path, kind=["text", "audio"])["kind"]) == {"text", "audio"}
    assert list(runlines.media(tmp_path, name="sample")["text"]) == ["text 1", "text 2"]
    empty = runlines.media(tmp_path, kind="image", name="nothing")
    assert empty.empty
    assert list(empty.columns) == ["ts", "event", "run", "name", "step", "kind", "path"]
    with pytest.raises(FieldError, match=r"kind 'imag' is no media kind \(did you mean 'image'"):
        runlines.media(tmp_path, kind="imag")


def test_a_run_without_media_gives_no_rows(tmp_path: Path) -> None:
    with Run("plain", tmp_path, **QUIET) as run:
        run.log("train_step", step=1, loss=0.5)

    assert runlines.media(tmp_path).empty
    assert runlines.histograms(tmp_path).empty


def test_a_resume_supersedes_the_media_of_the_steps_it_rewrote(tmp_path: Path) -> None:
    with Run("job", tmp_path, **QUIET) as run:
        for step in (1, 2, 3):
            run.image("samples", RGB, step=step, caption=f"first {step}")
        run.log("train_step", step=3, loss=1.0)
    with Run("job", tmp_path, resume="allow", resume_step=1, **QUIET) as run:
        run.image("samples", RGB[:, :, :1], step=2, caption="second 2")

    images = runlines.media(tmp_path, kind="image")

    assert images[["step", "caption"]].to_dict("records") == [
        {"step": 1, "caption": "first 1"},
        {"step": 2, "caption": "second 2"},
    ]


def test_two_folders_with_one_run_name_are_labelled_by_path(tmp_path: Path) -> None:
    gallery(tmp_path / "exp1", "base")
    gallery(tmp_path / "exp2", "base")

    frame = runlines.media(tmp_path / "exp1", tmp_path / "exp2", kind="image")

    assert sorted(set(frame["run"])) == ["exp1/base", "exp2/base"]
    for run, path in zip(frame["run"], frame["path"], strict=True):
        assert f"/{run}.artifacts/" in path


# -- histograms() ------------------------------------------------------------------------------


def _ranks(folder: Path, parts: list[np.ndarray], bins: Any) -> None:
    runs = []
    for rank in range(len(parts)):
        with environ(RANK=str(rank), WORLD_SIZE=str(len(parts)), LOCAL_RANK=str(rank)):
            runs.append(Run("dist", folder, **QUIET))
    for step in (1, 2):
        for run, values in zip(runs, parts, strict=True):
            run.histogram("grads", values * step, step=step, bins=bins)
    for run in runs:
        run.close()


def test_histograms_give_one_row_per_run_name_and_step(tmp_path: Path) -> None:
    gallery(tmp_path)

    table = runlines.histograms(tmp_path)

    assert table[["run", "name", "step"]].to_dict("records") == [
        {"run": "gallery", "name": "weights", "step": 1},
        {"run": "gallery", "name": "weights", "step": 2},
    ]
    counts, edges = np.histogram(np.arange(10.0) * 2, 5)
    assert table["counts"][1] == counts.tolist()
    assert table["edges"][1] == edges.tolist()


def test_a_rank_merge_with_shared_edges_equals_the_histogram_of_all_values(
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(1)
    parts = [rng.standard_normal(n) for n in (1000, 700, 300)]
    parts[1][:5] = np.nan
    edges = np.linspace(-4, 4, 33)
    _ranks(tmp_path, parts, edges)

    per_rank = runlines.histograms(tmp_path)
    merged = runlines.histograms(tmp_path, merge_ranks=True)

    assert sorted(set(per_rank["rank"])) == [0, 1, 2]
    assert len(per_rank) == 6
    assert len(merged) == 2
    for row in merged.to_dict("records"):
        every = np.concatenate(parts) * row["step"]
        finite = every[np.isfinite(every)]
        assert row["exact"] is True
        assert row["ranks"] == 3
        assert row["counts"] == np.histogram(finite, edges)[0].tolist()
        assert row["edges"] == edges.tolist()
        assert (row["count"], row["nan"]) == (finite.size, 5)
        assert (row["min"], row["max"]) == (finite.min(), finite.max())
        assert row["mean"] == pytest.approx(finite.mean())
        assert row["std"] == pytest.approx(finite.std())


def test_a_rank_merge_with_different_edges_spreads_counts_and_says_so(tmp_path: Path) -> None:
    parts = [np.linspace(0, 1, 100), np.linspace(2, 3, 50)]
    _ranks(tmp_path, parts, 10)

    merged = runlines.histograms(tmp_path, merge_ranks=True)

    row = merged.to_dict("records")[0]
    assert row["exact"] is False
    assert len(row["counts"]) == 10
    assert (row["edges"][0], row["edges"][-1]) == (0.0, 3.0)
    assert sum(row["counts"]) == pytest.approx(150)
    assert row["counts"][0] == pytest.approx(100 * 0.3)  # rank 0's bins lie in [0, 1]
    assert row["count"] == 150


# -- media's numbers are no metrics, in any view -----------------------------------------------


def _leaked(keys: Any) -> list[str]:
    """Return the keys that name a media event's field as a metric (`image.width`...)."""
    return sorted(
        str(k)
        for k in keys
        if str(k).split(".", 1)[0] in runlines._layout.MEDIA_EVENTS
        or str(k).rsplit(".", 1)[-1] in MEDIA_FIELDS
    )


def test_runs_ls_show_and_top_state_no_media_field_as_a_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = gallery(tmp_path)

    table = runlines.runs(tmp_path)
    assert "train_step.loss" in table.columns
    assert _leaked(table.columns) == []
    capsys.readouterr()
    assert main(["ls", "--json", str(tmp_path)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert _leaked(row) == []
    assert main(["show", "--json", str(log)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(m["event"], m["field"]) for m in shown["last"]] == [("train_step", "loss")]
    top = Top([tmp_path])
    top.refresh()
    for one in top.rows():
        assert _leaked([one.metric or "", *(key for key, _ in one.last)]) == []


def test_show_counts_media_by_kind_and_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = gallery(tmp_path)

    assert main(["show", str(log)]) == 0
    out = capsys.readouterr().out
    assert main(["show", "--json", str(log)]) == 0
    shown = json.loads(capsys.readouterr().out)

    section = out[out.index("\nmedia\n") + 1 :].split("\n\n")[0].splitlines()
    assert section[1].split() == ["KIND", "NAME", "COUNT"]
    assert [line.split() for line in section[2:]] == [
        ["audio", "clip", "2"],
        ["histogram", "weights", "2"],
        ["image", "samples", "2"],
        ["table", "preds", "2"],
        ["text", "sample", "2"],
    ]
    assert {(m["kind"], m["name"]): m["count"] for m in shown["media"]}[("image", "samples")] == 2


def test_compare_leaves_media_out_unless_its_event_is_named(tmp_path: Path) -> None:
    gallery(tmp_path)

    with pytest.raises(FieldError, match=r"'mean' is only in runlines' own records \(histogram\)"):
        runlines.compare(tmp_path, metric="mean")
    means = runlines.compare(tmp_path, metric="mean", event="histogram")
    assert means["gallery"].tolist() == [4.5, 9.0]
    assert list(runlines.compare(tmp_path, metric="loss").columns) == ["gallery"]  # one event


def test_the_dashboard_charts_no_media_field(tmp_path: Path) -> None:
    gallery(tmp_path)
    from runlines.dashboard import Server

    with Server(tmp_path, port=0) as server:
        server.store.catch_up(1 << 30)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = _get(server.url, "/api/runs")
            detail = _get(server.url, "/api/run?run=gallery")
            series = _get(server.url, "/api/series?run=gallery")

    (row,) = rows
    assert "train_step.loss" in row
    assert _leaked(row) == []
    assert _leaked(detail["row"]) == []
    charted = _series_names(series)
    assert "train_step.loss" in charted
    assert _leaked(charted) == []


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base.rstrip("/") + path, timeout=30) as answer:
        return json.loads(answer.read())


def _series_names(answer: Any) -> list[str]:
    """Return the `<event>.<field>` of each series a /api/series answer charts."""
    return [f"{one['event']}.{one['field']}" for one in answer["series"]]


@needs("PIL")
def test_a_jpeg_reads_back_with_its_format(tmp_path: Path) -> None:
    with Run("jpg", tmp_path, **QUIET) as run:
        run.image("photo", RGB[:, :, :3], step=1, format="jpeg")

    (row,) = runlines.media(tmp_path).to_dict("records")

    assert (row["format"], row["width"], row["height"]) == ("jpeg", 30, 20)
    assert Path(row["path"]).suffix == ".jpg"
    from PIL import Image

    with Image.open(io.BytesIO(Path(row["path"]).read_bytes())) as image:
        assert image.size == (30, 20)


def test_media_frames_are_pandas(tmp_path: Path) -> None:
    gallery(tmp_path)

    assert isinstance(runlines.media(tmp_path), pd.DataFrame)
    assert isinstance(runlines.histograms(tmp_path, merge_ranks=True), pd.DataFrame)
