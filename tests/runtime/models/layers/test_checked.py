"""The layer that holds a model to the protocol, around a fake model."""

from __future__ import annotations

import pytest

from runtime.errors import ModelCallError, ModelResponseError
from runtime.messages import UserMessage
from runtime.model import Model, ModelRequest
from runtime.models.layers import Checked, ModelCalls
from runtime.testing import FunctionModel

ASK = ModelRequest(messages=(UserMessage(content="hi"),))


def checked(model: Model) -> ModelCalls:
    return ModelCalls(model, (Checked(),))


async def test_what_a_model_raises_of_its_own_is_a_model_call_error_naming_it() -> None:
    def broken(request: ModelRequest) -> str:
        raise KeyError("oops")

    with pytest.raises(ModelCallError) as raised:
        await checked(FunctionModel(broken, name="mine")).complete(ASK)
    assert raised.value.error_type == "KeyError"
    assert "mine" in str(raised.value)
    assert isinstance(raised.value.__cause__, KeyError)


async def test_an_answer_that_is_no_response_is_refused_once_it_arrives() -> None:
    class Wrong:
        async def complete(self, request: ModelRequest) -> object:
            return "not a response"

    with pytest.raises(ModelResponseError):
        await checked(Wrong()).complete(ASK)  # type: ignore[arg-type]


async def test_a_good_answer_goes_through() -> None:
    response = await checked(FunctionModel(lambda request: "fine")).complete(ASK)
    assert response.message.content == "fine"
