"""Every ```python block in README.md and docs/ runs as written, file by file, in a fresh folder."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from _optional import skip_without
from runlines.errors import NonfiniteWarning

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Pages whose example run logs a NaN or an infinity on purpose: a user who copies it sees the
# warning that says so, and so does the test.
LOGS_NONFINITE = frozenset({"reading.md", "scale.md"})
# Pages whose examples need an optional package: they train with a framework, or query with SQL.
NEEDS = {"integrations.md": ("torch", "transformers", "optuna"), "scale.md": ("duckdb",)}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_python_examples_run(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for framework in NEEDS.get(page.name, ()):
        skip_without(framework)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}

    warns = pytest.warns(NonfiniteWarning, match="logged a non-finite value")
    with warns if page.name in LOGS_NONFINITE else contextlib.nullcontext():
        for number, block in enumerate(BLOCK.findall(page.read_text()), start=1):
            code = compile(block, f"{page.name} block {number}", "exec")
            exec(code, namespace)

    capsys.readouterr()
