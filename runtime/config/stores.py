"""How a configuration names a run store: a file, or the URL of a database Honeycomb
knows. The one place that says which URLs those are, so that a hive's ``store:`` is
checked as the run store checks what it is given when it opens."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = [
    "DEFAULT_SCHEMA",
    "URL_SCHEMES",
    "is_url",
    "password_problem",
    "store_problem",
    "url_schema",
]

URL_SCHEMES = ("postgresql://", "postgres://")
"""How a PostgreSQL store is named (a libpq connection URL)."""

DEFAULT_SCHEMA = "honeycomb"
"""The schema of a PostgreSQL store whose URL names none (``?schema=``)."""

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


def is_url(where: str | Path) -> bool:
    """Whether ``where`` names a PostgreSQL store (else it is an SQLite file)."""
    return isinstance(where, str) and where.startswith(URL_SCHEMES)


def store_problem(where: str | Path) -> str | None:
    """What is wrong with ``where`` as the name of a run store: a URL of a database
    Honeycomb does not know (``mysql://``), or a PostgreSQL URL that cannot be read or
    whose schema is not a plain name; None for a file or a PostgreSQL URL."""
    if isinstance(where, str) and "://" in where and not is_url(where):
        return (
            f"the run store {where.split('://')[0]}:// is not one Honeycomb knows: "
            "give a file, or a postgresql:// URL"
        )
    if is_url(where):
        try:
            schema = url_schema(str(where))
        except ValueError as exc:  # urlsplit's: a host's [ never closed
            return f"the run store's URL cannot be read: {exc}"
        if not _PLAIN_NAME.fullmatch(schema):
            return f"the run store's schema {schema!r} is not a plain name (letters, digits, _)"
    return None


def password_problem(password_env: str | None) -> str | None:
    """Why a PostgreSQL store cannot read its password from ``password_env``: the
    variable is not set (or is empty); None when it is, or none is named. Told by the
    store as it opens, and at a hive's ``store:`` before a command opens it."""
    if password_env is None or os.environ.get(password_env):
        return None
    return f"the run store's password_env names {password_env}, which is not set"


def url_schema(url: str) -> str:
    """The schema a PostgreSQL store's URL names (its first ``schema`` parameter), or
    :data:`DEFAULT_SCHEMA`."""
    for pair in urlsplit(url).query.split("&"):
        name, _, value = pair.partition("=")
        if unquote(name) == "schema":
            return unquote(value)
    return DEFAULT_SCHEMA
