"""``TextToolModel``: tools for a model without function calling, through text.

A request with tools reaches the inner model without any: its instructions list the
tools and say how to ask for one (an action: a JSON object in a code block, naming
the tool and its arguments), and the conversation's earlier calls and observations
are written as text (see :mod:`runtime.models.protocols.text_wire`). The reply is read back into
tool calls, one per action (see :mod:`runtime.models.protocols.actions` for what is read, and how
leniently), so the agent loop and the dispatcher see what they see of a model with
function calling: parallel-safe calls run together, side-effecting ones one at a
time in order, one observation per call in order, and an action naming an unknown
tool, or with arguments that are not an object, is an error observation. A reply
with no action is the final answer.

Use it for a local model whose server or chat template has no tools (Ollama,
llama.cpp, vLLM without a tool parser), or one that calls tools badly::

    model = TextToolModel(OpenAIModel("llama3.1:8b", base_url="http://localhost:11434/v1"))
"""

from __future__ import annotations

import msgspec

from runtime.messages import AssistantMessage
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.models.checks import check_response
from runtime.models.protocols.text_wire import replied, text_request

__all__ = ["ProtocolModel", "TextToolModel"]


class ProtocolModel(WrapperModel):
    """What the tool protocols' models share: the request written out (:meth:`_written`)
    for the inner model, which is never sent a tool, and its reply read back
    (:meth:`_replied`) into tool calls or the answer."""

    def __init__(self, inner: Model) -> None:
        super().__init__(inner)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The inner model's answer to ``request`` written out, read back.

        Raises:
            ModelError: as the inner model raises it; ModelResponseError for an answer
                that is not a well-formed response.
        """
        return self._read(await self.inner.complete(self._written(request)), request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """The request streamed through the inner model, when its text is the answer;
        answered in one go (:meth:`complete`) when it may be calls, not an answer, and
        then its text shown whole once it is read: its prose, without the actions (as
        a model with function calling streams the text beside its calls, which is the
        answer of a wrap-up that may call none)."""
        if self._in_one_go(request):
            response = await self.complete(request)
            if response.message.content:
                on_text(response.message.content)
            return response
        answer = await call_model(self.inner, self._written(request), on_text)
        return self._read(answer, request)

    def written(self, request: ModelRequest) -> ModelRequest:
        """``request`` as the inner model is sent it."""
        return self._written(request)

    def _written(self, request: ModelRequest) -> ModelRequest:
        raise NotImplementedError

    def _replied(self, message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
        raise NotImplementedError

    def _in_one_go(self, request: ModelRequest) -> bool:
        return bool(request.tools)

    def _read(self, answer: ModelResponse, request: ModelRequest) -> ModelResponse:
        """The inner model's answer with its calls read back as tool calls."""
        response = check_response(answer, self.inner)
        message = self._replied(response.message, request)
        if message is response.message:
            return response
        # An answer cut off at its output limit stays one: its last action's arguments
        # may be cut short, and the loop tells the model so.
        cut = response.finish_reason == "length"
        finish = "tool_calls" if message.tool_calls and not cut else response.finish_reason
        return msgspec.structs.replace(response, message=message, finish_reason=finish)


class TextToolModel(ProtocolModel):
    """A model that calls tools by writing actions as text, for ``inner``, which is
    never sent a tool; a request without tools is streamed (its text is the answer).

    Args:
        inner: The model that answers, whatever it is (its retries, limits and usage
            are its own: this model only writes the request and reads the reply).
    """

    def _written(self, request: ModelRequest) -> ModelRequest:
        return text_request(request)

    def _replied(self, message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
        return replied(message, request)
