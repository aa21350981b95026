"""The model-call layer of the run's budget: a call is reserved in the budget before it
is made (every limit checked and the call counted in one step, so concurrent workers
cannot all slip past the last allowed call), is in flight while it runs (what a run
stopped by its wall time reports, with the pieces of text it streamed), and what it
spent is charged once it answers.

A call that ends without an answer (cut off by the wall time or a cancelled worker,
or failed) after it streamed text is charged what :func:`cut_off_usage` estimates: a
server that wrote text had read the prompt, and bills both. One that streamed nothing
is charged no tokens: it may never have been sent (it waited for a slot or the rate
limit), and nothing says what it cost.

Inside the cost cap, outside the rest: a call the budget refuses is never made,
never traced, never waits for a slot."""

from __future__ import annotations

from runtime.messages import Usage
from runtime.model import ModelResponse
from runtime.models.layers.base import ModelCall, ModelLayer
from runtime.models.layers.cost_cap import price_of, prompt_tokens

__all__ = ["Budgeted", "cut_off_usage"]


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
        budget = call.budget
        if budget is not None:
            budget.call_ended(call)
            spent = cut_off_usage(call)
            if spent is not None:
                budget.charge(spent)
        return error


def cut_off_usage(call: ModelCall) -> Usage | None:
    """What ``call``, ended without an answer, spent by the token estimate, if it
    streamed text (None: it streamed none, and may never have been sent): its prompt
    (as the cost cap counts it) and a token a piece of text it streamed, at its model's
    price (0 without one). What the budget charges, and the call's event reports."""
    pieces = call.pieces
    if not pieces:
        return None
    prompt = prompt_tokens(call.request)
    price = price_of(call.model)
    cost = price.of(prompt, pieces) if price is not None else 0.0
    return Usage(input_tokens=prompt, output_tokens=pieces, cost=cost)
