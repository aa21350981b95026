"""Logging: nothing at import, and one call to see every model and tool call with
its run, worker and turn."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import anyio
import pytest

from honeycomb import Executor, Role, Subtask, tool
from honeycomb.testing import ScriptedModel
from honeycomb.tracing import configure_logging
from runtime.testing import call


def test_importing_honeycomb_configures_and_imports_no_logging() -> None:
    code = (
        "import logging, sys, honeycomb; "
        "print('structlog' in sys.modules, logging.getLogger().handlers)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False []"
    assert done.stderr == ""


async def test_configured_json_logs_carry_run_worker_and_turn() -> None:
    import structlog

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        structlog.get_logger("tools").info("looking up", key=key)
        await anyio.lowlevel.checkpoint()
        return key

    out = io.StringIO()
    configure_logging(json=True, stream=out)
    model = ScriptedModel({"r1/a": [[call("lookup", {"key": "k"})], "done"]})
    executor = Executor(
        [Role(name="w", description="d", tools=("lookup",))], model, tools=[lookup],
        aggregator="concat",
    )  # fmt: skip
    await executor.run("t", subtasks=[Subtask(id="a", role="w", instruction="i")], run_id="r1")
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    by_event: dict[str, dict[str, object]] = {}
    for entry in entries:  # the first of each kind
        by_event.setdefault(entry["event"], entry)
    model_call = by_event["model_call.finished"]
    assert (model_call["run_id"], model_call["worker"], model_call["turn"]) == ("r1", "a", 1)
    assert model_call["level"] == "info"
    assert "timestamp" in model_call
    tool_call = by_event["tool_call.finished"]
    assert (tool_call["tool"], tool_call["status"], tool_call["turn"]) == ("lookup", "ok", 1)
    own = by_event["looking up"]  # the tool's own log line is bound too
    assert (own["run_id"], own["worker"], own["turn"], own["key"]) == ("r1", "a", 1, "k")


def test_console_logs_and_level_filter() -> None:
    import structlog

    out = io.StringIO()
    configure_logging(level="warning", stream=out)
    structlog.get_logger("x").info("hidden")
    structlog.get_logger("x").warning("shown", n=1)
    text = out.getvalue()
    assert "hidden" not in text
    assert "shown" in text
    assert "n=1" in text
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging(level="loud")


async def test_console_logs_write_no_terminal_escapes_from_a_run() -> None:
    """A model's made-up tool name and call id (values without spaces, which the
    console renderer writes as they are), a tool's own message and the traceback it
    logs reach the console with their control characters as spaces: none can clear
    the screen or retitle the window (they went out raw)."""
    import structlog

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        try:
            raise ValueError(f"no \x1b[31m{key}")
        except ValueError:
            structlog.get_logger("tools").exception("lookup \x1b[2J failed")
        return key

    out = io.StringIO()
    configure_logging(stream=out)
    escapes = [call("\x1b[2Jrm", {}, id="c\x1b]0;owned\x07"), call("lookup", {"key": "\x1b[5m"})]
    model = ScriptedModel({"r1/a": [escapes, "done"]})
    executor = Executor(
        [Role(name="w", description="d", tools=("lookup",))], model, tools=[lookup],
        aggregator="concat",
    )  # fmt: skip
    await executor.run("t", subtasks=[Subtask(id="a", role="w", instruction="i")], run_id="r1")
    text = out.getvalue()
    assert "tool=' [2Jrm'" in text
    assert "call_id='c ]0;owned '" in text
    assert "lookup  [2J failed" in text
    assert "ValueError: no  [31m" in text  # the traceback, its lines kept
    assert not any(c in text for c in "\x1b\x07")
