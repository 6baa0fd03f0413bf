"""Redaction of what a value becomes as text (Path, Enum), of aggregated secrets, and of
e-mail-like file names that are not e-mail addresses."""

from __future__ import annotations

import enum
import json
import weakref
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath

import pytest

from runlines import Run
from runlines.redaction import REDACTED, redact, redact_text

_DB_URL = "postgresql://admin:hunter2pass@db.internal:5432/runs"


class Store(enum.Enum):
    MAIN = _DB_URL


def _records(path: Path, event: str) -> list[dict[str, object]]:
    lines = path.read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["event"] == event]


@pytest.mark.parametrize("pure", [False, True], ids=["c", "pure"])
def test_path_and_enum_values_are_redacted_as_the_text_they_are_written_as(
    run_dir: Path, pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if pure:
        monkeypatch.setattr("runlines._writer._CWriter", None)
    home = PurePosixPath("/home/ada.lovelace@example.org/data")

    with Run("r", run_dir, stdout=False, config={"store": Store.MAIN, "home": home}) as run:
        for _ in range(3):  # the first record plans, the next ones take the planned path
            run.log("v", home=home, store=Store.MAIN, nested=[home])

    text = run.path.read_text()
    assert "ada.lovelace" not in text
    assert "hunter2pass" not in text
    assert _records(run.path, "v")[-1]["home"] == f"/home/{REDACTED}/data"


@pytest.mark.parametrize("pure", [False, True], ids=["c", "pure"])
def test_aggregated_numbers_under_a_secret_key_are_redacted_in_every_field(
    run_dir: Path, pure: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if pure:
        monkeypatch.setattr("runlines._writer._CWriter", None)

    with Run("r", run_dir, stdout=False, on_nonfinite="ignore") as run:
        run.sample("v", every=4, aggregate=True)
        for pin in (1234567, 7654321, 1111111, float("nan")):
            run.log("v", api_key=pin, loss=0.5)

    (record,) = _records(run.path, "v")
    derived = {k: v for k, v in record.items() if k.startswith("api_key")}
    assert set(derived) == {"api_key", "api_key_min", "api_key_max", "api_key_last", "api_key_nan"}
    assert set(derived.values()) == {REDACTED}
    assert record["loss_min"] == 0.5


@pytest.mark.parametrize(
    "name",
    ["best@epoch12.ckpt", "runs/best@epoch12.ckpt", "model@step100.pt", "w@e3.safetensors"],
)
def test_a_file_name_with_an_at_sign_is_not_an_email(name: str) -> None:
    assert redact_text(name) == name


@pytest.mark.parametrize(
    "address", ["joao@sapo.pt", "ada@example.org", "x.y@mail.co.uk", "a+b@lab.example.ai"]
)
def test_an_email_with_a_real_domain_is_still_redacted(address: str) -> None:
    assert redact_text(f"contact {address} now") == f"contact {REDACTED} now"


def test_an_artifact_named_like_an_email_keeps_a_path_that_resolves(run_dir: Path) -> None:
    with Run("r", run_dir, stdout=False) as run:
        target = run.artifact("best@epoch12", b"weights")

    (record,) = _records(run.path, "artifact")
    assert (run.path.parent / str(record["path"])).resolve() == target.resolve()


class _Unreadable(Mapping[str, object]):
    def __getitem__(self, key: str) -> object:
        raise KeyError("unresolvable ${secret}")

    def __iter__(self) -> Iterator[str]:
        return iter(["a"])

    def __len__(self) -> int:
        return 1


def test_redact_of_a_container_that_breaks_while_walked_hides_it_and_never_raises() -> None:
    class Gone:
        pass

    gone = Gone()
    proxy = weakref.proxy(gone)
    del gone

    clean = redact({"config": _Unreadable(), "proxy": proxy, "step": 1})

    assert clean == {"config": REDACTED, "proxy": proxy, "step": 1}
