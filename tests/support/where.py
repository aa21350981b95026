"""A run store as a child process is given it on its command line: a file (a
:class:`~pathlib.Path`) or a URL (a ``str``), as ``RunStore`` takes it.

Apart from :mod:`tests.support.stores` (which pytest's marks come with): the modules
the tests start as processes of their own import this one, and a child that imported
pytest spent a third of its start on it for nothing."""

from __future__ import annotations

from pathlib import Path

__all__ = ["Where", "named"]

Where = Path | str
"""A store: its file, or its PostgreSQL URL."""


def named(given: str) -> Where:
    """The store a child process is given on its command line."""
    return given if "://" in given else Path(given)
