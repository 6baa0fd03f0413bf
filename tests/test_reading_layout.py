"""The read side's layout: one module per concept, no import cycles, nothing of the writer."""

from __future__ import annotations

import ast
from pathlib import Path

import runlines.reading

SRC = Path(runlines.reading.__file__).resolve().parents[1]
WRITE_SIDE = {"run", "sinks", "sampling", "artifacts", "_capture", "_lifecycle", "spans"}


def _imports(path: Path) -> set[str]:
    """Return the runlines modules *path* imports, at the top or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("runlines"):
            for alias in node.names:  # `from package import module` imports that module
                whole = f"{node.module}.{alias.name}"
                found.add(whole if _is_module(whole) else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("runlines"))
    return found


def _is_module(name: str) -> bool:
    path = SRC.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _read_side() -> dict[str, set[str]]:
    files = [*(SRC / "reading").rglob("*.py"), *(SRC / "cli").glob("*.py"), SRC / "_layout.py"]
    files += [SRC / "sql.py", SRC / "spark.py"]
    return {_module(f): _imports(f) for f in files}


def test_the_read_side_imports_nothing_of_the_write_side() -> None:
    graph = _read_side()

    used = {m.split(".")[1] for deps in graph.values() for m in deps if m.count(".") >= 1}

    assert used & WRITE_SIDE == set()


def test_the_reading_modules_import_each_other_without_a_cycle() -> None:
    graph = {
        m: {d for d in deps if d.startswith("runlines.reading.")}
        for m, deps in _read_side().items()
    }
    graph = {m: deps for m, deps in graph.items() if m.startswith("runlines.reading.")}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, " -> ".join((*path, module))
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, (*path, module))
        done.add(module)

    for module in graph:
        visit(module, ())

    assert "runlines.reading._columnar.blocks" in done
