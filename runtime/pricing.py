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
    """

    input_per_mtok: float
    output_per_mtok: float

    def __post_init__(self) -> None:
        for name in ("input_per_mtok", "output_per_mtok"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)}")

    def of(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of a call with these token counts."""
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


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
        cost = self.price.of(usage.input_tokens, usage.output_tokens)
        return replace(response, usage=replace(usage, cost=cost))
