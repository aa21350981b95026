"""The standard fan-out workload, run through Honeycomb's public API.

N workers under one Executor run with a static plan of N subtasks and a trivial
aggregator. Each worker takes K model turns; on turns 1..K-1 the fake model asks for T
parallel calls to an async ``lookup(key)`` tool (JSON-string arguments, so parsing and
validation run); on turn K it answers ``done-<i>``. The fake model goes through the
real ``Model`` protocol and checks that every earlier observation came back. It can
stream: its answers' text comes a character at a time (a token is seldom shorter). A
watched run (``Params.watched``) goes through ``Executor.stream``, consuming every
event as a live view would; a streamed one (``Params.stream``) too, with text deltas.
"""

from __future__ import annotations

import atexit
import functools
import itertools
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from benchmarks.spec import Counts, Params, lookup, pause, verdict
from honeycomb import Executor, Policy, Role, Subtask, SubtaskResult, tool
from honeycomb.store import RunStore
from runtime import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
    Usage,
    logs,
)
from runtime.events import TextDelta
from runtime.model import TextSink


class BenchModel:
    """The fake model: a real ``Model`` that scripts the workload and checks that the
    loop delivered every observation of earlier turns, in order."""

    def __init__(self, params: Params, counts: Counts) -> None:
        self.params = params
        self.counts = counts

    async def complete(self, request: ModelRequest) -> ModelResponse:
        worker = int((request.conversation or "w0").rsplit("/w", 1)[-1])
        turn = 1 + sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        seen = [m.content for m in request.messages if isinstance(m, ToolMessage)]
        self.counts.model_call(self.params, worker, turn, seen)
        await pause(self.params.lm)
        if turn < self.params.k:
            calls = tuple(
                [
                    ToolCall(
                        id=f"c{turn}-{j}",
                        name="lookup",
                        arguments=json.dumps({"key": f"{worker}-{turn}-{j}"}),
                    )
                    for j in range(self.params.t)
                ]
            )  # a list comprehension, as the floor's model makes its calls
            message = AssistantMessage(tool_calls=calls)
        else:
            message = AssistantMessage(content=f"done-{worker}")
        return ModelResponse(message=message, usage=Usage(input_tokens=10, output_tokens=5))

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, its text then shown a character at a time."""
        response = await self.complete(request)
        for piece in response.message.content or "":
            on_text(piece)
        return response


def build_executor(
    params: Params, counts: Counts, handlers: Sequence[Any] = (), store: RunStore | None = None
) -> Executor:
    """The Executor for the workload, its fake model and tool counting into ``counts``."""
    lookup_tool = tool(side_effects=params.side_effects)(lookup(params, counts))
    # Honeycomb's defaults, as users get them: every tool call under the default time
    # limit, events logged when the application configures structlog.
    role = Role(name="worker", tools=("lookup",), max_turns=params.k + 1,
                concurrency=max(params.t, 1))  # fmt: skip
    # log_events is on by default and logs only once the application has configured
    # structlog; the processes of F's logging figure do, and its baseline turns it off.
    logging_baseline = not params.events and logs.configured()
    return Executor(
        [role],
        BenchModel(params, counts),
        tools=[lookup_tool],
        aggregator=_aggregate,
        policy=Policy(max_workers=params.n, max_subtasks=params.n),
        on_event=handlers,
        log_events=not logging_baseline,
        store=store,
        trace=params.trace,
    )


async def _aggregate(task: str, results: Sequence[SubtaskResult]) -> str:
    return "\n".join(r.text for r in results if r.ok)


def plan(params: Params) -> list[Subtask]:
    return [Subtask(id=f"w{i}", role="worker", instruction=f"task {i}") for i in range(params.n)]


async def run_honeycomb(params: Params) -> dict[str, Any]:
    """Run the workload once through Honeycomb; returns counts and validity."""
    counts = Counts()
    events: list[object] = []
    handlers = [events.append] if params.events else []
    store = _store() if params.store else None
    executor = build_executor(params, counts, handlers, store)
    run_id = f"bench-{next(_RUN_IDS)}"
    if params.watched or params.stream:
        deltas = 0
        async with executor.stream(
            "fan out", subtasks=plan(params), run_id=run_id, text_deltas=params.stream
        ) as streamed:
            async for event in streamed:
                events.append(event)
                deltas += isinstance(event, TextDelta)
        result = streamed.result
        assert result is not None, streamed.error
        if params.stream and deltas < params.n:  # every answer streams
            counts.broken.append(f"{deltas} text deltas for {params.n} answers")
        return verdict(params, counts, result.answer_text.split("\n"), events=len(events))
    result = await executor.run("fan out", subtasks=plan(params), run_id=run_id)
    return verdict(params, counts, result.answer_text.split("\n"), events=len(events))


_RUN_IDS = itertools.count(1)


STORE_ENV = "HONEYCOMB_BENCH_STORE"
"""A PostgreSQL URL to keep the runs of G in, instead of an SQLite file (``--store``)."""


@functools.cache
def _store() -> RunStore:
    """The process's run store, in a temporary folder (or a schema of its own of the
    database ``HONEYCOMB_BENCH_STORE`` names): opened once and shared by every run, as
    a service shares one (each run has its own id)."""
    url = os.environ.get(STORE_ENV)
    if url:
        store = RunStore(scratch_schema(url, f"bench_{os.getpid()}"))
        atexit.register(drop_schema, store)
        return store
    folder = Path(tempfile.mkdtemp(prefix="honeycomb-bench-"))
    store = RunStore(folder / "runs.db")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    atexit.register(store.close)  # runs first: the file is closed, then removed
    return store


def scratch_schema(url: str, schema: str) -> str:
    """``url`` with its store in the schema ``schema``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "schema"] + [("schema", schema)]
    return urlunsplit(parts._replace(query=urlencode(query)))


def drop_schema(store: RunStore) -> None:
    """Close ``store`` and drop the schema a benchmark made for it."""
    import psycopg
    from psycopg import sql

    from honeycomb.store.postgres import split_url

    store.close()
    conninfo, schema, _ = split_url(store.where)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
