"""A small hive and cases files written for the eval tests, a one-worker Executor whose
answer they choose, and the runs their checks are shown without running anything."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from honeycomb import Executor, Role
from honeycomb.evals import CaseRun, ToolUse
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import Usage
from runtime.models.layers.cassette import cassette

TINY_HIVE = """
name: tiny
models:
  offline: {provider: offline, latency: 0}
roles:
  planner:
    description: Splits the request into subtasks.
  writer:
    description: Writes a short answer.
  aggregator:
    description: Merges the results.
planner: planner
aggregator: aggregator
"""
"""A hive of one worker on the offline model, with no latency: a run takes a
millisecond or two."""


def write(folder: Path, name: str, text: str) -> Path:
    """``folder/name`` holding ``text`` (dedented)."""
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def tiny_hive(folder: Path) -> Path:
    return write(folder, "hive.yaml", TINY_HIVE)


def writer(
    answer: str = "done",
    *,
    instructions: str = "",
    store: RunStore | None = None,
    **tape: Path,
) -> Executor:
    """One worker of the role ``writer`` (with ``instructions``) that answers
    ``answer``, its run's answer as it is; with ``record=PATH`` or ``replay=PATH``, its
    model's calls are kept in that cassette, or answered from it."""
    model = FunctionModel(lambda request: answer)
    return Executor(
        [Role(name="writer", instructions=instructions)],
        models=cassette({"m": model}, **tape) if tape else {"m": model},
        aggregator="concat",
        planner=lambda task: [("writer", task)],
        store=store,
    )


def shown_run(answer: Any = "", **fields: Any) -> CaseRun:
    """A case's run as its checks would see it, with ``fields`` given."""
    calls = tuple(ToolUse(**c) if isinstance(c, dict) else c for c in fields.pop("tool_calls", ()))
    usage = fields.pop("usage", Usage())
    text = answer if isinstance(answer, str) else ""
    made = {"case": "c", "task": "t", "run_id": "r", "status": "ok", **fields}
    return CaseRun(answer=answer, answer_text=text, usage=usage, tool_calls=calls, **made)
