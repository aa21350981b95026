"""The example service over real HTTP on 127.0.0.1 (uvicorn + httpx): concurrent
requests get their own answers; a client that disconnects cancels its run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from examples.service import create_app
from honeycomb import Executor, Role, tool
from honeycomb.hive import load_hive
from honeycomb.offline import OfflineModel
from honeycomb.testing import ScriptedModel
from runtime.testing import call
from tests.support import ROOT
from tests.support.asgi_server import ThreadedServer
from tests.support.concurrency import MEET_LIMIT_S

HIVE = ROOT / "examples" / "trip" / "hive.yaml"
CITIES = ["Lisbon", "Porto", "Madrid", "Oslo", "Rome"]


@pytest.fixture
def demo_service(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0.02")
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(tmp_path))
    executor = Executor.from_hive(load_hive(HIVE), model=OfflineModel(latency=0.02))
    with ThreadedServer(create_app(executor), name="service") as server:
        yield server.url


async def test_fifty_concurrent_requests_each_get_their_own_answer(demo_service: str) -> None:
    answers: dict[int, str] = {}

    async def ask(client: httpx.AsyncClient, i: int) -> None:
        task = f"Compare the weather in {CITIES[i % 5]} for request {i}."
        response = await client.post(f"{demo_service}/run", json={"task": task})
        assert response.status_code == 200, response.text
        answers[i] = response.json()["answer"]

    async with httpx.AsyncClient(timeout=60) as client, anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(ask, client, i)
    assert len(answers) == 50
    for i, answer in answers.items():
        assert f"request {i}" in answer
        assert CITIES[i % 5] in answer
        others = [c for c in CITIES if c != CITIES[i % 5]]
        assert not any(f"city={c}" in answer for c in others)


async def test_a_client_that_disconnects_cancels_its_run() -> None:
    executor, tools = slow_researchers(3)
    with ThreadedServer(create_app(executor), name="service") as server:
        async with httpx.AsyncClient(timeout=60) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.post(f"{server.url}/run", json={"task": "t"}))
                # The run is under way: its three tools started.
                await tools.until(lambda: len(tools.started) == 3, "its tools never started")
                tg.cancel_scope.cancel()  # the client leaves: its connection closes
            # Its tools, which would run far longer, are cancelled, while the server runs.
            await tools.until(lambda: len(tools.stopped) == 3, "its tools kept running")
            await no_active_runs(client, server.url)
    assert tools.finished == [], "a tool of the cancelled run kept running"


async def test_bad_request_names_what_to_send(demo_service: str) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{demo_service}/run", json={"tusk": "x"})
    assert response.status_code == 422
    assert '{"task": "..."}' in response.json()["error"]


@pytest.mark.parametrize("path", ["/run", "/stream"])
@pytest.mark.parametrize("body", [b"task=Compare the weather", b"{not json", b"\xff\xfe"])
async def test_a_body_that_is_not_json_gets_422_naming_the_shape(
    demo_service: str, body: bytes, path: str
) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{demo_service}{path}", content=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert '{"task": "..."}' in error
    assert "JSON" in error


async def test_the_request_its_docstring_shows_answers_sensibly(demo_service: str) -> None:
    import json
    import re

    import examples.service

    shown = re.search(r"curl -s localhost:8000/run -d '(.*)'", examples.service.__doc__ or "")
    assert shown is not None
    body = json.loads(shown.group(1))
    known = json.loads((HIVE.parent / "data" / "weather.json").read_text())["cities"]
    named = [c for c in known if c in body["task"]]
    assert len(named) >= 2
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{demo_service}/run", json=body)
    assert response.status_code == 200
    answer = response.json()["answer"]
    assert response.json()["status"] == "ok"
    assert "did not succeed" not in answer
    assert "Best weather" in answer
    assert all(city in answer for city in named)


async def test_a_run_id_that_is_not_a_string_gets_422(demo_service: str) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{demo_service}/run", json={"task": "x", "run_id": 7})
    assert response.status_code == 422
    assert "run_id" in response.json()["error"]


async def test_a_run_id_of_another_task_gets_409_naming_the_run_and_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HONEYCOMB_DEMO_TOOL_LATENCY", "0")
    monkeypatch.setenv("HONEYCOMB_OUTBOX", str(tmp_path))
    hive = load_hive(HIVE)
    executor = Executor.from_hive(hive, model=OfflineModel(latency=0), store=tmp_path / "runs.db")
    with ThreadedServer(create_app(executor), name="service") as server:
        async with httpx.AsyncClient(timeout=30) as client:
            first = {"task": "Weather in Rome?", "run_id": "r1"}
            assert (await client.post(f"{server.url}/run", json=first)).status_code == 200
            other = {"task": "Weather in Oslo?", "run_id": "r1"}
            response = await client.post(f"{server.url}/run", json=other)
            streamed = await client.post(f"{server.url}/stream", json=other)
            again = await client.post(f"{server.url}/run", json=first)
    assert response.status_code == 409
    told = response.json()
    assert (told["run_id"], told["task"]) == ("r1", "Weather in Rome?")
    assert "run 'r1' is a run of another task ('Weather in Rome?')" in told["error"]
    assert str(tmp_path) not in told["error"]  # the service's files are not the client's
    # Refused before its first event, a stream is answered as /run answers: not a 200
    # stream whose only event says 409.
    assert (streamed.status_code, streamed.json()) == (409, told)
    assert (again.status_code, again.json()["status"]) == (200, "ok")  # its own task: kept


@pytest.mark.parametrize("path", ["/run", "/stream"])
@pytest.mark.parametrize("run_id", ["r" * 600, "a\udc80b"], ids=["long", "not_text"])
async def test_a_run_id_no_store_keeps_gets_422_naming_it(
    demo_service: str, path: str, run_id: str
) -> None:
    """Such an id was answered 500 by /run, and by /stream with a 200 whose stream then
    broke off (the error raised after the response started): it is the client's to
    change. (A lone surrogate reaches the service as JSON's escape of one.)"""
    body = json.dumps({"task": "Weather in Rome?", "run_id": run_id}).encode()
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{demo_service}{path}", content=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"].startswith("ConfigError: run_id: ")


async def test_a_run_id_under_way_for_another_request_gets_409(tmp_path: Path) -> None:
    """A second request for a run another request carries on was answered 500, naming
    the service's store file and process id: it is the client's to send again."""
    executor, tools = slow_researchers(1, store=tmp_path / "runs.db")
    body = {"task": "t", "run_id": "r1"}
    with ThreadedServer(create_app(executor), name="service") as server:
        async with httpx.AsyncClient(timeout=60) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.post(f"{server.url}/run", json=body))
                await tools.until(lambda: tools.started, "its tool never started")
                second = await client.post(f"{server.url}/run", json=body)
                streamed = await client.post(f"{server.url}/stream", json=body)
                tg.cancel_scope.cancel()  # the first client leaves: its run is cancelled
            await no_active_runs(client, server.url)
    assert second.status_code == 409
    said = "run 'r1' is under way for another request: send it again once it ended"
    assert second.json() == {"error": said, "run_id": "r1"}
    assert (streamed.status_code, streamed.json()) == (409, second.json())  # /stream alike


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """The (event, data) pairs of a server-sent event stream, as they come."""
    kind, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif not line and kind:
            yield kind, json.loads(data)
            kind, data = "", ""


async def test_the_stream_endpoint_sends_events_and_the_answer_as_it_is_written(
    demo_service: str,
) -> None:
    task = {"task": "Compare the weather in Rome and Paris this weekend."}
    seen: list[tuple[str, Any]] = []
    async with (
        httpx.AsyncClient(timeout=60) as client,
        client.stream("POST", f"{demo_service}/stream", json=task) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in sse_events(response):
            seen.append(event)
    kinds = [kind for kind, _ in seen]
    assert kinds[0] == "run.started"
    assert kinds[-2:] == ["run.finished", "result"]
    result = seen[-1][1]
    assert result["status"] == "ok"
    deltas = [data for kind, data in seen if kind == "model_call.text"]
    written = "".join(d["text"] for d in deltas if d["worker"] == "aggregator")
    assert written == result["answer"]
    assert len([d for d in deltas if d["worker"] == "aggregator"]) > 5  # in pieces
    # The answer was being written before the run ended, not sent with its end.
    first = kinds.index("model_call.text")
    assert first < kinds.index("run.aggregation_finished")


async def test_a_client_that_leaves_the_stream_cancels_its_run() -> None:
    executor, tools = slow_researchers(2)
    with ThreadedServer(create_app(executor), name="service") as server:
        async with httpx.AsyncClient(timeout=10) as client:
            async with client.stream("POST", f"{server.url}/stream", json={"task": "t"}) as sent:
                async for kind, _ in sse_events(sent):
                    if kind == "tool_call.started":
                        break  # and leave
            # The tools that started, which would run far longer, are cancelled.
            await tools.until(
                lambda: tools.started and len(tools.stopped) == len(tools.started),
                "the run kept going after its client left",
            )
            await no_active_runs(client, server.url)
    assert tools.finished == [], "a tool of the cancelled run kept running"


async def no_active_runs(client: httpx.AsyncClient, url: str) -> None:
    """Wait until the service has no run under way (within the rendezvous limit)."""
    with anyio.fail_after(MEET_LIMIT_S):
        while (await client.get(f"{url}/health")).json()["active_runs"]:  # noqa: ASYNC110
            await anyio.sleep(0.02)


class SlowTools:
    """What the slow lookups did, as the server's thread tells it: which started, which
    were cancelled (stopped), which finished."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.finished: list[str] = []

    async def until(self, condition: Callable[[], object], failure: str) -> None:
        """Wait until ``condition`` holds (set in the server's thread), failing after
        the rendezvous limit with ``failure``."""
        with anyio.move_on_after(MEET_LIMIT_S):
            while not condition():  # noqa: ASYNC110 - set in the server's thread
                await anyio.sleep(0.01)
        assert condition(), f"{failure}: {self.__dict__}"


def slow_researchers(workers: int, store: Path | None = None) -> tuple[Executor, SlowTools]:
    """An Executor whose ``workers`` researchers each look something up for far longer
    than a test lasts, and what their lookups did; its runs kept in ``store``, if any."""
    tools = SlowTools()

    @tool
    async def slow_lookup(key: str) -> str:
        """Look something up, slowly."""
        tools.started.append(key)
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            tools.stopped.append(key)
            raise
        tools.finished.append(key)
        return "found"

    model = ScriptedModel(lambda key: [call("slow_lookup", {"key": key}), "done"])
    executor = Executor(
        [Role(name="researcher", tools=("slow_lookup",), tool_timeout=120)],
        model,
        tools=[slow_lookup],
        planner=lambda task: [("researcher", task)] * workers,
        aggregator="concat",
        store=store,
    )
    return executor, tools
