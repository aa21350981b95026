"""``JsonToolModel``: tools for a model without function calling, through a JSON
schema its server enforces.

A request with tools reaches the inner model with none, asking for an answer that
follows a JSON schema: a ``oneOf`` of one object per tool (``{"tool": <its name>,
"arguments": <its arguments' own schema>}``), an array of such calls where a turn may
call several, and the final answer (``{"answer": ...}``). A server that decodes under
the schema (llama.cpp, vLLM, Ollama, SGLang: a grammar) makes even a small model call
tools with arguments that match their schemas, every time. The answer is read back
into tool calls or the final answer (see :mod:`runtime.models.protocols.json_wire`), so the
agent loop and the dispatcher see what they see of a model with function calling:
an unknown tool, or arguments a tool refuses, is an error observation, and arguments
that are not an object go back as ``{}``.

A server that refuses ``json_schema`` is asked the next way, as for any structured
output (``json_object`` with the schema in the instructions, then the instructions
alone), and the reply is read leniently, as the text protocol reads one.

Use it for a local model that answers prose when it is given ``tools``::

    model = JsonToolModel(OpenAIModel("smollm2", base_url="http://127.0.0.1:8080/v1"))
"""

from __future__ import annotations

from runtime.messages import AssistantMessage
from runtime.model import ModelRequest
from runtime.models.protocols.json_wire import json_reply, json_request
from runtime.models.protocols.text_tools import ProtocolModel
from runtime.models.protocols.text_wire import uses_tools

__all__ = ["JsonToolModel"]


class JsonToolModel(ProtocolModel):
    """A model that calls tools by answering JSON of a schema, for ``inner``, which is
    never sent a tool; a request of a conversation without tools is streamed (its
    text is the answer), one with them is answered in one go (its text is JSON).

    Args:
        inner: The model that answers (its retries, limits, usage and structured
            output fallback are its own: this model writes the request and reads the
            reply).
    """

    def _written(self, request: ModelRequest) -> ModelRequest:
        return json_request(request)

    def _replied(self, message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
        return json_reply(message, request)

    def _in_one_go(self, request: ModelRequest) -> bool:
        return uses_tools(request)
