"""The model-call layer of the run's budget: a call is reserved in the budget before it
is made (every limit checked and the call counted in one step, so concurrent workers
cannot all slip past the last allowed call), is in flight while it runs (what a run
stopped by its wall time reports, with the pieces of text it streamed), and what it
spent is charged once it answers.

Inside the cost cap, outside the rest: a call the budget refuses is never made,
never traced, never waits for a slot."""

from __future__ import annotations

from runtime.model import ModelResponse
from runtime.models.layers.base import ModelCall, ModelLayer

__all__ = ["Budgeted"]


class Budgeted(ModelLayer):
    """Spends the call's budget (:attr:`ModelCall.budget`) for each call.

    Raises:
        BudgetExceeded: from a call the budget refuses (nothing is counted then).
    """

    __slots__ = ()

    def opened(self, call: ModelCall) -> None:
        budget = call.budget
        if budget is not None:
            budget.reserve_model_call()
            budget.call_started(call)

    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        budget = call.budget
        if budget is not None:
            budget.call_ended(call)
            budget.charge(response.usage)
        return response

    def failed(self, call: ModelCall, error: BaseException) -> BaseException:
        if call.budget is not None:
            call.budget.call_ended(call)
        return error
