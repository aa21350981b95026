"""Import an object from a ``package.module:attribute`` path, with errors that say why."""

from __future__ import annotations

import ast
import functools
import importlib
import pkgutil
import site
import sys
import sysconfig
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from runtime.errors import ConfigError, did_you_mean

__all__ = ["failing_once", "import_object", "path_meant"]

_SCANNED = 50
"""The most modules :func:`path_meant` reads for a function a bare name may mean."""


def import_object(path: str) -> Any:
    """The object at ``package.module:attribute`` (dots after the colon walk attributes).

    Raises:
        ConfigError: naming the module or attribute that could not be found.
    """
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise ConfigError(f"{path!r} is not an import path; write it as 'package.module:name'")
    failed = _FAILED.get()
    if failed is not None and module_name in failed:  # not run again: see failing_once
        raise ConfigError(
            f"cannot import {path!r}: importing {module_name!r} failed, as the error of "
            f"{failed[module_name]!r} says"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not _on_the_path(missing, module_name):  # an import of the module's own
            raise ConfigError(_raised(path, module_name, exc)) from exc
        close = did_you_mean(missing, _modules_beside(missing)) or _meant(path)
        raise ConfigError(f"cannot import {path!r}: no module named {missing!r}{close}") from exc
    except (Exception, SystemExit) as exc:  # the module itself failed while importing
        # SystemExit too: a module that exits as it is imported (a script's argparse
        # at its top level) is a configuration's mistake, not the process's wish.
        raise ConfigError(_raised(path, module_name, exc)) from exc
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            names = [name for name in dir(obj) if not name.startswith("_")]
            raise ConfigError(
                f"cannot import {path!r}: {module_name!r} has no attribute {part!r}"
                f"{did_you_mean(part, names)}"
            ) from exc
    return obj


def path_meant(ref: str) -> str | None:
    """The import path a reference that names no module may have meant, among the
    modules of the user's folder (:func:`_own_folder`: a hive's, while its paths
    resolve): ``tools:f`` for ``tools.py:f``, ``myhive.tools:f`` or ``tools.f``, and for
    a bare ``f``, when a module there defines ``f`` at its top level. None: no such
    module."""
    module_name, sep, name = ref.partition(":")
    if not sep:
        module_name, _, name = ref.rpartition(".")
    folder = _own_folder()
    if not name or folder is None:
        return None
    if not module_name:
        found = [p for p in sorted(folder.glob("*.py"))[:_SCANNED] if _defines(p, name)]
        return f"{found[0].stem}:{name}" if found else None
    beside = {found.name for found in pkgutil.iter_modules([str(folder)])}
    parts = module_name.removesuffix(".py").split(".")
    for start in range(len(parts)):  # myhive.tools, then tools
        if parts[start] in beside:
            meant = f"{'.'.join(parts[start:])}:{name}"
            return meant if meant != ref else None
    return None


def _own_folder() -> Path | None:
    """The folder of the user's own modules: the first on ``sys.path`` that is not the
    interpreter's nor an installed package's (a hive's, while its paths resolve; else
    the script's, or the working directory). Not merely the first: a library may put
    its own there (Ray, once imported, its vendored packages). None: there is none."""
    installed = _installed()
    for entry in sys.path:
        folder = Path(entry or ".").resolve()
        if folder.is_dir() and not any(folder.is_relative_to(p) for p in installed):
            return folder
    return None


@functools.cache
def _installed() -> tuple[Path, ...]:
    """The folders of the interpreter's modules, its installed packages and scripts."""
    kinds = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")
    found = {sysconfig.get_path(kind) for kind in kinds}
    found.update(site.getsitepackages())
    found.add(site.getusersitepackages())
    return tuple(Path(folder).resolve() for folder in found if folder)


def _defines(module: Path, name: str) -> bool:
    """Whether the source file ``module`` defines the function ``name`` at its top
    level (read, never imported: importing runs it)."""
    try:
        tree = ast.parse(module.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return any(isinstance(node, functions) and node.name == name for node in tree.body)


def _meant(path: str) -> str:
    """``" (did you mean 'tools:f'?)"`` for the path :func:`path_meant` finds, else ``""``."""
    meant = path_meant(path)
    return f" (did you mean {meant!r}?)" if meant is not None else ""


def _on_the_path(missing: str, module_name: str) -> bool:
    """Whether the module ``missing`` is ``module_name`` or a package it is in: the
    path is misspelt, rather than the module importing one that is not installed."""
    return module_name == missing or module_name.startswith(f"{missing}.")


_FAILED: ContextVar[dict[str, str] | None] = ContextVar("_FAILED", default=None)
"""In a :func:`failing_once` block: each module that failed as it was imported, and
the path whose error says why."""


@contextmanager
def failing_once() -> Iterator[None]:
    """A block in which a module that fails as it is imported is run once: Python
    forgets a module that failed, so each path into it ran it again (its top-level
    code, side effects and all) and told the same failure again. A later path into it
    is told that it failed, naming the path whose error says why."""
    token = _FAILED.set({})
    try:
        yield
    finally:
        _FAILED.reset(token)


def _raised(path: str, module_name: str, exc: BaseException) -> str:
    """What ``exc``, raised as ``module_name`` was imported, says of ``path`` (noted in
    a :func:`failing_once` block)."""
    failed = _FAILED.get()
    if failed is not None:
        failed.setdefault(module_name, path)
    return (
        f"cannot import {path!r}: importing {module_name!r} raised "
        f"{type(exc).__name__}: {exc}{_where(exc, module_name)}"
    )


def _modules_beside(name: str) -> list[str]:
    """The modules a misspelt module ``name`` may have meant: those of its package
    (``pkg.tols``: ``pkg``'s), or, for a top-level one, those of the user's folder
    (:func:`_own_folder`: a hive's, while its paths resolve), by the same dotted form."""
    parent, _, _ = name.rpartition(".")
    where: Sequence[str]
    if not parent:
        own = _own_folder()
        where = [str(own)] if own is not None else []
    else:
        try:
            where = importlib.import_module(parent).__path__
        except Exception:  # a parent that fails to import: no names to offer
            return []
    prefix = f"{parent}." if parent else ""
    return [prefix + found.name for found in pkgutil.iter_modules(list(where))]


def _where(exc: BaseException, module_name: str) -> str:
    """Where in the module ``module_name`` the statement that raised ``exc`` as it was
    imported is, as a ``SyntaxError`` says it (`` (tools.py, line 12)``): a ``@tool``
    refused, a name not defined. Empty when no frame of it is on the traceback (a
    ``SyntaxError``, which names the line itself)."""
    places = [
        (frame.f_code.co_filename, line)
        for frame, line in traceback.walk_tb(exc.__traceback__)
        if frame.f_globals.get("__name__") == module_name
    ]
    if not places:
        return ""
    file, line = places[-1]
    return f" ({Path(file).name}, line {line})"
