"""What model calls cost: prices per million tokens, applied by a wrapping model.

Honeycomb ships no price table (prices change and differ by provider); configure them
per model (``price:`` in the hive, or :class:`PricedModel` in Python). Without a
price, a call's cost is 0.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta
from msgspec.structs import replace

from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.value import Settings

__all__ = ["Price", "PricedModel"]


class Price(Settings, frozen=True, kw_only=True):
    """Dollars per million tokens (``price:`` of a hive's model).

    Attributes:
        input_per_mtok: Per million input (prompt) tokens.
        output_per_mtok: Per million output (completion) tokens.
        cached_input_per_mtok: Per million input tokens the provider read from its
            prompt cache (None: they cost ``input_per_mtok``, as any input token).
    """

    input_per_mtok: Annotated[float, Meta(ge=0)]
    output_per_mtok: Annotated[float, Meta(ge=0)]
    cached_input_per_mtok: Annotated[float, Meta(ge=0)] | None = None

    def of(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """The cost of a call with these token counts (``cached_input_tokens`` are
        among the ``input_tokens``: more are counted as all of them, so that a cost is
        never below zero)."""
        cached_price = self.cached_input_per_mtok
        if cached_price is None:
            cached_price, cached_input_tokens = self.input_per_mtok, 0
        cached_input_tokens = min(cached_input_tokens, input_tokens)
        fresh = input_tokens - cached_input_tokens
        return (
            fresh * self.input_per_mtok
            + cached_input_tokens * cached_price
            + output_tokens * self.output_per_mtok
        ) / 1e6


class PricedModel(WrapperModel):
    """A model whose answers carry their cost (``response.usage.cost``)."""

    def __init__(self, inner: Model, price: Price) -> None:
        super().__init__(inner)
        self.price = price

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return self._priced(await self.inner.complete(request))

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        return self._priced(await call_model(self.inner, request, on_text))

    def _priced(self, response: ModelResponse) -> ModelResponse:
        usage = response.usage
        cost = self.price.of(usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
        return replace(response, usage=replace(usage, cost=cost))
