"""The model-call layer of the run's budget: a call is reserved in the budget before it
is made (every limit checked and the call counted in one step, so concurrent workers
cannot all slip past the last allowed call), is in flight while it runs (what a run
stopped by its wall time reports, with the pieces of text it streamed), and what it
spent is charged once it answers.

What an endpoint billed and never answered counts too, by what :func:`unanswered_usage`
estimates: the prompt of each attempt its timeout cut off (the endpoint had the
request, and a retry sends it again), and, of a call that ends without an answer (cut
off by the wall time or a cancelled worker, or failed) after it streamed text, its
prompt and that text (a server that wrote text had read the prompt, and bills both).
A call cut off otherwise counts no tokens: it may never have been sent (it waited for
a slot or the rate limit, or could not connect), and nothing says what it cost.

The answer it passes on carries what the call spent in its usage, the attempts its
timeout cut off included: a worker's, a judge's and a summary's usage count them as
the budget does.

Inside the cost cap, outside the rest: a call the budget refuses is never made,
never traced, never waits for a slot."""

from __future__ import annotations

from msgspec.structs import replace

from runtime.messages import Usage
from runtime.model import ModelResponse
from runtime.models.layers.base import ModelCall, ModelLayer
from runtime.models.layers.cost_cap import price_of, sent_tokens

__all__ = ["Budgeted", "failed_usage", "spending", "spent_by", "unanswered_usage"]


class Budgeted(ModelLayer):
    """Spends the call's budget (:attr:`ModelCall.budget`) for each call.

    Raises:
        BudgetExceeded: from a call the budget refuses (nothing is counted then), and
            from a retry of one once the budget is spent (nothing is sent then).
    """

    __slots__ = ()

    def opened(self, call: ModelCall) -> None:
        budget = call.budget
        if budget is not None:
            budget.reserve_model_call()
            budget.call_started(call)

    def timed_out(self, call: ModelCall) -> None:
        if call.budget is not None:  # spent now: a retry, or another worker's call, sees it
            call.budget.charge(_spent(call, 1, 0))

    def retried(self, call: ModelCall) -> None:
        if call.budget is not None:
            call.budget.check(calls=0)  # the same call again: no more of model_calls

    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        budget = call.budget
        if budget is None:
            return response
        budget.call_ended(call)
        budget.charge(response.usage)  # (its attempts cut off were charged as they were)
        lost = unanswered_usage(call, answered=True)
        if lost is not None:  # the call's usage is what it spent: whoever counts it agrees
            response = replace(response, usage=response.usage + lost)
        return response

    def failed(self, call: ModelCall, error: BaseException) -> BaseException:
        budget = call.budget
        if budget is not None:
            budget.call_ended(call)
            if call.pieces:  # the attempt that streamed: its prompt and its text
                budget.charge(_spent(call, 1, call.pieces))
        return error


def unanswered_usage(call: ModelCall, *, answered: bool = False) -> Usage | None:
    """What ``call`` spent by the token estimate on what its endpoint never answered
    (None: nothing known): its prompt once for each attempt its timeout cut off, and, if
    it ended without an answer (not ``answered``) after it streamed text, its prompt
    and a token a piece of that text, at its model's price (0 without one). What the
    budget charged besides an answer's own usage, and the call's event reports."""
    pieces = 0 if answered else call.pieces or 0
    prompts = call.timeouts + (1 if pieces else 0)
    return _spent(call, prompts, pieces) if prompts else None


def failed_usage(call: ModelCall | None) -> Usage:
    """What ``call``, which failed, spent, for its caller's own usage to count as its
    run's budget does: the model call, and what :func:`unanswered_usage` estimates its
    endpoint billed. No call (None: a layer refused it as it opened, so it was never
    made): nothing."""
    if call is None:
        return Usage()
    made, lost = Usage(model_calls=1), unanswered_usage(call)
    return made if lost is None else made + lost


def _spent(call: ModelCall, prompts: int, pieces: int) -> Usage:
    """``prompts`` times ``call``'s prompt and ``pieces`` tokens of answer, by the token
    estimate, at its model's price."""
    prompt = sent_tokens(call.model, call.request) * prompts
    price = price_of(call.model)
    cost = price.of(prompt, pieces) if price is not None else 0.0
    return Usage(input_tokens=prompt, output_tokens=pieces, cost=cost)


def spending(error: BaseException, usage: Usage) -> BaseException:
    """``error``, ending a model call that was made (a judge's, a summary call), saying
    what the call spent (its ``spent``: a model error's field, and as well on what cuts
    the call off or refuses its retry, and on what carries it across a process): whoever
    counts the call's caller's spending reads it, as the run's budget counted it."""
    error.spent = usage  # type: ignore[attr-defined]
    return error


def spent_by(error: BaseException) -> Usage | None:
    """What the model call that ``error`` ended spent, as :func:`spending` said it
    (None: no call was made, or it did not say)."""
    spent = getattr(error, "spent", None)
    return spent if isinstance(spent, Usage) else None
