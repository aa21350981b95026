"""Import an object from a ``package.module:attribute`` path, with errors that say why."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback
from pathlib import Path
from typing import Any

from runtime.errors import ConfigError, did_you_mean

__all__ = ["import_object"]


def import_object(path: str) -> Any:
    """The object at ``package.module:attribute`` (dots after the colon walk attributes).

    Raises:
        ConfigError: naming the module or attribute that could not be found.
    """
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise ConfigError(f"{path!r} is not an import path; write it as 'package.module:name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if not _on_the_path(missing, module_name):  # an import of the module's own
            raise ConfigError(_raised(path, module_name, exc)) from exc
        close = did_you_mean(missing, _modules_beside(missing))
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


def _on_the_path(missing: str, module_name: str) -> bool:
    """Whether the module ``missing`` is ``module_name`` or a package it is in: the
    path is misspelt, rather than the module importing one that is not installed."""
    return module_name == missing or module_name.startswith(f"{missing}.")


def _raised(path: str, module_name: str, exc: BaseException) -> str:
    """What ``exc``, raised as ``module_name`` was imported, says of ``path``."""
    return (
        f"cannot import {path!r}: importing {module_name!r} raised "
        f"{type(exc).__name__}: {exc}{_where(exc, module_name)}"
    )


def _modules_beside(name: str) -> list[str]:
    """The modules a misspelt module ``name`` may have meant: those of its package
    (``pkg.tols``: ``pkg``'s), or, for a top-level one, those of the folder that leads
    ``sys.path`` (a hive's own, while its paths resolve), by the same dotted form."""
    parent, _, _ = name.rpartition(".")
    try:
        where = importlib.import_module(parent).__path__ if parent else sys.path[:1]
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
