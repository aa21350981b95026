"""What model calls cost: prices per million tokens, applied by a wrapping model.

Honeycomb ships no price table (prices change and differ by provider); configure them
per model (``price:`` in the hive, or :class:`PricedModel` in Python). Without a
price, a call's cost is 0.
"""

from __future__ import annotations

from msgspec.structs import replace

from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.value import Value

__all__ = ["Price", "PricedModel"]


class Price(Value, frozen=True, kw_only=True):
    """Dollars per million tokens.

    Attributes:
        input_per_mtok: Per million input (prompt) tokens.
        output_per_mtok: Per million output (completion) tokens.
        cached_input_per_mtok: Per million input tokens the provider read from its
            prompt cache (None: they cost ``input_per_mtok``, as any input token).
    """

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be 0 or more, got {value}")

    def of(self, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float:
        """The cost of a call with these token counts (``cached_input_tokens`` are
        among the ``input_tokens``)."""
        cached_price = self.cached_input_per_mtok
        if cached_price is None:
            cached_price, cached_input_tokens = self.input_per_mtok, 0
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
