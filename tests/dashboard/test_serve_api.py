"""The dashboard's JSON API over plain HTTP: the run table, series, a run's page, diff, safety."""

from __future__ import annotations

import http.client
import json
import os
import tracemalloc
import types
from pathlib import Path
from typing import Any

import pytest
from _serve_helpers import Client, png_bytes

from _logs import T0, line, train, write
from runlines import Run
from runlines.cli import main
from runlines.dashboard import Server
from runlines.dashboard._http import DashboardServer
from runlines.dashboard._series import unit_of
from runlines.errors import NonfiniteWarning


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


class TestRuns:
    def test_lists_each_run_with_status_config_and_metrics_of_one_event(
        self, serve_dir: Path, client: Client
    ) -> None:
        with Run("base", serve_dir, stdout=False, config={"optim": {"lr": 0.1}}) as run:
            run.log("train_step", step=1, loss=0.5)
            run.log("train_step", step=2, loss=0.3)
            run.log("eval", step=2, loss=0.9, accuracy=0.7)
        write(serve_dir / "crashed.jsonl", line("run_start", "crashed", attempt=1))

        rows = {row["run"]: row for row in client.json("/api/runs")}

        assert set(rows) == {"base", "crashed"}
        base = rows["base"]
        assert base["status"] == "ok"
        assert base["attempts"] == 1
        assert base["step"] == 2
        assert base["config.optim.lr"] == 0.1
        assert base["train_step.loss"] == 0.3
        assert base["eval.loss"] == 0.9  # never mixed with the train loss
        assert base["train_step.loss.best"] == 0.3
        assert base["eval.accuracy.best"] == 0.7
        assert base["path"] == str(serve_dir / "base.jsonl")
        assert rows["crashed"]["status"] == "died"

    def test_same_name_in_two_folders_are_two_runs_labelled_by_path(
        self, serve_dir: Path, client: Client
    ) -> None:
        train(serve_dir / "exp1", "baseline", range(1, 3))
        train(serve_dir / "exp2", "baseline", range(1, 5))

        rows = {row["run"]: row for row in client.json("/api/runs")}

        assert set(rows) == {"exp1/baseline", "exp2/baseline"}
        assert rows["exp1/baseline"]["step"] == 2
        assert rows["exp2/baseline"]["step"] == 4

    def test_a_name_found_twice_later_renames_the_run_found_first(
        self, serve_dir: Path, client: Client
    ) -> None:
        train(serve_dir / "exp1", "baseline", range(1, 3))
        first = [row["run"] for row in client.json("/api/runs")]
        train(serve_dir / "exp2", "baseline", range(1, 5))

        rows = {row["run"]: row for row in client.json("/api/runs")}
        page = client.json("/api/run?run=exp1/baseline")

        assert first == ["baseline"]
        assert set(rows) == {"exp1/baseline", "exp2/baseline"}  # as runlines.runs() says
        assert rows["exp1/baseline"]["step"] == 2
        assert page["row"]["run"] == "exp1/baseline"

    def test_a_live_run_is_running_and_its_row_grows(
        self, serve_dir: Path, server: Server, client: Client
    ) -> None:
        with Run("live", serve_dir, stdout=False) as run:
            run.log("train_step", step=1, loss=1.0)
            first = client.json("/api/runs")[0]
            run.log("train_step", step=2, loss=0.5)
            second = client.json("/api/runs")[0]

        assert (first["status"], first["step"]) == ("running", 1)
        assert (second["status"], second["step"]) == ("running", 2)

    def test_a_deleted_run_leaves_the_table_and_its_pages_answer_404(
        self, serve_dir: Path, client: Client
    ) -> None:
        train(serve_dir, "kept", range(1, 3))
        gone = train(serve_dir, "gone", range(1, 3))
        assert len(client.json("/api/runs")) == 2

        gone.unlink()
        rows = client.json("/api/runs")
        answers = [
            client.request(path)[0]
            for path in ("/api/run?run=gone", "/api/series?run=gone", "/api/diff?a=kept&b=gone")
        ]

        assert [row["run"] for row in rows] == ["kept"]
        assert answers == [404, 404, 404]
        assert client.json("/api/run?run=kept")["row"]["status"] == "ok"

    def test_a_replaced_log_shows_the_new_run_only(self, serve_dir: Path, client: Client) -> None:
        path = train(serve_dir, "r", range(1, 26))
        assert client.json("/api/runs")[0]["step"] == 25

        path.unlink()
        train(serve_dir, "r", range(1, 21))
        detail = client.json("/api/run?run=r")
        series = client.json("/api/series?run=r")["series"]

        (loss,) = [s for s in series if s["field"] == "loss"]
        assert (detail["row"]["attempts"], detail["row"]["step"]) == (1, 20)
        assert len(detail["attempts"]) == 1
        assert loss["count"] == 20

    def test_nan_values_are_named_in_the_table(self, serve_dir: Path, client: Client) -> None:
        write(
            serve_dir / "nan.jsonl",
            line("run_start", "nan", attempt=1),
            line("train_step", "nan", step=1, loss=float("nan")),
        )

        (row,) = client.json("/api/runs")

        assert row["train_step.loss"] == "NaN"


class TestSeries:
    def test_nan_and_inf_are_marks_at_their_step(self, serve_dir: Path, client: Client) -> None:
        write(
            serve_dir / "nan.jsonl",
            line("train_step", "nan", T0, step=1, loss=1.0),
            line("train_step", "nan", T0 + 1, step=2, loss=float("nan")),
            line("train_step", "nan", T0 + 2, step=3, loss=float("inf")),
            line("train_step", "nan", T0 + 3, step=4, loss=0.5),
        )

        answer = client.json("/api/series?run=nan")

        (loss,) = [s for s in answer["series"] if s["field"] == "loss"]
        assert loss["y"] == [1.0, 0.5]
        assert loss["step"] == [1.0, 4.0]
        assert [(m["step"], m["value"]) for m in loss["marks"]] == [(2, "NaN"), (3, "Infinity")]

    def test_span_durations_and_stepless_events_are_series(
        self, serve_dir: Path, client: Client
    ) -> None:
        write(
            serve_dir / "r.jsonl",
            line("train_step", "r", step=7, loss=1.0),
            line("system", "r", gpu_util=90.0),
            line("span", "r", name="forward", duration_s=0.25, status="ok"),
        )

        answer = client.json("/api/series?run=r")

        found = {(s["event"], s["field"]): s for s in answer["series"]}
        assert set(found) == {("train_step", "loss"), ("system", "gpu_util"), ("span", "forward")}
        assert found[("system", "gpu_util")]["step"] == [7.0]  # at the last step seen
        assert found[("span", "forward")]["y"] == [0.25]

    def test_since_the_current_version_answers_unchanged(
        self, serve_dir: Path, client: Client
    ) -> None:
        train(serve_dir, "r", range(1, 4))
        version = client.json("/api/series?run=r")["version"]

        answer = client.json(f"/api/series?run=r&since={version}")

        assert answer == {
            "run": "r",
            "rank": 0,
            "version": version,
            "started": answer["started"],
            "unchanged": True,
        }

    def test_each_series_has_its_unit_and_the_events_come_in_the_order_first_logged(
        self, serve_dir: Path, client: Client
    ) -> None:
        write(
            serve_dir / "r.jsonl",
            line("run_start", "r", T0, attempt=1),
            line("zeta", "r", T0, step=1, loss=1.0, step_s=0.5, tokens_per_s=9.0),
            line("eval", "r", T0 + 1, step=1, accuracy=0.5),
            line("system", "r", T0 + 2, rss_bytes=25_300_000_000, cpu_percent=90.0),
            line("alpha", "r", T0 + 3, step=2, elapsed_sec=3.0),
            line("span", "r", T0 + 4, name="forward", duration_s=0.25),
        )

        answer = client.json("/api/series?run=r")

        assert answer["events"] == ["zeta", "eval", "system", "alpha", "span"]
        units = {f"{s['event']}.{s['field']}": s["unit"] for s in answer["series"]}
        assert units == {
            "zeta.loss": None,
            "zeta.step_s": "s",
            "zeta.tokens_per_s": None,  # a rate, no duration
            "eval.accuracy": None,
            "system.rss_bytes": "bytes",
            "system.cpu_percent": "%",
            "alpha.elapsed_sec": "s",  # an alias of duration_s, by the field vocabulary
            "span.forward": "s",
        }

    def test_unknown_run_is_404_naming_the_endpoint_that_lists_runs(self, client: Client) -> None:
        status, _, body = client.request("/api/series?run=nope")

        assert status == 404
        assert "GET /api/runs" in json.loads(body)["error"]


def test_api_units_names_the_unit_of_each_column_that_has_one(
    serve_dir: Path, client: Client
) -> None:
    write(
        serve_dir / "r.jsonl",
        line("run_start", "r", T0, attempt=1, config={"max_bytes": 5}),
        line("system", "r", T0 + 1, rss_bytes=2_000, cpu_percent=90.0, threads=3),
        line("train_step", "r", T0 + 2, step=1, loss=0.5, step_s=0.1),
    )

    units = client.json("/api/units")

    assert units == {
        "duration_s": "s",
        "system.rss_bytes": "bytes",
        "system.cpu_percent": "%",
        "train_step.step_s": "s",
    }
    assert unit_of("eval.wait_s.best") == "s"  # a best is in its field's unit
    assert unit_of("_s") is None


class TestRunPage:
    def test_each_attempt_has_its_own_status_and_duration(
        self, serve_dir: Path, client: Client
    ) -> None:
        write(
            serve_dir / "r.jsonl",
            line("run_start", "r", T0, attempt=1),
            line("train_step", "r", T0 + 4, step=1, loss=1.0),  # then killed: no run_end
            line("run_start", "r", T0 + 100, attempt=2, resume_step=1),
            line("train_step", "r", T0 + 101, step=2, loss=0.5),
            line(
                "run_end",
                "r",
                T0 + 102,
                status="failed",
                exc_type="ValueError",
                exc_message="boom",
                traceback="Traceback (most recent call last):\n  ...\nValueError: boom\n",
            ),
            line("run_start", "r", T0 + 200, attempt=3, resume_step=2),
            line("train_step", "r", T0 + 203, step=3, loss=0.25),
            line("run_end", "r", T0 + 210, status="ok"),
        )

        detail = client.json("/api/run?run=r")

        attempts = detail["attempts"]
        assert [a["status"] for a in attempts] == ["died", "failed", "ok"]
        assert [a["duration_s"] for a in attempts] == [4.0, 2.0, 10.0]
        assert sum(a["duration_s"] for a in attempts) == detail["row"]["duration_s"]
        assert attempts[1]["traceback"].endswith("ValueError: boom\n")
        assert attempts[0]["traceback"] is None

    def test_an_attempt_without_config_keeps_the_runs_and_one_with_says_what_changed(
        self, serve_dir: Path, client: Client
    ) -> None:
        first = {"lr": 0.1, "optim": {"name": "adam"}}
        write(
            serve_dir / "kept.jsonl",
            line("run_start", "kept", T0, attempt=1, config=first),
            line("run_start", "kept", T0 + 1, attempt=2, config={}),  # Run() without config=
        )
        write(
            serve_dir / "changed.jsonl",
            line("run_start", "changed", T0, attempt=1, config=first),
            line("run_start", "changed", T0 + 1, attempt=2, config={"lr": 0.2, "seed": 1}),
        )

        kept = client.json("/api/run?run=kept")
        changed = client.json("/api/run?run=changed")

        assert kept["config"] == first
        assert [a["config_given"] for a in kept["attempts"]] == [True, False]
        assert kept["attempts"][1]["config_changes"] == {}
        assert changed["config"] == {"lr": 0.2, "seed": 1}
        assert changed["attempts"][1]["config_changes"] == {
            "lr": [0.1, 0.2],
            "optim.name": ["adam", None],
            "seed": [None, 1],
        }

    def test_the_last_attempt_without_run_end_has_the_runs_status(
        self, serve_dir: Path, client: Client
    ) -> None:
        with Run("live", serve_dir, stdout=False) as run:
            run.log("train_step", step=1, loss=1.0)
            live = client.json("/api/run?run=live")["attempts"]
        write(
            serve_dir / "died.jsonl",
            line("run_start", "died", T0, attempt=1),
            line("run_end", "died", T0 + 1, status="ok"),
            line("run_start", "died", T0 + 5, attempt=2),
        )

        died = client.json("/api/run?run=died")["attempts"]

        assert [a["status"] for a in live] == ["running"]
        assert [(a["status"], a["duration_s"]) for a in died] == [("ok", 1.0), ("died", 0.0)]

    def test_config_environment_attempts_spans_artifacts_and_ranks(
        self, serve_dir: Path, client: Client
    ) -> None:
        picture = serve_dir / "sample.png"
        picture.write_bytes(png_bytes())
        with (
            pytest.raises(ValueError, match="boom"),
            Run("r", serve_dir, stdout=False, config={"lr": 0.1}) as run,
        ):
            run.log("train_step", step=1, loss=1.0)
            raise ValueError("boom")
        with Run("r", serve_dir, stdout=False, config={"lr": 0.1}, resume_step=1) as run:
            with run.span("forward"):
                run.log("train_step", step=2, loss=0.5)
            run.artifact("samples", path=picture, step=2)
        write(serve_dir / "r.rank1.jsonl", line("train_step", "r", step=2, loss=0.7, rank=1))

        detail = client.json("/api/run?run=r")

        assert detail["config"] == {"lr": 0.1}
        assert detail["environment"]["python"]
        assert [(a["attempt"], a["status"]) for a in detail["attempts"]] == [
            (1, "failed"),
            (2, "ok"),
        ]
        assert detail["attempts"][0]["exc_type"] == "ValueError"
        assert detail["attempts"][1]["resume_step"] == 1
        assert detail["spans"]["forward"]["count"] == 1
        (artifact,) = detail["artifacts"]
        assert artifact["image"] is True
        assert [(r["rank"], r["last"]["train_step.loss"]) for r in detail["ranks"]] == [
            (0, 0.5),
            (1, 0.7),
        ]
        status, headers, body = client.request(
            "/api/artifact?run=r&path=" + artifact["path"].replace("/", "%2F")
        )
        assert (status, headers["Content-Type"], body) == (200, "image/png", png_bytes())


class TestArtifactDownloads:
    SIZE = 128 << 20

    @pytest.fixture(name="checkpoint")
    def _checkpoint(self, serve_dir: Path) -> Path:
        path = serve_dir / "ckpt.bin"
        with open(path, "wb") as stream:  # sparse: costs no disk
            stream.truncate(self.SIZE - 3)
            stream.seek(self.SIZE - 3)
            stream.write(b"end")
        write(serve_dir / "r.jsonl", line("artifact", "r", name="ckpt", path="ckpt.bin"))
        return path

    def test_head_answers_the_size_from_stat_without_reading_the_file(
        self, checkpoint: Path, client: Client
    ) -> None:
        client.json("/api/runs")  # the run's records are read before the measure
        tracemalloc.start()
        try:
            status, headers, body = client.request(
                "/api/artifact?run=r&path=ckpt.bin", method="HEAD"
            )
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

        assert (status, int(headers["Content-Length"]), body) == (200, self.SIZE, b"")
        assert peak < 4 << 20

    def test_get_sends_the_file_in_blocks_of_bounded_memory(
        self, checkpoint: Path, client: Client
    ) -> None:
        client.json("/api/runs")
        connection = http.client.HTTPConnection(client.host, client.port, timeout=30)
        tracemalloc.start()
        try:
            connection.request("GET", "/api/artifact?run=r&path=ckpt.bin")
            answer = connection.getresponse()
            received, last = 0, b""
            while block := answer.read(1 << 16):
                received += len(block)
                last = block
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
            connection.close()

        assert (answer.status, int(answer.getheader("Content-Length", "0"))) == (200, self.SIZE)
        assert received == self.SIZE
        assert last.endswith(b"end")
        assert peak < 4 << 20


class TestDiff:
    def test_config_changes_and_the_first_step_where_a_metric_parts(
        self, serve_dir: Path, client: Client
    ) -> None:
        for name, lr, drift in (("a", 0.1, 0.0), ("b", 0.2, 1.0)):
            with Run(name, serve_dir, stdout=False, config={"lr": lr, "seed": 1}) as run:
                for step in range(1, 51):
                    run.log("train_step", step=step, loss=1.0 / step + (drift if step > 40 else 0))

        diff = client.json("/api/diff?a=a&b=b")

        assert diff["changed"] == {"lr": [0.1, 0.2]}
        assert diff["added"] == diff["removed"] == {}
        (loss,) = diff["metrics"]
        assert (loss["event"], loss["field"], loss["step"]) == ("train_step", "loss", 41)
        assert loss["agrees"] is False

    def test_answers_what_runlines_diff_json_prints(
        self, serve_dir: Path, client: Client, capsys: pytest.CaptureFixture[str]
    ) -> None:
        for name, loss in (("a", 1.0), ("b", float("inf"))):
            with Run(name, serve_dir, stdout=False, on_nonfinite="ignore") as run:
                run.log("train_step", step=1, loss=0.5)
                run.log("train_step", step=2, loss=loss)
        assert main(["diff", "--json", str(serve_dir / "a.jsonl"), str(serve_dir / "b.jsonl")]) == 0
        printed = json.loads(capsys.readouterr().out)

        served = client.json("/api/diff?a=a&b=b")

        assert served == printed
        assert [(m["step"], m["a"], m["b"]) for m in served["metrics"]] == [(2, 1.0, "Infinity")]


class TestBadInput:
    @pytest.mark.parametrize("rank", ["nan", "inf", "-inf", "1.5", "one"])
    def test_a_rank_that_is_no_whole_number_is_400(
        self, serve_dir: Path, client: Client, rank: str
    ) -> None:
        train(serve_dir, "r", range(1, 3))

        status, _, body = client.request(f"/api/series?run=r&rank={rank}")

        assert status == 400
        assert "?rank= must be a whole number" in json.loads(body)["error"]

    def test_a_nul_byte_in_an_artifact_path_is_400(self, serve_dir: Path, client: Client) -> None:
        write(serve_dir / "r.jsonl", line("artifact", "r", name="x", path="x\x00y.png"))

        status, _, body = client.request("/api/artifact?run=r&path=x%00y.png")

        assert status == 400
        assert "NUL" in json.loads(body)["error"]

    def test_a_tolerance_that_diff_refuses_is_400_with_its_message(
        self, serve_dir: Path, client: Client
    ) -> None:
        train(serve_dir, "a", range(1, 3))

        status, _, body = client.request("/api/diff?a=a&b=a&atol=-inf")

        assert status == 400
        assert "atol must be a finite number >= 0" in json.loads(body)["error"]

    def test_a_run_deleted_while_its_diff_is_read_is_404(
        self, serve_dir: Path, client: Client, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from runlines import reading

        train(serve_dir, "a", range(1, 3))
        gone = train(serve_dir, "b", range(1, 3))
        real = reading.diff

        def delete_then_diff(*args: Any, **options: Any) -> Any:
            gone.unlink()
            return real(*args, **options)

        monkeypatch.setattr("runlines.reading.diff", delete_then_diff)
        status, _, body = client.request("/api/diff?a=a&b=b")

        assert status == 404
        assert "run 'b' was deleted" in json.loads(body)["error"]


class TestSafety:
    def test_paths_outside_the_static_files_and_the_artifacts_are_refused(
        self, tmp_path: Path, serve_dir: Path, client: Client
    ) -> None:
        (tmp_path / "secret.txt").write_text("secret")
        train(serve_dir, "r", range(1, 3))

        answers = [
            client.request(path)[0]
            for path in (
                "/static/../../secret.txt",
                "/static/%2e%2e/%2e%2e/secret.txt",
                "/static/vendor/../../../secret.txt",
                "/api/artifact?run=r&path=../secret.txt",
                "/api/artifact?run=r&path=/etc/passwd",
                "/../secret.txt",
            )
        ]

        assert answers == [404, 404, 404, 404, 404, 404]

    def test_a_symlink_that_leads_out_of_the_sources_is_refused(
        self, tmp_path: Path, serve_dir: Path, client: Client
    ) -> None:
        outside = train(tmp_path / "elsewhere", "private", range(1, 3))
        (serve_dir / "private.jsonl").symlink_to(outside)
        secret = tmp_path / "secret.png"
        secret.write_bytes(png_bytes())
        picture = serve_dir / "pic.png"
        picture.write_bytes(png_bytes())
        with Run("r", serve_dir, stdout=False) as run:
            run.artifact("pic", path=picture)
        picture.unlink()
        picture.symlink_to(secret)  # the registered file now leads out of the sources

        runs = [row["run"] for row in client.json("/api/runs")]
        status, _, _ = client.request("/api/artifact?run=r&path=pic.png")

        assert runs == ["r"]
        assert status == 403

    def test_an_artifact_record_naming_a_file_outside_the_sources_is_refused(
        self, tmp_path: Path, serve_dir: Path, client: Client
    ) -> None:
        (tmp_path / "secret.png").write_bytes(png_bytes())
        write(serve_dir / "r.jsonl", line("artifact", "r", name="x", path="../secret.png"))

        status, _, body = client.request("/api/artifact?run=r&path=../secret.png")

        assert status == 403
        assert b"inside the served folders" in body

    def test_the_server_is_read_only(self, serve_dir: Path, client: Client) -> None:
        train(serve_dir, "r", range(1, 3))
        before = _snapshot(serve_dir)

        methods = [client.request("/api/runs", method=m)[0] for m in ("POST", "PUT", "DELETE")]
        for path in ("/", "/api/runs", "/api/series?run=r", "/api/run?run=r", "/api/diff?a=r&b=r"):
            assert client.request(path)[0] == 200

        assert methods == [405, 405, 405]
        assert _snapshot(serve_dir) == before

    def test_a_host_header_naming_another_site_is_refused_on_loopback(self, client: Client) -> None:
        status, _, body = client.request("/api/runs", headers={"Host": "evil.example:8000"})

        assert status == 403
        assert "127.0.0.1" in json.loads(body)["error"]

    def test_any_loopback_address_serves_the_url_it_prints(self, serve_dir: Path) -> None:
        train(serve_dir, "r", range(1, 3))
        with Server(serve_dir, host="127.0.0.2", port=0) as server:
            status, _, _ = Client(server).request("/api/runs")

        assert server.url.startswith("http://127.0.0.2:")
        assert status == 200

    def test_a_refused_host_is_told_the_address_the_server_listens_on(
        self, server: Server, client: Client
    ) -> None:
        status, _, body = client.request("/api/runs", headers={"Host": "localhost.evil.example"})

        assert status == 403
        assert server.url.removesuffix("/") in json.loads(body)["error"]

    def test_off_loopback_every_request_needs_the_token_from_the_url(self, serve_dir: Path) -> None:
        train(serve_dir, "r", range(1, 3))
        with Server(serve_dir, host="0.0.0.0", port=0) as server:
            token = server.token
            client = Client(server)
            client.host = "127.0.0.1"

            refused = [client.request(p)[0] for p in ("/", "/api/runs", "/api/runs?token=x")]
            allowed = [
                client.request(f"/?token={token}")[0],
                client.request(f"/api/runs?token={token}")[0],
                client.request("/api/runs", headers={"X-Runlines-Token": str(token)})[0],
                client.request("/static/app.js")[0],  # the page's own code holds no data
            ]

        assert token
        assert f"?token={token}" in server.url
        assert refused == [401, 401, 401]
        assert allowed == [200, 200, 200, 200]

    def test_loopback_needs_no_token(self, server: Server) -> None:
        assert server.token is None
        assert server.url.startswith("http://127.0.0.1:")
        assert "token" not in server.url


_LOW_DESCRIPTOR_SERVER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
from runlines.dashboard import Server
with Server(sys.argv[1], host="0.0.0.0", port=0, token="secret") as server:
    print(server.url, flush=True)
    sys.stdin.read()
"""


class TestConnections:
    def test_silent_sockets_never_lock_out_the_token_holder(self, serve_dir: Path) -> None:
        """More silent sockets than the server has descriptors; then a real request."""
        import socket
        import subprocess
        import sys

        train(serve_dir, "r", range(1, 3))
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
        with subprocess.Popen(
            [sys.executable, "-c", _LOW_DESCRIPTOR_SERVER, str(serve_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        ) as process:
            assert process.stdout is not None
            assert process.stdin is not None
            port = int(process.stdout.readline().rsplit(":", 1)[1].split("/")[0])
            silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(300)]
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("GET", "/api/runs", headers={"X-Runlines-Token": "secret"})
                answer = connection.getresponse()
                rows = json.loads(answer.read())
                connection.close()
            finally:
                for sock in silent:
                    sock.close()
                process.stdin.close()

        assert answer.status == 200
        assert [row["run"] for row in rows] == ["r"]

    def test_a_silent_connection_is_closed_after_the_idle_timeout(
        self, server: Server, client: Client, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import socket

        monkeypatch.setattr(DashboardServer, "idle_timeout_s", 0.2)

        with socket.create_connection((client.host, client.port), timeout=10) as silent:
            closed = silent.recv(1)  # waits for the server, at most the 10 s above

        assert closed == b""

    def test_past_the_cap_with_every_connection_answering_a_new_one_gets_503(
        self, serve_dir: Path, client: Client, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        checkpoint = serve_dir / "ckpt.bin"
        with open(checkpoint, "wb") as stream:
            stream.truncate(256 << 20)  # more than the socket buffers hold: sending blocks
        write(serve_dir / "r.jsonl", line("artifact", "r", name="ckpt", path="ckpt.bin"))
        client.json("/api/runs")
        monkeypatch.setattr(DashboardServer, "max_connections", 2)
        busy = [http.client.HTTPConnection(client.host, client.port, timeout=10) for _ in range(2)]
        try:
            for connection in busy:  # answered, never read: both stay busy sending
                connection.request("GET", "/api/artifact?run=r&path=ckpt.bin")
                assert connection.getresponse().status == 200

            status, headers, body = client.request("/api/runs")
        finally:
            for connection in busy:
                connection.close()

        assert (status, headers["Retry-After"]) == (503, "1")
        assert "too many connections" in json.loads(body)["error"]


class TestPackage:
    def test_the_page_and_vendored_uplot_with_its_license_are_served(self, client: Client) -> None:
        page = client.request("/")
        script = client.request("/static/vendor/uPlot.iife.min.js")
        license_text = client.request("/static/vendor/LICENSE")[2].decode()

        assert page[0] == 200
        assert b"/static/app.js" in page[2]
        assert script[0] == 200
        assert script[1]["Content-Type"].startswith("text/javascript")
        assert "MIT" in license_text
        assert "Leon Sorokin" in license_text

    def test_runlines_serve_is_the_function_after_the_package_is_imported(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], serve_dir: Path
    ) -> None:
        import runlines
        import runlines.dashboard
        from runlines import serve

        assert serve is runlines.serve is runlines.dashboard.serve
        assert isinstance(serve, types.FunctionType)
        assert type(runlines.dashboard) is types.ModuleType  # no module swaps its class

        def interrupt(self: Server) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(Server, "serve_forever", interrupt)

        runlines.serve(serve_dir, port=0)
        runlines.serve(serve_dir, host="0.0.0.0", port=0)

        err = capsys.readouterr().err
        assert err.count("runlines dashboard: http://") == 2
        assert "warning: serving on 0.0.0.0" in err
        assert "?token=" in err.splitlines()[-1]

    def test_cli_serve_takes_sources_host_port_and_open(
        self, monkeypatch: pytest.MonkeyPatch, serve_dir: Path
    ) -> None:
        from runlines.cli import main

        calls = []
        monkeypatch.setattr(
            "runlines.dashboard.serve",
            lambda *sources, **options: calls.append((sources, options)),
        )

        status = main(["serve", str(serve_dir), "--host", "::1", "--port", "0", "--open"])

        assert status == 0
        assert calls == [((str(serve_dir),), {"host": "::1", "port": 0, "open_browser": True})]

    def test_a_missing_source_is_an_error_that_says_what_to_pass(self, tmp_path: Path) -> None:
        from runlines.errors import ReadError

        with pytest.raises(ReadError, match=r"pass \.jsonl log files or folders"):
            Server(tmp_path / "missing", port=0)


def test_import_runlines_does_not_import_the_server() -> None:
    import subprocess
    import sys

    code = (
        "import sys, runlines; "
        "print('runlines.dashboard' in sys.modules, 'http.server' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")},
    )

    assert out.stdout.split() == ["False", "False"]


def test_ints_beyond_any_float_are_served(serve_dir: Path, client: Client) -> None:
    huge = 10**400
    write(
        serve_dir / "big.jsonl",
        b'{"ts": %d, "event": "train_step", "run": "big", "step": 1, "tokens": %d}\n'
        % (huge, huge),
        line("train_step", "big", step=2, loss=0.5),
    )

    (row,) = client.json("/api/runs")
    series = client.json("/api/series?run=big")["series"]

    assert row["step"] == 2
    assert row["train_step.tokens"] == huge
    assert {s["field"] for s in series} == {"tokens", "loss"}
    assert row["started"] == "2026-01-01T00:00:00+00:00"  # from the first ts a calendar holds


def test_a_port_in_use_is_an_error_that_says_to_pick_another(server: Server) -> None:
    port = int(server.url.rsplit(":", 1)[1].strip("/"))

    with pytest.raises(OSError, match="pick another --port, or 0"):
        Server(port=port)


def test_the_cli_imports_the_http_server_only_for_serve() -> None:
    import subprocess
    import sys

    code = "import sys, runlines.cli; print('http.server' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")},
    )

    assert out.stdout.split() == ["False"]


def test_the_librarys_own_warning_and_nonfinite_records_are_no_charts(
    serve_dir: Path, client: Client
) -> None:
    with pytest.warns(NonfiniteWarning), Run("r", serve_dir, stdout=False) as run:
        run.log("train_step", step=1, loss=1.0)
        run.log("train_step", step=2, loss=float("nan"))

    answer = client.json("/api/series?run=r")

    assert {(s["event"], s["field"]) for s in answer["series"]} == {("train_step", "loss")}
