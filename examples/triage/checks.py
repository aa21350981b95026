"""A check of the triage eval (evals.yaml): plain Python, given the answer and the run."""

from __future__ import annotations

from typing import Any


def every_message_ticketed(answer: Any, run: Any) -> str | None:
    """Every message classified got a ticket: None when it did, else which did not."""
    classified = {
        c.arguments.get("message_id") for c in run.tool_calls if c.tool == "classify_message"
    }
    ticketed = {c.arguments.get("message_id") for c in run.tool_calls if c.tool == "open_ticket"}
    missing = sorted(str(m) for m in classified - ticketed)
    return f"no ticket for {', '.join(missing)}" if missing else None
