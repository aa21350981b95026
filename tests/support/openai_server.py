"""A local OpenAI-compatible server for tests: chat completions and the Responses API.

It serves ``POST /v1/chat/completions`` and ``POST /v1/responses`` (one-shot, or
streamed as server-sent events when the request says ``stream: true``) and
``POST /v1/embeddings`` (:func:`embedding`: vectors made from the words of each text)
on 127.0.0.1, on a free port,
from a background thread with its own event loop, so any test can use it whatever
loop the test runs on. Tests program it with behaviours, consumed one per request
(:meth:`OpenAIServer.enqueue`), and read back every request it received
(:attr:`OpenAIServer.requests`)::

    with OpenAIServer() as server:
        server.enqueue(error(429, retry_after=0.3), text("hello"))
        model = OpenAIModel("gpt-test", base_url=server.base_url)
        ...
        assert len(server.requests) == 2

:attr:`OpenAIServer.default` may also be a function of the request (a responder), and
:meth:`OpenAIServer.inject` makes a share of requests fail at random, reproducibly
(:class:`Faults`: 429 with Retry-After, 500, or an answer slower than the client waits).

A :class:`Reply` is sent in the shape of the path asked: a chat completion, or a
Responses API response (its text as a ``message`` item, its calls as ``function_call``
items, its reasoning as a ``reasoning`` item); ``RecordedRequest.path`` says which.
A streamed chat completion sends a :class:`Reply` in chunks as OpenAI does: the role,
the reasoning and the text word by word, the tool calls' pieces interleaved by
``index``, the finish reason, the usage (if ``stream_options.include_usage``), then
``[DONE]``; a streamed Responses API answer as typed events: ``response.created``, the
text word by word (``response.output_text.delta``), then ``response.completed`` (or
``response.incomplete``) with the whole response. ``cut_after`` breaks either off after
that many chunks or events (see :class:`Reply`).
``ignore_stream`` plays a server that ignores ``stream: true`` and answers whole.

A :class:`Quota` makes it enforce requests and tokens per minute as providers do.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import math
import random
import re
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from runtime.testing import text_pieces
from tests.support.asgi_server import Lifecycle, ThreadedServer

__all__ = [
    "Behaviour",
    "Faults",
    "OpenAIServer",
    "Quota",
    "Raw",
    "RecordedRequest",
    "Reply",
    "Responder",
    "embedding",
    "error",
    "text",
    "tool_calls",
]


HOLD_LIMIT_S = 30.0
"""How long a stream held back (``Reply.hold_until``) waits to be let go."""

BODY_PIECES = 10
"""Pieces a one-shot answer with a ``chunk_delay_s`` is sent in."""


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer 200 with one chat completion (text, tool calls, or both).

    ``tool_calls`` holds ``(id, name, arguments)`` with the arguments as raw text, so a
    test can send JSON that does not parse. ``reasoning`` is sent as the message's
    ``reasoning_content`` (as DeepSeek and vLLM's reasoning parsers do), and
    ``reasoning_tokens`` as ``usage.completion_tokens_details.reasoning_tokens``.
    ``cached_tokens`` is sent as ``usage.prompt_tokens_details.cached_tokens``
    (OpenAI's form), ``cache_hit_tokens`` as ``usage.prompt_cache_hit_tokens`` (with
    the misses as ``prompt_cache_miss_tokens``: DeepSeek's).

    On ``/v1/responses``: ``reasoning`` is the summary of a ``reasoning`` item (with
    ``reasoning_encrypted`` as its ``encrypted_content``), ``cached_tokens`` goes in
    ``usage.input_tokens_details``, and ``finish_reason="length"`` makes the response
    ``incomplete`` (``max_output_tokens``).

    Streamed: ``chunk_delay_s`` is the pause before each chunk (one-shot, before each
    of :data:`BODY_PIECES` pieces of the body: a server that writes its answer
    slowly, never pausing long between two bytes); ``cut_after`` breaks
    the stream off after that many chunks (0: before the first, 1: after the role,
    before any text), by resetting the connection (``cut="reset"``) or by ending the
    stream without a finish reason or ``[DONE]`` (``cut="end"``). ``hold_until`` holds
    the chunks after the first ``hold_after`` back until the event is set (the test
    sets it when its client has shown what came); not set within
    :data:`HOLD_LIMIT_S`, the stream is cut. ``ignore_stream`` answers a streamed
    request as a one-shot one, with one ``application/json`` body (as some servers and
    proxies do).
    """

    content: str | None = None
    tool_calls: tuple[tuple[str, str, str], ...] = ()
    prompt_tokens: int = 11
    completion_tokens: int = 7
    reasoning: str | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cache_hit_tokens: int | None = None
    finish_reason: str | None = None  # default: "tool_calls" if there are calls, else "stop"
    model: str | None = None  # default: the model the request named
    delay_s: float = 0.0
    reasoning_encrypted: str | None = None
    chunk_delay_s: float = 0.0
    cut_after: int | None = None
    cut: str = "reset"
    hold_after: int = 0
    hold_until: threading.Event | None = None
    ignore_stream: bool = False


@dataclass(frozen=True, slots=True)
class Raw:
    """Answer ``status`` with OpenAI's JSON error body, or with ``body`` when given
    (so ``Raw(200, body={...})`` sends any completion, even a broken one), or with the
    bytes ``content`` as they are (truncated JSON, HTML ...) typed ``media_type``."""

    status: int
    message: str = "something went wrong"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None  # replaces the standard {"error": {...}} body when given
    delay_s: float = 0.0
    content: bytes | None = None  # replaces any JSON body when given
    media_type: str = "application/json"


Behaviour = Reply | Raw


def text(content: str, *, delay_s: float = 0.0) -> Reply:
    """A plain text answer, sent after ``delay_s`` seconds."""
    return Reply(content=content, delay_s=delay_s)


def tool_calls(
    *calls: tuple[str, Mapping[str, Any] | str], content: str | None = None, delay_s: float = 0.0
) -> Reply:
    """An answer asking for tool calls ``(name, arguments)``; ids are ``call_0``, ``call_1``...

    Arguments given as a mapping are sent as JSON; a string is sent as is.
    """
    return Reply(
        content=content,
        delay_s=delay_s,
        tool_calls=tuple(
            (f"call_{i}", name, args if isinstance(args, str) else json.dumps(dict(args)))
            for i, (name, args) in enumerate(calls)
        ),
    )


def error(
    status: int,
    message: str = "something went wrong",
    *,
    retry_after: float | None = None,
    retry_after_ms: float | None = None,
    headers: Mapping[str, str] | None = None,
    delay_s: float = 0.0,
) -> Raw:
    """An HTTP error, with ``Retry-After`` (seconds) and/or ``retry-after-ms`` if given."""
    sent = dict(headers or {})
    if retry_after is not None:
        sent["Retry-After"] = f"{retry_after:g}"
    if retry_after_ms is not None:
        sent["retry-after-ms"] = f"{retry_after_ms:g}"
    return Raw(status, message, headers=sent, delay_s=delay_s)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server received it.

    ``at`` is ``time.monotonic()`` on arrival; ``number`` counts requests from 1;
    ``in_flight`` is how many requests the server was handling on its arrival, itself
    included; ``fault`` names the fault injected into it, if any; ``raw`` is the body's
    bytes as they came (what a provider's prompt cache compares).
    """

    path: str
    body: Any
    headers: Mapping[str, str]  # lower-case names
    at: float
    number: int = 0
    in_flight: int = 1
    fault: str | None = None
    raw: bytes = b""


Responder = Callable[[RecordedRequest], Behaviour]
"""Chooses the answer to a request, when nothing is queued."""


FAULT_KINDS = ("429", "500", "timeout")


@dataclass(frozen=True, slots=True)
class Faults:
    """Answer a share of requests with a fault instead of their behaviour.

    Each request is faulted with probability ``rate``; the kind is drawn by
    ``weights`` from ``429`` (with ``Retry-After: retry_after_s``), ``500``, and
    ``timeout`` (an answer held ``hang_s`` seconds: longer than the client waits).
    Draws come from ``random.Random(seed)``, one per request in order of arrival, so a
    run is reproducible. A faulted request leaves the queue of behaviours untouched.
    """

    rate: float = 0.3
    weights: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 1.0))
    retry_after_s: float = 0.2
    hang_s: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ValueError(f"rate must be within [0, 1], got {self.rate}")
        unknown = set(self.weights) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; kinds: {FAULT_KINDS}")

    def draw(self, rng: random.Random) -> str | None:
        """The fault for the next request, or None."""
        if rng.random() >= self.rate:
            return None
        kinds = list(self.weights)
        return rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]

    def behaviour(self, kind: str) -> Behaviour:
        if kind == "429":
            return error(429, "rate limit reached (injected)", retry_after=self.retry_after_s)
        if kind == "500":
            return error(500, "the server had an error (injected)")
        return text("too late (injected)", delay_s=self.hang_s)


QuotaHeaders = Literal["retry-after", "bare", "x-ratelimit"]


@dataclass(frozen=True, slots=True)
class Quota:
    """A provider's rate limit: ``requests`` and ``tokens`` per ``window_s`` seconds
    (None: no limit of that kind), each a bucket that holds that many and refills
    evenly over the window, as OpenAI's limits do.

    A request takes one request and its reply's tokens (prompt plus completion) from
    the buckets when it arrives; if either holds too little it is answered 429 and
    takes nothing. What the server tells the client, by ``headers``:

    - ``"retry-after"``: a 429 says when to retry (``Retry-After`` in whole seconds,
      ``retry-after-ms`` exactly); nothing else.
    - ``"bare"``: a 429 and nothing more.
    - ``"x-ratelimit"``: every answer, 429s included, carries ``x-ratelimit-limit-*``,
      ``x-ratelimit-remaining-*`` and ``x-ratelimit-reset-*`` (the time until the bucket
      is full again, as ``"1.5s"`` or ``"250ms"``) for requests and tokens; a 429 sends
      no ``Retry-After``.
    """

    requests: int | None = None
    tokens: int | None = None
    window_s: float = 60.0
    headers: QuotaHeaders = "retry-after"

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            raise ValueError(f"window_s must be positive, got {self.window_s}")
        for name in ("requests", "tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")


class _Bucket:
    """One limit of a :class:`Quota`: ``size`` refilled over ``window_s``."""

    def __init__(self, size: int, window_s: float, now: float) -> None:
        self.size, self.rate = size, size / window_s
        self.level, self._at = float(size), now

    def refill(self, now: float) -> None:
        self.level = min(self.size, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_s(self, cost: float) -> float:
        """Seconds until ``cost`` fits."""
        return max(cost - self.level, 0.0) / self.rate

    def reset_s(self) -> float:
        """Seconds until the bucket is full."""
        return (self.size - self.level) / self.rate


def _duration(seconds: float) -> str:
    """``"1.5s"``, ``"250ms"``: how OpenAI writes a reset time."""
    return f"{seconds:.3g}s" if seconds >= 1 else f"{math.ceil(seconds * 1000)}ms"


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_exceeded",
}


class OpenAIServer(Lifecycle):
    """The server; use it as a context manager (or call :meth:`start` and :meth:`stop`).

    Attributes:
        default: What to answer when no behaviour is queued (or a responder).
    """

    def __init__(
        self,
        default: Behaviour | Responder | None = None,
        *,
        faults: Faults | None = None,
        quota: Quota | None = None,
    ) -> None:
        self.default: Behaviour | Responder = default or text("ok")
        self._queue: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._faults = faults
        self._rng = random.Random(faults.seed if faults else 0)
        self._in_flight = 0
        self._quota: Quota | None = None
        self._buckets: dict[str, _Bucket] = {}
        self.throttled = 0
        """Requests answered 429 because the quota was spent."""
        self.left = threading.Event()
        """Set when a client goes away from a stream before its end (what makes a
        server such as vLLM or llama.cpp's stop generating)."""
        self.limit(quota)
        self._stopping = asyncio.Event()  # binds to the server's loop on first use
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._handle, methods=["POST"]),
                Route("/v1/embeddings", self._handle, methods=["POST"]),
                Route("/v1/responses", self._handle, methods=["POST"]),
            ]
        )
        self._server = ThreadedServer(app, name="openai-test-server")

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def base_url(self) -> str:
        return f"{self._server.url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, in order of arrival."""
        with self._lock:
            return list(self._requests)

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Queue behaviours; each request takes the next one, then :attr:`default`."""
        with self._lock:
            self._queue.extend(behaviours)

    def inject(self, faults: Faults | None) -> None:
        """Fault requests from now on as ``faults`` says (None: stop), seeded anew."""
        with self._lock:
            self._faults = faults
            self._rng = random.Random(faults.seed if faults else 0)

    def limit(self, quota: Quota | None) -> None:
        """Enforce ``quota`` from now on (None: stop), its buckets full."""
        now = time.monotonic()
        with self._lock:
            self._quota, self.throttled = quota, 0
            sizes = {"requests": quota.requests, "tokens": quota.tokens} if quota else {}
            self._buckets = {
                kind: _Bucket(size, quota.window_s, now)
                for kind, size in sizes.items()
                if quota is not None and size is not None
            }

    @property
    def injected(self) -> Counter[str]:
        """Faults injected so far, by kind."""
        return Counter(r.fault for r in self.requests if r.fault is not None)

    def reset(self) -> None:
        """Forget queued behaviours, faults and recorded requests; restore the default."""
        with self._lock:
            self._queue.clear()
            self._requests.clear()
            self._faults = None
            self.default = text("ok")
        self.left.clear()
        self.limit(None)

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        # Slow answers still pending go out now, instead of being cancelled.
        self._server.call_soon(self._stopping.set)
        self._server.stop()

    async def _handle(self, request: Request) -> Response:
        arrived = time.monotonic()
        raw = await request.body()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        with self._lock:
            self._in_flight += 1
            fault = self._faults.draw(self._rng) if self._faults is not None else None
            number = len(self._requests) + 1
            recorded = RecordedRequest(
                request.url.path,
                body,
                dict(request.headers),
                arrived,
                number,
                self._in_flight,
                fault,
                raw,
            )
            self._requests.append(recorded)
            queued = self._queue.popleft() if self._queue and fault is None else None
        try:
            behaviour = self._choose(recorded, queued)
            behaviour, headers = self._charge(behaviour)
            return await self._answer(behaviour, recorded, headers)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _choose(self, recorded: RecordedRequest, queued: Behaviour | None) -> Behaviour:
        if recorded.fault is not None and self._faults is not None:
            return self._faults.behaviour(recorded.fault)
        if queued is not None:
            return queued
        return self.default(recorded) if callable(self.default) else self.default

    def _charge(self, behaviour: Behaviour) -> tuple[Behaviour, dict[str, str]]:
        """Take the request's cost from the quota: the behaviour to answer with (a 429
        when the quota is spent) and the rate-limit headers to send with it."""
        if self._quota is None:
            return behaviour, {}
        quota = self._quota
        tokens = 0
        if isinstance(behaviour, Reply):
            tokens = behaviour.prompt_tokens + behaviour.completion_tokens
        costs = {"requests": 1.0, "tokens": float(tokens)}
        with self._lock:
            now = time.monotonic()
            for bucket in self._buckets.values():
                bucket.refill(now)
            wait = max(b.wait_s(costs[k]) for k, b in self._buckets.items()) if self._buckets else 0
            if wait == 0:
                for kind, bucket in self._buckets.items():
                    bucket.level -= costs[kind]
            else:
                self.throttled += 1
            headers: dict[str, str] = {}
            if quota.headers == "x-ratelimit":
                for kind, bucket in self._buckets.items():
                    headers[f"x-ratelimit-limit-{kind}"] = str(bucket.size)
                    headers[f"x-ratelimit-remaining-{kind}"] = str(max(math.floor(bucket.level), 0))
                    headers[f"x-ratelimit-reset-{kind}"] = _duration(bucket.reset_s())
        if wait == 0:
            return behaviour, headers
        if quota.headers == "retry-after":
            headers = {"Retry-After": str(math.ceil(wait)), "retry-after-ms": f"{wait * 1000:.0f}"}
        message = "Rate limit reached: requests or tokens per minute used up (quota)"
        return Raw(429, message, headers=headers), {}

    async def _answer(
        self, behaviour: Behaviour, recorded: RecordedRequest, headers: Mapping[str, str]
    ) -> Response:
        await self._pause(behaviour.delay_s)
        body, number = recorded.body, recorded.number
        if isinstance(behaviour, Raw) and behaviour.content is not None:
            headers = dict(behaviour.headers)
            return Response(behaviour.content, behaviour.status, headers, behaviour.media_type)
        if isinstance(behaviour, Raw):
            sent = {**behaviour.headers, **headers}
            return JSONResponse(_error_body(behaviour), behaviour.status, sent)
        named = body.get("model", "") if isinstance(body, dict) else ""
        if isinstance(body, dict) and recorded.path.endswith("/embeddings"):
            return JSONResponse(_embeddings(body, named), 200, headers)
        model = behaviour.model or named
        responses = recorded.path.endswith("/responses")
        if isinstance(body, dict) and body.get("stream") and not behaviour.ignore_stream:
            if responses:
                events = _response_events(behaviour, model, number)
            else:
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                events = _chunks(behaviour, model, number, usage=usage)
            return StreamingResponse(
                self._events(behaviour, events, done=not responses),
                headers=dict(headers),
                media_type="text/event-stream",
            )
        if responses:
            return self._whole(behaviour, _response(behaviour, model, number), headers)
        return self._whole(behaviour, _completion(behaviour, model, number), headers)

    def _whole(self, reply: Reply, body: Any, headers: Mapping[str, str]) -> Response:
        """A one-shot answer: at once, or in pieces ``reply.chunk_delay_s`` apart."""
        if reply.chunk_delay_s <= 0:
            return JSONResponse(body, 200, headers)
        data = json.dumps(body).encode()
        size = -(-len(data) // BODY_PIECES)

        async def pieces() -> Any:
            for at in range(0, len(data), size):
                await self._pause(reply.chunk_delay_s)
                yield data[at : at + size]

        return StreamingResponse(pieces(), headers=dict(headers), media_type="application/json")

    async def _events(self, reply: Reply, chunks: list[dict[str, Any]], *, done: bool) -> Any:
        """The chunks as server-sent events (each named by its ``type``, if it has one,
        as the Responses API's are), cut off as ``reply`` says; then ``[DONE]``, as
        chat completions end, if ``done``. A client that goes away first sets
        :attr:`left`."""
        try:
            for sent, chunk in enumerate(chunks):
                if reply.cut_after is not None and sent >= reply.cut_after:
                    if reply.cut == "end":
                        return
                    raise _StreamCut(f"the stream is cut after {sent} chunks (as asked)")
                if sent == reply.hold_after and not await self._let_go(reply):
                    raise _StreamCut(f"held after {sent} chunks, and never let go")
                await self._pause(reply.chunk_delay_s)
                named = f"event: {chunk['type']}\n" if "type" in chunk else ""
                yield f"{named}data: {json.dumps(chunk)}\n\n"
            if done:
                yield "data: [DONE]\n\n"
        except (asyncio.CancelledError, GeneratorExit):  # its client went away
            self.left.set()
            raise

    async def _let_go(self, reply: Reply) -> bool:
        """Whether a stream held back (``reply.hold_until``) was let go in time."""
        held = reply.hold_until
        return held is None or await asyncio.to_thread(held.wait, HOLD_LIMIT_S)

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds``, or less if the server stops meanwhile."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)


class _StreamCut(Exception):
    """Raised in a streamed answer to break the connection off (uvicorn resets it)."""


def _chunks(reply: Reply, model: str, number: int, *, usage: bool) -> list[dict[str, Any]]:
    """``reply`` as the chunks of a streamed chat completion."""
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"reasoning_content": piece} for piece in text_pieces(reply.reasoning or "")]
    deltas += [{"content": piece} for piece in text_pieces(reply.content or "")]
    # Every call's first piece (id, name), then their arguments in turns, interleaved.
    calls = reply.tool_calls
    deltas += [
        {"tool_calls": [{"index": i, "id": id_, "type": "function",
                         "function": {"name": name, "arguments": ""}}]}
        for i, (id_, name, _) in enumerate(calls)
    ]  # fmt: skip
    pieces = [[args[at : at + 4] for at in range(0, len(args), 4)] for _, _, args in calls]
    for round_ in range(max((len(p) for p in pieces), default=0)):
        deltas += [
            {"tool_calls": [{"index": i, "function": {"arguments": p[round_]}}]}
            for i, p in enumerate(pieces)
            if round_ < len(p)
        ]
    finish = reply.finish_reason or ("tool_calls" if calls else "stop")
    base = {"id": f"chatcmpl-test{number}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}  # fmt: skip
    chunks = [
        {**base, "choices": [{"index": 0, "delta": d, "logprobs": None, "finish_reason": None}]}
        for d in deltas
    ]
    chunks.append(
        {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]}
    )
    if usage:
        for chunk in chunks:
            chunk["usage"] = None
        whole = _completion(reply, model, number)["usage"]
        chunks.append({**base, "choices": [], "usage": whole})
    return chunks


def _response_events(reply: Reply, model: str, number: int) -> list[dict[str, Any]]:
    """``reply`` as the events of a streamed Responses API answer: the response begun,
    its text word by word, then the whole response."""
    whole = _response(reply, model, number)
    begun = {**whole, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": begun}]
    text = {"type": "response.output_text.delta", "item_id": f"msg_test{number}"}
    events += [
        {**text, "output_index": 0, "content_index": 0, "delta": piece}
        for piece in text_pieces(reply.content or "")
    ]
    last = "response.incomplete" if whole["status"] == "incomplete" else "response.completed"
    events.append({"type": last, "response": whole})
    return [{**event, "sequence_number": at} for at, event in enumerate(events)]


def _error_body(fail: Raw) -> Any:
    if fail.body is not None:
        return fail.body
    kind = _ERROR_TYPES.get(fail.status, "server_error" if fail.status >= 500 else "api_error")
    return {"error": {"message": fail.message, "type": kind, "param": None, "code": None}}


def _completion(reply: Reply, model: str, number: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content, "refusal": None}
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}
            for id_, name, args in reply.tool_calls
        ]
    finish = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    usage: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    if reply.reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    if reply.cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    if reply.cache_hit_tokens is not None:
        usage["prompt_cache_hit_tokens"] = reply.cache_hit_tokens
        usage["prompt_cache_miss_tokens"] = reply.prompt_tokens - reply.cache_hit_tokens
    return {
        "id": f"chatcmpl-test{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


EMBEDDING_DIMENSIONS = 64
SYNONYMS = {"automobile": "car", "vehicle": "car", "cars": "car", "feline": "cat", "kitten": "cat"}
"""Words the embeddings treat as one, so a test can find by meaning what no word of
its query matches."""


def embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic vector for ``text``: a hashed bag of its lower-cased words (with
    :data:`SYNONYMS` folded together), of length one."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        word = SYNONYMS.get(word, word)
        slot = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimensions
        vector[slot] += 1.0
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm else [1.0] + [0.0] * (dimensions - 1)


def _embeddings(body: dict[str, Any], model: str) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dimensions = int(body.get("dimensions") or EMBEDDING_DIMENSIONS)
    data = []
    for index, text in enumerate(texts):
        vector = embedding(str(text), dimensions)
        sent: Any = vector
        if body.get("encoding_format") == "base64":  # what the openai client asks for
            sent = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": sent})
    tokens = sum(len(str(t).split()) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _response(reply: Reply, model: str, number: int) -> dict[str, Any]:
    """``reply`` as the Responses API answers: output items, usage, status."""
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        reasoning: dict[str, Any] = {
            "type": "reasoning",
            "id": f"rs_test{number}",
            "summary": [{"type": "summary_text", "text": reply.reasoning}],
        }
        if reply.reasoning_encrypted is not None:
            reasoning["encrypted_content"] = reply.reasoning_encrypted
        output.append(reasoning)
    if reply.content is not None:
        output.append(
            {
                "type": "message",
                "id": f"msg_test{number}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            }
        )
    output += [
        {
            "type": "function_call",
            "id": f"fc_test{number}_{index}",
            "call_id": id_,
            "name": name,
            "arguments": args,
            "status": "completed",
        }
        for index, (id_, name, args) in enumerate(reply.tool_calls)
    ]
    cut = reply.finish_reason == "length"
    return {
        "id": f"resp_test{number}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": reply.prompt_tokens,
            "input_tokens_details": {"cached_tokens": reply.cached_tokens or 0},
            "output_tokens": reply.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens or 0},
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }
