"""The command line's layout: each command in a module of its own, none importing the package."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import runlines.cli
from runlines.cli import _parser

CLI = Path(runlines.cli.__file__).resolve().parent


def _handlers() -> dict[str, str]:
    """Return each command's name and the module of the function that runs it."""
    (commands,) = (a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.get_default("handler").__module__ for name, sub in commands.choices.items()}


def test_each_command_runs_in_a_module_of_its_own() -> None:
    handlers = _handlers()

    assert {name: module for name, module in handlers.items() if module == "runlines.cli"} == {}
    assert handlers == {
        "ls": "runlines.cli._ls",
        "show": "runlines.cli._show",
        "tail": "runlines.cli._tail",
        "compare": "runlines.cli._compare",
        "plot": "runlines.cli._plot",
        "which": "runlines.cli._which",
        "query": "runlines.cli._query",
        "export": "runlines.cli._query",
        "diff": "runlines.cli._diff",
        "top": "runlines.cli._top",
        "compact": "runlines.cli._compact",
        "serve": "runlines.cli._serve",
        "tag": "runlines.cli._tag",
        "untag": "runlines.cli._tag",
        "note": "runlines.cli._tag",
        "report": "runlines.cli._report",
        "watch": "runlines.cli._watch",
        "import": "runlines.cli._import",
        "sync": "runlines.cli._sync",
    }


def test_no_module_of_the_cli_imports_the_package_back() -> None:
    found = []
    for path in sorted(p for p in CLI.glob("*.py") if p.name != "__init__.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "runlines.cli":
                found.append(f"{path.name}:{node.lineno} from runlines.cli import ...")
            elif isinstance(node, ast.Import) and "runlines.cli" in (a.name for a in node.names):
                found.append(f"{path.name}:{node.lineno} import runlines.cli")

    assert found == []
