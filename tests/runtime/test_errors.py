"""The error tree in runtime/errors.py: every class it draws exists, and every leaf is
raised by the code, so no documented error is one that never happens."""

from __future__ import annotations

import re
from pathlib import Path

import runtime
import runtime.errors

ROOT = Path(__file__).resolve().parents[2]
TREE = re.findall(r"[├└]── (\w+)", runtime.errors.__doc__ or "")


def sources() -> str:
    files = [
        p for package in ("runtime", "workers", "honeycomb") for p in (ROOT / package).rglob("*.py")
    ]
    return "\n".join(p.read_text() for p in files if p.name != "errors.py")


def test_the_tree_draws_every_error_class() -> None:
    classes = {
        name
        for name in runtime.errors.__all__
        if isinstance(getattr(runtime.errors, name), type)
        and issubclass(getattr(runtime.errors, name), runtime.HoneycombError)
        and name != "HoneycombError"
    }
    assert set(TREE) == classes


def test_every_leaf_of_the_tree_is_raised_somewhere() -> None:
    code = sources()
    leaves = [
        name
        for name in TREE
        if not any(
            other is not getattr(runtime.errors, name)
            and issubclass(other, getattr(runtime.errors, name))
            for other in (getattr(runtime.errors, n) for n in TREE)
        )
    ]
    never = [name for name in leaves if not re.search(rf"\b{name}\(", code)]
    assert never == []
