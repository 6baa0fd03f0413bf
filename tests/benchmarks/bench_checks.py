"""Cost per call of the field and redaction checks, side by side with a baseline.

Run: ``python tests/benchmarks/bench_checks.py``; prints a markdown table. Not collected by pytest.
"""

from __future__ import annotations

import hashlib
import timeit
from collections.abc import Callable
from dataclasses import dataclass

from runlines.fields import Vocabulary, json_kind
from runlines.redaction import DEFAULT_REDACTOR

_ROUNDS = 15
_TRACEBACK = "".join(
    f'  File "/home/user/project/train.py", line {n}, in step\n    loss = model(batch)\n'
    for n in range(25)
)


@dataclass(frozen=True, slots=True)
class Case:
    """One measured operation and the baseline it is compared with."""

    name: str
    call: Callable[[], object]
    baseline_name: str
    baseline: Callable[[], object]


def _ns_per_call(case: Case) -> tuple[float, float]:
    """Return the best ns per call of the case and of its baseline, measured in turns.

    Turns, so that a busy machine slows both sides alike.
    """
    timers = (timeit.Timer(case.call), timeit.Timer(case.baseline))
    numbers = [timer.autorange()[0] for timer in timers]
    best = [float("inf"), float("inf")]
    for _ in range(_ROUNDS):
        for side, (timer, number) in enumerate(zip(timers, numbers, strict=True)):
            best[side] = min(best[side], timer.timeit(number) / number * 1e9)
    return best[0], best[1]


def _empty_call() -> object:
    """An empty call: the floor any function call pays."""
    return None


def _cases() -> list[Case]:
    redactor = DEFAULT_REDACTOR
    vocab = Vocabulary()
    record: dict[str, object] = {"epoch": 3, "step": 1200, "loss": 0.412, "lr": 3e-4}
    record["split"] = "train"
    nested: dict[str, object] = {**record, "config": {"optimizer": "adamw", "betas": [0.9, 0.99]}}
    digest = hashlib.sha256(b"checkpoint").hexdigest()
    path = "/data/imagenet/train/n01440764/ILSVRC2012_val_00000293.JPEG"
    argv = ["train.py", "--lr", "3e-4", "--epochs", "10", "--data", "/data/imagenet"]
    known = {"split": False}
    loss = 0.412
    redactor.is_secret_key("split")
    return [
        Case(
            "redact_fields(record, split='train')",
            lambda: redactor.redact_fields(record),
            "dict(record)",
            lambda: dict(record),
        ),
        Case(
            "redact_fields(record + nested config)",
            lambda: redactor.redact_fields(nested),
            "dict(record)",
            lambda: dict(nested),
        ),
        Case(
            "redact_text('train')", lambda: redactor.redact_text("train"), "empty call", _empty_call
        ),
        Case(
            "redact_text(sha256 digest)",
            lambda: redactor.redact_text(digest),
            "empty call",
            _empty_call,
        ),
        Case(
            "redact_text(file path)", lambda: redactor.redact_text(path), "empty call", _empty_call
        ),
        Case(
            "redact_text(2 KB traceback)",
            lambda: redactor.redact_text(_TRACEBACK),
            "traceback.lower()",
            _TRACEBACK.lower,
        ),
        Case(
            "is_secret_key('split'), cached",
            lambda: redactor.is_secret_key("split"),
            "dict.get",
            lambda: known.get("split"),
        ),
        Case(
            "redact_argv(7 args)",
            lambda: redactor.redact_argv(argv),
            "list(argv)",
            lambda: list(argv),
        ),
        Case(
            "Vocabulary.agreed_name('loss')",
            lambda: vocab.agreed_name("loss"),
            "dict.get",
            lambda: known.get("split"),
        ),
        Case("json_kind(0.412)", lambda: json_kind(loss), "type(0.412)", lambda: type(loss)),
    ]


def _numpy_cases() -> list[Case]:
    try:
        import numpy as np
    except ImportError:
        return []
    value = np.float32(0.412)
    return [Case("json_kind(np.float32)", lambda: json_kind(value), "type()", lambda: type(value))]


def main() -> None:
    """Print one markdown table row per case."""
    print("| operation | ns/call | baseline | ns/call | ratio |")
    print("|---|---:|---|---:|---:|")
    for case in _cases() + _numpy_cases():
        cost, base = _ns_per_call(case)
        ratio = cost / base
        print(
            f"| `{case.name}` | {cost:,.0f} | `{case.baseline_name}` | {base:,.0f} | {ratio:.1f}x |"
        )


if __name__ == "__main__":
    main()
