"""A small ASGI service whose endpoint awaits ``Executor.run()``.

Run it with the demo hive on the offline model::

    pip install uvicorn starlette
    uvicorn examples.service:app --port 8000
    curl -s localhost:8000/run -d '{"task": "Compare the weather in Rome and Paris this weekend."}'

Many requests run at once on one event loop, each its own isolated run. A client that
disconnects cancels its run: every worker and tool call of it stops.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from honeycomb import Executor, HoneycombError, RunResult
from runtime import dump_value

HIVE = Path(__file__).parent / "trip" / "hive.yaml"
_EXPECTED = 'send a JSON body like {"task": "..."} (a non-empty task; an optional "run_id")'


def create_app(executor: Executor) -> Starlette:
    """The service around one Executor, shared by every request."""
    active = _Counter()

    async def run(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:  # not JSON, or not UTF-8: the client's mistake, not ours
            body = None
        task = body.get("task") if isinstance(body, dict) else None
        run_id = body.get("run_id") if isinstance(body, dict) else None
        if not isinstance(task, str) or not task.strip() or not isinstance(run_id, str | None):
            return JSONResponse({"error": _EXPECTED}, status_code=422)
        result: RunResult | None = None
        error: HoneycombError | None = None
        async with anyio.create_task_group() as tg:
            # The run and a watcher for the client going away; whichever ends first
            # cancels the other.
            tg.start_soon(_cancel_on_disconnect, request, tg.cancel_scope)
            active.value += 1
            try:
                result = await executor.run(task, run_id=run_id or None)
            except HoneycombError as exc:
                error = exc
            finally:
                active.value -= 1
                tg.cancel_scope.cancel()
        if result is not None:
            return JSONResponse(_payload(result))
        if error is not None:
            return JSONResponse({"error": f"{type(error).__name__}: {error}"}, status_code=500)
        return Response(status_code=499)  # the client went away

    async def health(request: Request) -> Response:
        return JSONResponse({"active_runs": active.value})

    return Starlette(
        routes=[Route("/run", run, methods=["POST"]), Route("/health", health, methods=["GET"])]
    )


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


app = create_app(Executor.from_yaml(HIVE))
