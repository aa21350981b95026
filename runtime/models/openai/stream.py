"""Reading an answer off the wire: a whole body (:func:`read_body`), a stream's lines
and their server-sent events (:func:`read_lines`, :func:`event_data`), each a break
of the connection or a stall past the timeout told as Honeycomb's error; and a streamed
chat completion (:class:`CompletionStream`; a Responses API answer's is
:class:`~runtime.models.openai._responses_body.ResponseStream`, both an
:class:`AnswerStream`): server-sent events, chunk by chunk, into the pieces of text to
show as they arrive and, at the end, one :class:`ModelResponse`.

Each chunk is checked as it arrives (a chunk that is not JSON, or a field of the wrong
type, is a :class:`ModelResponseError` naming the chunk and the field). Tool calls
come in pieces keyed by their ``index``, several calls' pieces interleaved; each
call's id and name come with its first piece, its arguments in any number of them.
A piece that names its function with an id or a name other than those of the call its
index holds, once that call's arguments are whole, starts a new call (Ollama numbers
every call of a turn ``0``), so that no call is merged into another; arguments sent
whole again, once they came in pieces, are not added twice, and an empty object sent
before a call's arguments (a gateway's passing on of Anthropic's empty ``input``) is
not added to them.
Only the first choice is read, as a whole answer's is (a request for several, ``n``,
has theirs interleaved, each at its ``index``).
Usage comes in a last chunk without choices (``stream_options.include_usage``); a
stream that breaks off after the finish reason, before its usage or ``[DONE]`` (a
server or proxy that closes the connection abruptly), has given its whole answer, which
is taken, its usage estimated.

The assembled answer is read by the parser of non-streamed completions, so a
streamed answer is checked, and its tool calls given ids where the server sent none,
exactly as a whole one is. A stream that ends before a ``finish_reason`` is an
answer cut off, worth a retry (if nothing of it was shown: see
:class:`~runtime.limits.retry.ShownText`), unless it ends with ``[DONE]``: the server
said it is over (some proxies in front of Gemini, and vLLM at times, send no reason),
and it is taken whole, its reason ``tool_calls`` if it has calls, else ``stop``.

Some servers and proxies ignore ``stream: true`` and answer with one JSON body, as to
a one-shot call, and a proxy or web server may answer with an HTML page:
:func:`answered_whole` tells such an answer by its content type, read as the one-shot
body it is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Protocol

from runtime.errors import ModelConnectionError, ModelResponseError, ModelTimeout
from runtime.model import ModelResponse
from runtime.models.checks import shown
from runtime.models.openai._completion import (
    _list,
    _Malformed,
    _object,
    _text,
    answered_error,
    completion_response,
    content_parts,
    error_in,
)

__all__ = [
    "AnswerStream",
    "CompletionStream",
    "answered_whole",
    "event_data",
    "read_body",
    "read_lines",
    "streamed_json",
]


class AnswerStream(Protocol):
    """What reads one streamed answer: :meth:`add` each event's data as it comes, then
    :meth:`response` (a chat completion's :class:`CompletionStream`, a Responses API
    answer's :class:`~runtime.models.openai._responses_body.ResponseStream`)."""

    done: bool
    """The server said the answer is over: no event after it is read."""

    @property
    def finished(self) -> bool:
        """The answer is whole: a stream that breaks off now loses at most its usage."""
        ...

    def add(self, data: str) -> str:
        """Take one event's data; the text it adds to the answer ("" for none)."""
        ...

    def response(self) -> ModelResponse:
        """The whole answer (a :class:`ModelResponseError` if the stream ended first)."""
        ...


def answered_whole(content_type: str | None) -> bool:
    """Whether the answer to a streamed request is one body rather than server-sent
    events: JSON (``application/json``, or another ``+json`` type: the server ignored
    ``stream: true``), or an HTML page (a proxy's or a web server's, where no API
    answers), which is no answer. An answer of any other type is read as events."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media in ("application/json", "text/html") or media.endswith("+json")


async def read_body(response: Any) -> bytes:
    """The whole body; a connection that breaks while it is read is a connection error.

    ``response`` is the SDK's HTTP response (from ``httpx`` or ``httpx2``, depending on
    the ``openai`` version), so its errors are caught by what they are, not by class.
    """
    try:
        body: bytes = await response.aread()
    except Exception as exc:  # the HTTP library's transport errors; cancellation passes
        raise ModelConnectionError(f"the answer broke off: {exc}") from exc
    return body


async def read_lines(response: Any, timeout_s: float) -> AsyncGenerator[str, None]:
    """The lines of a streamed body as they come; a stream that stalls past the
    timeout, or breaks, is a timeout or a connection error (see :func:`read_body`)."""
    try:
        async for line in response.iter_lines():
            yield line
    except Exception as exc:  # the HTTP library's transport errors; cancellation passes
        if "Timeout" in type(exc).__name__:
            raise ModelTimeout(timeout_s) from exc
        raise ModelConnectionError(f"the stream broke off: {exc}") from exc


async def event_data(lines: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """The data of each server-sent event in ``lines`` (its ``data:`` lines joined);
    comments and other fields are skipped."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
    if data:
        yield "\n".join(data)


def streamed_json(data: str, model: str, what: str) -> Any:
    """The JSON of one event's ``data`` (``what`` it is: ``a chunk``, ``an event``).

    Raises:
        ModelResponseError: for data that is not JSON (retryable: a proxy's or a
            connection's fault).
    """
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ModelResponseError(
            f"model {model!r} streamed {what} that is not JSON ({exc}): {shown(data)}",
            retryable=True,
        ) from exc


class _Call:
    """One tool call as its pieces arrive."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []
        self.extra: Any = None  # its extra_content (Gemini's thought signature)


def _whole(call: _Call) -> bool:
    """Whether ``call``'s arguments so far are whole: none, or a JSON value."""
    arguments = "".join(call.arguments)
    try:
        json.loads(arguments)
    except ValueError:
        return not arguments.strip()
    return True


def _another(call: _Call, given: str | None, name: str) -> bool:
    """Whether a piece naming function ``name``, with the id ``given`` (if any), is of
    a call other than ``call``: its id or its function is another."""
    return bool(given and call.id and call.id != given) or bool(call.name and call.name != name)


class CompletionStream:
    """One streamed completion of ``model``: :meth:`add` each event's data, then
    :meth:`response`.

    Attributes:
        done: The server said the stream is over (``[DONE]``).
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.done = False
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[_Call] = []  # in the order they started
        self._at: dict[int, _Call] = {}  # the call each index stands for now
        self._finish: str | None = None
        self._usage: dict[str, Any] = {}
        self._named: str | None = None
        self._chunks = 0
        self._choice: Any = None  # the index of the answer's choice, once one came

    def add(self, data: str) -> str:
        """Take one event's data; the text it adds to the answer ("" for none).

        Raises:
            ModelResponseError: for a chunk that is not JSON (retryable: a proxy's or a
                connection's fault), an error sent in the stream, or a malformed chunk.
            ModelHTTPError: for an error sent in the stream that stands for one (a
                server error, a rate limit: see :func:`answered_error`).
        """
        if data.strip() == "[DONE]":
            self.done = True
            return ""
        self._chunks += 1
        chunk = streamed_json(data, self.model, "a chunk")
        error = error_in(chunk, "choices")
        if error is not None:
            # A server error or a rate limit is retried as its HTTP error would be (if
            # no text was shown yet: see ShownText).
            raise answered_error(error, self.model, "sent an error in its stream")
        try:
            return self._add(chunk, f"chunk {self._chunks}")
        except _Malformed as exc:
            raise ModelResponseError(
                f"model {self.model!r} streamed a malformed chunk: {exc}"
            ) from exc

    @property
    def finished(self) -> bool:
        """Its finish reason came: all of the answer did, only its usage may follow."""
        return self._finish is not None

    def _add(self, data: Any, where: str) -> str:
        chunk = _object(data, where)
        self._named = _text(chunk.get("model"), f"{where}.model") or self._named
        if chunk.get("usage") is not None:
            self._usage = _object(chunk["usage"], f"{where}.usage")
        found = self._first_choice(_list(chunk.get("choices") or [], f"{where}.choices"), where)
        if found is None:
            return ""
        at, choice = found
        self._finish = _text(choice.get("finish_reason"), f"{at}.finish_reason") or self._finish
        delta = _object(choice.get("delta") or {}, f"{at}.delta")
        # Text, or typed parts (Mistral's reasoning models: see content_parts).
        said, thinking = content_parts(delta.get("content"), f"{at}.delta.content")
        reasoning = _text(delta.get("reasoning_content"), f"{at}.delta.reasoning_content")
        if reasoning is None and isinstance(delta.get("reasoning"), str):
            reasoning = delta["reasoning"]  # newer vLLM's name (see parse_completion)
        reasoning = thinking if reasoning is None else reasoning
        if reasoning is not None:  # "" too: sent back as a whole answer's is (DeepSeek's)
            self._reasoning.append(reasoning)
        for index, item in enumerate(
            _list(delta.get("tool_calls") or [], f"{at}.delta.tool_calls")
        ):
            self._call_piece(item, f"{at}.delta.tool_calls[{index}]")
        text = said or ""
        # A refusal's words come as their own pieces: the answer's text (see parse_completion).
        text += _text(delta.get("refusal"), f"{at}.delta.refusal") or ""
        if text:
            self._content.append(text)
        return text

    def _first_choice(self, choices: list[Any], where: str) -> tuple[str, dict[str, Any]] | None:
        """Where the answer's choice is among a chunk's ``choices``, and it (None: the
        chunk has none of it). The answer is the first choice, as a whole answer's is:
        the choices a request for several (``n`` in the settings) has are streamed each
        at its ``index``, their pieces interleaved."""
        for at, raw in enumerate(choices):
            choice = _object(raw, f"{where}.choices[{at}]")
            index = choice.get("index")
            if self._choice is None:
                self._choice = index  # a choice without an index is the answer's
            if index is None or index == self._choice:
                return f"{where}.choices[{at}]", choice
        return None

    def _call_piece(self, item: Any, where: str) -> None:
        piece = _object(item, where)
        given = _text(piece.get("id"), f"{where}.id")
        index = piece.get("index")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool)):
            raise _Malformed(f"{where}.index is not a whole number")
        function = _object(piece.get("function") or {}, f"{where}.function")
        # The name comes whole (servers that repeat it in every piece do no harm).
        name = _text(function.get("name"), f"{where}.function.name")
        call = self._call_of(index, given, name)
        if given:
            call.id = given
        call.name = name or call.name
        if piece.get("extra_content") is not None:
            call.extra = piece["extra_content"]
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the object itself, whole
            call.arguments = [json.dumps(arguments)]
        elif arguments:
            text = _text(arguments, f"{where}.function.arguments") or ""
            so_far = "".join(call.arguments)
            if so_far.strip() == "{}" and text.lstrip().startswith("{"):
                # A proxy's "{}" before the arguments came (Anthropic's tool_use block
                # starts with an empty input, which some gateways pass on): not theirs.
                call.arguments = [text]
            # Some servers and proxies (LiteLLM's last chunk) send a call's arguments
            # whole again once they have come in pieces: the same text, not more of it.
            elif not (call.arguments and _whole(call) and so_far == text):
                call.arguments.append(text)

    def _call_of(self, index: int | None, given: str | None, name: str | None) -> _Call:
        """The call a piece with ``index`` belongs to: the one its index (or, with no
        index, as some servers send, its id or the last piece) says, unless the piece
        starts another call (it names a function, with another id or another name)
        once the arguments of that one are whole: a new call. Ollama sends every call
        of a turn at one index, and some of OpenRouter's providers every call with one
        id. A server that sends a new id with every piece of one call (some proxies do)
        sends no name with them, or sends them before the arguments are whole."""
        if index is None:
            known = [c for c in self._calls if name and given and c.id == given]
            current = known[0] if known else self._calls[-1] if self._calls else None
        else:
            current = self._at.get(index)
        if current is None or (name and _whole(current) and _another(current, given, name)):
            current = _Call()
            self._calls.append(current)
        if index is not None:
            self._at[index] = current
        return current

    def response(self) -> ModelResponse:
        """The whole answer.

        Raises:
            ModelResponseError: when the stream ended before the answer did (retryable),
                or the answer is malformed.
        """
        finish = self._finish
        if finish is None and self.done:  # [DONE] ends it whole, though no reason came
            finish = "tool_calls" if self._calls else "stop"
        if finish is None:
            raise ModelResponseError(
                f"the stream of model {self.model!r} ended before its answer did (no "
                f"finish_reason in {self._chunks} chunks)",
                retryable=True,
            )
        message: dict[str, Any] = {
            "content": "".join(self._content) if self._content else None,
            "reasoning_content": "".join(self._reasoning) if self._reasoning else None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                    "extra_content": call.extra,
                }
                for call in self._calls
            ],
        }
        body = {
            "choices": [{"message": message, "finish_reason": finish}],
            "usage": self._usage,
            "model": self._named,
        }
        return completion_response(body, self.model)
