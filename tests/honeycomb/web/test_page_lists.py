"""The lists of ``honeycomb serve`` (runs, sessions) over a store holding more than
they show: each says so and links to a longer one, as ``honeycomb runs`` says it
holds more; and a run page's workers, listed as its timeline lists them."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from honeycomb import Executor, OfflineModel, Role
from honeycomb.testing import FunctionModel
from honeycomb.web import create_app
from tests.support.asgi_server import ThreadedServer

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}


def _listed(page: str) -> list[str]:
    return re.findall(r'<td><a href="/(?:runs|sessions)/([^"]+)">', page)


async def test_a_list_says_the_store_holds_more_and_links_to_a_longer_one(db: Path) -> None:
    """The list of runs showed the newest 200 and said nothing of the others (and the
    sessions likewise): a store of more looked like a store of 200."""
    roles = [Role(name="planner"), Role(name="researcher", description="Finds facts.")]
    executor = Executor(roles, OfflineModel(latency=0), store=db)
    for n in range(3):
        await executor.session(f"talk-{n}").run(f"Find the weather in city {n}.")
    assert executor.store is not None
    executor.store.close()
    with ThreadedServer(create_app(db, token=TOKEN), name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            cut = await client.get("/?limit=2")
            longer = await client.get("/?limit=4")
            talks = await client.get("/sessions?limit=2")
            refused = await client.get("/?limit=0")
    assert len(_listed(cut.text)) == 2
    assert "the newest 2 runs in runs.db (it holds more)" in cut.text
    assert 'href="/?limit=4">show the newest 4</a>' in cut.text
    assert len(_listed(longer.text)) == 3
    assert "it holds more" not in longer.text
    assert _listed(talks.text) == ["talk-2", "talk-1"]
    assert 'href="/sessions?limit=4">show the newest 4</a>' in talks.text
    assert refused.status_code == 422
    assert "limit: give a whole number from 1 to 100000, not &#x27;0&#x27;" in refused.text


async def test_a_run_pages_workers_are_listed_in_the_timelines_order(db: Path) -> None:
    """A run of a dozen workers listed their transcripts by name as text (s1, s10, s11,
    s12, s2 ...) under a timeline listing them as the plan does (s1, s2 ... s12); a
    person looking for the tenth worker found it third. They now come as the timeline
    has them."""
    executor = Executor(
        [Role(name="worker")], FunctionModel(lambda request: "done"), store=db, aggregator="concat"
    )
    parts = [("worker", f"part {n}") for n in range(12)]
    assert (await executor.run("split", subtasks=parts, run_id="dozen")).status == "ok"
    with ThreadedServer(create_app(db, token=TOKEN), name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            page = (await client.get("/runs/dozen")).text
    rows = re.findall(r'<div class="row[^"]*" data-worker="([^"]+)"', page)
    listed = re.findall(r'<details class="worker" data-worker="([^"]+)"', page)
    assert rows == [f"s{n}" for n in range(1, 13)]
    assert listed == rows
