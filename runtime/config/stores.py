"""How a configuration names a run store: a file, or the URL of a database Honeycomb
knows. The one place that says which URLs those are, so that a hive's ``store:`` is
checked as the run store checks what it is given when it opens."""

from __future__ import annotations

from pathlib import Path

__all__ = ["URL_SCHEMES", "is_url", "store_problem"]

URL_SCHEMES = ("postgresql://", "postgres://")
"""How a PostgreSQL store is named (a libpq connection URL)."""


def is_url(where: str | Path) -> bool:
    """Whether ``where`` names a PostgreSQL store (else it is an SQLite file)."""
    return isinstance(where, str) and where.startswith(URL_SCHEMES)


def store_problem(where: str | Path) -> str | None:
    """What is wrong with ``where`` as the name of a run store: a URL of a database
    Honeycomb does not know (``mysql://``); None for a file or a PostgreSQL URL."""
    if isinstance(where, str) and "://" in where and not is_url(where):
        return (
            f"the run store {where.split('://')[0]}:// is not one Honeycomb knows: "
            "give a file, or a postgresql:// URL"
        )
    return None
