"""The public surface: a complete, sorted __all__ in every public module, and a light import."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from types import ModuleType

import pytest

import runlines
from _optional import skip_without

PUBLIC_MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(runlines.__path__, "runlines.")
    if not any(part.startswith("_") for part in info.name.split("."))
)


def isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then CamelCase, then the rest."""
    if name.isupper() or (name.upper() == name and "_" in name):
        return 0, name
    return (1 if name[:1].isupper() else 2), name


def bound_names(module: ModuleType) -> set[str]:
    """The public names *module*'s own source binds at top level (not those it imports)."""
    names: set[str] = set()
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_the_public_modules_are_found() -> None:
    assert {"runlines.run", "runlines.reading", "runlines.fields"} <= set(PUBLIC_MODULES)
    assert not any(name.startswith("runlines._") for name in PUBLIC_MODULES)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_every_public_module_has_a_sorted_complete_all(name: str) -> None:
    # lightning, transformers: need their framework; the importers, the tool they read
    if name.startswith(("runlines.integrations.", "runlines.importers.")):
        skip_without(name.rpartition(".")[2])
    module = importlib.import_module(name)
    exported = list(getattr(module, "__all__", ()))

    assert hasattr(module, "__all__"), f"{name} has no __all__"
    assert exported == sorted(exported, key=isort_key), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{name}.__all__ lists a name twice"
    missing = bound_names(module) - set(exported)
    assert not missing, f"{name} binds public names not in __all__: {sorted(missing)}"
    absent = [n for n in exported if not hasattr(module, n)]
    assert not absent, f"{name}.__all__ lists names it does not have: {absent}"


def test_the_top_level_all_is_sorted_and_complete() -> None:
    public = {name for name in dir(runlines) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(runlines, name)).__name__ == "module"}

    assert runlines.__all__ == sorted(runlines.__all__, key=isort_key)
    assert set(runlines.__all__) - {"__version__"} == public - modules - {"annotations"}
    assert all(getattr(runlines, name) is not None for name in runlines.__all__)


def test_the_top_level_exports_run_redactor_vocabulary_field_readers_and_errors() -> None:
    from runlines import errors, fields, reading, redaction, sql

    expected = {
        "Run": runlines.run.Run,
        "Redactor": redaction.Redactor,
        "Vocabulary": fields.Vocabulary,
        "Field": fields.Field,
        "load": reading.load,
        "iter_events": reading.iter_events,
        "compare": reading.compare,
        "query": sql.query,
        "export": sql.export,
        **{name: getattr(errors, name) for name in errors.__all__},
    }

    assert {name: getattr(runlines, name) for name in expected} == expected
    assert set(expected) <= set(runlines.__all__)


def test_an_unknown_top_level_name_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        _ = runlines.Nope


def test_import_runlines_imports_no_heavy_library() -> None:
    heavy = (
        *("pandas", "numpy", "matplotlib", "torch", "pyarrow", "filelock"),
        *("runlines.reading", "runlines.fields", "runlines.sql"),
    )
    code = f"import sys, runlines; print(','.join(m for m in {heavy!r} if m in sys.modules))"

    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert loaded.stdout.strip() == ""
