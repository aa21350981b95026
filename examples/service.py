"""A small ASGI service whose endpoints await ``Executor.run()`` or stream
``Executor.stream()`` as server-sent events.

Run it with the demo hive on the offline model::

    pip install uvicorn starlette
    uvicorn examples.service:app --port 8000
    curl -s localhost:8000/run -d '{"task": "Compare the weather in Rome and Paris this weekend."}'
    curl -sN localhost:8000/stream -d '{"task": "Compare the weather in Rome and Paris."}'

A body's optional ``"run_id"`` names the run: with a run store, one it keeps goes on
(or answers as it ended) when sent with its own task, and one of another task gets
409, naming the run and its task, and so does one under way for another request (send
it again once it ended); one no store could keep (over 512 bytes, not valid text) gets
422.

``/stream`` sends every event of the run as it happens (``event:`` its kind, ``data:``
its fields as JSON), the answers' text as it is written among them
(``model_call.text``), then ``result`` (what ``/run`` answers) or ``error`` (with the
``status`` ``/run`` would answer). A run refused before its first event (the 409s
above) is answered as ``/run`` answers it, with that status, not a stream. The text
is only ever accepted text: that of an answer output guards check comes once they
pass it, and never if they refuse it, so a client shows the deltas as they come.

Conversations are sessions (``docs/sessions.md``): ``POST /sessions/ID/messages``
with ``{"message": "..."}`` answers the message with a run that sees the session's
earlier messages and answers (as ``/run`` does, or as ``/stream`` does when the request
accepts ``text/event-stream``), and ``GET /sessions/ID`` gives the conversation, turn by
turn with each turn's run::

    curl -s localhost:8000/sessions/ann/messages -d '{"message": "Weather in Lisbon and Porto?"}'
    curl -s localhost:8000/sessions/ann/messages -d '{"message": "And Madrid?"}'
    curl -s localhost:8000/sessions/ann

Messages to one session are answered one at a time, in the order they come (one sent
with ``"busy": "refuse"`` while another is answered gets 409 instead); those of
different sessions run at once. With a run store (``HONEYCOMB_STORE=.honeycomb/runs.db``
before ``uvicorn``), a service started again goes on with its conversations: a message
it was answering as it stopped is answered first, from where its run stopped.

Many requests run at once on one event loop, each its own isolated run. A client that
disconnects cancels its run: every worker and tool call of it stops.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal, NamedTuple

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectSendStream
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from honeycomb import Event, Executor, HoneycombError, RunResult, RunStream, Turn
from honeycomb.errors import (
    ConfigError,
    GuardrailTripped,
    RunBusy,
    RunMismatch,
    SessionError,
)
from honeycomb.events import RunFinished
from honeycomb.messages import dump_value

HIVE = Path(__file__).parent / "trip" / "hive.yaml"
Busy = Literal["wait", "refuse"]
_EXPECTED = 'send a JSON body like {"task": "..."} (a non-empty task; an optional "run_id")'


def create_app(executor: Executor) -> Starlette:
    """The service around one Executor, shared by every request."""
    active = _Counter()

    async def run(request: Request) -> Response:
        asked = await _asked(request)
        if asked is None:
            return JSONResponse({"error": _EXPECTED}, status_code=422)
        task, run_id = asked
        return await _answered(
            request,
            active,
            lambda: executor.run(task, run_id=run_id or None),
            run_id,
        )

    async def stream(request: Request) -> Response:
        asked = await _asked(request)
        if asked is None:
            return JSONResponse({"error": _EXPECTED}, status_code=422)
        task, run_id = asked
        try:  # what stream() refuses at once (a run id no store keeps ...): not a stream
            started = executor.stream(task, run_id=run_id or None)
        except HoneycombError as exc:
            status, body = _failure(exc, run_id)
            return JSONResponse(body, status_code=status)
        return EventStream(_streamed(active, lambda: started, run_id))

    async def message(request: Request) -> Response:
        said = await _said(request)
        if said is None:
            return JSONResponse({"error": _SAY}, status_code=422)
        text, busy = said
        try:  # a turn the service was stopped during is resumed before the new message
            session = executor.session(
                request.path_params["session_id"], busy=busy, unfinished="resume"
            )
        except ConfigError as exc:  # an id no store keeps (over 512 bytes ...)
            return JSONResponse({"error": str(exc)}, status_code=422)
        if "text/event-stream" in request.headers.get("accept", ""):
            # A message that waits for the session's turn starts its stream at once.
            streamed = _streamed(active, lambda: session.stream(text))
            return EventStream(streamed, held=busy == "refuse")
        return await _answered(request, active, lambda: session.run(text))

    async def conversation(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            turns = await executor.session(session_id).turns()
        except ConfigError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        if not turns:
            return JSONResponse({"error": f"no session {session_id!r}"}, status_code=404)
        return JSONResponse(
            {"session_id": session_id, "turns": [_turn(t) for t in turns]},
        )

    async def health(request: Request) -> Response:
        return JSONResponse({"active_runs": active.value})

    return Starlette(
        routes=[
            Route("/run", run, methods=["POST"]),
            Route("/stream", stream, methods=["POST"]),
            Route("/sessions/{session_id}/messages", message, methods=["POST"]),
            Route("/sessions/{session_id}", conversation, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


async def _answered(
    request: Request,
    active: _Counter,
    answer: Callable[[], Awaitable[RunResult]],
    run_id: str | None = None,
) -> Response:
    """The JSON response to a request whose answer is a run's result (of ``run_id``,
    when the client named it)."""
    result: RunResult | None = None
    error: HoneycombError | None = None
    async with anyio.create_task_group() as tg:
        # The run and a watcher for the client going away; whichever ends first
        # cancels the other.
        tg.start_soon(_cancel_on_disconnect, request, tg.cancel_scope)
        active.value += 1
        try:
            result = await answer()
        except HoneycombError as exc:
            error = exc
        finally:
            active.value -= 1
            tg.cancel_scope.cancel()
    if result is not None:
        return JSONResponse(_payload(result))
    if error is not None:
        status, body = _failure(error, run_id)
        return JSONResponse(body, status_code=status)
    return Response(status_code=499)  # the client went away


def _failure(error: HoneycombError, run_id: str | None) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a request (on run ``run_id``, when the client named
    it) whose run raised ``error``. The client's mistakes, with 409 and never naming
    where the service keeps its runs, nor its processes: a run under way (another
    request carries it on, here or in another replica: send again once it ended), one
    the store keeps of another task (it goes on only with its own task, named), a
    session busy with another message (or whose last one did not finish). With 422: a
    run id no store keeps, a task the run's input guards refused. Anything else failed
    (500)."""
    if run_id and isinstance(error, RunBusy):
        said = f"run {run_id!r} is under way for another request: send it again once it ended"
        return 409, {"error": said, "run_id": run_id}
    if run_id and isinstance(error, RunMismatch) and error.task is not None:
        said = (
            f"run {run_id!r} is a run of another task ({error.task!r}): send that task "
            "to go on with it, or a new run_id for this one"
        )
        return 409, {"error": said, "run_id": run_id, "task": error.task}
    unkept = isinstance(error, ConfigError) and error.field == "run_id"
    refused = isinstance(error, GuardrailTripped) and error.kind == "input"
    status = 409 if isinstance(error, SessionError) else 422 if unkept or refused else 500
    return status, {"error": f"{type(error).__name__}: {error}"}


def _streamed(
    active: _Counter,
    start: Callable[[], AbstractAsyncContextManager[RunStream]],
    run_id: str | None = None,
) -> Producer:
    """What a stream's response sends: every event of the run ``start`` starts (of
    ``run_id``, when the client named it), then its result, or its error as the
    :class:`Answer` ``/run`` gives (:func:`_failure`), which :class:`EventStream` sends
    as the response itself when it comes first."""

    async def produce(send: MemoryObjectSendStream[bytes | Answer]) -> None:
        active.value += 1
        try:
            async with send:
                try:  # its start too: a session busy with another message refuses there
                    async with start() as run:
                        async for event in run:
                            await send.send(_sse(event.kind, _fields(event)))
                except HoneycombError as exc:
                    await send.send(Answer(*_failure(exc, run_id)))
                    return
                if run.result is not None:
                    await send.send(_sse("result", _payload(run.result)))
        finally:
            active.value -= 1

    return produce


_SAY = (
    'send a JSON body like {"message": "..."} (a non-empty message; "busy": "refuse" not to wait)'
)


async def _said(request: Request) -> tuple[str, Busy] | None:
    """The message a request's body says, and whether it may wait for the session's
    turn; None for a body of another shape."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    text, busy = body.get("message"), body.get("busy", "wait")
    if not isinstance(text, str) or not text.strip() or busy not in ("wait", "refuse"):
        return None
    return text, busy


def _turn(turn: Turn) -> dict[str, Any]:
    return {
        "turn": turn.turn,
        "run_id": turn.run_id,
        "message": turn.message,
        "answer": turn.answer,
        "status": turn.status,
        "cost": turn.cost,
        "started_at": turn.started_at,
    }


async def _asked(request: Request) -> tuple[str, str | None] | None:
    """The task and run id a request's body asks for; None for a body of another shape
    (not JSON, not UTF-8, no task: the client's mistake, not ours)."""
    try:
        body = json.loads(await request.body())
    except ValueError:
        return None
    task = body.get("task") if isinstance(body, dict) else None
    run_id = body.get("run_id") if isinstance(body, dict) else None
    if not isinstance(task, str) or not task.strip() or not isinstance(run_id, str | None):
        return None
    return task, run_id


class Answer(NamedTuple):
    """A JSON answer in place of a stream, sent as a stream's first item."""

    status: int
    body: dict[str, Any]


Producer = Callable[[MemoryObjectSendStream[bytes | Answer]], Coroutine[Any, Any, None]]


class EventStream(Response):
    """A ``text/event-stream`` answer: what ``produce`` sends, sent on as it comes.

    ``held``: the response starts with what ``produce`` sends first, the stream's first
    event (200) or an :class:`Answer` in its place (its status and JSON body), so that a
    request refused as its run starts gets its status, not a stream. Not held (a
    message that waits for its session's turn, which may take long: a client or a
    proxy gives up on a response whose headers do not come), it starts at once, and an
    ``Answer`` comes as the stream's ``error`` event. ``produce`` runs in a task group
    with the sending, so the run is never left going in an async generator; a client
    that disconnects cancels both.
    """

    def __init__(self, produce: Producer, *, held: bool = True) -> None:
        # Not Response's own headers: they would declare a length, of an empty body.
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        self.produce = produce
        self.held = held

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender, receiver = anyio.create_memory_object_stream[bytes | Answer](math.inf)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_on_disconnect_asgi, receive, tg.cancel_scope)
            tg.start_soon(self.produce, sender)
            async with receiver:
                first = await anext(receiver, b"") if self.held else b""
                if isinstance(first, Answer):
                    answer = JSONResponse(first.body, status_code=first.status)
                    await answer(scope, receive, send)
                    tg.cancel_scope.cancel()
                    return
                start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
                await send(start)
                if first:
                    await send(_body(first))
                async for chunk in receiver:
                    await send(_body(chunk))
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()


def _body(chunk: bytes | Answer) -> dict[str, Any]:
    """The ASGI message that sends ``chunk`` of a stream under way: an :class:`Answer`
    comes as its ``error`` event."""
    if isinstance(chunk, Answer):
        chunk = _sse("error", {**chunk.body, "status": chunk.status})
    return {"type": "http.response.body", "body": chunk, "more_body": True}


async def _cancel_on_disconnect_asgi(receive: Receive, scope: anyio.CancelScope) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


def _fields(event: Event) -> dict[str, Any]:
    """An event's fields for the stream; a run's end without its result, which
    follows on its own (``result``)."""
    fields = event.fields()
    if isinstance(event, RunFinished):
        fields.pop("result", None)
    return fields


def _sse(kind: str, data: Any) -> bytes:
    """One server-sent event: its name and its data as one line of JSON."""
    payload = pydantic_core.to_json(data, fallback=str).decode()
    return f"event: {kind}\ndata: {payload}\n\n".encode()


class _Counter:
    value = 0


async def _cancel_on_disconnect(request: Request, scope: anyio.CancelScope) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


def _payload(result: RunResult) -> dict[str, Any]:
    return {
        "run_id": result.run_id,
        "status": result.status,
        "answer": result.answer_text,
        "failures": {f.subtask.id: str(f.error) for f in result.failures},
        "timings": result.timings.model_dump(),
        "usage": dump_value(result.usage),
    }


# HONEYCOMB_STORE=.honeycomb/runs.db keeps the runs and the conversations there.
app = create_app(Executor.from_yaml(HIVE, store=os.environ.get("HONEYCOMB_STORE") or None))
