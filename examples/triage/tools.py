"""Tools for the triage example: read the bundled support inbox, classify a message by
keyword rules, and open a ticket. Opening a ticket is a side effect: Honeycomb runs those
calls one at a time, in order, and with a run store journals each one, so a resumed run
never opens the same ticket twice.

``HONEYCOMB_TICKETS`` (default ``./tickets``) is where :func:`open_ticket` writes.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any, Literal

import anyio

from honeycomb import ToolContext, tool

INBOX = Path(__file__).parent / "inbox.json"
Priority = Literal["low", "normal", "high"]

# (category, priority, words that point to it), first match wins.
_RULES: tuple[tuple[str, Priority, tuple[str, ...]], ...] = (
    ("billing", "high", ("charged", "refund", "invoice", "payment")),
    ("account access", "high", ("log in", "login", "password", "locked")),
    ("bug", "normal", ("crash", "error", "broken", "fails")),
    ("feature request", "low", ("planned", "feature", "could you add", "dark mode")),
)


@cache
def _messages() -> dict[str, dict[str, str]]:
    loaded = json.loads(INBOX.read_text(encoding="utf-8"))["messages"]
    return {m["message_id"]: m for m in loaded}


@tool
def read_inbox() -> list[dict[str, str]]:
    """Read the new messages of the support inbox: id, from, subject and text."""
    return list(_messages().values())


@tool
def classify_message(message_id: str) -> dict[str, Any]:
    """Classify one support message: its category and the priority it needs.

    Args:
        message_id: The message's id, such as "MSG-101".

    Raises:
        ValueError: for an id the inbox does not have.
    """
    message = _messages().get(message_id.strip().upper())
    if message is None:
        raise ValueError(f"no message {message_id!r}; the inbox has {', '.join(_messages())}")
    text = f"{message['subject']} {message['text']}".lower()
    for category, priority, hints in _RULES:
        hit = next((h for h in hints if h in text), None)
        if hit is not None:
            return {"message_id": message_id, "category": category, "priority": priority,
                    "because": f"it mentions {hit!r}"}  # fmt: skip
    return {"message_id": message_id, "category": "other", "priority": "normal",
            "because": "no rule matched"}  # fmt: skip


@tool(side_effects=True)
async def open_ticket(
    message_id: str, subject: str, priority: Priority, details: str, ctx: ToolContext
) -> str:
    """Open a support ticket for one message (a side effect): writes it as a file and
    returns its path.

    Args:
        message_id: The message the ticket is for.
        subject: The ticket's subject.
        priority: How urgent it is.
        details: What the ticket is about.
    """
    folder = anyio.Path(os.environ.get("HONEYCOMB_TICKETS", "tickets"))
    await folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{message_id}.md"
    text = f"# [{priority}] {subject}\n\n{details}\n\n---\nOpened by call {ctx.call_id}.\n"
    await path.write_text(text, "utf-8")
    return str(await path.resolve())
