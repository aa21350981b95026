"""The example service's conversations over real HTTP on 127.0.0.1: messages to one
session from concurrent clients answered one at a time, sessions in parallel, as JSON
or as server-sent events, and a service started again going on with them."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import httpx

from examples.service import create_app
from honeycomb import Executor, GuardCheck, Guards, OfflineModel, Role
from honeycomb.events import RunFinished, RunStarted
from honeycomb.testing import FunctionModel
from runtime import Event
from tests.examples.test_service import sse_events
from tests.support.asgi_server import ThreadedServer
from tests.support.model_requests import role_of

ROLES = [
    Role(name="planner"),
    Role(name="researcher", description="Finds facts about cities and their weather."),
    Role(name="aggregator"),
]


def executor(model: Any, store: Path | None = None, **options: Any) -> Executor:
    return Executor(ROLES, model, store=store, **options)


async def test_concurrent_clients_of_one_session_are_answered_one_at_a_time() -> None:
    spans: list[tuple[str, str]] = []  # (run id, run.started | run.finished), in order

    def note(event: Event) -> None:
        if isinstance(event, RunStarted | RunFinished):
            spans.append((event.run_id or "", event.kind))

    ex = executor(OfflineModel(latency=0.01), on_event=[note])
    cities = ["Rome", "Oslo", "Lima", "Kyiv"]
    with ThreadedServer(create_app(ex), name="service") as server:
        async with httpx.AsyncClient(timeout=60) as client:

            async def say(session: str, city: str) -> None:
                body = {"message": f"Find the weather in {city}."}
                sent = await client.post(f"{server.url}/sessions/{session}/messages", json=body)
                assert sent.status_code == 200, sent.text

            async with anyio.create_task_group() as tg:
                for session in ("ann", "bob"):
                    for city in cities:
                        tg.start_soon(say, session, city)
            shown = {
                s: (await client.get(f"{server.url}/sessions/{s}")).json() for s in ("ann", "bob")
            }
    for session in ("ann", "bob"):
        turns = shown[session]["turns"]
        assert [t["turn"] for t in turns] == [1, 2, 3, 4]
        assert sorted(t["message"] for t in turns) == sorted(
            f"Find the weather in {c}." for c in cities
        )
        assert all(t["status"] == "ok" and t["answer"] for t in turns)
        # Never two runs of one session under way at once.
        mine = {t["run_id"] for t in turns}
        kinds = [kind for run_id, kind in spans if run_id in mine]
        assert kinds == ["run.started", "run.finished"] * 4
    # The two sessions did run at once: one's run started while the other's went on.
    ann = {t["run_id"] for t in shown["ann"]["turns"]}
    under_way: dict[bool, int] = defaultdict(int)
    overlapped = False
    for run_id, kind in spans:
        mine = run_id in ann
        under_way[mine] += 1 if kind == "run.started" else -1
        overlapped = overlapped or (under_way[True] > 0 and under_way[False] > 0)
    assert overlapped


async def test_a_message_streams_its_events_and_a_busy_session_refuses_when_asked() -> None:
    hold = threading.Event()  # set from the test; the server's loop runs in its own thread
    model = OfflineModel(latency=0)

    async def stalls(request: Any) -> Any:
        if role_of(request) == "researcher" and "Oslo" in str(request.messages[1].content):
            await asyncio.to_thread(hold.wait, 60)
        return await model.complete(request)

    with ThreadedServer(create_app(executor(FunctionModel(stalls))), name="service") as server:
        url, shown = f"{server.url}/sessions/cat/messages", f"{server.url}/sessions/cat"
        async with httpx.AsyncClient(timeout=60) as client:
            headers = {"accept": "text/event-stream"}
            body = {"message": "Find the weather in Rome."}
            async with client.stream("POST", url, json=body, headers=headers) as sent:
                assert sent.headers["content-type"].startswith("text/event-stream")
                seen = [event async for event in sse_events(sent)]
            assert seen[0][0] == "run.started"
            assert seen[-1][0] == "result"
            assert seen[-1][1]["status"] == "ok"

            async with anyio.create_task_group() as tg:
                oslo = {"message": "Find the weather in Oslo."}
                tg.start_soon(lambda: client.post(url, json=oslo))
                with anyio.fail_after(30):  # the Oslo turn is under way
                    while len((await client.get(shown)).json()["turns"]) < 2:  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                lima = {"message": "And Lima?", "busy": "refuse"}
                refused = await client.post(url, json=lima)
                # Streamed, refused as it starts: the response's status says so (it was
                # a 200 stream, broken off by the error raised after it started).
                refused_streamed = await client.post(url, json=lima, headers=headers)
                # One that waits for its turn starts its stream at once (a client or a
                # proxy gives up on headers that do not come), its events once it runs.
                lisbon = {"message": "And Lisbon?"}
                with anyio.fail_after(30):  # a hang's stop: its headers came at its end
                    async with client.stream("POST", url, json=lisbon, headers=headers) as wait:
                        hold.set()
                        waited = [event async for event in sse_events(wait)]
            assert refused.status_code == 409
            assert "SessionBusy" in refused.json()["error"]
            assert (refused_streamed.status_code, refused_streamed.json()) == (409, refused.json())
            assert wait.status_code == 200
            assert (waited[-1][0], waited[-1][1]["status"]) == ("result", "ok")
            turns = (await client.get(shown)).json()["turns"]
            assert [t["message"] for t in turns] == [
                "Find the weather in Rome.",
                "Find the weather in Oslo.",
                "And Lisbon?",
            ]
            assert (await client.get(f"{server.url}/sessions/nobody")).status_code == 404


async def test_a_service_started_again_goes_on_with_the_conversation(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    url = "{}/sessions/dan/messages"
    first = executor(OfflineModel(latency=0), store)
    with ThreadedServer(create_app(first), name="service") as server:
        async with httpx.AsyncClient(timeout=60) as client:
            said = await client.post(
                url.format(server.url), json={"message": "Find the weather in Rome."}
            )
    answer = said.json()["answer"]
    assert first.store is not None
    first.store.close()

    model = FunctionModel(OfflineModel(latency=0).complete)
    with ThreadedServer(create_app(executor(model, store)), name="service") as server:
        async with httpx.AsyncClient(timeout=60) as client:
            again = await client.post(url.format(server.url), json={"message": "And in Oslo?"})
            turns = (await client.get(f"{server.url}/sessions/dan")).json()["turns"]
    assert again.status_code == 200
    assert [t["turn"] for t in turns] == [1, 2]
    planned = [str(r.messages[1].content) for r in model.requests if role_of(r) == "planner"]
    assert answer.strip() in planned[0]


async def test_a_message_cut_off_is_answered_first_by_the_service_started_again(
    tmp_path: Path,
) -> None:
    store = tmp_path / "runs.db"
    started, hold = threading.Event(), threading.Event()
    model = OfflineModel(latency=0)

    async def stalls(request: Any) -> Any:
        if role_of(request) == "researcher":
            started.set()
            await asyncio.to_thread(hold.wait, 60)
        return await model.complete(request)

    first = executor(FunctionModel(stalls), store)
    with ThreadedServer(create_app(first), name="service") as server:
        url = f"{server.url}/sessions/eve/messages"
        async with httpx.AsyncClient(timeout=60) as client:
            async with anyio.create_task_group() as tg:
                rome = {"message": "Find the weather in Rome."}
                tg.start_soon(lambda: client.post(url, json=rome))
                with anyio.fail_after(30):  # its researcher is under way
                    while not started.is_set():  # noqa: ASYNC110 - set in the server's thread
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()  # the client leaves: the run is cut off
            with anyio.fail_after(30):
                while (await client.get(f"{server.url}/health")).json()["active_runs"]:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
        hold.set()
    assert first.store is not None
    first.store.close()

    with ThreadedServer(
        create_app(executor(OfflineModel(latency=0), store)), name="service"
    ) as server:
        async with httpx.AsyncClient(timeout=60) as client:
            said = await client.post(
                f"{server.url}/sessions/eve/messages", json={"message": "And in Oslo?"}
            )
            turns = (await client.get(f"{server.url}/sessions/eve")).json()["turns"]
    assert said.status_code == 200, said.text
    assert [(t["message"], t["status"]) for t in turns] == [
        ("Find the weather in Rome.", "ok"),
        ("And in Oslo?", "ok"),
    ]


def _no_wires(check: GuardCheck) -> str | None:
    return "it asks for a wire" if "wire" in check.text else None


async def test_a_message_the_client_must_change_gets_422_not_a_server_error() -> None:
    # A session id no store keeps was an Internal Server Error (the ConfigError raised
    # through the route), and a message the run's input guards refused a 500, as if
    # the service had failed: a client told so sends it again as it is.
    ex = executor(OfflineModel(latency=0), guards=Guards(input=(_no_wires,)))
    with ThreadedServer(create_app(ex), name="service") as server:
        async with httpx.AsyncClient(timeout=60) as client:
            long = f"{server.url}/sessions/{'x' * 600}"
            sent = await client.post(f"{long}/messages", json={"message": "Hello."})
            assert sent.status_code == 422
            assert "is 600 bytes long (UTF-8): an id is at most 512" in sent.json()["error"]
            assert (await client.get(long)).status_code == 422
            body = {"message": "Please wire the funds to bob."}
            refused = await client.post(f"{server.url}/sessions/ann/messages", json=body)
            assert refused.status_code == 422
            assert refused.json()["error"] == (
                "GuardrailTripped: input guard '_no_wires' tripped: it asks for a wire"
            )
            assert (await client.get(f"{server.url}/sessions/ann")).status_code == 404
