"""The dashboard's /api/media: a run's media records; their files only through /api/artifact."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runlines import Run
from runlines.dashboard import Server

QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
PIXELS = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)


def _get(server: Server, path: str) -> bytes:
    with urllib.request.urlopen(server.url.rstrip("/") + path, timeout=30) as answer:
        data: bytes = answer.read()
        return data


@pytest.fixture(name="served")
def _served(tmp_path: Path) -> Any:
    with Run("gallery", tmp_path, **QUIET) as run:
        for step in (1, 2):
            run.image("samples", PIXELS, step=step, caption=f"step {step}")
            run.histogram("weights", [1.0, 2.0, 3.0], step=step, bins=3)
    (tmp_path / "secret.txt").write_text("not a media file")
    with Server(tmp_path, port=0) as server:
        server.store.catch_up(1 << 30)
        yield server, run


def test_api_media_lists_a_runs_media_records_by_kind_and_name(served: Any) -> None:
    server, _ = served

    every = json.loads(_get(server, "/api/media?run=gallery"))
    images = json.loads(_get(server, "/api/media?run=gallery&kind=image&name=samples"))

    assert [(m["event"], m["step"]) for m in every["media"]] == [
        ("image", 1), ("histogram", 1), ("image", 2), ("histogram", 2),
    ]  # fmt: skip
    assert [m["caption"] for m in images["media"]] == ["step 1", "step 2"]
    assert every["media"][1]["counts"] == [1, 1, 1]


def test_an_image_a_record_points_to_is_served_and_nothing_else(served: Any) -> None:
    server, run = served
    image = json.loads(_get(server, "/api/media?run=gallery&kind=image"))["media"][0]

    data = _get(server, f"/api/artifact?run=gallery&path={urllib.parse.quote(image['path'])}")

    assert data == (run.directory / image["path"]).read_bytes()
    for path in ("secret.txt", "../secret.txt", "gallery.jsonl"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _get(server, f"/api/artifact?run=gallery&path={urllib.parse.quote(path)}")
        assert refused.value.code == 404
        refused.value.close()


def test_since_answers_only_the_records_a_page_does_not_have(tmp_path: Path) -> None:
    with Run("live", tmp_path, **QUIET) as run, Server(tmp_path, port=0) as server:
        run.image("samples", PIXELS, step=1)
        server.store.catch_up(1 << 30)
        first = json.loads(_get(server, "/api/media?run=live"))
        run.image("samples", PIXELS, step=2)
        run.histogram("weights", [1.0], step=2)
        server.store.catch_up(1 << 30)

        more = json.loads(_get(server, f"/api/media?run=live&since=1&epoch={first['epoch']}"))
        other_epoch = json.loads(_get(server, "/api/media?run=live&since=1&epoch=99"))
        past_the_end = json.loads(
            _get(server, f"/api/media?run=live&since=9&epoch={first['epoch']}")
        )

    assert (first["from"], first["total"], len(first["media"])) == (0, 1, 1)
    assert (more["from"], more["total"]) == (1, 3)
    assert [(m["event"], m["step"]) for m in more["media"]] == [("image", 2), ("histogram", 2)]
    assert (other_epoch["from"], len(other_epoch["media"])) == (0, 3)
    assert (past_the_end["from"], len(past_the_end["media"])) == (0, 3)
