"""The ``Model`` protocol: one async method, one request in, one response out.

Anything that can answer a :class:`ModelRequest` is a model: the OpenAI adapter, the
test models in :mod:`runtime.testing`, the offline rule-based model, and wrappers that
add behaviour (retries, limits, budgets) by holding another model.
"""

from __future__ import annotations

import functools
import json
from dataclasses import field
from functools import cached_property
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from runtime._values import value_class
from runtime.messages import AssistantMessage, Messages, Usage

__all__ = [
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OutputSchema",
    "ToolChoice",
    "ToolSchema",
    "WrapperModel",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")


class ToolSchema(_Frozen):
    """What a model is told about one tool. The JSON schema is kept as text so the
    value stays immutable; :attr:`parameters` parses it (once)."""

    name: str
    description: str = ""
    parameters_json: str = '{"type": "object", "properties": {}}'

    @classmethod
    def of(cls, name: str, description: str, parameters: dict[str, Any]) -> ToolSchema:
        return cls(name=name, description=description, parameters_json=json.dumps(parameters))

    @cached_property
    def parameters(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.parameters_json)
        return loaded


class OutputSchema(_Frozen):
    """A JSON schema the final answer must follow (structured output)."""

    name: str
    json_schema_text: str
    strict: bool = True

    @classmethod
    def of(cls, name: str, schema: dict[str, Any], *, strict: bool = True) -> OutputSchema:
        return cls(name=name, json_schema_text=json.dumps(schema), strict=strict)

    @classmethod
    def for_model(cls, model: type[BaseModel]) -> OutputSchema:
        """The schema of a pydantic model (made once per model class)."""
        return _schema_of(model)

    @cached_property
    def json_schema(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.json_schema_text)
        return loaded


@functools.cache
def _schema_of(model: type[BaseModel]) -> OutputSchema:
    return OutputSchema.of(model.__name__, model.model_json_schema(), strict=False)


ToolChoice = Literal["auto", "none", "required"]


@value_class
class ModelRequest:
    """Everything a model needs for one call.

    Attributes:
        messages: The conversation so far, system prompt first.
        tools: Tools the model may call; empty for a tool-less call.
        tool_choice: ``auto``, ``none``, ``required``, or the name of one tool to force.
        parallel_tool_calls: Whether the model may ask for several calls in one turn.
        output: A JSON schema the answer must follow, if any.
        timeout: Seconds the call may take, if limited.
        conversation: Identifies the conversation (run and worker), so that one model
            instance shared by many workers can keep state per conversation.
    """

    messages: Messages
    tools: tuple[ToolSchema, ...] = ()
    tool_choice: ToolChoice | str = "auto"
    parallel_tool_calls: bool = True
    output: OutputSchema | None = None
    timeout: float | None = None
    conversation: str | None = None


@value_class
class ModelResponse:
    """One model answer: the assistant message, what it cost, and why it stopped.

    Like the messages, a slotted read-only dataclass that checks nothing when made: the
    agent loop checks a model's answer where it receives it
    (:func:`runtime._checks.check_response`).
    """

    message: AssistantMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""


@runtime_checkable
class Model(Protocol):
    """Anything that answers a :class:`ModelRequest`.

    Raises:
        ModelError: (or a subclass) when the call fails; ``retryable`` says whether
            trying again may help.
    """

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class WrapperModel:
    """A model that holds another model and passes calls through.

    Subclass it and override :meth:`complete` to add behaviour around the inner call.
    """

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"
