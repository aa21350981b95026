"""Fixtures for the run store's tests."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.stores import KINDS, Where

if TYPE_CHECKING:
    from tests.support.postgres import PostgresServer


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    """A new run store, not made yet: a file, then a schema of the session's
    PostgreSQL server (every test that takes it runs on both)."""
    if request.param == "sqlite":
        return tmp_path / "runs.db"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.url()


@pytest.fixture
def files(store: Where, tmp_path: Path) -> tuple[Where, Path, Path]:
    """The files of a durable run (tests/support/durable.py): its store (on each kind
    of store), the effects its side-effecting tool made, and its log of model calls."""
    return store, tmp_path / "effects.txt", tmp_path / "calls.txt"
