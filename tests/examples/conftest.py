"""What the example tests share: the files the examples' tools write go to a temporary
folder, and their tools take no time (``pytestmark = usefixtures("example_outputs")``)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def example_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files the examples' tools write go to a temporary folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    for name in ("OUTBOX", "NOTES", "REPORTS", "TICKETS"):
        monkeypatch.setenv(f"HONEYCOMB_{name}", str(tmp_path / name.lower()))
