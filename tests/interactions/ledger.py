"""What a cell's model and tools saw, in files: the model calls and the tool calls of
every life of a run, in this process or in Ray actors (other processes, which can
only tell the test through files). One JSON object a line, appended."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Ledger", "Span", "overlap", "read"]


@dataclass(frozen=True)
class Ledger:
    """The files of one cell."""

    folder: Path

    @property
    def models(self) -> Path:
        return self.folder / "model_calls.jsonl"

    @property
    def tools(self) -> Path:
        return self.folder / "tool_calls.jsonl"

    @property
    def halted(self) -> Path:
        """Written by a tool that holds the first life of a run where the test stops it."""
        return self.folder / "halted"

    def model_calls(self) -> list[dict[str, Any]]:
        return _read(self.models)

    def tool_calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The tool calls that ran to their end (with ``start`` and ``end`` times), in
        the order they ended."""
        started: dict[tuple[Any, ...], float] = {}
        ended = []
        for line in _read(self.tools):
            key = (line["life"], line["worker"], line["call"])
            if line["phase"] == "start":
                started[key] = line["at"]
            elif tool is None or line["tool"] == tool:
                ended.append({**line, "start": started.get(key, line["at"]), "end": line["at"]})
        return ended

    def tool_starts(self, tool: str | None = None) -> list[dict[str, Any]]:
        """Every tool call that started (those cut off too)."""
        return [
            line
            for line in _read(self.tools)
            if line["phase"] == "start" and (tool is None or line["tool"] == tool)
        ]


def append(path: str | Path, entry: dict[str, Any]) -> None:
    """Add ``entry`` as a line; one write of one line (appends are not interleaved)."""
    line = (json.dumps(entry, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def now() -> float:
    """A clock every process of the machine shares (CLOCK_MONOTONIC)."""
    return time.monotonic()


def read(path: str | Path) -> list[dict[str, Any]]:
    """The entries of a ledger's file, oldest first."""
    return _read(Path(path))


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@dataclass(frozen=True)
class Span:
    """When something was in flight."""

    start: float
    end: float
    what: str


def overlap(spans: list[Span]) -> int:
    """The most spans in flight at one moment (a span ending as another starts is
    not in flight with it)."""
    edges = sorted([(s.start, 1) for s in spans] + [(s.end, -1) for s in spans])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most
