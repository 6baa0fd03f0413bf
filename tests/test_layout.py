"""The import graph of src/runlines: no module imports one that imports it back.

Every import counts, wherever it runs: at the top of a module, inside a function, under
TYPE_CHECKING, and by name (a dotted module name in a string, as `importlib.import_module` and
the CLI's COMMAND_GROUPS take it). A package's files named as data (`resources.files(...)`) are
no import of its code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules(src: Path) -> dict[str, Path]:
    """Return each module under *src* by dotted name: a package by its __init__.py."""
    found = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _data_anchors(tree: ast.AST) -> set[int]:
    """Return the ids of the strings that name a package as a place of files, not code."""
    anchors: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name == "files":
                anchors.update(id(arg) for arg in node.args)
    return anchors


def _imports(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """Return the modules of *modules* that module *name* (at *path*) imports, anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    anchors = _data_anchors(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                found.add(whole if whole in modules else base)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "." in node.value
            and node.value in modules
            and id(node) not in anchors
        ):
            found.add(node.value)
    return {module for module in found if module in modules and module != name}


def import_graph(src: Path) -> dict[str, set[str]]:
    """Return, for each module under *src*, the modules under *src* it imports."""
    modules = _modules(src)
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(groups)


def _described(graph: Mapping[str, set[str]], group: list[str]) -> Iterator[str]:
    for module in group:
        inside = sorted(graph[module].intersection(group))
        yield f"{module} imports {', '.join(inside)}"


def test_no_module_imports_one_that_imports_it_back() -> None:
    graph = import_graph(SRC)

    found = cycles(graph)

    assert "runlines.reading._frames" in graph["runlines.reading"]  # it sees the lazy doors
    assert found == [], "import cycles:\n" + "\n".join(
        "; ".join(_described(graph, group)) for group in found
    )


def test_the_read_side_imports_neither_the_cli_nor_the_dashboard() -> None:
    graph = import_graph(SRC)
    upward = ("runlines.cli", "runlines.dashboard")

    found = {
        (module, other)
        for module, imported in graph.items()
        if module.startswith("runlines.reading")
        for other in imported
        if other.startswith(upward)
    }

    assert found == set()


def test_the_check_sees_imports_in_functions_by_name_and_relative(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("LAZY = {'a': 'pkg.sub.b'}\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from . import c\n")
    (package / "sub" / "c.py").write_text(
        "import importlib.resources\n"
        "def g():\n"
        "    import pkg\n"
        "    return importlib.resources.files('pkg.sub')\n"
    )

    graph = import_graph(tmp_path)

    assert graph == {
        "pkg": {"pkg.sub.b"},
        "pkg.sub": set(),
        "pkg.sub.b": {"pkg.sub.c"},
        "pkg.sub.c": {"pkg"},
    }
    assert cycles(graph) == [["pkg", "pkg.sub.b", "pkg.sub.c"]]


def test_no_module_swaps_its_class() -> None:
    """A module stays a module: `runlines.serve` is a function, not a callable package."""
    swaps = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr == "__class__"
        and isinstance(node.ctx, ast.Store)
    ]

    assert swaps == []


# --- the doors: what crosses a package border -------------------------------------------------

READ_SIDE: Final = ("runlines.reading", "runlines.dashboard", "runlines.sql", "runlines.spark")
# the writer and what only a run uses; `_layout`, `_encoding`, `errors` and `fields` are the
# on-disk contract and the vocabulary both sides share
WRITE_SIDE: Final = (
    *("runlines.run", "runlines._writer", "runlines.sinks", "runlines._logfile"),
    *("runlines._watching", "runlines._compact", "runlines._lifecycle", "runlines._capture"),
    *("runlines._context", "runlines._console", "runlines.artifacts", "runlines.sampling"),
    *("runlines.spans", "runlines.redaction", "runlines._native", "runlines._speedups"),
    *("runlines.integrations", "runlines.testing"),
)


def _is_under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _reached(graph: Mapping[str, set[str]], start: str) -> set[str]:
    """Return the modules *start* imports, and those they import, and so on."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for other in graph[todo.pop()] - seen:
            seen.add(other)
            todo.append(other)
    return seen


def test_the_read_side_never_imports_the_write_side() -> None:
    graph = import_graph(SRC)

    found = {
        (module, other)
        for module in graph
        if _is_under(module, READ_SIDE)
        for other in _reached(graph, module)
        if _is_under(other, WRITE_SIDE)
    }

    assert "runlines._layout" in _reached(graph, "runlines.reading._files")  # it follows imports
    assert found == set()


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _from_imports(src: Path) -> Iterator[tuple[str, str, str, ast.ImportFrom]]:
    """Yield (importing module, its package, imported module, node) of each `from` import."""
    modules = _modules(src)
    for name, path in modules.items():
        package = _package(name, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*up, base] if base else up)
                yield name, package, base, node


def underscore_imports(src: Path) -> list[str]:
    """Return each underscore name (no module) imported from outside the importer's package."""
    modules = _modules(src)
    found = []
    for name, package, base, node in _from_imports(src):
        home = base if base in modules and modules[base].name == "__init__.py" else None
        home = home or base.rpartition(".")[0]
        for alias in node.names:
            private = alias.name.startswith("_") and not alias.name.startswith("__")
            if private and f"{base}.{alias.name}" not in modules and home != package:
                found.append(f"{name}: {alias.name} from {base}")
    return sorted(found)


def door_bypasses(src: Path) -> list[str]:
    """Return each import of a module inside a private package from outside that package."""
    modules = _modules(src)
    doors = {
        n for n, p in modules.items() if p.name == "__init__.py" and n.split(".")[-1][0] == "_"
    }
    found = []
    for name, path in modules.items():
        for other in _imports(name, path, modules):
            for door in doors:
                inside = other.startswith(door + ".")
                if inside and not (name == door or name.startswith(door + ".")):
                    found.append(f"{name} imports {other}, past {door}")
    return sorted(found)


def _function_imports(src: Path) -> Iterator[tuple[str, int, str]]:
    """Yield (file, line, imported module) of each import inside a function."""
    for path, line, module, _ in _function_import_statements(src):
        yield path, line, module


def _function_import_statements(src: Path) -> Iterator[tuple[str, int, str, str]]:
    """Yield (file, line, imported module, the statement as one line) of each import inside a
    function: `from m import a, b` once, `import a, b` once per module."""
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for func in ast.walk(tree):
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(func):
                    if isinstance(node, ast.Import):
                        for alias in node.names:
                            where = str(path.relative_to(src))
                            yield where, node.lineno, alias.name, f"import {alias.name}"
                    elif isinstance(node, ast.ImportFrom):
                        module = node.module or "."
                        names = ", ".join(alias.name for alias in node.names)
                        where = str(path.relative_to(src))
                        yield where, node.lineno, module, f"from {module} import {names}"


# cli/_query.py takes these of reading/_duckdb.py until #26's step 4 gives that engine its door
# (reading/_duckdb/__init__): then this list is empty.
UNDERSCORE_IMPORTS_LEFT: Final[list[str]] = []  # cli/_query asks the SQL engine's door

OPTIONAL = "an optional dependency at its door"
KEPT_OFF = "a module that one call needs, kept off `import runlines`, a run's open or a load"
# Every import inside a function in src/, and why it is not at its module's top. 292 before the
# engine and the copy got their doors (#26), 246 with two sessions' features, 47 once each module
# imported at its top and run.py opened through one door, 32 once the install checks asked
# `find_spec` and the frames' and the dashboard's parts came through their packages' doors. A
# new one is added here with its reason, or moved to its module's top.
FUNCTION_IMPORTS: Final[dict[tuple[str, str], tuple[str, str]]] = {
    # the extras
    ("runlines/_compact.py", "from runlines.reading import _copies, _rules"): (
        OPTIONAL, "numpy and pyarrow: the Parquet copy written at close"),
    ("runlines/_media.py", "from PIL import Image"): (OPTIONAL, "Pillow: JPEG and PIL images"),
    ("runlines/_media.py", "import pyarrow.parquet"): (OPTIONAL, "pyarrow: a media table"),
    ("runlines/cli/_import.py", "from runlines.importers.mlflow import import_mlflow"): (
        OPTIONAL, "mlflow"),
    ("runlines/cli/_import.py", "from runlines.importers.wandb import import_wandb"): (
        OPTIONAL, "wandb"),
    ("runlines/cli/_import.py", "from runlines.importers.tensorboard import import_tensorboard"): (
        OPTIONAL, "tensorboard"),
    ("runlines/cli/_plot.py",
     "from runlines.cli._plotting import nonfinite_count, plot_groups, plot_metric, runs_and_events"
     ): (OPTIONAL, "matplotlib"),
    ("runlines/cli/_query.py", "from runlines.reading import _duckdb"): (OPTIONAL, "duckdb"),
    ("runlines/compat/tensorboard.py", "import numpy"): (OPTIONAL, "numpy: a histogram or image"),
    ("runlines/dashboard/_history.py", "from runlines.dashboard import _copy_columns"): (
        OPTIONAL, "numpy and pyarrow: a history read from the copy"),
    ("runlines/dashboard/_http.py", "import pyarrow.parquet"): (OPTIONAL, "pyarrow: a table page"),
    ("runlines/dashboard/_http.py", "from runlines.dashboard._groups import grouped"): (
        OPTIONAL, "numpy and pandas: grouped charts"),
    ("runlines/dashboard/_report.py", "from runlines.dashboard import _charts"): (
        OPTIONAL, "numpy: the report's charts"),
    ("runlines/reading/_buffers.py", "import pyarrow.compute"): (
        OPTIONAL, "pyarrow.compute: 25 ms that the copy's write does without"),
    ("runlines/reading/_copies/format.py", "from pyarrow import ArrowException, PythonFile, parquet"
     ): (OPTIONAL, "pyarrow: a copy's footer"),
    ("runlines/reading/_duckdb/views.py", "import pandas"): (OPTIONAL, "pandas: a DuckDB frame"),
    ("runlines/reading/_frames/__init__.py", "from runlines.reading import _duckdb"): (
        OPTIONAL, "duckdb: load(engine='duckdb')"),
    ("runlines/reading/_rules.py", "import pandas"): (OPTIONAL, "pandas: every frame's door"),
    ("runlines/reading/_spark/__init__.py", "from runlines.reading._spark import frame"): (
        OPTIONAL, "pyspark"),
    ("runlines/run.py", "from runlines import _media"): (
        OPTIONAL, "numpy, Pillow and pyarrow: a media call"),
    ("runlines/sql.py", "from runlines.reading import _duckdb"): (OPTIONAL, "duckdb"),
    # the platform's: POSIX only
    ("runlines/run.py", "from runlines import _tee"): (
        OPTIONAL, "ctypes, fcntl and termios: console capture, POSIX only"),
    ("runlines/cli/_top.py", "from runlines.cli._screen import Screen"): (
        OPTIONAL, "termios and tty: top's live view, POSIX only"),
    # kept off import, a run's open or a load, for what they cost there
    ("runlines/run.py",
     "from runlines import _capture, _console, _context, _encoding, _layout, _lifecycle, "
     "_logfile, _notes, _watching, artifacts, fields"): (
        KEPT_OFF, "the write side's one door: orjson, filelock, signal, subprocess: a run's open"),
    ("runlines/_layout.py", "from filelock import FileLock, Timeout"): (
        KEPT_OFF, "filelock (about 20 ms): a reader asks only of a log whose lock file exists"),
    ("runlines/cli/_watch.py", "from runlines._alerts import Rule, Watcher, parse_target"): (
        KEPT_OFF, "urllib and http.client: `runlines watch` only, not every command's start"),
    ("runlines/_console.py", "import shutil"): (
        KEPT_OFF, "shutil (bz2, lzma; 2-3 ms): the first status line, not a run's open"),
    ("runlines/_native.py", "import sysconfig"): (KEPT_OFF, "sysconfig: the extension is missing"),
    ("runlines/fields.py", "import tomllib"): (KEPT_OFF, "tomllib (3 ms): a vocabulary file"),
    ("runlines/reading/_rules.py", "import difflib"): (
        KEPT_OFF, "difflib: an error message's suggestion, not a load (tests/test_import.py)"),
    ("runlines/sinks.py", "import select"): (KEPT_OFF, "select: a sink on a descriptor"),
    ("runlines/spans.py", "import inspect"): (
        KEPT_OFF, "inspect (ast, dis; 4-8 ms): span used as a decorator"),
}  # fmt: skip
FUNCTION_IMPORTS_FEWER_THAN: Final = 40  # the target of #26


def test_no_underscore_name_is_imported_across_a_package_border() -> None:
    found = underscore_imports(SRC)

    assert found == UNDERSCORE_IMPORTS_LEFT


def test_a_private_package_is_entered_by_its_door_alone() -> None:
    """Other modules use only what `reading/_columnar/__init__` (and its kin) hands on."""
    found = door_bypasses(SRC)

    assert "runlines.reading._columnar" in {
        n for n, p in _modules(SRC).items() if p.name == "__init__.py"
    }
    assert found == []


def test_each_import_inside_a_function_is_listed_with_its_reason() -> None:
    found = {(path, statement) for path, _, _, statement in _function_import_statements(SRC)}

    assert len(found) > 0  # the check sees them
    assert sorted(found - FUNCTION_IMPORTS.keys()) == [], "new: list each with its reason"
    assert sorted(FUNCTION_IMPORTS.keys() - found) == [], "gone: remove each from the list"


def test_fewer_than_40_imports_inside_functions() -> None:
    found = list(_function_imports(SRC))

    assert len(found) < FUNCTION_IMPORTS_FEWER_THAN, "\n".join(
        f"{path}:{line} {module}" for path, line, module in found
    )
    assert len(found) == len(FUNCTION_IMPORTS)  # no statement listed once and found twice


def test_the_border_checks_see_names_doors_and_functions(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "_inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_inner" / "__init__.py").write_text("from pkg._inner.part import thing\n")
    (package / "_inner" / "part.py").write_text("thing = 1\n_hidden = 2\n")
    (package / "user.py").write_text(
        "from pkg._inner.part import _hidden\ndef f():\n    from pkg._inner import thing\n"
    )

    assert underscore_imports(tmp_path) == ["pkg.user: _hidden from pkg._inner.part"]
    assert door_bypasses(tmp_path) == ["pkg.user imports pkg._inner.part, past pkg._inner"]
    assert [m for _, _, m in _function_imports(tmp_path)] == ["pkg._inner"]


def _shared_basenames(tests: Path) -> dict[str, list[str]]:
    """Return each file name that more than one test module under *tests* carries."""
    seen: dict[str, list[str]] = {}
    for path in sorted(tests.rglob("*.py")):
        if "benchmarks" not in path.parts:
            seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    return {name: where for name, where in seen.items() if len(where) > 1 and name != "conftest.py"}


def test_no_two_test_modules_share_a_file_name() -> None:
    # The test folders are not packages, so pytest imports each module by its file name; a second
    # tests/x/test_a.py beside tests/y/test_a.py stops the whole collection.
    shared = _shared_basenames(Path(__file__).resolve().parent)
    assert not shared, f"rename one of each: {shared}"


def test_the_file_name_check_sees_a_name_in_two_folders(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "test_same.py").write_text("", encoding="utf-8")
        (tmp_path / folder / "conftest.py").write_text("", encoding="utf-8")
    (tmp_path / "a" / "test_other.py").write_text("", encoding="utf-8")
    assert _shared_basenames(tmp_path) == {"test_same.py": ["a/test_same.py", "b/test_same.py"]}
