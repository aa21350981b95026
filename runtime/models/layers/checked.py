"""The model-call layer that holds a model to the protocol: what a model raises that
is not a Honeycomb error is a :class:`~runtime.errors.ModelCallError` naming the
model and the exception's type (the original chained), and what it answers is checked
once, as it arrives (a model is user code: see :func:`~runtime.models.checks.check_response`).
Cancellation always goes through.

Innermost of the layers a worker composes: every layer outside it sees a well-formed
answer or a Honeycomb error."""

from __future__ import annotations

from runtime.errors import HoneycombError, ModelCallError
from runtime.model import ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.models.checks import check_response

__all__ = ["Checked"]


class Checked(WrapperModel):
    """``inner``'s calls, their errors translated and their answers checked.

    Raises:
        ModelCallError: when ``inner`` raised an exception of its own.
        ModelResponseError: when what it answered is not a well-formed response.
    """

    __slots__ = ()  # benchmark E: one per worker

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            answer = await self.inner.complete(request)
        except HoneycombError:
            raise
        except Exception as exc:  # the model's own (cancellation is not an Exception)
            raise ModelCallError(self.inner, exc) from exc
        return check_response(answer, self.inner)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        try:
            answer = await call_model(self.inner, request, on_text)
        except HoneycombError:
            raise
        except Exception as exc:
            raise ModelCallError(self.inner, exc) from exc
        return check_response(answer, self.inner)
