"""``honeycomb serve`` shows the conversations a store keeps: each with its turns, and
each turn's message, answer and run (a link to the run's page), its text escaped."""

from __future__ import annotations

from pathlib import Path

import httpx

from honeycomb import Executor, OfflineModel, Role
from honeycomb.web import cookie_name, create_app, session_key
from tests.support.asgi_server import ThreadedServer

TOKEN = "test-token-0123456789"
EVIL = "<script>alert(1)</script>"


async def test_the_sessions_and_a_conversation_with_its_runs(db: Path) -> None:
    roles = [Role(name="planner"), Role(name="researcher", description="Finds facts.")]
    executor = Executor(roles, OfflineModel(latency=0), store=db)
    session = executor.session("ann & bob")
    first = await session.run(f"Find the weather in Rome {EVIL}.")
    await session.run("And in Oslo?")
    assert executor.store is not None
    executor.store.close()
    with ThreadedServer(create_app(db, token=TOKEN), name="serve") as server:
        cookies = {cookie_name(TOKEN, server.port): session_key(TOKEN)}
        async with httpx.AsyncClient(base_url=server.url, cookies=cookies) as client:
            listed = await client.get("/sessions")
            shown = await client.get("/sessions/ann%20%26%20bob")
            missing = await client.get("/sessions/nobody")
    assert 'href="/sessions/ann%20%26%20bob"' in listed.text
    assert "<td>2</td>" in listed.text
    assert shown.status_code == 200
    assert f'href="/runs/{first.run_id}"' in shown.text
    assert "#2 · " in shown.text
    assert EVIL not in shown.text
    assert "&lt;script&gt;" in shown.text
    assert missing.status_code == 404
