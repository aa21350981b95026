"""docs/api.md, the reference of Honeycomb's public surface: one section a public
module (``## `honeycomb.events```), one table row a name (``| `RunFinished` | ... |``).
The tests read which modules are public from it."""

from __future__ import annotations

import re

from tests.support import ROOT

__all__ = ["API_PAGE", "documented_names", "moved_names", "public_modules"]

API_PAGE = ROOT / "docs" / "api.md"

_SECTION = re.compile(r"^## `(honeycomb(?:\.\w+)?)`\n(.*?)(?=^## |\Z)", re.M | re.S)
_ROW = re.compile(r"^\| `(\w+)` \|", re.M)
_MOVED = re.compile(r"^\| `(honeycomb\.\w+)` \| (`.*`) \|$", re.M)


def _sections() -> dict[str, str]:
    return {m[1]: m[2] for m in _SECTION.finditer(API_PAGE.read_text(encoding="utf-8"))}


def public_modules() -> list[str]:
    """``honeycomb`` and the namespaces the page documents, sorted."""
    return sorted(_sections())


def documented_names(module: str) -> list[str]:
    """The names the page's section on ``module`` lists, in the page's order."""
    return _ROW.findall(_sections()[module])


def moved_names() -> dict[str, list[str]]:
    """The page's table of where names went: the names each namespace took from
    ``honeycomb``."""
    page = API_PAGE.read_text(encoding="utf-8")
    table = page[page.index("## Where names went") :].split("\n## ", 1)[0]
    return {m[1]: re.findall(r"`(\w+)`", m[2]) for m in _MOVED.finditer(table)}
