"""Attributes of a package that load their module on first use (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_attributes", "lazy_names"]


def lazy_attributes(
    package: str, where: Mapping[str, str], space: dict[str, Any]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``where[name]`` on first access and keeps
    the value in the package's namespace ``space``."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        space[name] = value
        return value

    return __getattr__


def lazy_names(package: str, space: dict[str, Any], sources: Sequence[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the names of the module's ``__all__`` that it binds
    only for type checkers (``if TYPE_CHECKING:``), so that each name is written twice
    (there and in ``__all__``): on first access, the name is taken from the first of
    ``sources`` that has it, and kept in the module's namespace ``space``.

    The sources are packages that load their own names on first use (looking a name
    up in one loads only the module that defines it) or the defining modules
    themselves; a miss in one costs its import, so list the cheapest first.
    """

    def __getattr__(name: str) -> Any:
        if name in space["__all__"]:
            for source in sources:
                value = getattr(importlib.import_module(source), name, _MISSING)
                if value is not _MISSING:
                    space[name] = value
                    return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


_MISSING = object()
