"""The model-call layer of a cap on what one call may cost (``cost_per_call`` of a
run's budgets), from its model's price.

Before a call, its prompt is counted by the token estimate
(:mod:`runtime.models.tokens`) and priced; what the cap leaves goes to the answer: the
call's output limit is lowered to the tokens that cost fits in, so no answer can take
the call past the cap (the prompt is priced all at the input price, cached or not; an
endpoint whose tokenizer counts it as more tokens than the estimate can pass the cap
by what they cost; each attempt is held to the cap, and one its timeout cut off and
retried costs its prompt besides). A call whose prompt alone would cost the cap (no
room left for a token of answer) is not made: :class:`~runtime.errors.BudgetExceeded` names
``cost_per_call``, what it allows and what the prompt would cost, and the run stops
as at any of its budgets, with its partial results (a context that grew past the cap
is fixed by a larger cap, or by compaction).

Outermost of a model call's layers: a call it refuses is never reserved, counted or
traced. A model without a price costs nothing, so nothing is capped; a run's budgets
in dollars with no priced model at all could never stop anything, and are refused
(:func:`check_priced`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from msgspec.structs import replace

from runtime.errors import BudgetExceeded, ConfigError
from runtime.messages import AssistantMessage
from runtime.model import Model, ModelRequest, request_writer, wrapped
from runtime.models.layers.base import ModelCall, ModelLayer
from runtime.models.tokens import estimated_tokens

if TYPE_CHECKING:
    from runtime.limits import Limits

__all__ = [
    "CostCap",
    "Pricing",
    "check_priced",
    "price_of",
    "sent_tokens",
    "unpriced_called",
    "unpriced_problem",
]


class Pricing(Protocol):
    """What a call costs, from its tokens (a :class:`~runtime.models.pricing.Price`)."""

    def of(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """Dollars for a call of these token counts."""
        ...


TOKENS_PER_MESSAGE = 4
"""What a message's framing takes besides its text (roles, separators)."""


class CostCap(ModelLayer):
    """Holds each call to ``cap`` dollars at ``price``.

    Raises:
        BudgetExceeded: for a call whose prompt alone would cost ``cap``.
    """

    __slots__ = ("cap", "price")

    def __init__(self, cap: float, price: Pricing) -> None:
        self.cap = cap
        self.price = price

    def opened(self, call: ModelCall) -> None:
        call.request = self._capped(call.request, call.model)

    def _capped(self, request: ModelRequest, model: Model) -> ModelRequest:
        """``request``, its output limit within what the cap leaves the prompt
        ``model`` sends for it."""
        prompt = self.price.of(sent_tokens(model, request), 0)
        per_token = self.price.of(0, 1)
        room = self.cap - prompt
        if room < per_token:
            raise BudgetExceeded("cost_per_call", self.cap, round(prompt, 6))
        if per_token == 0:
            return request  # answers cost nothing: the prompt alone is held to the cap
        allowed = int(room / per_token)
        limit = request.max_output_tokens
        if limit is not None and limit <= allowed:
            return request
        return replace(request, max_output_tokens=allowed)


def sent_tokens(model: Model, request: ModelRequest) -> int:
    """The tokens ``model`` sends for ``request``, by the token estimate: the request
    as the model writes it out (:func:`~runtime.model.request_writer`: a tool
    protocol's model sends its tools, its rules and the calls as text, twice or thrice
    the tokens of the request it is given)."""
    write = request_writer(model)
    return prompt_tokens(request if write is None else write(request))


def prompt_tokens(request: ModelRequest) -> int:
    """The tokens ``request`` sends, by the token estimate: its messages' texts and
    calls, its tools' schemas, and each message's framing."""
    texts = []
    for message in request.messages:
        texts.append(message.content or "")
        if isinstance(message, AssistantMessage):
            texts += [f"{c.name} {c.arguments}" for c in message.tool_calls]
    for schema in request.tools:
        texts += [schema.name, schema.description, json.dumps(schema.parameters)]
    return estimated_tokens(texts) + TOKENS_PER_MESSAGE * len(request.messages)


def price_of(model: Model) -> Pricing | None:
    """The price ``model`` (or a model it wraps: a ``PricedModel``) charges its calls
    at (None: none)."""
    for layer in wrapped(model):
        price: Pricing | None = getattr(layer, "price", None)
        if callable(getattr(price, "of", None)):
            return price
    return None


def check_priced(limits: Limits, models: Iterable[Model]) -> None:
    """Refuse budgets in dollars (``cost``, ``cost_per_call``) for ``models`` of which
    none has a price: every call would cost 0, so the budget could never stop one. A
    model without a price among priced ones costs 0 (an offline or local model).

    Raises:
        ConfigError: naming the budget and how to price the models.
    """
    problem = unpriced_problem(limits, any(price_of(model) is not None for model in models))
    if problem is not None:
        limit, message = problem
        raise ConfigError(message, field=f"policy.budgets.{limit}")


def unpriced_problem(limits: Limits, priced: bool) -> tuple[str, str] | None:
    """The budget in dollars of ``limits`` that no price could count (``priced``: some
    model has one), and what is wrong with it (None: nothing): what
    :func:`check_priced` refuses, and a hive file at that budget's line."""
    named = [name for name in ("cost", "cost_per_call") if getattr(limits, name) is not None]
    if not named or priced:
        return None
    return named[0], (
        "a budget in dollars counts the models' prices, and no model has one: every call "
        "would cost 0 and the budget would never stop the run; give the models their "
        "prices (price: {input_per_mtok: ..., output_per_mtok: ...} in the hive, "
        "PricedModel(model, Price(...)) in Python), or bound the run by total_tokens or "
        "model_calls instead"
    )


def unpriced_called(limits: Limits, called: str, priced: bool) -> tuple[str, str] | None:
    """The budget in dollars of ``limits`` that the calls of ``called`` (a hive called as
    a tool, in words), none of whose models has a price (not ``priced``), would spend
    uncounted, and what is wrong (None: nothing). Its calls spend the caller's budget,
    each at 0: what a hive with no priced model is refused for, nested."""
    named = [name for name in ("cost", "cost_per_call") if getattr(limits, name) is not None]
    if not named or priced:
        return None
    return named[0], (
        f"{called} calls models none of which has a price: its calls would spend this "
        f"run's budgets.{named[0]} at 0 each, and the budget would never count them; give "
        "its models their prices (price: {input_per_mtok: ..., output_per_mtok: ...} in "
        "its hive, PricedModel(model, Price(...)) in Python), or bound the run by "
        "total_tokens or model_calls instead"
    )
