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
