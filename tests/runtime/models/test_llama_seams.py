"""``LlamaModel`` where it meets what is around it: the environment's proxies, the
holders and calls that share its server, llama.cpp's queue and context, and the name
its answers carry."""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Iterator

import anyio.to_thread
import pytest

from honeycomb import Executor, Role
from honeycomb.events import Event, ModelCallFinished
from runtime import ConfigError, ContextExceeded, ModelHTTPError, ModelRequest, UserMessage
from runtime.limits.retry_policy import RetryPolicy
from runtime.models.llama import LlamaModel
from runtime.models.llama_server import LlamaServer, bundled_gguf
from runtime.models.openai.chat import OpenAIModel
from tests.support.llama import REAL_MODEL, SEED, slots, start_server

pytestmark = REAL_MODEL

HI = ModelRequest(messages=(UserMessage(content="Say hi."),), max_output_tokens=4)

LONG = ModelRequest(messages=(UserMessage(content="Tell a story."),), max_output_tokens=24)
"""A call that writes all its 24 tokens (the models that send it ignore end-of-text)."""


def small(*, max_concurrency: int | None = None) -> LlamaModel:
    """A model with a server of its own, as small as it gets, that writes to the end of
    its output limit and never retries."""
    return LlamaModel(
        parallel=1,
        context=256,
        threads=1,
        seed=SEED,
        settings={"ignore_eos": True},
        retry=RetryPolicy(attempts=1),
        max_concurrency=max_concurrency,
    )


class Proxy:
    """A proxy on the loopback that notes the first line of every request sent to it
    and answers 502."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed: the test is over
                return
            with connection:
                self.requests.append(connection.recv(65536).split(b"\r\n")[0].decode())
                connection.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")

    def close(self) -> None:
        self._socket.shutdown(socket.SHUT_RDWR)  # wakes the accept() it waits in
        self._socket.close()
        self._thread.join(timeout=10)


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[Proxy]:
    """A proxy that the environment names for every request, as a corporate shell's does."""
    found = Proxy()
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, found.url)
        monkeypatch.setenv(name.lower(), found.url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield found
    found.close()


async def test_calls_reach_the_models_own_server_past_any_proxy_the_environment_names(
    llama_server: LlamaServer, proxy: Proxy
) -> None:
    model = LlamaModel(server=llama_server, retry=RetryPolicy(attempts=1))
    answer = await model.complete(HI)
    assert answer.usage.output_tokens > 0
    assert proxy.requests == []  # neither the prompt nor the server's key went to it


async def test_an_openai_endpoint_still_goes_through_the_environments_proxy(proxy: Proxy) -> None:
    model = OpenAIModel("remote", base_url="http://127.0.0.1:9/v1", retry=RetryPolicy(attempts=1))
    with pytest.raises(ModelHTTPError) as caught:
        await model.complete(HI)
    assert caught.value.status == 502  # the proxy's answer
    assert proxy.requests == ["POST http://127.0.0.1:9/v1/chat/completions HTTP/1.1"]


async def test_a_call_in_flight_keeps_the_server_up_when_the_last_holder_lets_go() -> None:
    model = small()
    writing = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        call = group.create_task(model.stream(LONG, lambda _text: writing.set()))
        async with model.held():  # a run, outside an Executor's block
            await writing.wait()
        assert model.server.running  # the run ended under the call
    assert call.result().usage.output_tokens == LONG.max_output_tokens
    assert not model.server.running  # it stopped as the call ended


async def test_a_call_in_flight_keeps_the_server_up_through_aclose() -> None:
    model = small()
    writing = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        call = group.create_task(model.stream(LONG, lambda _text: writing.set()))
        await writing.wait()
        await model.aclose()
        assert model.server.running
    assert call.result().usage.output_tokens == LONG.max_output_tokens
    assert not model.server.running
    # A call held by no one starts it again, and leaves it running.
    await model.complete(HI)
    assert model.server.running
    await model.aclose()
    assert not model.server.running


async def test_a_call_of_another_model_on_the_server_keeps_it_up_past_the_last_holder() -> None:
    """Two models on one server (a hive's of one file): the one that made it stopped it
    as its last holder let go, under the other's call."""
    model = small()
    other = LlamaModel(
        server=model.server, settings={"ignore_eos": True}, retry=RetryPolicy(attempts=1)
    )
    writing = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        call = group.create_task(other.stream(LONG, lambda _text: writing.set()))
        async with model.held():
            await writing.wait()
        assert model.server.running  # the other model's call is in flight
    assert call.result().usage.output_tokens == LONG.max_output_tokens
    assert not model.server.running  # it stopped as that call ended


async def test_a_call_cancelled_before_its_server_began_loading_leaves_it_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The thread that loads the server began only after its call was cancelled and its
    run (the last holder) had stopped the server, which was not running: it loaded the
    model for no one, and the server ran until the process ended."""
    model = small()
    entered, go, done = threading.Event(), threading.Event(), threading.Event()
    loading = LlamaServer.start

    def late(server: LlamaServer, **options: bool) -> None:  # a thread that begins late
        entered.set()
        go.wait()
        try:
            loading(server, **options)
        finally:
            done.set()

    monkeypatch.setattr(LlamaServer, "start", late)
    async with model.held():  # a run
        call = asyncio.ensure_future(model.complete(HI))
        await anyio.to_thread.run_sync(entered.wait)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    go.set()  # the run has ended: its stop found nothing running
    await anyio.to_thread.run_sync(done.wait)
    assert not model.server.running


async def test_a_retry_goes_to_the_server_as_it_runs_not_to_the_port_of_one_stopped() -> None:
    server = start_server(parallel=1, context=256)
    try:
        model = LlamaModel(server=server, retry=RetryPolicy(attempts=2, initial_wait_s=0))
        # Its one slot taken, the call learns the port and waits; the server's owner
        # stops it and starts it again, at another port, before the call is sent.
        async with asyncio.TaskGroup() as group, server.limiter.attempt():
            call = group.create_task(model.complete(HI))
            while not server.limiter.waiting:  # noqa: ASYNC110 - a limiter has no event
                await asyncio.sleep(0)
            host, port = server.address.removeprefix("http://").split(":")
            await anyio.to_thread.run_sync(server.stop)
            with socket.socket() as closed:  # the old port refuses, and is not reused
                closed.bind((host, int(port)))
                await anyio.to_thread.run_sync(server.start)
        assert call.result().usage.output_tokens > 0  # the retry went to the new port
    finally:
        server.stop()


def test_calls_past_the_servers_slots_wait_in_the_models_limiter() -> None:
    shared = small(max_concurrency=32)  # a hive's default: held to the slots
    assert shared.limiter is shared.server.limiter
    assert shared.limiter.max_concurrency == shared.server.parallel == 1
    on_it = LlamaModel(server=shared.server)
    assert on_it.limiter is shared.server.limiter  # models of one server share its slots
    fewer = LlamaModel(parallel=4, context=256, max_concurrency=2)
    assert fewer.limiter.max_concurrency == 2


async def test_waiting_for_a_slot_does_not_count_against_the_calls_timeout() -> None:
    model = small()
    short = ModelRequest(messages=(UserMessage(content="Count."),), max_output_tokens=12)
    await model.complete(short)  # the server is up
    latencies = []
    for _ in range(2):
        started = time.monotonic()
        await model.complete(short)
        latencies.append(time.monotonic() - started)
    # Twelve calls on one slot: the last waits for eleven others, each about one call
    # long; each may take five calls' time once its turn comes (a busy machine's share
    # of the CPU comes and goes: at three, one CI run timed a call out), far from the
    # twelve the last would take if its wait counted.
    timed = ModelRequest(messages=short.messages, max_output_tokens=12, timeout=5 * max(latencies))
    async with asyncio.TaskGroup() as group:
        calls = [group.create_task(model.complete(timed)) for _ in range(12)]
    assert [c.result().usage.output_tokens for c in calls] == [12] * 12
    await model.aclose()


async def test_answers_and_events_carry_the_models_name(llama_server: LlamaServer) -> None:
    model = LlamaModel(server=llama_server, name="tiny")
    assert (await model.complete(HI)).model == "tiny"
    assert (await model.stream(HI, lambda _text: None)).model == "tiny"
    events: list[Event] = []
    executor = Executor(
        [Role(name="greeter", description="Greets.", max_output_tokens=4)],
        model,
        aggregator="concat",
        on_event=[events.append],
    )
    await executor.run("Greet.", subtasks=[("greeter", "Say hi.")])
    finished = [e for e in events if isinstance(e, ModelCallFinished)]
    assert finished
    assert {e.model for e in finished} == {"tiny"}


async def test_a_prompt_past_the_context_names_the_setting_and_what_it_needs(
    llama_server: LlamaServer,
) -> None:
    model = LlamaModel(server=llama_server, retry=RetryPolicy(attempts=1))
    big = ModelRequest(messages=(UserMessage(content="word " * 2200),), max_output_tokens=10)
    with pytest.raises(ModelHTTPError) as caught:
        await model.complete(big)
    assert caught.value.status == 400
    said = str(caught.value)
    found = re.search(
        r"its prompt is (\d+) tokens, more than a call may hold: 2048, the context of each "
        r"of its slots \(LlamaModel\(context=\.\.\.\), a hive model's context:, --context of "
        r"honeycomb's --model local\); give "
        r"context (\d+) or more for this prompt and an answer of 10 tokens",
        said,
    )
    assert found, said
    prompt, enough = int(found[1]), int(found[2])
    assert prompt > 2048
    assert enough % 256 == 0
    assert prompt + 10 <= enough < prompt + 10 + 256


@pytest.mark.parametrize("said", [None, 4096])
async def test_a_llama_cpp_server_of_ones_own_refusing_a_prompt_past_its_context_says_what_to_set(
    llama_server: LlamaServer, said: int | None
) -> None:
    """The same server behind an endpoint's model, as a llama.cpp server of one's own is
    reached: its refusal was passed on as it said it ('the request exceeds the
    available context size, try increasing it'), naming no setting and no number."""
    model = OpenAIModel(
        "smollm2",
        base_url=llama_server.base_url,
        api_key=llama_server.api_key,
        retry=RetryPolicy(attempts=1),
        context_tokens=said,
    )
    big = ModelRequest(messages=(UserMessage(content="word " * 2200),), max_output_tokens=10)
    with pytest.raises(ContextExceeded) as caught:
        await model.complete(big)
    error = caught.value
    assert (error.status, error.context_tokens, error.answer_tokens) == (400, 2048, 10)
    assert error.prompt_tokens > 2048
    enough = -(-(error.prompt_tokens + 10) // 256) * 256
    assert str(error) == (
        f"HTTP 400 from model 'smollm2': its prompt is {error.prompt_tokens} tokens, more "
        "than a call may hold: 2048, the context of each of the server's slots (llama.cpp's "
        "server gives each its --ctx-size divided by its --parallel); give context "
        f"{enough} or more for this prompt and an answer of 10 tokens; "
        + (
            "and say that context as the model's (the model's context_tokens=..., a hive "
            "model's context:, --context of honeycomb's --model), so that a run fits what "
            "it hands the model to it"
            if said is None
            else "the model says its context is 4096 (the model's context_tokens=..., a "
            "hive model's context:, --context of honeycomb's --model): more than the "
            "server gives"
        )
    )
    assert error.body["type"] == "exceed_context_size_error"  # the server's own words kept
    assert str(error) == f"HTTP 400 from model 'smollm2': {error.hint}"


async def test_a_prompt_no_context_of_the_model_holds_is_told_so_not_sent_round(
    llama_server: LlamaServer,
) -> None:
    # SmolLM2 was trained on 8,192 tokens, the most a slot gets whatever is asked: a
    # context past that named as the cure only came back capped, with the same advice.
    model = LlamaModel(server=llama_server, retry=RetryPolicy(attempts=1))
    huge = ModelRequest(messages=(UserMessage(content="word " * 8500),), max_output_tokens=10)
    with pytest.raises(ModelHTTPError) as caught:
        await model.complete(huge)
    assert "no context holds it: the model was trained on 8192 tokens" in str(caught.value)
    assert "shorten the prompt" in str(caught.value)
    assert "give context" not in str(caught.value)


async def test_an_answer_past_what_the_model_was_trained_on_is_given_the_most_there_is(
    llama_server: LlamaServer,
) -> None:
    # A planner's limit is sized by the plan it may write (9,604 tokens for 20 subtasks).
    model = LlamaModel(server=llama_server, retry=RetryPolicy(attempts=1))
    big = ModelRequest(messages=(UserMessage(content="word " * 2200),), max_output_tokens=9604)
    with pytest.raises(ModelHTTPError) as caught:
        await model.complete(big)
    found = re.search(
        r"its prompt is (\d+) tokens.*; give context 8192, all the model was trained on, "
        r"for this prompt and an answer of up to (\d+) tokens",
        str(caught.value),
    )
    assert found, str(caught.value)
    assert int(found[1]) + int(found[2]) == 8192


def test_a_context_llama_cpp_would_round_up_is_refused() -> None:
    with pytest.raises(
        ConfigError, match=r"context \(128\) must be a multiple of 256.*give it 256"
    ):
        LlamaModel(parallel=1, context=128)
    with pytest.raises(ConfigError, match=r"give context 512 \(or 256\)"):
        LlamaModel(parallel=4, context=300)


def test_each_slot_holds_the_context_given(llama_server: LlamaServer) -> None:
    assert {slot["n_ctx"] for slot in slots(llama_server)} == {llama_server.context}


def test_a_server_stopped_under_a_streamed_answer_stops_at_once() -> None:
    """A stream's handler in llama.cpp waits for the next piece up to its ping
    interval (30 s by default), and a stop waited for it: a service holding its own
    server that shut down under a streamed call took half a minute to stop."""
    server = LlamaServer(bundled_gguf(), parallel=1, context=256, threads=1)
    server.start()
    try:
        host, port = server.address.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=60)
        body = {
            "model": "m",
            "stream": True,
            "max_tokens": 200,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Tell a story."}],
        }
        headers = {"Authorization": f"Bearer {server.api_key}"}
        connection.request("POST", "/v1/chat/completions", json.dumps(body), headers)
        answer = connection.getresponse()
        line = answer.readline()
        # Keep-alive comments, each ending its event with a blank line, come while the
        # prompt is read (on a loaded machine, a while).
        while line and (line.startswith(b":") or not line.strip()):
            line = answer.readline()
        assert line.startswith(b"data: ")  # the answer is being written
        started = time.monotonic()
        server.stop()
        took = time.monotonic() - started
        connection.close()
    finally:
        server.stop()
    assert took < 10, f"the stop took {took:.1f}s"
