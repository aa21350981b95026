"""Tools and a model importable by path, for the tests that run workers on both
backends (in this process, and in Ray actors, which are other processes: what the
tools see, they write to files the test reads)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import time

from runtime import (
    AssistantMessage,
    ModelRequest,
    ToolCall,
    ToolContext,
    ToolMessage,
    UserMessage,
    tool,
)


def _append(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def record_line(path: str, line: str) -> None:
    """Append a line to a file (a plain function, made a tool by a test).

    Args:
        path: The file.
        line: The line.
    """
    _append(path, line)


def _read(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as given:
        return given.read()


@tool(exclusive="ledger")
async def ledger(path: str, entry: str) -> str:
    """Write an entry to the ledger, holding its exclusive key for a while.

    Args:
        path: The ledger's file.
        entry: What to write.
    """
    _append(path, f"start {time.time():.6f} {entry}")
    await asyncio.sleep(0.03)
    _append(path, f"end {time.time():.6f} {entry}")
    return entry


@tool(side_effects=True)
def note(path: str, text: str) -> str:
    """A side effect: append a line to a file.

    Args:
        path: The file.
        text: The line.
    """
    _append(path, text)
    return f"noted {text}"


@tool(side_effects=True)
def intent_seen(store: str) -> str:
    """Say whether this call's intent is in the run store's journal as it runs (an
    intent with no outcome yet).

    Args:
        store: The run store's file.
    """
    with sqlite3.connect(store) as db:
        (count,) = db.execute(
            "SELECT count(*) FROM journal WHERE tool = 'intent_seen' AND status IS NULL"
        ).fetchone()
    return "intent seen" if count else "no intent"


@tool(side_effects=True)
def key(context: ToolContext) -> str:
    """Say this call's idempotency key."""
    return context.idempotency_key


@tool
async def wait(path: str, seconds: float) -> str:
    """Wait, saying so in a file with this process's id; say so too when cancelled. A
    wait after one in another process is short (the worker continued elsewhere).

    Args:
        path: The file.
        seconds: How long.
    """
    before = _read(path)
    _append(path, f"waiting {os.getpid()}")
    if "waiting" in before:
        return "waited again"
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _append(path, "cancelled")
        raise
    return "waited"


@tool(side_effects=True, approval=True)
def guarded_note(path: str, text: str) -> str:
    """Append ``text`` to a file, once a person approves.

    Args:
        path: The file.
        text: The line.
    """
    _append(path, text)
    return f"noted {text}"


@tool(timeout=0.05)
async def held() -> str:
    """Hold the event loop past the call's time limit, as an async tool that blocks does
    (it cannot be cancelled: its result stands, with a warning)."""
    time.sleep(0.25)  # noqa: ASYNC251 (what the call does wrong: it holds the event loop)
    return "held"


@tool
def pid() -> str:
    """The process that runs the call."""
    return str(os.getpid())


@tool
def crash(path: str, after: float) -> str:
    """End this process after a while (as a tool that runs out of memory does), saying
    so in a file with the process's id first.

    Args:
        path: The file.
        after: Seconds it runs first.
    """
    _append(path, f"crashing {os.getpid()}")
    time.sleep(after)
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


@tool
async def echo(text: str, delay: float) -> str:
    """Answer ``text`` after ``delay`` seconds.

    Args:
        text: What to answer.
        delay: Seconds.
    """
    await asyncio.sleep(delay)
    return text


def scripted(request: ModelRequest) -> AssistantMessage | str:
    """A model whose task is its script, as JSON: ``{"turns": [[[tool, arguments],
    ...], ...], "log": file or null, "block": file}`` (with ``block``, its first answer
    takes half a second, blocking its event loop, and says so in that file). Turn after
    turn it makes the calls listed (call ids ``c<turn>_<i>``), then answers with the
    observations, in order, joined by ``|`` (with ``"told": true``, it answers with
    what it was told instead: its script, and whatever followed it). It holds no
    state, so a worker that moves to another process makes the same calls again."""
    task = next(m for m in request.messages if isinstance(m, UserMessage)).content
    script = json.loads(task.split("\n")[0])
    if script.get("told"):
        return task
    if script.get("log"):
        _append(script["log"], f"call {os.getpid()}")
    turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
    if script.get("block") and turn == 0:  # its first answer holds its process up
        _append(script["block"], "answering")
        time.sleep(0.5)  # blocking: the actor's messages wait until it answers
        _append(script["block"], "answered")
    turns = script["turns"]
    if turn < len(turns):
        calls = tuple(
            ToolCall(id=f"c{turn}_{i}", name=name, arguments=json.dumps(arguments))
            for i, (name, arguments) in enumerate(turns[turn])
        )
        return AssistantMessage(tool_calls=calls)
    seen = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    return "|".join(seen)
