"""Hive files written for a test, and the mistakes loading one reports."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from honeycomb import ConfigErrors
from honeycomb.hive import load_hive

CHATTY = """\
name: chatty
models:
  offline:
    provider: offline
    latency: 0
roles:
  planner:
    description: Splits requests into subtasks.
  researcher:
    description: Finds facts about cities and their weather.
  aggregator:
    description: Merges the findings.
"""
"""A hive on the offline model, at once: what ``honeycomb chat`` and the sessions talk to."""


def hive(folder: Path, text: str) -> Path:
    """``folder/hive.yaml`` holding ``text`` (dedented)."""
    path = folder / "hive.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def errors_of(path: Path) -> list[str]:
    """Each error loading the hive at ``path`` reports; the test fails if it loads."""
    with pytest.raises(ConfigErrors) as caught:
        load_hive(path)
    return [str(e) for e in caught.value.errors]
