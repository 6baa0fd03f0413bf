"""`install()`: a meta path finder that makes `import <name>` give a drop-in module.

The drop-in module itself is `<name>` (its state, `wandb.run`, is the one module's), with a
spec of that name; a few submodules that integrations import (`wandb.sdk.lib.config_util`,
`wandb.wandb_run`) are made from the drop-in's names, and `importlib.metadata.version(<name>)`
(the check of Lightning's loggers) gives the drop-in's `__version__`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys
import types
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["install", "is_installed", "uninstall"]

# per drop-in: its submodules, each with the drop-in names it holds
_SUBMODULES: Final = {
    "wandb": {
        "sdk": (),
        "sdk.lib": ("RunDisabled",),
        "sdk.lib.config_util": ("ConfigError",),
        "wandb_run": ("Run",),
    },
}


class _Distribution(importlib.metadata.Distribution):
    """The drop-in as an installed distribution: its name and `__version__`, no files."""

    def __init__(self, name: str, module: types.ModuleType) -> None:
        self._metadata = (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {module.__version__}\n"
            f"Summary: runlines' drop-in for {name} ({module.__name__})\n"
        )

    def read_text(self, filename: str) -> str | None:
        return self._metadata if filename in ("METADATA", "PKG-INFO") else None

    def locate_file(self, path: str | os.PathLike[str]) -> Any:
        msg = f"runlines' drop-in has no installed files, so none at {os.fspath(path)!r}"
        raise FileNotFoundError(msg)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds *name* and its submodules; loads the drop-in module as *name*."""

    def __init__(self, name: str, module: types.ModuleType) -> None:
        self.name = name
        self.module = module
        self.submodules = {f"{name}.{sub}": names for sub, names in _SUBMODULES[name].items()}
        self.set_aside: dict[str, types.ModuleType] = {}  # the real modules, by name

    def find_spec(
        self, fullname: str, path: Any = None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name and fullname not in self.submodules:
            return None
        below = f"{fullname}."
        package = fullname == self.name or any(s.startswith(below) for s in self.submodules)
        spec = importlib.util.spec_from_loader(fullname, self, is_package=package)
        if spec is not None:
            spec.origin = self.module.__file__
        return spec

    def find_distributions(
        self, context: importlib.metadata.DistributionFinder.Context | None = None
    ) -> Iterable[importlib.metadata.Distribution]:
        """Give the drop-in's distribution when asked for *name* by name (a version check)."""
        asked = None if context is None else context.name
        if asked is None or asked.replace("-", "_").lower() != self.name:
            return []
        return [_Distribution(self.name, self.module)]

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == self.name:
            return self.module
        module = types.ModuleType(spec.name, f"runlines' {self.name} drop-in: {spec.name}")
        for attribute in self.submodules[spec.name]:
            setattr(module, attribute, getattr(self.module, attribute))
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the drop-in module is loaded already."""


def _finder(name: str) -> _Finder | None:
    for finder in sys.meta_path:
        if isinstance(finder, _Finder) and finder.name == name:
            return finder
    return None


def is_installed(name: str) -> bool:
    """Return whether `import <name>` gives the drop-in."""
    return _finder(name) is not None


def install(name: str, module: types.ModuleType) -> None:
    """Make `import <name>` give *module*; installing twice does nothing.

    A real `<name>` imported already stays with the code that holds it, and is set back in
    `sys.modules` by uninstall().
    """
    if is_installed(name):
        return
    finder = _Finder(name, module)
    # the real package imported already: set aside (code that holds it keeps it), back at
    # uninstall(); the names the drop-in gives are its own from now on
    for given in (name, *finder.submodules):
        if given in sys.modules and sys.modules[given] is not module:
            finder.set_aside[given] = sys.modules.pop(given)
    module.__path__ = []  # a package, for its submodules
    sys.meta_path.insert(0, finder)


def uninstall(name: str) -> None:
    """Undo install(): `import <name>` finds the real package again."""
    finder = _finder(name)
    if finder is None:
        return
    sys.meta_path.remove(finder)
    for loaded in [n for n in sys.modules if n == name or n.startswith(f"{name}.")]:
        if loaded == name or loaded in finder.submodules:
            del sys.modules[loaded]
    for attribute in ("__path__", *{sub.split(".")[0] for sub in _SUBMODULES[name]}):
        finder.module.__dict__.pop(attribute, None)
    sys.modules.update(finder.set_aside)
