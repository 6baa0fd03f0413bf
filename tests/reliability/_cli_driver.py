"""Run the readers and every CLI command on each log of a folder; print one JSON result each.

Run as `python _cli_driver.py DIR`, in a subprocess with a timeout, so that a hang fails the
test instead of stopping the suite. Each result: {"file", "args", "status", "err", "crash"};
"crash" holds the traceback of any exception other than a RunlinesError (readers) or any
exception at all (the CLI, whose main() must catch its own).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import traceback
import warnings
from pathlib import Path

import runlines
from runlines import RunlinesError
from runlines.cli import main

COMMANDS = [
    ["show", "{log}"],
    ["tail", "{log}"],
    ["tail", "-n", "0", "{log}"],
    ["tail", "{log}", "--event", "step"],
    ["compare", "{log}", "--metric", "loss"],
    ["compare", "{log}", "--metric", "step"],
    ["ls", "{dir}"],
    ["which", "{log}", "{dir}"],
]


def run_cli(args: list[str]) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    crash = None
    status = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(args)
        except BaseException:
            crash = traceback.format_exc()
    return {"args": args, "status": status, "err": err.getvalue(), "crash": crash}


def run_reader(name: str, path: Path) -> dict[str, object]:
    crash = error = None
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            if name == "iter_events":
                list(runlines.iter_events(path))
            else:
                runlines.load(path)
        except RunlinesError as err:
            error = str(err)
        except BaseException:
            crash = traceback.format_exc()
    return {"args": [name], "status": None, "err": error or "", "crash": crash}


def main_driver(folder: Path) -> None:
    for log in sorted(folder.glob("*/*.jsonl")):  # one log (or a folder named like one) each
        results = [run_reader("iter_events", log), run_reader("load", log)]
        for template in COMMANDS:
            args = [part.format(log=log, dir=log.parent) for part in template]
            results.append(run_cli(args))
        for result in results:
            print(json.dumps({"file": log.name, **result}), flush=True)


if __name__ == "__main__":
    main_driver(Path(sys.argv[1]))
