"""Every place in a JSON-like value, for fuzz tests that change one of them."""

from __future__ import annotations

from typing import Any

from runtime import YamlPath


def paths_in(data: Any, here: YamlPath = ()) -> list[YamlPath]:
    """Every key and index path in ``data``, parents before their children."""
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    found: list[YamlPath] = []
    for key, value in items:
        found += [(*here, key), *paths_in(value, (*here, key))]
    return found
