"""The model-call layer of tracing: each call of a worker's turn is a
``model_call.started`` event, then a ``model_call.finished`` with its status,
duration, model, tokens, cost, tool calls and, when the model's retry policy retried
it, its attempts and the time they waited (the ``model`` span of a run's trace).
While the call runs, :data:`~runtime.events.current_call` holds its report, which the
retry policy tells each retry (``model_call.retrying``).

Inside the budget (a refused call has no span) and outside the check of what the
model answered (a malformed answer is the span's error)."""

from __future__ import annotations

import time
from collections.abc import Coroutine
from typing import Any

from runtime.errors import HoneycombError
from runtime.events import Caller, CallReport, ModelCallFinished, ModelCallStarted, current_call
from runtime.messages import Usage
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model

__all__ = ["Traced"]


class Traced(WrapperModel):
    """Reports each call of ``inner`` to ``caller``'s tracer, when anyone listens."""

    __slots__ = ("caller",)  # benchmark E: one per worker

    def __init__(self, inner: Model, caller: Caller) -> None:
        super().__init__(inner)
        self.caller = caller

    def complete(self, request: ModelRequest) -> Coroutine[Any, Any, ModelResponse]:
        if not self.caller.tracer.enabled:  # nobody listens: nothing to build
            return self.inner.complete(request)
        return self._traced(request, None)

    def stream(
        self, request: ModelRequest, on_text: TextSink
    ) -> Coroutine[Any, Any, ModelResponse]:
        if not self.caller.tracer.enabled:
            return call_model(self.inner, request, on_text)
        return self._traced(request, on_text)

    async def _traced(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        caller, turn = self.caller, request.turn
        caller.tracer.emit(ModelCallStarted(worker=caller.worker, run_id=caller.run_id, turn=turn))
        report = CallReport(caller.tracer, worker=caller.worker, run_id=caller.run_id, turn=turn)
        reported = current_call.set(report)  # the retry policy reports each retry to it
        started = time.perf_counter()
        try:
            if on_text is None:
                response = await self.inner.complete(request)
            else:
                response = await call_model(self.inner, request, on_text)
        except HoneycombError as exc:
            self._finished(request, started, report, None, exc)
            raise
        finally:
            current_call.reset(reported)
        self._finished(request, started, report, response, None)
        return response

    def _finished(
        self,
        request: ModelRequest,
        started: float,
        report: CallReport,
        response: ModelResponse | None,
        exc: HoneycombError | None,
    ) -> None:
        caller = self.caller
        usage = response.usage if response is not None else Usage()
        caller.tracer.emit(
            ModelCallFinished(
                worker=caller.worker,
                run_id=caller.run_id,
                turn=request.turn,
                duration_s=time.perf_counter() - started,
                status="ok" if exc is None else "error",
                model=response.model if response is not None else "",
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost=usage.cost,
                tool_calls=len(response.message.tool_calls) if response is not None else 0,
                error=None if exc is None else f"{type(exc).__name__}: {exc}",
                attempts=report.attempts,
                retry_wait_s=report.retry_wait_s,
                reasoning_tokens=usage.reasoning_tokens,
                cached_input_tokens=usage.cached_input_tokens,
            )
        )
