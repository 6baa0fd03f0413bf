"""`runs(group_by=...)` and `compare(group_by=..., x=...)`: groups of runs by config."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

import runlines
from _logs import line, write
from runlines import Run
from runlines.errors import FieldError
from runlines.reading._groups import auto_keys, group_label, is_seed_key


def _sweep(folder: Path, *, nan_at: int | None = None) -> Path:
    """Write 2 lr x 2 batch sizes x 3 seeds; seed 2 logs fewer steps, and every other step."""
    for lr in (0.1, 0.01):
        for batch in (16, 32):
            for seed in range(3):
                name = f"lr{lr}-b{batch}-s{seed}"
                config = {"lr": lr, "batch_size": batch, "seed": seed, "model": "mlp"}
                with Run(name, folder, stdout=False, config=config, on_nonfinite="ignore") as run:
                    steps = range(2, 9, 2) if seed == 2 else range(1, 7)
                    for step in steps:
                        loss = lr * 10 / step + seed / 100 + batch / 1000
                        if nan_at == step and seed == 1 and lr == 0.1 and batch == 16:
                            loss = math.nan
                        run.log("train_step", step=step, loss=loss)
                        run.log("train_step", step=step, loss=loss / 2)  # two records a step
                    run.log("eval", step=steps[-1], accuracy=0.9 - lr + seed / 10)
    return folder


def _expected(folder: Path) -> pd.DataFrame:
    """Return the groups as pandas computes them from every record (load()), per step."""
    frame = runlines.load(folder, event="train_step")
    starts = runlines.load(folder, event="run_start")
    configs = pd.DataFrame(
        [{"run": r, **c} for r, c in zip(starts["run"], starts["config"], strict=True)]
    )
    per_run = frame.groupby(["run", "step"])["loss"].mean().reset_index()
    merged = per_run.merge(configs, on="run")
    return merged.groupby(["lr", "batch_size", "step"])["loss"].agg(
        ["count", "mean", "std", "min", "max"]
    )


class TestCompareGroups:
    def test_groups_equal_a_pandas_groupby_over_every_record(self, run_dir: Path) -> None:
        expected = _expected(_sweep(run_dir))

        table = runlines.compare(run_dir, metric="loss", group_by=["lr", "batch_size"])

        assert table.attrs["group_by"] == ["lr", "batch_size"]
        assert table.columns.names == ["group", "stat"]
        assert list(table.columns.get_level_values("group").unique()) == [
            "lr=0.01,batch_size=16",
            "lr=0.01,batch_size=32",
            "lr=0.1,batch_size=16",
            "lr=0.1,batch_size=32",
        ]
        for (lr, batch, step), want in expected.iterrows():
            got = table.loc[step, f"lr={lr},batch_size={batch}"]
            assert got["n"] == want["count"]
            for stat in ("mean", "min", "max"):
                assert got[stat] == pytest.approx(want[stat], rel=1e-12)
            if want["count"] > 1:
                assert got["std"] == pytest.approx(want["std"], rel=1e-9)
            else:
                assert got["std"] is pd.NA  # one run: no spread to state

    def test_runs_at_different_steps_align_on_the_union_and_n_counts_them(
        self, run_dir: Path
    ) -> None:
        _sweep(run_dir)

        table = runlines.compare(run_dir, metric="loss", group_by=["lr", "batch_size"])

        assert list(table.index) == [1, 2, 3, 4, 5, 6, 8]
        group = table["lr=0.1,batch_size=16"]
        assert list(group["n"]) == [2, 3, 2, 3, 2, 3, 1]
        assert group.loc[8, "mean"] == pytest.approx((1 / 8 + 0.02 + 0.016) * 0.75)

    def test_group_with_no_run_at_a_step_is_missing_with_n_zero(self, tmp_path: Path) -> None:
        write(
            tmp_path / "a.jsonl",
            line("run_start", run="a", config={"lr": 1}),
            line("train_step", run="a", step=1, loss=1.0),
        )
        write(
            tmp_path / "b.jsonl",
            line("run_start", run="b", config={"lr": 2}),
            line("train_step", run="b", step=2, loss=2.0),
        )

        table = runlines.compare(tmp_path, metric="loss", group_by="lr")

        assert table.loc[2, ("lr=1", "n")] == 0
        assert table.loc[2, ("lr=1", "mean")] is pd.NA
        assert table.loc[2, ("lr=2", "mean")] == 2.0

    def test_a_logged_nan_makes_its_step_nan_never_missing(self, run_dir: Path) -> None:
        _sweep(run_dir, nan_at=3)

        table = runlines.compare(run_dir, metric="loss", group_by=["lr", "batch_size"])

        group = table["lr=0.1,batch_size=16"]
        assert group.loc[3, "n"] == 2  # the NaN's run counts
        for stat in ("mean", "std", "min", "max"):
            assert math.isnan(group.loc[3, stat])
            assert not table.isna().loc[3, ("lr=0.1,batch_size=16", stat)]
        assert not math.isnan(group.loc[5, "mean"])  # other steps stay numbers
        assert not math.isnan(table.loc[3, ("lr=0.1,batch_size=32", "mean")])

    def test_auto_picks_the_varying_keys_but_seeds(self, run_dir: Path) -> None:
        _sweep(run_dir)

        table = runlines.compare(run_dir, metric="loss", group_by="auto")

        assert table.attrs["group_by"] == ["lr", "batch_size"]

    def test_several_events_label_group_and_event(self, run_dir: Path) -> None:
        _sweep(run_dir)
        with Run("extra", run_dir, stdout=False, config={"lr": 0.1, "batch_size": 16}) as run:
            run.log("eval", step=2, loss=0.5)

        table = runlines.compare(run_dir, metric="loss", group_by=["lr", "batch_size"])

        labels = list(table.columns.get_level_values("group").unique())
        assert "lr=0.1,batch_size=16 · eval" in labels
        assert "lr=0.1,batch_size=16 · train_step" in labels
        assert table.loc[2, ("lr=0.1,batch_size=16 · eval", "n")] == 1

    def test_unknown_key_names_the_config_keys(self, run_dir: Path) -> None:
        _sweep(run_dir)

        with pytest.raises(FieldError, match=r"'l_r'.*config keys: batch_size, lr, model, seed"):
            runlines.compare(run_dir, metric="loss", group_by=["l_r"])

    def test_config_prefix_is_accepted(self, run_dir: Path) -> None:
        _sweep(run_dir)

        table = runlines.compare(run_dir, metric="loss", group_by=["config.lr"])

        assert table.attrs["group_by"] == ["lr"]


class TestX:
    def test_a_field_on_some_records_of_the_event(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "a.jsonl",
            line("train_step", run="a", step=1, loss=1.0, tokens=100),
            line("train_step", run="a", step=2, loss=2.0),
            line("train_step", run="a", step=3, loss=3.0, tokens=300),
        )

        table = runlines.compare(log, metric="loss", x="tokens")

        assert table.index.name == "tokens"
        assert list(table.index) == [100, 300]
        assert list(table["a"]) == [1.0, 3.0]

    def test_a_field_of_another_event_is_joined_by_step(self, tmp_path: Path) -> None:
        log = write(
            tmp_path / "a.jsonl",
            line("train_step", run="a", step=1, loss=1.0),
            line("progress", run="a", step=1, tokens=128),
            line("train_step", run="a", step=2, loss=2.0),
            line("progress", run="a", step=2, tokens=256),
            line("train_step", run="a", step=3, loss=3.0),  # no progress at step 3
        )

        table = runlines.compare(log, metric="loss", x="tokens", event="train_step")

        assert list(table.index) == [128, 256]
        assert list(table["a"]) == [1.0, 2.0]

    def test_by_is_x_older_name(self, tmp_path: Path) -> None:
        log = write(tmp_path / "a.jsonl", line("s", run="a", step=1, epoch=0, loss=1.0))

        assert runlines.compare(log, metric="loss", by="epoch").equals(
            runlines.compare(log, metric="loss", x="epoch")
        )
        with pytest.raises(ValueError, match="two x axes"):
            runlines.compare(log, metric="loss", by="epoch", x="step")

    def test_x_with_groups(self, run_dir: Path) -> None:
        _sweep(run_dir)

        table = runlines.compare(run_dir, metric="accuracy", x="step", group_by="lr")

        assert list(table.index) == [6, 8]
        assert table.loc[6, ("lr=0.1", "n")] == 4


class TestRunsGroups:
    def test_one_row_per_group_equal_to_pandas(self, run_dir: Path) -> None:
        _sweep(run_dir, nan_at=6)
        table = runlines.runs(run_dir)
        by = ["config.lr", "config.batch_size"]
        metric = "train_step.loss.best"
        expected = table.groupby(by)[metric].agg(["count", "mean", "std", "min", "max"])

        groups = runlines.runs(run_dir, group_by=["lr", "batch_size"])

        assert groups.attrs["group_by"] == ["lr", "batch_size"]
        assert list(groups.columns[:5]) == ["group", "lr", "batch_size", "n", "runs"]
        assert len(groups) == 4
        for _, row in groups.iterrows():
            want = expected.loc[(row["lr"], row["batch_size"])]
            assert row["n"] == want["count"] == len(row["runs"])
            for stat in ("mean", "std", "min", "max"):
                assert row[f"{metric}.{stat}"] == pytest.approx(want[stat])

    def test_a_last_value_logged_nan_makes_the_group_nan(self, run_dir: Path) -> None:
        _sweep(run_dir, nan_at=6)  # lr 0.1, batch 16, seed 1: its last loss is NaN

        groups = runlines.runs(run_dir, group_by=["lr", "batch_size"]).set_index("group")

        assert math.isnan(groups.loc["lr=0.1,batch_size=16", "train_step.loss.mean"])
        assert not groups.isna().loc["lr=0.1,batch_size=16", "train_step.loss.mean"]
        assert not math.isnan(groups.loc["lr=0.1,batch_size=16", "train_step.loss.best.mean"])

    def test_auto_and_its_keys(self, run_dir: Path) -> None:
        _sweep(run_dir)

        groups = runlines.runs(run_dir, group_by="auto")

        assert groups.attrs["group_by"] == ["lr", "batch_size"]
        assert set(groups["n"]) == {3}

    def test_a_metric_some_runs_lack_is_over_those_that_have_it(self, tmp_path: Path) -> None:
        for name, fields in (("a", {"loss": 1.0}), ("b", {"loss": 3.0}), ("c", {})):
            write(
                tmp_path / f"{name}.jsonl",
                line("run_start", run=name, config={"lr": 1}),
                line("train_step", run=name, step=1, **fields),
            )

        row = runlines.runs(tmp_path, group_by="lr").iloc[0]

        assert row["n"] == 3
        assert row["train_step.loss.mean"] == 2.0


class TestAuto:
    @pytest.mark.parametrize(
        ("key", "seedy"),
        [
            ("seed", True),
            ("data_seed", True),
            ("optim.seed", True),
            ("rng_state", True),
            ("RNG", True),
            ("seeds_used", False),
            ("lr", False),
            ("strong", False),
        ],
    )
    def test_seed_keys(self, key: str, seedy: bool) -> None:
        assert is_seed_key(key) is seedy

    def test_varying_keys_in_first_seen_order(self) -> None:
        configs = [
            {"model": "a", "lr": 1, "seed": 0, "tags": [1]},
            {"model": "a", "lr": 2, "seed": 1, "tags": [1]},
            {"model": "a", "lr": 2, "seed": 2, "tags": [2], "extra": True},
        ]

        assert auto_keys(configs) == ["lr", "tags", "extra"]

    def test_label_writes_values_as_json_and_texts_as_themselves(self) -> None:
        assert group_label(["lr", "opt", "x"], [1e-05, "adam", None]) == "lr=1e-05,opt=adam,x=null"
        assert group_label([], []) == "all"
