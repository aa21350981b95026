"""The ``Model`` protocol: one async method, one request in, one response out.

Anything that can answer a :class:`ModelRequest` is a model: the OpenAI adapter, the
test models in :mod:`runtime.testing`, the offline rule-based model, and wrappers that
add behaviour (retries, limits, budgets) by holding another model.

A model may also stream (:class:`StreamingModel`): its ``stream`` method answers as
``complete`` does, and hands each piece of the answer's text to a callback as it
arrives. It is optional: :func:`answer` calls it when someone listens and the model
has it, and ``complete`` otherwise.

The loop streams when its run asks for the text as it is written (see
:class:`~runtime.events.Tracer`); otherwise every call is one-shot.

A model may serve itself from this process (:class:`ServedModel`, llama.cpp's
:class:`~runtime.models.llama.LlamaModel`): whoever uses it holds it (:func:`held`) for as
long as its server should stay up.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

import msgspec

from runtime.messages import AssistantMessage, Messages, Usage
from runtime.value import Value

if TYPE_CHECKING:
    from pydantic import BaseModel

    from runtime.errors import ConfigError

__all__ = [
    "Model",
    "ModelRequest",
    "ModelResponse",
    "OutputSchema",
    "ServedModel",
    "StreamingModel",
    "TextSink",
    "ToolChoice",
    "ToolSchema",
    "WrapperModel",
    "call_model",
    "context_of",
    "held",
    "missing_key",
    "request_writer",
    "tells_attempts",
    "wrapped",
]


class ToolSchema(Value, frozen=True, kw_only=True):
    """What a model is told about one tool: its name, what it does, and the JSON
    schema of its arguments (read-only, like every value)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = msgspec.field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


class OutputSchema(Value, frozen=True, kw_only=True):
    """A JSON schema the final answer must follow (structured output)."""

    name: str
    json_schema: dict[str, Any]
    strict: bool = True

    @classmethod
    def for_model(cls, model: type[BaseModel]) -> OutputSchema:
        """The schema of a pydantic model (made once per model class)."""
        return _schema_of(model)


@functools.cache
def _schema_of(model: type[BaseModel]) -> OutputSchema:
    return OutputSchema(name=model.__name__, json_schema=model.model_json_schema(), strict=False)


ToolChoice = Literal["auto", "none", "required"]


# benchmark B: made every model turn or tool call, never walked by the GC
class ModelRequest(Value, frozen=True, gc=False, kw_only=True):
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
        max_output_tokens: The most tokens the answer may take, if limited (sent as
            the endpoint's output limit, below any the model's settings give; a model
            that cannot be told may write more, which the caller copes with).
        turn: The loop turn the call belongs to (0: none), as the call's events and
            the budget's report of calls in flight name it; never sent.
    """

    messages: Messages
    tools: tuple[ToolSchema, ...] = ()
    tool_choice: ToolChoice | str = "auto"
    parallel_tool_calls: bool = True
    output: OutputSchema | None = None
    timeout: float | None = None
    conversation: str | None = None
    max_output_tokens: int | None = None
    turn: int = 0


# benchmark B: made every model turn or tool call, never walked by the GC
class ModelResponse(Value, frozen=True, gc=False, kw_only=True):
    """One model answer: the assistant message, what it cost, and why it stopped.

    The agent loop checks a model's answer where it receives it
    (:func:`runtime.models.checks.check_response`): a model is user code.
    """

    message: AssistantMessage
    usage: Usage = Usage()
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


TextSink = Callable[[str], None]
"""Receives the pieces of an answer's text as they arrive (quick, never raising)."""


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A model that can also stream: :meth:`stream` answers as ``complete`` does and
    calls ``on_text`` with each piece of the answer's text, in order, as it arrives
    (joined, the pieces are the message's content). Tool calls and reasoning are
    not shown; they are in the response.

    Raises:
        ModelError: as ``complete``; :class:`~runtime.errors.StreamInterrupted` when
            the answer broke off after some of its text was shown.
    """

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse: ...


def call_model(
    model: Model, request: ModelRequest, on_text: TextSink | None
) -> Coroutine[Any, Any, ModelResponse]:
    """``model``'s answer, streamed to ``on_text`` when one is given and the model can
    stream; one-shot (``complete``) otherwise. The model's own awaitable, handed back
    as it is: a layer that passes a streamed call on costs it no frame of its own
    (benchmark J)."""
    stream = getattr(model, "stream", None) if on_text is not None else None
    if on_text is None or not callable(stream):
        return model.complete(request)
    response: Coroutine[Any, Any, ModelResponse] = stream(request, on_text)
    return response


@runtime_checkable
class ServedModel(Model, Protocol):
    """A model served from this process (llama.cpp in-process): its server starts
    with the first call, and stops once the last block of :meth:`held` ends."""

    def held(self) -> AbstractAsyncContextManager[None]: ...


@asynccontextmanager
async def held(models: Iterable[Model]) -> AsyncIterator[None]:
    """Hold, for the block, each :class:`ServedModel` among ``models`` and the models
    they wrap, once each (an Executor holds its models for its block, a run for its
    own)."""
    served: dict[int, ServedModel] = {}
    for model in models:
        for layer in wrapped(model):
            if isinstance(layer, ServedModel):
                served.setdefault(id(layer), layer)
    if not served:
        yield
        return
    async with AsyncExitStack() as stack:
        for model in served.values():
            await stack.enter_async_context(model.held())
        yield


class WrapperModel:
    """A model that holds another model and passes calls through, streamed or not.

    Subclass it and override :meth:`complete` to add behaviour around the inner call;
    override :meth:`stream` too for that behaviour around a streamed call. A subclass
    that overrides only ``complete`` is called through it when asked to stream (its
    behaviour holds; the text comes all at once, in the response).
    """

    # benchmark E: every worker holds a few (its calls' layers); subclasses without
    # __slots__ of their own get an instance dict as usual
    __slots__ = ("inner",)

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        own = type(self)
        if own.complete is not WrapperModel.complete and own.stream is WrapperModel.stream:
            # A subclass that adds behaviour to complete alone: keep that behaviour.
            return await self.complete(request)
        return await call_model(self.inner, request, on_text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


def wrapped(model: Model) -> Iterator[object]:
    """``model``, then each model it wraps (its ``inner``), outermost first."""
    current: object = model
    while current is not None:
        yield current
        current = getattr(current, "inner", None)


def tells_attempts(model: Model) -> bool:
    """Whether ``model``, or a model it wraps, tells the model call it makes of that
    call's attempts (:func:`runtime.limits.budget.timed_out`,
    :func:`~runtime.limits.budget.retried`), as a retry policy or an endpoint does: it
    says so with ``tells_attempts = True``. Only the call of a model that tells is the
    current task's (:data:`~runtime.limits.budget.attempting`) while it is made: a
    context variable set a call is no price for a model with nothing to tell
    (benchmarks B and E)."""
    return any(getattr(m, "tells_attempts", False) for m in wrapped(model))


def missing_key(model: Model) -> ConfigError | None:
    """The error ``model``'s calls (or those of a model it wraps) would fail with for
    want of an API key, found before any call: a model that needs one says so with a
    ``missing_key()`` method of its own (the OpenAI adapters have one)."""
    for layer in wrapped(model):
        check = getattr(layer, "missing_key", None)
        found = check() if callable(check) else None
        if found is not None:
            return cast("ConfigError", found)
    return None


def context_of(model: Model) -> int | None:
    """The tokens one call of ``model`` (or of a model it wraps) may hold, its prompt
    and its answer together, when the model says (a ``context_tokens`` attribute: a
    local model's); None: not said."""
    for layer in wrapped(model):
        tokens = getattr(layer, "context_tokens", None)
        if isinstance(tokens, int):
            return tokens
    return None


def request_writer(model: Model) -> Callable[[ModelRequest], ModelRequest] | None:
    """How ``model`` writes a request out before its endpoint is sent it (a tool
    protocol's model writes the tools into the prompt, and calls and results as text:
    its ``written()`` method says how), or None when it sends requests as they are.
    What measures a request against a budget measures what is sent."""
    writers: list[Callable[[ModelRequest], ModelRequest]] = []
    for layer in wrapped(model):
        write = getattr(layer, "written", None)
        if callable(write):
            writers.append(write)
    if not writers:
        return None

    def written(request: ModelRequest) -> ModelRequest:
        for write in writers:
            request = write(request)
        return request

    return written
