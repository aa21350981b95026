"""Fixtures for the run store's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.stores import Where


@pytest.fixture
def files(store: Where, tmp_path: Path) -> tuple[Where, Path, Path]:
    """The files of a durable run (tests/support/durable.py): its store (on each kind
    of store), the effects its side-effecting tool made, and its log of model calls."""
    return store, tmp_path / "effects.txt", tmp_path / "calls.txt"
