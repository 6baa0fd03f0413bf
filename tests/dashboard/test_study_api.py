"""/api/study: each run's config against a metric, and each key's rank correlation with it.

The numbers are checked against pandas: `.corr(method="spearman")` for a numeric key, and
the correlation ratio of the metric's ranks (`.rank()`, by a groupby) for a categorical one.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from _serve_helpers import Client

import runlines
from _logs import T0, line, write
from runlines.dashboard._study import correlation_ratio, ranks, spearman

LRS = (0.1, 0.03, 0.01, 0.003, 0.001, 0.03, 0.01)
OPTS = ("adam", "sgd", "adam", "sgd", "adam", "adam", "sgd")


def _sweep(folder: Path) -> None:
    """Seven runs of lr, depth and optim; one without depth, one with a NaN last loss."""
    for i, (lr, opt) in enumerate(zip(LRS, OPTS, strict=True)):
        config = {"lr": lr, "optim": opt, "seed": i} | ({"depth": i % 3 + 1} if i != 6 else {})
        name = f"r{i}"
        losses = (lr * 30, lr * 10 + (i % 2), lr * 20)  # the best is not the last
        write(
            folder / f"{name}.jsonl",
            line("run_start", name, T0, attempt=1, config=config),
            *(line("train_step", name, T0 + s, step=s, loss=v) for s, v in enumerate(losses, 1)),
            line("run_end", name, T0 + 9, status="ok"),
        )
    write(
        folder / "nan.jsonl",
        line("run_start", "nan", T0, attempt=1, config={"lr": 0.5, "optim": "sgd", "depth": 2}),
        line("train_step", "nan", T0 + 1, step=1, loss=0.7),
        line("train_step", "nan", T0 + 2, step=2, loss=math.nan),
        line("run_end", "nan", T0 + 3, status="ok"),
    )


def _eta(keys: pd.Series, values: pd.Series) -> float:
    """The correlation ratio of *values*' ranks by *keys*, by pandas."""
    ranked = values.rank()
    between = ranked.groupby(keys).agg(lambda r: len(r) * (r.mean() - ranked.mean()) ** 2).sum()
    return math.sqrt(between / ((ranked - ranked.mean()) ** 2).sum())


@pytest.mark.parametrize("stat", ["last", "best"])
def test_the_importance_of_each_key_is_the_rank_correlation_pandas_gives(
    serve_dir: Path, client: Client, stat: str
) -> None:
    _sweep(serve_dir)
    table = runlines.runs(serve_dir)
    column = "train_step.loss" + (".best" if stat == "best" else "")
    held = table[table[column].notna()]

    answer = client.json(f"/api/study?metric=train_step.loss&stat={stat}")

    assert answer["column"] == column
    assert sorted(r["run"] for r in answer["runs"]) == sorted(held["run"])
    assert answer["left_out"] == ([] if stat == "best" else ["nan"])  # its last loss is NaN
    by_key = {row["key"]: row for row in answer["importance"]}
    assert set(by_key) == {"lr", "optim", "seed", "depth"}
    for key in ("lr", "seed", "depth"):
        both = held[[f"config.{key}", column]].dropna()
        expected = both.corr(method="spearman").iloc[0, 1]
        assert by_key[key]["measure"] == "spearman"
        assert by_key[key]["n"] == len(both)
        assert by_key[key]["value"] == pytest.approx(expected, abs=1e-12), key
    assert by_key["depth"]["n"] == len(held) - 1  # r6 has no depth
    assert by_key["optim"]["measure"] == "correlation ratio"
    expected = _eta(held["config.optim"], held[column])
    assert by_key["optim"]["value"] == pytest.approx(expected, abs=1e-12)
    values = [abs(row["value"]) for row in answer["importance"]]
    assert values == sorted(values, reverse=True)


def test_each_run_has_its_config_and_value_and_each_key_its_axis(
    serve_dir: Path, client: Client
) -> None:
    _sweep(serve_dir)

    answer = client.json("/api/study?metric=train_step.loss")

    assert answer["metric"] == "train_step.loss"
    assert answer["stat"] == "last"
    assert "train_step.loss" in answer["metrics"]
    runs = {r["run"]: r for r in answer["runs"]}
    assert runs["r3"]["config"] == {"lr": 0.003, "optim": "sgd", "seed": 3, "depth": 1}
    assert runs["r3"]["value"] == pytest.approx(0.003 * 20)
    assert runs["r6"]["config"]["depth"] is None
    axes = {k["key"]: k for k in answer["keys"]}
    assert axes["lr"] == {"key": "lr", "kind": "numeric", "scale": "log", "min": 0.001, "max": 0.1}
    assert axes["seed"]["scale"] == "linear"
    assert axes["optim"] == {"key": "optim", "kind": "categorical", "categories": ["adam", "sgd"]}
    assert answer["axis"]["kind"] == "numeric"


def test_an_unknown_metric_or_stat_is_refused_with_the_choices(
    serve_dir: Path, client: Client
) -> None:
    _sweep(serve_dir)

    status, _, body = client.request("/api/study?metric=train_step.los")
    status_stat, _, body_stat = client.request("/api/study?stat=mean")

    assert status == 400
    assert b"train_step.loss" in body
    assert status_stat == 400
    assert b"stat=last or stat=best" in body_stat


def test_the_metric_defaults_to_the_first_with_a_best(serve_dir: Path, client: Client) -> None:
    _sweep(serve_dir)

    assert client.json("/api/study")["metric"] == "train_step.loss"


def test_ranks_and_correlations_agree_with_pandas_on_ties_and_constants() -> None:
    xs = [3.0, 1.0, 3.0, 2.0, 5.0, 3.0]
    ys = [0.5, 0.1, 0.9, 0.9, 0.2, 0.4]

    assert ranks(xs) == pd.Series(xs).rank().tolist()
    # Spearman's rho is Pearson's r of the (average) ranks: pandas' own "spearman" needs scipy
    rho = pd.Series(xs).rank().corr(pd.Series(ys).rank())
    assert spearman(xs, ys) == pytest.approx(rho)
    assert spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None  # a key that does not vary
    assert spearman([1.0], [2.0]) is None
    assert correlation_ratio(["a", "a", "b", "b"], [1.0, 2.0, 3.0, 4.0]) == pytest.approx(
        _eta(pd.Series(["a", "a", "b", "b"]), pd.Series([1.0, 2.0, 3.0, 4.0]))
    )
    assert correlation_ratio(["a", "a"], [1.0, 2.0]) is None  # one category


def test_runs_narrows_the_study_and_a_categorical_value_is_its_text(
    serve_dir: Path, client: Client
) -> None:
    _sweep(serve_dir)
    write(
        serve_dir / "odd.jsonl",
        line("run_start", "odd", T0, attempt=1, config={"lr": 1e-05, "optim": ["adam", 2]}),
        line("train_step", "odd", T0 + 1, step=1, loss=0.2),
    )

    some = client.json("/api/study?metric=train_step.loss&runs=r0,r1,r2")
    every = client.json("/api/study?metric=train_step.loss")

    assert sorted(r["run"] for r in some["runs"]) == ["r0", "r1", "r2"]
    odd = next(r for r in every["runs"] if r["run"] == "odd")
    assert odd["config"]["optim"] == '["adam", 2]'
    optim = next(k for k in every["keys"] if k["key"] == "optim")
    assert optim["categories"] == ['["adam", 2]', "adam", "sgd"]
    assert next(r for r in every["runs"] if r["run"] == "r1")["config"]["optim"] == "sgd"
