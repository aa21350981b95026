"""The model-call layer of the run's budget: a call is reserved in the budget before it
is made (every limit checked and the call counted in one step, so concurrent workers
cannot all slip past the last allowed call), is in flight while it runs (what a run
stopped by its wall time reports), and what it spent is charged once it answers.

Outermost of a model call's layers: a call the budget refuses is never made, never
traced, never waits for a slot."""

from __future__ import annotations

from runtime.limits import Budget
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model

__all__ = ["Budgeted"]


class Budgeted(WrapperModel):
    """Spends ``budget`` for each call of ``inner``.

    Args:
        inner: The layers inside it.
        budget: The run's budget.
        who: Whose calls they are, as the calls in flight are reported (a worker, a
            judge role).
        kind: What the calls are: ``turn``, ``summary``, ``judge``.

    Raises:
        BudgetExceeded: from a call the budget refuses (nothing is counted then).
    """

    __slots__ = ("budget", "kind", "who")  # benchmark E: one per worker

    def __init__(self, inner: Model, budget: Budget, who: str | None, kind: str = "turn") -> None:
        super().__init__(inner)
        self.budget = budget
        self.who = who
        self.kind = kind

    async def complete(self, request: ModelRequest) -> ModelResponse:
        budget = self.budget
        budget.reserve_model_call()
        flight = budget.call_started(self.who, request.turn, self.kind)
        try:
            response = await self.inner.complete(request)
        finally:
            budget.call_ended(flight)
        budget.charge(response.usage)
        return response

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        budget = self.budget
        budget.reserve_model_call()
        flight = budget.call_started(self.who, request.turn, self.kind)

        def counted(text: str) -> None:  # pieces streamed: what a stopped run reports
            flight.streamed(text)
            on_text(text)

        try:
            response = await call_model(self.inner, request, counted)
        finally:
            budget.call_ended(flight)
        budget.charge(response.usage)
        return response
