"""A run's page as it takes the run's updates: a worker's details that a person opens
stay open, even one whose request was under way as the person opened them; a call
that waits anew under the id of one decided shows its own arguments."""

from __future__ import annotations

import asyncio
import functools
import time
from pathlib import Path
from typing import Any

from msgspec.structs import replace

from honeycomb import Decision
from honeycomb.approvals import ApprovalEntry
from honeycomb.store import RunStore
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from tests.honeycomb.web.test_serve import TOKEN, _later, _payer_asked, _paying, _until, _Watched
from tests.honeycomb.web.test_serve_edges import _payer
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM


@IN_CHROMIUM
async def test_in_chromium_details_opened_during_an_update_stay_open(
    db: Path, browser: Any, tmp_path: Path
) -> None:
    """The page kept open the details that were open as it asked for an update, not
    as the update came: details opened while the request was under way closed again
    as it came (a person reading a worker's transcript saw it fold away)."""
    steps = asyncio.Semaphore(0)
    executor = _paying(db, tmp_path / "effects.txt", steps)
    running = await _payer_asked(executor, db)
    app = create_app(db, token=TOKEN, poll_s=0.1)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/pay?token={TOKEN}")
        asked, answer = asyncio.Event(), asyncio.Event()

        async def held(route: Any) -> None:  # the page's update, held until the test says
            asked.set()
            await answer.wait()
            await route.continue_()

        await page.route("**/live?shown=1", held)
        before = int(await watched.dataset("updates") or 0)
        steps.release()  # the reader reads once more: the run changes, the page asks
        await asyncio.wait_for(asked.wait(), 30)
        details = "details.worker[data-worker='payer']"
        await page.click(f"{details} summary")  # opened while the update is under way
        assert await page.eval_on_selector(details, "d => d.open")
        answer.set()
        await _until(functools.partial(_later, watched, before), "yes")
        assert await page.eval_on_selector(details, "d => d.open"), "it folded away"
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()
    for _ in range(3):  # the reader's reads left: the run ends waiting for the payer
        steps.release()
    assert (await running).status == "waiting"


@IN_CHROMIUM
async def test_in_chromium_a_call_that_waits_anew_under_the_same_id_shows_its_own_arguments(
    db: Path, browser: Any
) -> None:
    """A worker's call decided, and a later call of the same worker waiting under the
    same id (the store tells calls apart by worker, turn and id; written so here),
    before the page took the update: the page kept the first call's form,
    the arguments of a call decided already, for the call that waits, and approving it
    approved arguments nobody had seen."""
    first = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="ids")
    (asked,) = first.pending
    assert asked.arguments == {"to": "ann"}
    store = RunStore(db)
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(store), poll_s=0.05)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/ids?token={TOKEN}")
        shown = "form.approval dd[data-argument='to']"
        assert await page.inner_text(shown) == "ann"
        # Its events connected, their first update taken: the one held below is the
        # run's moving on (one under way as the route is set would not be held).
        await _until(functools.partial(_later, watched, 0), "yes")
        asked_for, answer = asyncio.Event(), asyncio.Event()

        async def held(route: Any) -> None:  # the page's update, held until the run moved on
            asked_for.set()
            await answer.wait()
            await route.continue_()

        await page.route("**/live?shown=1", held)
        before = int(await watched.dataset("updates") or 0)
        await store.keep_approval("ids", ApprovalEntry(pending=asked, decision=Decision.approved()))
        later = replace(asked, turn=asked.turn + 2, arguments={"to": "eve"}, asked_at=time.time())
        await store.keep_approval("ids", ApprovalEntry(pending=later))
        await asyncio.wait_for(asked_for.wait(), 30)
        answer.set()
        await _until(functools.partial(_later, watched, before), "yes")
        assert await page.inner_text(shown) == "eve"
        assert await page.locator("form.approval").count() == 1
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()
    store.close()
