"""The wandb drop-in: W&B's commit semantics, the key mapping, config, summary, define_metric."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import runlines.compat.wandb as wandb
from runlines.errors import RunStateError
from runlines.reading import RunSummary, iter_events


@pytest.fixture(autouse=True)
def _no_run_left() -> Iterator[None]:
    yield
    wandb.finish()


def records(path: Path | None, *events: str) -> list[dict[str, Any]]:
    assert path is not None
    found = [r for r in iter_events(path) if not events or r["event"] in events]
    return [{k: v for k, v in r.items() if k not in ("ts", "run")} for r in found]


def start(tmp_path: Path, **kwargs: Any) -> wandb.Run:
    return wandb.init(project="proj", name="exp", dir=tmp_path, **kwargs)


class TestCommits:
    def test_each_log_without_step_is_one_record_at_the_next_step(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.log({"train/loss": 0.5})
        wandb.log({"train/loss": 0.25})
        run.finish()

        assert records(run.path, "train") == [
            {"event": "train", "step": 0, "loss": 0.5},
            {"event": "train", "step": 1, "loss": 0.25},
        ]

    def test_commit_false_gathers_values_until_a_commit(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.log({"train/loss": 0.5}, commit=False)
        wandb.log({"train/lr": 0.1}, commit=False)
        wandb.log({"train/grad_norm": 2.0})
        run.finish()

        assert records(run.path, "train") == [
            {"event": "train", "step": 0, "loss": 0.5, "lr": 0.1, "grad_norm": 2.0}
        ]

    def test_a_given_step_gathers_until_a_later_step(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.log({"train/loss": 0.5}, step=3)
        wandb.log({"train/lr": 0.1}, step=3)
        wandb.log({"train/loss": 0.4}, step=5)
        run.finish()  # commits what step 5 gathered

        assert records(run.path, "train") == [
            {"event": "train", "step": 3, "loss": 0.5, "lr": 0.1},
            {"event": "train", "step": 5, "loss": 0.4},
        ]

    def test_a_step_before_the_current_one_is_ignored_with_a_warning(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run = start(tmp_path)

        wandb.log({"train/loss": 0.5}, step=7)
        wandb.log({"train/loss": 0.9}, step=3)
        wandb.log({"train/lr": 0.1})  # joins step 7, and commits it
        run.finish()

        assert records(run.path, "train") == [{"event": "train", "step": 7, "loss": 0.5, "lr": 0.1}]
        assert "step 3 that is less than the current step 7" in capsys.readouterr().err

    def test_commit_true_with_a_step_commits_it(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.log({"train/loss": 0.5}, step=2, commit=True)
        wandb.log({"train/loss": 0.4})
        run.finish()

        assert [r["step"] for r in records(run.path, "train")] == [2, 3]


class TestKeys:
    def test_a_commit_is_one_record_per_event_at_its_step(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.log({"train/loss": 0.5, "eval/loss": 0.7, "lr": 0.1, "a/b/c": 1})
        run.finish()

        assert records(run.path, "train", "eval", "metrics", "a") == [
            {"event": "train", "step": 0, "loss": 0.5},
            {"event": "eval", "step": 0, "loss": 0.7},
            {"event": "metrics", "step": 0, "lr": 0.1},
            {"event": "a", "step": 0, "b/c": 1},
        ]

    def test_runlines_own_names_get_a_trailing_underscore(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.log({"step": 4, "run": "x", "system/gpu": 1, "summary/x": 2})
        run.finish()

        assert records(run.path, "metrics", "system_", "summary_") == [
            {"event": "metrics", "step": 0, "step_": 4, "run_": "x"},
            {"event": "system_", "step": 0, "gpu": 1},
            {"event": "summary_", "step": 0, "x": 2},
        ]


class TestConfig:
    def test_config_before_the_first_log_is_run_starts(self, tmp_path: Path) -> None:
        run = start(tmp_path, config={"lr": 0.1})

        wandb.config.update({"batch": 8})
        run.config.depth = 3
        run.config["width"] = 64
        run.config.setdefaults({"lr": 1.0, "seed": 0})
        wandb.log({"train/loss": 1.0})
        run.finish()

        (start_record,) = records(run.path, "run_start")
        assert start_record["config"] == {"lr": 0.1, "batch": 8, "depth": 3, "width": 64, "seed": 0}
        assert (wandb.run, run.config.lr, run.config["batch"]) == (None, 0.1, 8)

    def test_a_change_after_the_first_log_is_a_config_record(self, tmp_path: Path) -> None:
        run = start(tmp_path, config={"lr": 0.1})
        wandb.log({"train/loss": 1.0})

        wandb.config.update({"lr": 0.2}, allow_val_change=True)
        run.finish()

        assert records(run.path, "config") == [{"event": "config", "config": {"lr": 0.2}}]

    def test_changing_a_value_needs_allow_val_change(self, tmp_path: Path) -> None:
        start(tmp_path, config={"lr": 0.1})

        with pytest.raises(wandb.ConfigError, match="allow_val_change=True"):
            wandb.config.update({"lr": 0.2})

        assert wandb.config["lr"] == 0.1


class TestSummary:
    def test_summary_is_the_last_values_or_the_ones_set(self, tmp_path: Path) -> None:
        run = start(tmp_path)
        wandb.log({"train/loss": 0.5, "eval/score": 3})

        wandb.summary["eval/score"] = 9
        wandb.summary.update({"best_epoch": 2})

        assert dict(wandb.summary) == {"train/loss": 0.5, "eval/score": 9, "best_epoch": 2}
        assert run.summary["train/loss"] == 0.5

    def test_finish_writes_the_set_values_as_the_runs_declared_values(self, tmp_path: Path) -> None:
        run = start(tmp_path)
        wandb.log({"eval/score": 3})
        wandb.log({"eval/score": 4})
        wandb.summary["eval/score"] = 9
        wandb.summary["extra"] = {"a": 1}

        run.finish()

        assert records(run.path, "summary") == [
            {"event": "summary", "values": {"eval.score": 9, "metrics.extra.a": 1}}
        ]
        row = _row(run.path)
        assert (row["eval.score"], row["metrics.extra.a"]) == (9, 1)

    def test_define_metric_summary_declares_its_statistics(self, tmp_path: Path) -> None:
        run = start(tmp_path)
        wandb.define_metric("eval/*", summary="min,max,mean,first,last")
        for score in (3, 1, 5):
            wandb.log({"eval/score": score})

        run.finish()

        assert records(run.path, "summary")[0]["values"] == {
            "eval.score.min": 1,
            "eval.score.max": 5,
            "eval.score.mean": 3,
            "eval.score.first": 3,
            "eval.score.last": 5,
        }


class TestDefineMetric:
    def test_step_metric_steps_the_records_and_step_sync_fills_it_in(self, tmp_path: Path) -> None:
        run = start(tmp_path)
        wandb.define_metric("train/global_step")
        wandb.define_metric("*", step_metric="train/global_step", step_sync=True)

        wandb.log({"train/loss": 0.5, "train/global_step": 10})
        wandb.log({"eval/loss": 0.7, "train/global_step": 10})  # its train record goes
        wandb.log({"eval/loss": 0.6})  # the last global step, synced
        run.finish()

        assert records(run.path, "train", "eval") == [
            {"event": "train", "step": 10, "loss": 0.5, "global_step": 10},
            {"event": "eval", "step": 10, "loss": 0.7},
            {"event": "eval", "step": 10, "loss": 0.6},
        ]

    def test_goal_sets_which_way_is_better_for_runs(self, tmp_path: Path) -> None:
        run = start(tmp_path)
        wandb.define_metric("train/loss", goal="maximize")
        wandb.define_metric("eval/*", goal="minimize")

        for value in (0.5, 0.9, 0.7):
            wandb.log({"train/loss": value, "eval/reward": value})
        run.finish()

        row = _row(run.path)
        assert (row["train.loss.best"], row["eval.reward.best"]) == (0.9, 0.5)
        declared = [
            (r["metric"], r["column"], r["goal"]) for r in records(run.path, "define_metric")
        ]
        assert declared == [
            ("train/loss", "train.loss", "max"),
            ("eval/reward", "eval.reward", "min"),
        ]

    def test_a_goal_after_the_values_counts_them_again(self, tmp_path: Path) -> None:
        run = start(tmp_path)
        for value in (0.5, 0.9, 0.7):
            wandb.log({"train/loss": value})

        wandb.define_metric("train/loss", goal="maximize")
        run.finish()

        assert _row(run.path)["train.loss.best"] == 0.9

    def test_declarations_survive_a_summarys_state(self, tmp_path: Path) -> None:
        """A Parquet copy keeps RunSummary.state(): declarations go through it."""
        run = start(tmp_path)
        wandb.define_metric("train/loss", goal="maximize")
        wandb.log({"train/loss": 0.5})
        wandb.log({"train/loss": 0.9})
        wandb.summary["train/loss"] = 0.1
        run.finish()
        assert run.path is not None
        summary = RunSummary(run.path)
        for record in iter_events(run.path):
            summary.add(record)

        state = orjson.loads(orjson.dumps(summary.state()))
        row = RunSummary.restored(run.path, state).row()

        assert (row["train.loss"], row["train.loss.best"]) == (0.1, 0.9)

    def test_runs_reads_declarations_from_a_parquet_copy(self, tmp_path: Path) -> None:
        """The copy's summary comes from the Python pass, which reads declarations."""
        pytest.importorskip("pyarrow")
        import runlines
        from runlines.reading._copies import write_copy

        run = start(tmp_path)
        wandb.define_metric("train/loss", goal="maximize")
        for value in (0.5, 0.9, 0.7):
            wandb.log({"train/loss": value})
        wandb.summary["train/loss"] = 0.1
        run.finish()
        assert run.path is not None

        assert write_copy(run.path) is not None
        row = runlines.runs(run.path).iloc[0]

        assert (row["train.loss"], row["train.loss.best"]) == (0.1, 0.9)


class TestRun:
    def test_wandb_run_has_id_name_dir_config_summary_log_and_finish(self, tmp_path: Path) -> None:
        run = wandb.init(project="proj", id="abc123", dir=tmp_path, config={"lr": 0.1})

        assert wandb.run is run
        assert (run.id, run.name, run.dir) == ("abc123", "abc123", str(tmp_path / "proj"))
        run.log({"train/loss": 1.0})
        assert run.config.lr == 0.1
        assert run.summary["train/loss"] == 1.0
        run.finish()
        assert wandb.run is None
        assert run.path == tmp_path / "proj" / "abc123.jsonl"

    def test_a_generated_name_is_adjective_noun_number(self, tmp_path: Path) -> None:
        first = wandb.init(project="proj", dir=tmp_path)
        first.log({"x": 1})
        first.finish()
        second = wandb.init(project="proj", dir=tmp_path)

        assert re.fullmatch(r"[a-z]+-[a-z]+-1", first.name)
        assert re.fullmatch(r"[a-z]+-[a-z]+-2", second.name)

    def test_init_tags_notes_group_job_type_go_to_a_run_info_record(self, tmp_path: Path) -> None:
        run = start(tmp_path, tags=["a", "b"], notes="n", group="g", job_type="train", id="x1")

        run.finish()

        assert records(run.path, "run_info") == [
            {
                "event": "run_info",
                "project": "proj",
                "wandb_id": "x1",
                "tags": ["a", "b"],
                "notes": "n",
                "group": "g",
                "job_type": "train",
            }
        ]

    def test_finish_with_an_exit_code_ends_the_run_failed(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        wandb.finish(exit_code=3)

        (end,) = records(run.path, "run_end")
        assert (end["status"], end["exit_code"]) == ("failed", 3)

    def test_init_again_returns_the_open_run_unless_reinit(self, tmp_path: Path) -> None:
        first = start(tmp_path)

        assert start(tmp_path) is first
        second = start(tmp_path, reinit=True)
        assert second is not first
        assert wandb.run is second

    def test_mode_disabled_writes_nothing(self, tmp_path: Path) -> None:
        run = start(tmp_path, mode="disabled")

        wandb.log({"train/loss": 1.0})
        run.finish()

        assert not (tmp_path / "proj").exists()

    def test_resume_continues_the_named_run(self, tmp_path: Path) -> None:
        start(tmp_path).finish()

        run = start(tmp_path, resume="allow")
        run.finish()

        assert run.name == "exp"
        assert [r["attempt"] for r in records(run.path, "run_start")] == [1, 2]

    def test_alert_is_a_record_and_watch_says_it_logs_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        run = start(tmp_path)

        wandb.alert("diverged", "loss is NaN", level="WARN")
        wandb.watch(object())
        wandb.watch(object())
        run.finish()

        assert records(run.path, "alert") == [
            {"event": "alert", "title": "diverged", "text": "loss is NaN", "level": "WARN"}
        ]
        assert capsys.readouterr().err.count("wandb.watch() logs nothing") == 1


class TestOutsideTheSubset:
    @pytest.mark.parametrize(
        ("get", "named"),
        [
            (lambda: wandb.Video, "'Video'"),
            (lambda: wandb.require, "'require'"),
            (lambda: wandb.log_model, "'log_model'"),
        ],
    )
    def test_a_missing_call_raises_naming_it_and_the_docs(self, get: Any, named: str) -> None:
        with pytest.raises(AttributeError, match=re.escape(named) + ".*docs/compat.md"):
            get()

    def test_a_missing_run_attribute_raises_naming_it(self, tmp_path: Path) -> None:
        run = start(tmp_path)

        with pytest.raises(AttributeError, match=r"wandb\.run has no 'url'.*docs/compat\.md"):
            _ = run.url
        with pytest.raises(AttributeError, match=r"wandb\.config has no 'missing'"):
            _ = run.config.missing

    def test_calls_before_init_say_to_call_init(self) -> None:
        with pytest.raises(RunStateError, match=r"call wandb.init\(\) before wandb.log"):
            wandb.log({"x": 1})
        with pytest.raises(RunStateError, match=r"wandb.init\(\) before using wandb.config"):
            wandb.config.update({})


class TestInstall:
    @pytest.fixture(autouse=True)
    def _real_wandb_kept_aside(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        for name in [n for n in sys.modules if n == "wandb" or n.startswith("wandb.")]:
            monkeypatch.delitem(sys.modules, name)
        yield
        wandb.uninstall()

    def test_import_wandb_gives_the_drop_in_with_a_spec(self) -> None:
        wandb.install()

        spec = importlib.util.find_spec("wandb")
        import wandb as imported  # type: ignore[import-not-found,unused-ignore]
        from wandb.sdk.lib.config_util import (  # type: ignore[import-not-found,unused-ignore]
            ConfigError,
        )

        assert spec is not None
        assert spec.name == "wandb"
        assert imported is wandb
        assert ConfigError is wandb.ConfigError  # type: ignore[comparison-overlap]
        assert hasattr(imported, "run")

    def test_install_sets_an_imported_package_aside_until_uninstall(self) -> None:
        real = type(sys)("wandb")
        sys.modules["wandb"] = real

        wandb.install()
        import wandb as imported  # type: ignore[import-not-found,unused-ignore]

        assert imported is wandb
        wandb.uninstall()
        assert sys.modules["wandb"] is real
        del sys.modules["wandb"]

    def test_uninstall_lets_import_find_the_real_package(self) -> None:
        wandb.install()
        wandb.uninstall()

        spec = importlib.util.find_spec("wandb")

        assert spec is None or spec.origin != wandb.__file__
        assert "wandb" not in sys.modules


def _row(path: Path | None) -> dict[str, Any]:
    assert path is not None
    summary = RunSummary(path)
    for record in iter_events(path):
        summary.add(record)
    return summary.row()


def test_a_run_never_finished_writes_its_summary_at_exit(tmp_path: Path) -> None:
    """W&B finishes at exit; the run's own close writes run_end, knowing how the job ended."""
    import os
    import subprocess

    code = (
        "import runlines.compat.wandb as wandb\n"
        f"wandb.init(project='proj', name='exp', dir={str(tmp_path)!r})\n"
        "wandb.log({'train/loss': 0.5})\n"
        "wandb.log({'train/loss': 0.25}, commit=False)\n"
        "wandb.summary['best'] = 1\n"
        "raise RuntimeError('boom')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    done = subprocess.run(
        [sys.executable, "-c", code], env=env, timeout=120, check=False, capture_output=True
    )

    assert done.returncode == 1
    log = tmp_path / "proj" / "exp.jsonl"
    assert [(r["event"], r.get("status")) for r in records(log, "train", "summary", "run_end")] == [
        ("train", None),
        ("train", None),
        ("summary", None),
        ("run_end", "failed"),
    ]
