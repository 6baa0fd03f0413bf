"""The public surface: a complete, sorted __all__ and a light import."""

from __future__ import annotations

import subprocess
import sys

import runlines


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in dir(runlines) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(runlines, name)).__name__ == "module"}

    assert runlines.__all__ == sorted(runlines.__all__)
    assert set(runlines.__all__) - {"__version__"} == public - modules - {"annotations"}
    assert all(getattr(runlines, name) is not None for name in runlines.__all__)


def test_import_runlines_imports_no_heavy_library() -> None:
    heavy = ("pandas", "numpy", "matplotlib", "torch", "pyarrow", "filelock", "runlines.reading")
    code = f"import sys, runlines; print(','.join(m for m in {heavy!r} if m in sys.modules))"

    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert loaded.stdout.strip() == ""
