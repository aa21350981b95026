"""Import paths resolved in a hive's folder, without leaving the folder on ``sys.path``.

A hive names tools and output schemas as ``module:name``, where the module may be a
file next to the hive (``tools.py``). While the hive's paths resolve, its folder leads
``sys.path``; then it is taken out. Modules imported from the folder stay imported (the
tools are their functions) and are remembered as the folder's, so that two hives in
different folders, each with its own ``tools.py``, each get their own: while one
hive's paths resolve, the same-named modules of another hive's folder are set aside,
and after, they are put back. The modules keep their plain names (not unique ones made
from the path): a hive's files import each other by them (``from helpers import x``),
and Ray's actors import them by them too, from the folder on their ``PYTHONPATH``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from runtime.config.imports import failing_once

__all__ = ["imports_from"]

_FOLDERS: dict[Path, dict[str, ModuleType]] = {}
"""The modules imported from each hive's folder, by name."""


@contextmanager
def imports_from(folder: Path) -> Iterator[None]:
    """A block in which imports look in ``folder`` (absolute) first, and find the
    modules imported from it before rather than another hive's of the same names."""
    own = _FOLDERS.get(folder, {})
    # A list, compared by identity: what sys.modules holds need not be hashable.
    others = [m for f, modules in _FOLDERS.items() if f != folder for m in modules.values()]
    aside = {
        name: module
        for name, module in list(sys.modules.items())
        if (name in own and module is not own[name])
        or (any(module is m for m in others) and _has_module(folder, name))
    }
    for name in aside:
        del sys.modules[name]
    sys.modules.update(own)
    before = dict(sys.modules)
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        with failing_once():  # a tools.py that fails is run, and told, once
            yield
    finally:
        if entry in sys.path:  # unless a module the block imported took it out
            sys.path.remove(entry)
        imported = {
            name: module
            for name, module in list(sys.modules.items())
            if before.get(name) is not module and _is_in(module, folder)
        }
        if imported:
            _FOLDERS[folder] = {**own, **imported}
        sys.modules.update(aside)


def _has_module(folder: Path, name: str) -> bool:
    """Whether ``folder`` has a module or package that ``name`` imports from."""
    top = name.partition(".")[0]
    return (folder / f"{top}.py").is_file() or (folder / top).is_dir()


def _is_in(module: ModuleType, folder: Path) -> bool:
    where = getattr(module, "__file__", None)
    if where is None:  # a namespace package: where its portions are
        where = next(iter(getattr(module, "__path__", None) or ()), None)
    return where is not None and Path(where).resolve().is_relative_to(folder)
