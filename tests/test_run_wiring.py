"""Spans, sampling, artifacts, the field vocabulary and redaction, through a real Run."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from freezegun import freeze_time

from runlines import FieldDriftWarning, FieldError, Run, RunlinesWarning
from runlines.redaction import Redactor

# Every test runs on log()'s C fast path and on its pure-Python path (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fast_path")


def records(path: Path, event: str | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if event is None or r["event"] == event]


class TestSpans:
    def test_span_record_has_name_duration_and_fields(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01") as frozen, Run("r", run_dir, stdout=False) as run:
            for seconds in (0.5, 0.25):  # under a second: the log's once-a-second check waits
                with run.span("eval", split="val"):
                    frozen.tick(seconds)

        spans = records(run.path, "span")
        assert [s["duration_s"] for s in spans] == [pytest.approx(0.5), pytest.approx(0.25)]
        for span in spans:
            assert span["name"] == "eval"
            assert span["status"] == "ok"
            assert span["split"] == "val"
            assert "parent" not in span

    def test_nested_span_names_its_parent(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run, run.span("epoch"), run.span("eval"):
            pass

        spans = {s["name"]: s for s in records(run.path, "span")}
        assert spans["eval"]["parent"] == "epoch"

    def test_decorated_function_is_one_span_per_call(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:

            @run.span("train_step")
            def step(x: int) -> int:
                return x * 2

            assert [step(1), step(2)] == [2, 4]

        assert [s["name"] for s in records(run.path, "span")] == ["train_step", "train_step"]

    def test_exception_in_span_is_recorded_and_propagates(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            for shard in ("a", "b"):
                with pytest.raises(KeyError), run.span("load"):
                    raise KeyError(shard)

        spans = records(run.path, "span")
        assert [(s["status"], s["exc_type"]) for s in spans] == [("failed", "KeyError")] * 2

    def test_run_end_summarizes_spans_by_name(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01") as frozen, Run("r", run_dir, stdout=False) as run:
            for seconds in (1.0, 3.0):
                with run.span("eval"):
                    frozen.tick(seconds)

        summary = records(run.path, "run_end")[0]["spans"]["eval"]
        assert summary["count"] == 2
        assert summary["total_s"] == pytest.approx(4.0)
        assert summary["mean_s"] == pytest.approx(2.0)
        assert summary["max_s"] == pytest.approx(3.0)

    def test_reserved_span_field_is_refused(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run, pytest.raises(FieldError, match="reserved"):
            run.span("eval", run="x")


class TestSampling:
    def test_every_n_keeps_first_then_every_nth_and_counts_all(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.sample("batch", every=10)
            for step in range(25):
                run.log("batch", step=step, loss=1.0)
            run.log("eval", step=25)

        kept = records(run.path, "batch")
        assert [r["step"] for r in kept] == [0, 10, 20, 24]
        assert [r["n"] for r in kept] == [1, 10, 10, 4]
        assert sum(r["n"] for r in kept) == 25
        assert len(records(run.path, "eval")) == 1

    def test_per_second_keeps_at_most_rate_records_a_second(self, run_dir: Path) -> None:
        with freeze_time("2026-01-01") as frozen, Run("r", run_dir, stdout=False) as run:
            run.sample("batch", per_second=2)
            for step in range(40):
                run.log("batch", step=step)
                frozen.tick(0.05)

        kept = records(run.path, "batch")
        assert sum(r["n"] for r in kept) == 40
        assert len(kept) <= 2 * 2 + 2  # two seconds of records, the first and the trailing one

    def test_aggregate_writes_one_record_per_window(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.sample("batch", every=10, aggregate=True)
            for step in range(25):
                run.log("batch", step=step, loss=float(step))

        windows = records(run.path, "batch")
        assert [w["n"] for w in windows] == [10, 10, 5]
        assert windows[0]["loss"] == pytest.approx(4.5)
        assert (windows[0]["loss_min"], windows[0]["loss_max"]) == (0.0, 9.0)
        assert windows[2]["loss_last"] == 24.0

    def test_dropped_event_never_converts_its_values(self, run_dir: Path) -> None:
        class DeviceTensor:
            def item(self) -> float:
                raise AssertionError("a dropped event must not sync the device")

            def __float__(self) -> float:
                raise AssertionError("a dropped event must not sync the device")

        with Run("r", run_dir, stdout=False) as run:
            run.sample("batch", every=1000)
            run.log("batch", step=0, loss=0.5)
            for step in range(1, 100):
                run.log("batch", step=step, loss=DeviceTensor())
            run.log("batch", step=100, loss=0.25)  # the trailing record written at close

        assert [r["n"] for r in records(run.path, "batch")] == [1, 100]

    def test_sample_needs_exactly_one_rate(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            with pytest.raises(ValueError, match="every"):
                run.sample("batch")
            with pytest.raises(ValueError, match="every"):
                run.sample("batch", every=10, per_second=2)
            with pytest.raises(ValueError, match="every"):
                run.sample("batch", every=0)


class TestArtifacts:
    def test_array_goes_to_a_side_file_and_the_record_points_at_it(self, run_dir: Path) -> None:
        preds = np.arange(100_000, dtype=np.float32).reshape(1000, 100)

        with Run("r", run_dir, stdout=False) as run:
            saved = run.artifact("predictions", preds, step=1200, split="val")

        record = records(run.path, "artifact")[0]
        line = next(x for x in run.path.read_text().splitlines() if '"artifact"' in x)
        assert saved.parent == run_dir / "r.artifacts"
        assert (run.path.parent / record["path"]).resolve() == saved.resolve()
        assert record["sha256"] == hashlib.sha256(saved.read_bytes()).hexdigest()
        assert record["bytes"] == saved.stat().st_size
        assert (record["shape"], record["dtype"], record["step"]) == ([1000, 100], "float32", 1200)
        assert record["split"] == "val"
        assert len(line) < 500
        assert np.array_equal(np.load(saved), preds)

    def test_existing_checkpoint_is_registered_without_copying(
        self, run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.chdir(tmp_path)  # outside any git repository: no diff of a dirty tree
        run_dir.mkdir(parents=True)
        checkpoint = run_dir / "model.pt"
        checkpoint.write_bytes(b"weights" * 1000)

        with Run("r", run_dir, stdout=False) as run:
            returned = run.artifact("checkpoint", path=checkpoint, step=5)

        record = records(run.path, "artifact")[0]
        assert returned == checkpoint
        assert record["path"] == "model.pt"
        assert record["sha256"] == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
        assert not (run_dir / "r.artifacts").exists()

    def test_artifact_name_cannot_escape_the_artifacts_folder(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run, pytest.raises(FieldError):
            run.artifact("../../etc/x", b"data")


class TestVocabulary:
    def test_alias_warns_once_naming_the_agreed_field(self, run_dir: Path) -> None:
        with (
            Run("r", run_dir, stdout=False) as run,
            pytest.warns(FieldDriftWarning, match="'step'") as caught,
        ):
            run.log("train_step", iteration=1, loss=0.5)
            run.log("train_step", iteration=2, loss=0.5)
            run.log("eval", iteration=2, accuracy=0.5)

        assert len(caught) == 1
        assert [r["iteration"] for r in records(run.path, "train_step")] == [1, 2]

    def test_strict_fields_refuses_an_alias(self, run_dir: Path) -> None:
        with (
            Run("r", run_dir, stdout=False, strict_fields=True) as run,
            pytest.raises(ValueError, match=r"learning_rate.*'lr'"),
        ):
            run.log("train_step", learning_rate=0.1)

    def test_type_drift_warns_once(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("train_step", step=1)
            run.log("train_step", step=2)  # the C path's, if on: the string below reaches it
            with pytest.warns(FieldDriftWarning, match="step") as caught:
                run.log("train_step", step="3")
                run.log("eval", step="4")

        assert len(caught) == 1
        assert [r["step"] for r in records(run.path, "train_step")] == [1, 2, "3"]

    def test_type_drift_from_string_to_number_warns_once(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("eval", split="val", step="1")
            with pytest.warns(FieldDriftWarning, match="step") as caught:
                run.log("eval", split="val", step=2)
                run.log("eval", split="val", step=3)

        assert len(caught) == 1

    def test_string_appearing_in_a_numeric_key_set_is_redacted(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False) as run:
            run.log("note", value=1)
            run.log("note", value=2)  # the C path's, if on: the strings below reach it
            with pytest.warns(FieldDriftWarning):
                run.log("note", value=f"key {SECRETS['aws']}")
            run.log("note", value=f"again {SECRETS['aws']}")

        assert secret_free(run.path.read_bytes()) == []
        assert [r["value"] for r in records(run.path, "note")][:2] == [1, 2]

    def test_project_vocabulary_from_a_toml_file(self, run_dir: Path, tmp_path: Path) -> None:
        vocabulary = tmp_path / "fields.toml"
        vocabulary.write_text(
            '[aliases]\ntok = "tokens_seen"\n'
            '[fields]\ntokens_seen = { type = "integer", description = "tokens so far" }\n'
        )

        with (
            Run("r", run_dir, stdout=False, vocabulary=vocabulary) as run,
            pytest.warns(FieldDriftWarning, match="tokens_seen") as caught,
        ):
            run.log("train_step", tok=5)
            run.log("train_step", tok=6)

        assert len(caught) == 1
        assert [r["tok"] for r in records(run.path, "train_step")] == [5, 6]

    def test_fields_is_the_deprecated_name_of_vocabulary(
        self, run_dir: Path, tmp_path: Path
    ) -> None:
        vocabulary = tmp_path / "fields.toml"
        vocabulary.write_text(
            '[aliases]\ntok = "tokens_seen"\n'
            '[fields]\ntokens_seen = { type = "integer", description = "tokens so far" }\n'
        )

        with pytest.warns(DeprecationWarning, match=r"vocabulary=") as caught:
            run = Run("r", run_dir, stdout=False, fields=vocabulary)
        with run, pytest.warns(FieldDriftWarning, match="tokens_seen"):
            run.log("train_step", tok=5)

        assert caught[0].filename == __file__  # points at the user's call

    def test_vocabulary_and_fields_together_are_refused(self, run_dir: Path) -> None:
        with pytest.raises(TypeError, match="pass the vocabulary once"):
            Run("r", run_dir, stdout=False, vocabulary="a.toml", fields="a.toml")


SECRETS = {
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "slack": "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "openai": "sk-" + "proj-Abc123Def456Ghi789Jkl012Mno345Pqr678Stu",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "url_password": "hunter2hunter2",
    "email": "ada.lovelace@example.com",
    "keyed": "plain-looking-but-keyed-value",
}


def secret_free(data: bytes | str) -> list[str]:
    text = data.decode() if isinstance(data, bytes) else data
    return [name for name, secret in SECRETS.items() if secret in text]


class TestRedaction:
    def test_secrets_reach_no_sink_from_any_path(
        self, run_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setattr(
            sys, "argv", ["train.py", "--api-key", SECRETS["keyed"], f"--token={SECRETS['github']}"]
        )
        config = {
            "db_password": SECRETS["keyed"],
            "nested": {"hooks": [f"Bearer {SECRETS['jwt']}"], "owner": SECRETS["email"]},
        }

        with pytest.raises(RuntimeError), Run("r", run_dir, config=config, console="json") as run:
            run.log("note", text=f"key {SECRETS['aws']}", deep={"a": [{"b": SECRETS["slack"]}]})
            run.log("note", api_key=SECRETS["keyed"], step=1)
            with run.span("upload", url=f"https://bot:{SECRETS['url_password']}@hub.example.com/x"):
                pass
            run.artifact("notes", {"ok": 1}, token=SECRETS["openai"])
            raise RuntimeError(f"auth failed for {SECRETS['openai']}")

        assert secret_free(run.path.read_bytes()) == []
        assert secret_free(capsys.readouterr().out) == []

    def test_repr_of_an_unknown_object_is_redacted(self, run_dir: Path) -> None:
        class Client:
            def __repr__(self) -> str:
                return f"Client(key={SECRETS['github']})"

        with (
            Run("r", run_dir, stdout=False) as run,
            pytest.warns(RunlinesWarning, match="cannot encode"),
        ):
            run.log("note", client=Client(), nested={"clients": [Client()]})

        assert secret_free(run.path.read_bytes()) == []
        assert records(run.path, "note")[0]["client"].startswith("Client(key=")

    def test_console_lines_are_redacted_too(
        self, run_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with Run("r", run_dir, console="pretty") as run:
            run.log("note", password=SECRETS["keyed"], text=SECRETS["aws"])

        assert secret_free(capsys.readouterr().out) == []

    def test_ordinary_training_fields_are_untouched(self, run_dir: Path) -> None:
        fields = {
            "loss": 0.5,
            "tokens_per_s": 1234.5,
            "max_tokens": 2048,
            "split": "val",
            "model": "bert-base-uncased",
            "sha256": hashlib.sha256(b"x").hexdigest(),
            "run_id": "20260501T120000Z-4242-a1b2c3",
        }

        with Run("r", run_dir, stdout=False) as run:
            run.log("eval", **fields)
            run.log("eval", **fields)  # the C path's, if on

        for record in records(run.path, "eval"):
            assert {k: record[k] for k in fields} == fields

    def test_extra_patterns_and_allow_list(self, run_dir: Path) -> None:
        redactor = Redactor(extra_keys=["internal_id"], allow=["session_key"])

        with Run("r", run_dir, stdout=False, redact=redactor) as run:
            run.log("note", internal_id="abc", session_key="visible")
            run.log("note", internal_id="def", session_key="seen")

        assert [(r["internal_id"], r["session_key"]) for r in records(run.path, "note")] == [
            ("[redacted]", "visible"),
            ("[redacted]", "seen"),
        ]

    def test_redact_false_writes_values_as_given(self, run_dir: Path) -> None:
        with Run("r", run_dir, stdout=False, redact=False) as run:
            run.log("note", password="open")
            run.log("note", password="sesame")

        assert [r["password"] for r in records(run.path, "note")] == ["open", "sesame"]
