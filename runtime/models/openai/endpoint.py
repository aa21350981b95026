"""What the OpenAI adapters share: :class:`OpenAIEndpoint`, the base of
:class:`~runtime.models.openai.chat.OpenAIModel` (chat completions) and
:class:`~runtime.models.openai.responses.OpenAIResponsesModel` (the Responses API).

It holds the official ``openai.AsyncOpenAI`` client (one per event loop), with the
SDK's own retries turned off: :class:`~runtime.limits.retry.RetryPolicy` is the one retry
policy. Every attempt, retries included, passes through the model's
:class:`~runtime.limits.ratelimit.AdaptiveLimiter`, which all workers using the model share,
and every answer (429s included) tells it what the endpoint's ``x-ratelimit-*``
headers say is left of its quota. ``openai`` errors are translated into
:mod:`runtime.errors` here. Its API key and the values of its extra headers are
secrets (:mod:`runtime.secrets`): masked in its answers and its errors as they
arrive, whatever the endpoint echoes, so nothing past the adapter sees them. An
endpoint that refuses structured output as asked is asked the next way
(``json_schema``, ``json_object``, the instructions alone), in that call and every
later one; the agent loop's validation of the answer stays the
judge. An endpoint whose chat template wants user and assistant turns to alternate
(Gemma's, older Mistral ones: ``Conversation roles must alternate``, on vLLM or
llama.cpp) gets consecutive user messages as one from then on (:attr:`alternating`),
and one that refuses ``stream_options`` streams without it (:attr:`stream_usage`).
An adapter says how to build a request, send it and read the answer, and how to
send it as a stream and read the answer's events as they come (:meth:`_streamed`,
:meth:`_answer_stream`); a streamed call is retried, under the same policy, only until
some of its text was shown.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Literal

import openai
from msgspec.structs import replace

from runtime import logs
from runtime.concurrency import TimedOut, closed_with_loop, within
from runtime.config.endpoints import endpoint_secrets, http_url_problem
from runtime.errors import (
    ConfigError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeout,
)
from runtime.events import report_retry
from runtime.limits.budget import timed_out
from runtime.limits.quota import quota_from_headers
from runtime.limits.ratelimit import AdaptiveLimiter
from runtime.limits.retry import ShownText, endpoint_call
from runtime.limits.retry_policy import RetryPolicy
from runtime.model import ModelRequest, ModelResponse, TextSink
from runtime.models.context_refusal import context_hint, told_of_server
from runtime.models.layers.cost_cap import prompt_tokens
from runtime.models.openai._completion import estimated_usage
from runtime.models.openai.refusals import (
    MAX_TOKENS,
    QUOTA_SPENT,
    REASONING_CONTENT,
    STREAM_OPTIONS,
    about_model,
    all_text,
    key_refused,
    not_served,
    quota_spent,
    refuses,
    refuses_format,
    retry_after,
    wants_alternation,
    with_cause,
)
from runtime.models.openai.request import (
    KEY_VARIABLE,
    NO_KEY,
    Api,
    given_problem,
    key_missing,
    key_source,
    key_unsendable,
    reads_key_variable,
    split_settings,
    without_query,
)
from runtime.models.openai.stream import (
    AnswerStream,
    answered_whole,
    event_data,
    read_body,
    read_lines,
)
from runtime.secrets import (
    CREDENTIAL_PARAMETERS,
    add_header,
    add_secret,
    mask_error,
    masked,
    shows_secret,
)

__all__ = ["OpenAIEndpoint", "OutputMode"]

OutputMode = Literal["json_schema", "json_object", "instructions"]
_FALLBACK: dict[OutputMode, OutputMode] = {
    "json_schema": "json_object",
    "json_object": "instructions",
}


class OpenAIEndpoint(abc.ABC):
    """A model behind an endpoint of one of OpenAI's APIs (see the adapters for the
    arguments); subclasses say how to build a request (:meth:`_params`), send it
    (:meth:`_send`) and read the answer's body (:meth:`_parse`).

    Raises:
        ConfigError: for a setting Honeycomb sets itself, or ``extra_headers``,
            ``extra_query`` or ``extra_body`` of another shape (ConfigErrors, one for
            each, when there are several).
    """

    api: ClassVar[Api] = "chat"
    """Which API the adapter speaks: it decides which settings the SDK names."""

    tells_attempts: ClassVar[bool] = True
    """Its retries and the attempts its timeout cut off (:func:`runtime.model.tells_attempts`)."""

    stream_calls: bool = False
    """Send one-shot calls as streams too (their text shown to no one): a server that
    stops generating only when a stream's reader goes away (llama.cpp's, which keeps
    generating a one-shot answer nobody waits for any more) then stops a cancelled
    call at once. :class:`~runtime.models.llama.LlamaModel` sets it."""

    trust_env: bool = True
    """Whether its HTTP client takes its settings from the environment, as httpx's do
    by default: the proxy that ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` name
    (past ``NO_PROXY``), CA files, ``.netrc``. :class:`~runtime.models.llama.LlamaModel`
    turns it off: its server is on this machine's loopback, and its prompts and key
    go to no proxy."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        settings: Mapping[str, Any] | None = None,
        client: openai.AsyncOpenAI | None = None,
        max_concurrency: int | None = 32,
        limiter: AdaptiveLimiter | None = None,
        context_tokens: int | None = None,
    ) -> None:
        self.model = model
        problem = given_problem(timeout, max_concurrency, context_tokens, api_key_env)
        if problem is not None:  # else every call fails, or none is made, in other words
            raise ConfigError(f"model {model!r}: {problem}")
        self.context_tokens = context_tokens
        """The tokens one call holds, its prompt and its answer together, as its server
        serves the model (None: not said). Said, a run fits to it what it hands the
        model (dependency results, an aggregator's inputs, a session's conversation)
        and checks a compaction budget against it (:func:`runtime.model.context_of`)."""
        self._base_url = base_url or None  # as given: an empty key is none for it alone
        self.base_url = self._base_url or os.environ.get("OPENAI_BASE_URL") or None
        if api_key is not None and api_key_env is not None:
            raise ConfigError(f"model {model!r}: give api_key or api_key_env, not both")
        self._api_key = api_key
        self.api_key_env = api_key_env
        """The environment variable its key is read from as its client is made, in the
        process that makes it (None: ``api_key``, else ``OPENAI_API_KEY``)."""
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.settings = dict(settings or {})
        self._sdk_settings, self._extra_body = split_settings(
            self.settings, self.api, f"model {model!r}"
        )
        self._given = client.with_options(max_retries=0) if client is not None else None
        # An httpx client serves the event loop it first ran on: one client per loop,
        # closed as its loop shuts down (with what closes it) and dropped once it is.
        self._clients: dict[asyncio.AbstractEventLoop, tuple[openai.AsyncOpenAI, object]] = {}
        self._unbound: openai.AsyncOpenAI | None = None  # made outside any loop
        self._key: str | None = None
        if limiter is None and max_concurrency is not None:
            limiter = AdaptiveLimiter(max_concurrency)
        self.limiter = limiter
        self.output_mode: OutputMode = "json_schema"
        """How structured output is asked for; an endpoint's refusal moves it on."""
        self.alternating = False
        """Whether consecutive user messages go out as one (the chat API only): set
        once the endpoint refuses turns that do not alternate."""
        self.limit_name: str | None = None
        """The name the output limit goes under once the endpoint refused the one sent
        first (the chat API only: ``max_completion_tokens`` where ``max_tokens`` was
        refused, as Azure's reasoning models refuse it)."""
        self.stream_usage = True
        """Whether streamed calls ask for their usage (``stream_options``, the chat
        API only): unset once the endpoint refuses that parameter."""
        self.sends_reasoning = True
        """Whether an assistant message goes back with its reasoning
        (``reasoning_content``, the chat API only): unset once the endpoint refuses
        that field (Mistral's: 422 ``extra_forbidden``)."""
        client_key = client.api_key if client is not None else None
        add_secret(self._key_read() or client_key, _KEY, owner=self)
        # http://user:PASSWORD@host/v1, given or in the URL of the client given.
        urls = f"{self.base_url or ''} {client.base_url if client is not None else ''}"
        for secret in endpoint_secrets(urls):
            add_secret(secret, "password", owner=self)
        # The URL calls go to (a client given has its own).
        sent_to = self.base_url if client is None else None
        problem = http_url_problem(sent_to, "base_url") if sent_to else None
        if problem is not None:
            given = "" if base_url else " (from OPENAI_BASE_URL)"
            raise ConfigError(masked(f"model {model!r}: {problem}{given}"))
        # Sent as it was checked: without the spaces at its ends (else a space before
        # it is a URL with no scheme, one after it a path the server does not serve).
        self._base_url = self._base_url.strip() if self._base_url else None
        self.base_url = self.base_url.strip() if self.base_url else None
        for value in self._sdk_settings.get("extra_headers", {}).values():
            add_header(value, owner=self)
        # A key an endpoint takes in its URL (Gemini's ?key=, Azure's ?api-key=).
        for name, value in self._sdk_settings.get("extra_query", {}).items():
            if str(name).lower() in CREDENTIAL_PARAMETERS and isinstance(value, str):
                add_secret(value, _KEY, owner=self)

    def __repr__(self) -> str:
        # Masked: errors name the model by its repr, and a base_url may hold a password.
        url = self._url()
        at = f", base_url={masked(url)!r}" if url else ""
        return f"{type(self).__name__}({self.model!r}{at})"

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client for the running event loop, made on first use in it (so
        configs validate without a key), or the one given.

        Raises:
            ConfigError: when no API key is given or set and the endpoint is OpenAI's.
        """
        if self._given is not None:
            return self._given
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            if self._unbound is None:
                self._unbound = self._new_client()
            return self._unbound
        served = self._clients.get(loop)
        if served is None:
            found = self._new_client()
            # A weak mapping would not do: a client's connections refer to its loop.
            self._clients = {k: v for k, v in self._clients.items() if not k.is_closed()}
            served = self._clients[loop] = (found, closed_with_loop(found.close))
        return served[0]

    def missing_key(self, what: str | None = None) -> ConfigError | None:
        """The error its calls would fail with for want of an API key, if they would
        (an Executor asks before a run starts), naming it as ``what`` (default
        ``model 'NAME'``)."""
        if self._given is not None:
            return None
        missing = key_missing(
            what or f"model {self.model!r}",
            api_key=self._api_key,
            api_key_env=self.api_key_env,
            base_url=self._base_url,
        )
        return None if missing is None else ConfigError(missing)

    def _key_read(self) -> str | None:
        """The key given, or read now from the variable named (None: neither)."""
        if self.api_key_env is not None:
            return os.environ.get(self.api_key_env) or None
        return self._api_key

    def _new_client(self) -> openai.AsyncOpenAI:
        missing = self.missing_key()
        if missing is not None:
            raise missing
        key = self._key_read()
        if reads_key_variable(key, self._base_url):
            key = os.environ.get(KEY_VARIABLE)
        key = key or NO_KEY  # local servers (Ollama, vLLM, llama.cpp) ignore it
        add_secret(key, _KEY, owner=self)  # from the environment, or given
        source = key_source(self.api_key_env, self._api_key, self._base_url, given=False)
        unsendable = key_unsendable(f"model {self.model!r}", key, source)
        if unsendable is not None:  # else every call fails as if the endpoint were away
            raise ConfigError(unsendable)
        self._key = key
        base_url, query = without_query(self.base_url) if self.base_url else (None, {})
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            default_query=query or None,
            max_retries=0,
            timeout=self.timeout,
            # Not the SDK's default client, whose __del__ closes it on whatever loop is
            # running then: one of a loop that has ended fails on the next loop.
            http_client=openai.DefaultAsyncHttpxClient(trust_env=self.trust_env),
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One call, retried under :attr:`retry`, each attempt through :attr:`limiter`.

        Raises:
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError:
                when the call fails and retrying did not help (or is not allowed).
        """
        return await self._call(request, None)

    async def _call(self, request: ModelRequest, shown: ShownText | None) -> ModelResponse:
        """The call, streamed to ``shown`` if given, asking for structured output the
        next way while the endpoint refuses it (and leaving out what else it refuses:
        turns that do not alternate, ``stream_options``)."""
        while True:
            mode, alternating, usage = self.output_mode, self.alternating, self.stream_usage
            renamed, reasoning = self.limit_name, self.sends_reasoning
            try:
                return await self._retried(request, mode, shown)
            except ModelHTTPError as exc:
                if not alternating and wants_alternation(exc):
                    self._alternate(exc)
                elif usage and refuses(exc, STREAM_OPTIONS):
                    self._unask_stream_usage(exc)
                elif reasoning and refuses(exc, REASONING_CONTENT):
                    self._unsend_reasoning(exc)
                elif renamed is None and self._refuses_limit_name(exc, request):
                    self._rename_limit(exc)
                elif request.output is None or mode not in _FALLBACK or not refuses_format(exc):
                    told = told_of_server(exc, request, self.context_tokens)
                    if told is None:
                        raise
                    raise told from exc  # a prompt past its context: what to set
                else:
                    self._fall_back(mode, exc)

    async def _retried(
        self, request: ModelRequest, mode: OutputMode, shown: ShownText | None
    ) -> ModelResponse:
        return await endpoint_call(
            self.retry,
            self.limiter,
            lambda: self._complete_once(request, mode, shown),
            shown=shown,
            model=repr(self),
        )

    def _fall_back(self, mode: OutputMode, exc: ModelHTTPError) -> None:
        """The endpoint refused structured output asked for as ``mode``: ask the next
        way, in this call and every later one (workers that asked at the same time
        move it on once)."""
        if self.output_mode == mode:
            self.output_mode = _FALLBACK[mode]
            if logs.configured():
                fields = {"model": self.model, "refused": mode, "now": self.output_mode}
                logs.log("model_call.output_fallback", fields | {"error": str(exc)})
        report_retry(str(exc.status), f"{type(exc).__name__}: {exc}", 0.0)

    def _alternate(self, exc: ModelHTTPError) -> None:
        """The endpoint refused turns that do not alternate: send consecutive user
        messages as one, in this call and every later one."""
        now, self.alternating = not self.alternating, True
        self._switched("model_call.alternating", exc, now=now)

    def _unask_stream_usage(self, exc: ModelHTTPError) -> None:
        """The endpoint refused ``stream_options``: stream without it, in this call and
        every later one (a stream then counts the usage the server sends unasked)."""
        now, self.stream_usage = self.stream_usage, False
        self._switched("model_call.stream_usage_refused", exc, now=now)

    def _unsend_reasoning(self, exc: ModelHTTPError) -> None:
        """The endpoint refused ``reasoning_content`` in an assistant message: send
        none, in this call and every later one."""
        now, self.sends_reasoning = self.sends_reasoning, False
        self._switched("model_call.reasoning_refused", exc, now=now)

    def _refuses_limit_name(self, exc: ModelHTTPError, request: ModelRequest) -> bool:
        """Whether ``exc`` refuses ``max_tokens``, the name Honeycomb chose for the
        request's output limit (one the settings name is theirs to change)."""
        chosen = not {"max_tokens", "max_completion_tokens"} & self.settings.keys()
        limited = request.max_output_tokens is not None or self.context_tokens is not None
        return self.api == "chat" and chosen and limited and refuses(exc, MAX_TOKENS)

    def _rename_limit(self, exc: ModelHTTPError) -> None:
        """The endpoint refused ``max_tokens``: send the output limit as
        ``max_completion_tokens``, in this call and every later one."""
        now = self.limit_name is None
        self.limit_name = "max_completion_tokens"
        self._switched("model_call.output_limit_renamed", exc, now=now)

    def _switched(self, event: str, exc: ModelHTTPError, *, now: bool) -> None:
        """Log ``event`` when this call's refusal (``exc``) made the switch (``now``:
        workers refused at the same time switch once); the call made again is reported
        as a retry."""
        if now and logs.configured():
            logs.log(event, {"model": self.model, "error": str(exc)})
        report_retry(str(exc.status), f"{type(exc).__name__}: {exc}", 0.0)

    async def _complete_once(
        self, request: ModelRequest, mode: OutputMode, shown: ShownText | None
    ) -> ModelResponse:
        """One attempt, bounded as a whole by the call's timeout: from the request sent
        to the answer's last byte, streamed or not (the HTTP client's own timeout only
        bounds each wait for a byte, which a server sending slowly never trips)."""
        # The client is made before the clock starts: making one (its TLS context,
        # which a busy machine takes a good part of a second over) is not the
        # endpoint's time.
        self.client  # noqa: B018
        mine = "the role's model_timeout" if request.timeout is not None else "its timeout"
        with self._bounded(self._timeout_s(request), mine):
            if shown is not None:
                response = await self._stream_raw(request, mode, shown)
            else:
                response = await self._complete_raw(request, mode)
        if not response.usage.input_tokens and not response.usage.output_tokens:
            response = self._estimated(request, response)
        # A misbehaving proxy, or a model that was told the key, may send it back.
        return masked(response)

    def _estimated(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        """``response``, which reported no usage (a stream from an endpoint that ignores
        or refuses ``stream_options``, a proxy that drops it), with the token estimate's
        in its place: a call counts in its run's budget and cost whatever its endpoint
        reports."""
        usage = estimated_usage(request, response.message)
        if logs.configured():
            fields = {"model": self.model, "input_tokens": usage.input_tokens}
            logs.log("model_call.usage_estimated", fields | {"output_tokens": usage.output_tokens})
        return replace(response, usage=usage)

    @contextlib.contextmanager
    def _bounded(self, limit: float, named: str) -> Iterator[None]:
        """The block is one attempt: cut at ``limit`` seconds as a whole (a
        :class:`ModelTimeout` saying which limit, ``named``), and a model error it
        raises shows no secret.

        Raises:
            ModelTimeout: past the limit, or the HTTP client's own.
            ModelError: the block's, masked.
        """
        try:
            with within(limit):
                yield
        except (TimedOut, ModelTimeout) as exc:  # the whole attempt's, or the client's
            timed_out()  # the endpoint had the request: its model call counts the prompt
            raise ModelTimeout(limit, model=self.model, limit=named) from exc
        except ModelError as exc:
            # Some proxies and debugging servers echo the request's headers in their
            # error bodies: mask the secrets, and drop the SDK's error that holds them.
            if not shows_secret(all_text(exc)):
                raise
            exc.__context__ = None  # not only hidden from a traceback: gone
            raise mask_error(exc) from None

    async def _complete_raw(self, request: ModelRequest, mode: OutputMode) -> ModelResponse:
        if self.stream_calls:  # retried as a one-shot call is: no text was shown
            return await self._stream_raw(request, mode, ShownText(_unread))
        params = self._params(request, mode)
        with self._translated(params):
            # The raw body, parsed here: the SDK's lenient parsing lets malformed
            # answers through as objects with missing or wrong-typed attributes.
            raw = await self._send(params)
            with _accepted():  # answered 200: a body cut off or unreadable was billed
                response = self._parse(await read_body(raw.http_response))
        self._observe(raw.headers, response)
        return response

    def _observe(self, headers: Mapping[str, str], answer: ModelResponse | None = None) -> None:
        """Tell the limiter what the endpoint's ``x-ratelimit-*`` headers say is left of
        its quota, and what the ``answer`` cost (see :meth:`AdaptiveLimiter.observe`)."""
        if self.limiter is not None:
            tokens = answer.usage.input_tokens + answer.usage.output_tokens if answer else None
            self.limiter.observe(quota_from_headers(headers), tokens=tokens)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        """:meth:`complete`, streamed: the answer's text goes to ``on_text`` as it comes.

        Raises:
            StreamInterrupted: when the stream broke off after some text was shown
                (before that, a cut stream is retried like any failed attempt).
            ModelHTTPError, ModelConnectionError, ModelTimeout, ModelResponseError:
                as :meth:`complete`.
        """
        return await self._call(request, ShownText(on_text))

    async def _stream_raw(
        self, request: ModelRequest, mode: OutputMode, on_text: ShownText
    ) -> ModelResponse:
        """One streamed attempt: its text to ``on_text`` as it comes, then the answer."""
        params = self._params(request, mode)
        params["stream"] = True
        with self._translated(params):
            async with self._streamed(params) as response:
                with _accepted():
                    found = await self._read_stream(response, params["timeout"], on_text)
        self._observe(response.headers, found)
        return found

    async def _read_stream(
        self, response: Any, timeout_s: float, on_text: ShownText
    ) -> ModelResponse:
        """The answer in the streamed ``response``, its text to ``on_text`` as it comes."""
        if answered_whole(response.headers.get("content-type")):
            # The server ignored stream: true. Its answer is read as a one-shot answer
            # is, and its text shown in one piece.
            found = self._parse(await read_body(response.http_response))
            if found.message.content:
                on_text(found.message.content)
            return found
        return await self._read_events(response, timeout_s, on_text)

    async def _read_events(
        self, response: Any, timeout_s: float, on_text: ShownText
    ) -> ModelResponse:
        """The answer in ``response``'s server-sent events, its text to ``on_text`` as
        it comes; whole once it is finished, should the stream break off after."""
        answer = self._answer_stream()
        lines = read_lines(response, timeout_s)
        # Closed here, not whenever they are collected: the stream may end early.
        async with contextlib.aclosing(lines), contextlib.aclosing(event_data(lines)) as events:
            try:
                async for data in events:
                    text = answer.add(data)
                    if text:
                        on_text(text)
                    if answer.done:
                        break
            except ModelConnectionError:
                if not answer.finished:
                    raise
        return answer.response()

    @abc.abstractmethod
    def _streamed(self, params: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[Any]:
        """Send ``params`` as a streamed request: the response, its body unread."""

    @abc.abstractmethod
    def _answer_stream(self) -> AnswerStream:
        """What reads a streamed answer's events into the answer."""

    @contextlib.contextmanager
    def _translated(self, params: Mapping[str, Any]) -> Iterator[None]:
        """The ``openai`` errors raised in the block as :mod:`runtime.errors`; a
        connection error names the endpoint and the model."""
        try:
            yield
        except openai.APITimeoutError as exc:
            raise ModelTimeout(params["timeout"]) from exc
        except openai.APIConnectionError as exc:
            raise self._unreachable(with_cause(exc)) from exc
        except ModelConnectionError as exc:  # the answer broke off as it was read
            if exc.model is not None:
                raise
            raise self._unreachable(exc.reason) from exc.__cause__
        except openai.APIStatusError as exc:
            self._observe(exc.response.headers)
            raise self._http_error(exc) from exc
        except openai.OpenAIError as exc:
            raise ModelResponseError(f"{type(exc).__name__}: {exc}") from exc

    def _http_error(self, exc: openai.APIStatusError) -> ModelHTTPError:
        """The error of an HTTP error status, with what to change (:meth:`_hint`); a
        429 for a quota spent (OpenAI's ``insufficient_quota``: the account's plan and
        billing, not its rate) is not retried, as no wait mends it."""
        body = exc.body if exc.body is not None else exc.message
        error = ModelHTTPError(
            exc.status_code,
            body,
            retry_after=retry_after(exc.response.headers),
            model=self.model,
            hint=self._hint(exc.status_code, body, str(exc.request.url.copy_with(query=None))),
        )
        if exc.status_code == 429 and quota_spent(body):
            error.retryable = False
        return error

    def _hint(self, status: int, body: object, asked: str) -> str | None:
        """What an HTTP error ``status`` for the URL ``asked`` says to change: a 404 that
        is not about the model (the server serves no such path: a ``base_url`` without
        its ``/v1``, or with the API's path in it) the URL and what to try, one about
        the model the endpoint asked; a 400 for a prompt past the model's context, the
        context to say; a 401 or 403 the endpoint and where the key it refused came
        from; a 429 for a quota spent, the account's billing."""
        if status == 404 and not about_model(body, self.model):
            return masked(not_served(asked, self._url()))
        if status == 404:
            return masked(f"asked at {self._endpoint()}")
        if status == 400:
            return context_hint(body, self.context_tokens)
        if status in (401, 403):
            given = self._given is not None
            headers = self._sdk_settings.get("extra_headers")
            source = key_source(
                self.api_key_env,
                self._api_key,
                self._base_url,
                given=given,
                sent_to=asked,
                headers=headers,
            )
            return masked(key_refused(status, source, self._endpoint()))
        if status == 429 and quota_spent(body):
            return QUOTA_SPENT
        return None

    def _unreachable(self, reason: str) -> ModelConnectionError:
        """The error of a connection to the endpoint that failed for ``reason``."""
        return ModelConnectionError(reason, base_url=self._endpoint(), model=self.model)

    def _endpoint(self) -> str:
        """The endpoint its calls go to, OpenAI's own included (no base_url given)."""
        return self._url() or str(self.client.base_url).rstrip("/")

    def _url(self) -> str | None:
        """The base URL its calls go to: the client's given (whatever ``base_url`` or
        ``OPENAI_BASE_URL`` say), else ``base_url``; None: OpenAI's own, by default."""
        if self._given is not None:
            return str(self._given.base_url).rstrip("/")
        return self.base_url

    def _base_params(self, request: ModelRequest) -> dict[str, Any]:
        """The parameters every request has: the settings, the model and the timeout."""
        params: dict[str, Any] = {
            **self._sdk_settings,
            "model": self.model,
            "timeout": self._timeout_s(request),
        }
        if self._extra_body:
            params["extra_body"] = self._extra_body
        return params

    def _timeout_s(self, request: ModelRequest) -> float:
        """Seconds one attempt at ``request`` may take: its own limit (a role's
        ``model_timeout``), else the model's."""
        return request.timeout if request.timeout is not None else self.timeout

    def _limit_output(self, params: dict[str, Any], key: str, request: ModelRequest) -> None:
        """Set the output limit ``key`` to the request's, unless the settings set a lower
        one; and, for a model that says its context, to no more than the context leaves
        the request's prompt (by the token estimate): a server refuses a request whose
        prompt and output limit together pass its context (vLLM's max_model_len)."""
        limit = request.max_output_tokens
        if self.context_tokens is not None:
            room = self.context_tokens - prompt_tokens(request)
            if room > 0 and (limit is None or room < limit):
                limit = room  # else the prompt alone fills it: the server says so
        if limit is not None:
            given = params.get(key)
            params[key] = limit if not isinstance(given, int) else min(given, limit)

    @abc.abstractmethod
    def _params(self, request: ModelRequest, mode: OutputMode) -> dict[str, Any]:
        """The SDK call's keyword arguments for ``request``, structured output asked
        for as ``mode``."""

    @abc.abstractmethod
    async def _send(self, params: dict[str, Any]) -> Any:
        """Send the request; the SDK's raw response (``with_raw_response``)."""

    @abc.abstractmethod
    def _parse(self, body: bytes) -> ModelResponse:
        """The response in the answer's body.

        Raises:
            ModelResponseError: naming the model and what is wrong with the body.
        """


_KEY = "api key"


@contextlib.contextmanager
def _accepted() -> Iterator[None]:
    """The block reads the answer (one body, or a stream) to an attempt its endpoint
    accepted (it answered 200): one that breaks off, ends before its answer did or
    sends what cannot be read had its prompt read, and is billed for it as an attempt
    its timeout cut off is (:func:`timed_out`; a timeout the call's bound counts, and
    the prompt of a call that streamed text counts with that text)."""
    try:
        yield
    except (ModelConnectionError, ModelResponseError):
        timed_out()
        raise


def _unread(text: str) -> None:
    """Where the text of a one-shot call sent as a stream goes: nowhere."""
