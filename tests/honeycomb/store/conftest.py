"""Fixtures for the run store's tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The files of a durable run (tests/support/durable.py): its store, the effects
    its side-effecting tool made, and its log of model calls."""
    return tmp_path / "runs.db", tmp_path / "effects.txt", tmp_path / "calls.txt"
