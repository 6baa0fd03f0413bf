"""The dashboard's /api/console: a run's captured console, its tail paged back, and searches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from _serve_helpers import Client

import runlines
from runlines import Run
from runlines.dashboard import Server

QUIET: dict[str, Any] = {"stdout": False, "system": False, "capture": False}
LINES = 450
_SRC = str(Path(runlines.__file__).resolve().parents[1])


def _console_text() -> str:
    lines = [f"{1796231348 + n / 1000:.3f} out step {n} loss {n / 100:.2f}\n" for n in range(LINES)]
    lines[100] = "1796231348.100 err \x1b[31mCUDA error\x1b[0m: out of memory\n"
    lines[300] = "1796231348.300 err NCCL WARN Cuda failure 'out of memory'\n"
    return "".join(lines)


@pytest.fixture(name="served")
def _served(serve_dir: Path) -> Any:
    for name in ("captured", "plain"):
        with Run(name, serve_dir, **QUIET) as run:
            run.log("train_step", step=1, loss=0.5)
    (serve_dir / "captured.console.log").write_text(_console_text() + "1796231349.000 out torn")
    (serve_dir / "secret.txt").write_text("not a console")
    with Server(serve_dir, port=0) as server:
        server.store.catch_up(1 << 30)
        yield Client(server)


def test_the_tail_is_the_last_lines_paged_back_by_offset(served: Client) -> None:
    last = served.json("/api/console?run=captured&limit=200")
    earlier = served.json(f"/api/console?run=captured&limit=200&before={last['start']}")
    first = served.json(f"/api/console?run=captured&limit=200&before={earlier['start']}")

    texts = [line["text"] for page in (first, earlier, last) for line in page["lines"]]
    assert [len(p["lines"]) for p in (first, earlier, last)] == [50, 200, 200]
    assert texts[0] == "step 0 loss 0.00"
    assert texts[-1] == "step 449 loss 4.49"  # the torn line, still being written, is not shown
    assert len(texts) == LINES
    assert (last["more"], earlier["more"], first["more"]) == (True, True, False)
    assert first["start"] == 0
    assert last["lines"][-1] == {
        "offset": last["lines"][-1]["offset"],
        "ts": 1796231348.449,
        "stream": "out",
        "text": "step 449 loss 4.49",
    }
    assert last["captured"] is True
    assert last["path"].endswith("captured.console.log")


def test_a_search_finds_lines_case_blind_through_colours_with_time_and_stream(
    served: Client,
) -> None:
    found = served.json("/api/console?run=captured&q=" + quote("cuda ERROR: OUT"))
    both = served.json("/api/console?run=captured&q=out+of+memory")
    errors = served.json("/api/console?run=captured&stream=err")

    assert [(line["ts"], line["stream"]) for line in found["lines"]] == [(1796231348.1, "err")]
    assert found["lines"][0]["text"] == "\x1b[31mCUDA error\x1b[0m: out of memory"  # as printed
    assert found["matches"] == 1
    assert [line["ts"] for line in both["lines"]] == [1796231348.1, 1796231348.3]
    assert errors["matches"] == 2
    assert served.json("/api/console?run=captured&q=step")["matches"] == LINES - 2


def test_a_search_pages_back_and_takes_a_regular_expression(served: Client) -> None:
    last = served.json("/api/console?run=captured&q=" + quote("^step \\d+5 ") + "&regex=1&limit=10")
    before = served.json(
        "/api/console?run=captured&q="
        + quote("^step \\d+5 ")
        + f"&regex=1&limit=10&before={last['start']}"
    )

    assert last["matches"] == 44  # 15, 25, ... 445: not 5
    assert [line["text"].split()[1] for line in last["lines"]] == [
        str(n) for n in range(355, 446, 10)
    ]
    assert last["more"] is True
    assert before["lines"][-1]["text"].startswith("step 345 ")


def test_a_bad_pattern_or_number_is_a_400_that_says_what_to_fix(served: Client) -> None:
    status, _, body = served.request("/api/console?run=captured&q=%28unclosed&regex=1")
    assert status == 400
    assert "not a valid regular expression" in json.loads(body)["error"]
    assert "leave out ?regex=1" in json.loads(body)["error"]

    for query in ("limit=0", "limit=x", "limit=99999", "before=-1", "stream=both", "regex=yes"):
        status, _, body = served.request(f"/api/console?run=captured&{query}")
        assert status == 400, query
        assert "?" + query.split("=")[0] + "=" in json.loads(body)["error"]


def test_only_a_known_runs_own_console_is_read(served: Client, serve_dir: Path) -> None:
    plain = served.json("/api/console?run=plain")
    status, _, body = served.request("/api/console?run=secret")
    path_status, _, _ = served.request("/api/console?run=../secret.txt")
    (serve_dir / "plain.console.log").symlink_to(serve_dir / "secret.txt")
    link_status, _, link_body = served.request("/api/console?run=plain")

    assert (plain["captured"], plain["lines"], plain["more"]) == (False, [], False)
    assert status == 404
    assert "GET /api/runs lists the runs" in json.loads(body)["error"]
    assert path_status == 404
    assert link_status == 403
    assert b"not a console" not in link_body


def test_a_captured_job_s_console_is_served(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        textwrap.dedent(
            """
            import os, sys
            from runlines import Run
            with Run("job", sys.argv[1], console_capture=True, stdout=False, system=False) as run:
                print("<b>hello</b>", flush=True)
                run.log("train_step", step=1, loss=0.5)
                os.write(2, b"a warning\\n")
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_SRC, os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, check=True, timeout=60)

    with Server(tmp_path, port=0) as server:
        answer = Client(server).json("/api/console?run=job")

    assert [(line["stream"], line["text"]) for line in answer["lines"]] == [
        ("out", "<b>hello</b>"),
        ("err", "a warning"),
    ]
