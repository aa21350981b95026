"""The model-call layer that holds a model to the protocol: what a model raises that
is not a Honeycomb error is a :class:`~runtime.errors.ModelCallError` naming the
model and the exception's type (the original chained), and what it answers is checked
once, as it arrives (a model is user code: see :func:`~runtime.models.checks.check_response`).
Cancellation always goes through.

Innermost of the layers a worker composes: every layer outside it sees a well-formed
answer or a Honeycomb error."""

from __future__ import annotations

from runtime.errors import HoneycombError, ModelCallError
from runtime.model import ModelResponse
from runtime.models.checks import check_response
from runtime.models.layers.base import ModelCall, ModelLayer

__all__ = ["Checked"]


class Checked(ModelLayer):
    """The call's errors translated and its answer checked.

    Raises:
        ModelCallError: when the model raised an exception of its own.
        ModelResponseError: when what it answered is not a well-formed response.
    """

    __slots__ = ()

    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        return check_response(response, call.model)

    def failed(self, call: ModelCall, error: BaseException) -> BaseException:
        if isinstance(error, HoneycombError) or not isinstance(error, Exception):
            return error  # ours, or cancellation (not an Exception): as it is
        translated = ModelCallError(call.model, error)
        translated.__cause__ = error
        return translated
