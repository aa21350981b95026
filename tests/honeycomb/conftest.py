"""Fixtures for the tests of honeycomb's packages."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.stores import KINDS, Where

if TYPE_CHECKING:
    from tests.support.postgres import PostgresServer


@pytest.fixture
def fast_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo without simulated tool latency, run in a temporary folder (where its run
    store goes); its outbox, which this returns, in that folder too."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(tmp_path / "outbox"))
    return tmp_path / "outbox"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A run store's file, not made yet."""
    return tmp_path / "runs.db"


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Where:
    """A new run store, not made yet: a file, then a schema of the session's
    PostgreSQL server (every test that takes it runs on both)."""
    if request.param == "sqlite":
        return tmp_path / "runs.db"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.url()
