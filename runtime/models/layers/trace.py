"""The model-call layer of tracing: each call of a worker's turn is a
``model_call.started`` event, then a ``model_call.finished`` with its status,
duration, model, tokens, cost, tool calls and, when the model's retry policy retried
it, its attempts and the time they waited (the ``model`` span of a run's trace),
however it ends: a call cut off (its worker cancelled) is finished ``cancelled`` as
it stops, so its span ends no later than its worker's. What its endpoint never
answered (attempts its timeout cut off, the text a call that ended without an answer
streamed) it reports as the budget charges it, with its answer's usage
(:func:`~runtime.models.layers.budget.unanswered_usage`). While the call runs,
:data:`~runtime.events.current_call` holds its report, which the retry policy tells
each retry (``model_call.retrying``).

Inside the budget (a refused call has no span) and outside the check of what the
model answered (a malformed answer is the span's error)."""

from __future__ import annotations

import time
from asyncio import CancelledError

from msgspec.structs import replace

from runtime.events import CallReport, ModelCallFinished, ModelCallStarted, current_call
from runtime.model import ModelResponse
from runtime.models.layers.base import ModelCall, ModelLayer
from runtime.models.layers.budget import unanswered_usage

__all__ = ["Traced"]


class Traced(ModelLayer):
    """Reports each call to its caller's tracer (:attr:`ModelCall.caller`), when
    anyone listens."""

    __slots__ = ()

    def opened(self, call: ModelCall) -> None:
        caller = call.caller  # (None: the calls are not traced, see workers.calls.model_calls)
        if caller is None:
            return
        tracer, worker, run_id, turn = caller.tracer, caller.worker, caller.run_id, call.turn
        tracer.emit(ModelCallStarted(worker=worker, run_id=run_id, turn=turn))
        call.report = CallReport(tracer, worker=worker, run_id=run_id, turn=turn)
        call.reported = current_call.set(call.report)  # the retry policy reports each retry to it
        call.timed = time.perf_counter()

    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        report, caller = call.report, call.caller
        if report is not None and caller is not None:
            _closed(call)
            usage = response.usage
            lost = unanswered_usage(call, answered=True)
            if lost is not None:  # attempts its timeout cut off: paid for, as budgets count
                usage = usage + lost
            caller.tracer.emit(
                ModelCallFinished(
                    worker=caller.worker,
                    run_id=caller.run_id,
                    turn=call.turn,
                    duration_s=time.perf_counter() - call.timed,
                    status="ok",
                    model=response.model,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cost=usage.cost,
                    tool_calls=len(response.message.tool_calls),
                    attempts=report.attempts,
                    retry_wait_s=report.retry_wait_s,
                    reasoning_tokens=usage.reasoning_tokens,
                    cached_input_tokens=usage.cached_input_tokens,
                    finish_reason=response.finish_reason,
                )
            )
        return response

    def failed(self, call: ModelCall, error: BaseException) -> BaseException:
        report, caller = call.report, call.caller
        if report is not None and caller is not None:
            _closed(call)
            # A Honeycomb error is the call's failure; cancellation cuts it off (what
            # else gets here, past the check that translates a model's own errors,
            # stops the process: a failure all the same).
            cut_off = isinstance(error, CancelledError)
            spent = unanswered_usage(call)
            finished = ModelCallFinished(
                worker=caller.worker,
                run_id=caller.run_id,
                turn=call.turn,
                duration_s=time.perf_counter() - call.timed,
                status="cancelled" if cut_off else "error",
                error=None if cut_off else f"{type(error).__name__}: {error}",
                attempts=report.attempts,
                retry_wait_s=report.retry_wait_s,
            )
            if spent is not None:  # paid for, as the budget counts it
                finished = replace(
                    finished,
                    input_tokens=spent.input_tokens,
                    output_tokens=spent.output_tokens,
                    cost=spent.cost,
                )
            caller.tracer.emit(finished)
        return error


def _closed(call: ModelCall) -> None:
    """The call traced is no longer the model call in progress. (Each way a call ends
    names only the fields it has: benchmark F, as a call of sixteen keywords or more
    builds a dict.)"""
    if call.reported is not None:
        current_call.reset(call.reported)
    call.report = call.reported = None
