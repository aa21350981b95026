"""Fixtures for the tests of honeycomb's packages."""

from __future__ import annotations

from pathlib import Path

import pytest


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
