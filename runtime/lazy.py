"""Attributes of a package that load their module on first use (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


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
