"""Honeycomb's entries forwarded from the task that made them (a worker's in a Ray
actor) and logged where they arrive, as they would have been logged where made."""

from __future__ import annotations

import contextvars
import io
import json
from typing import Any

import structlog

from runtime import logs
from runtime.secrets import add_secret

SECRET = "tok-9c1e4b7a55"


def test_a_forwarded_entry_is_logged_with_what_its_task_bound_and_nothing_else() -> None:
    """The task that logs it had bound another worker's values (what runs there, a
    driver's channel, may have been started in one's task): none of them is the
    entry's. Its fields are masked as it is logged, the secret unknown where made."""
    out = io.StringIO()
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.JSONRenderer()],
        logger_factory=structlog.PrintLoggerFactory(file=out),
    )
    sent: list[tuple[Any, ...]] = []

    def made_there() -> None:
        logs.forwarded.set(lambda *entry: sent.append(entry))
        logs.bind(run_id="r1", worker="w1")
        logs.bind(turn=2)
        logs.log("tool_call.held_loop", {"tool": "t", "error": f"busy {SECRET}"}, level="warning")

    def logged_here() -> None:
        structlog.contextvars.bind_contextvars(worker="other", turn=7, extra="x")
        add_secret(SECRET, "token")
        logs.log_bound(*sent[0])

    contextvars.copy_context().run(made_there)
    contextvars.copy_context().run(logged_here)
    (line,) = out.getvalue().splitlines()
    assert json.loads(line) == {
        "event": "tool_call.held_loop",
        "tool": "t",
        "error": "busy [token hidden]",
        "run_id": "r1",
        "worker": "w1",
        "turn": 2,
    }
