"""Every page of ``honeycomb serve`` follows what it shows, by the run page's one
mechanism (its events, then a fetch of its changing parts): the lists of runs and of
sessions take the runs and sessions that start after they opened, and a page whose
run or session is deleted says so."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from pathlib import Path
from typing import Any

import httpx

from honeycomb import Approvals, Executor, OfflineModel, Role, tool
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions
from honeycomb.testing import ScriptedModel
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from runtime.testing import call
from runtime.tools.approvals import PendingApproval
from tests.honeycomb.web.test_serve import _later, _until, _Watched
from tests.support import approvals
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}


def _executor(db: Path) -> Executor:
    roles = [Role(name="planner"), Role(name="researcher", description="Finds facts.")]
    return Executor(roles, OfflineModel(latency=0), store=db)


async def _opened(context: Any, address: str) -> _Watched:
    """A page of ``address``, once it follows what it shows (its first update came)."""
    watched = _Watched(await context.new_page())
    await watched.page.goto(address)
    await _until(functools.partial(_later, watched, 0), "yes")
    return watched


@IN_CHROMIUM
async def test_in_chromium_a_page_whose_session_is_forgotten_says_so(
    db: Path, browser: Any
) -> None:
    """A page left open on a finished run stopped following it once the run ended, and
    still showed it, as if it were there, after its session was forgotten (its run
    deleted with it); so did the session's page. Each now says it is gone, and keeps
    what it showed; so does the page of a session cleared of its turns. A page gone
    asks every few seconds whether what it showed came back: its events were refused
    (404), then its part, two errors in the browser's console each time; they now say
    it is still gone."""
    executor = _executor(db)
    session, other = executor.session("talk"), executor.session("other")
    answered = await session.run("Find the weather in Rome.")
    await other.run("Find the weather in Oslo.")
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as server:
        context = await browser.new_context()
        await context.clock.install()  # the pages' few seconds, run at once
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        run = await _opened(context, f"{server.url}/runs/{answered.run_id}")
        await _until(lambda: run.dataset("ended"), "true")
        talk = await _opened(context, f"{server.url}/sessions/talk")
        cleared = await _opened(context, f"{server.url}/sessions/other")
        assert await run.dataset("lost") is None
        await session.forget()
        await other.clear()
        await _until(lambda: cleared.dataset("lost"), await cleared.dataset("gone"))
        await _until(lambda: talk.dataset("lost"), await talk.dataset("gone"))
        pages = (run, talk, cleared)
        async with contextlib.AsyncExitStack() as stack:
            asked = [
                await stack.enter_async_context(watched.page.expect_request(_events))
                for watched in pages
            ]
            await context.clock.run_for(5000)  # each asks whether it is there
        for request in asked:  # answered, not refused (as to a wrong address)
            answer = await (await request.value).response()
            assert answer.status == 200, answer.url
        await _until(lambda: run.dataset("lost"), await run.dataset("gone"))
        said = await run.page.inner_text("p.lost")
        assert said.startswith("This run is no longer in runs.db: it was deleted")
        assert (await talk.page.inner_text("p.lost")).startswith(
            "This session is no longer in runs.db: it was forgotten, or cleared of its turns."
        )
        assert "Rome" in await talk.page.inner_text("#turns")  # what it showed, kept
        assert await run.page.query_selector("#state [data-status='ok']") is not None
        for watched in pages:
            assert await watched.dataset("lost") == await watched.dataset("gone")
            assert await watched.dataset("errors") is None
            assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


def _events(request: Any) -> bool:
    """Whether ``request`` is a page's for its events."""
    return "/events?" in request.url


@IN_CHROMIUM
async def test_in_chromium_the_lists_take_runs_and_sessions_started_after_they_opened(
    db: Path, browser: Any
) -> None:
    """The lists of runs and of sessions were drawn once: a run started after the list
    opened was not on it until the page was reloaded. They now follow the store."""
    executor = _executor(db)
    await executor.session("first talk").run("Find the weather in Rome.")
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        runs = await _opened(context, f"{server.url}/")
        talks = await _opened(context, f"{server.url}/sessions")
        later = await executor.session("second talk").run("And in Oslo?")
        await runs.page.wait_for_selector(f'a[href="/runs/{later.run_id}"]', timeout=30_000)
        await talks.page.wait_for_selector('a[href="/sessions/second%20talk"]', timeout=30_000)
        for watched in (runs, talks):
            navigations = "performance.getEntriesByType('navigation').length"
            assert await watched.page.evaluate(navigations) == 1  # no reload
            assert await watched.dataset("errors") is None
            assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


@IN_CHROMIUM
async def test_in_chromium_a_call_decided_on_its_page_is_followed_to_the_end_on_the_list(
    db: Path, browser: Any, tmp_path: Path
) -> None:
    """Where approvals meet the lists: a run waits for a person, who approves its call
    on its page; the run goes on (resumed by its code) to its end, and the list of runs
    open beside it follows it, waiting, then ok, without a reload."""
    effects = tmp_path / "effects.txt"
    paying = approvals.executor(db, effects)
    assert (await paying.run(approvals.TASK, subtasks=approvals.plan(1), run_id="r1")).status == (
        "waiting"
    )
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)), poll_s=0.1)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        runs = await _opened(context, f"{server.url}/")
        status = 'tr[data-run="r1"] td.status'
        assert await runs.page.inner_text(status) == "waiting"
        run = await _opened(context, f"{server.url}/runs/r1")
        await run.page.click("form.approval button[value=approve]")
        await run.page.wait_for_selector("form.approval", state="detached")
        assert (await paying.resume("r1")).status == "ok"
        await runs.page.wait_for_selector(f"{status}.ok", timeout=30_000)
        await run.page.wait_for_selector("#state [data-status='ok']", timeout=30_000)
        assert effects.read_text() == "paid 120 to ann\n"
        for watched in (runs, run):
            assert await watched.dataset("errors") is None
            assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


@IN_CHROMIUM
async def test_in_chromium_the_list_of_evals_takes_an_eval_kept_after_it_opened(
    db: Path, browser: Any
) -> None:
    """The list of evals was drawn once, as the others were: an eval kept after it
    opened (``honeycomb eval`` in another terminal) was not on it until a reload."""
    store = RunStore(db)
    await store.open()
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        evals = await _opened(context, f"{server.url}/evals")
        assert "No evals in runs.db yet" in await evals.page.inner_text("#listed")
        await store.keep_eval("ev-1", "greetings", time.time(), True, b"{}")
        await evals.page.wait_for_selector('a[href="/evals/ev-1"]', timeout=30_000)
        assert await evals.page.evaluate("performance.getEntriesByType('navigation').length") == 1
        assert await evals.dataset("errors") is None
        assert evals.errors == [], "\n".join(evals.errors)
        await context.close()
    store.close()


def _waiting(db: Path) -> Executor:
    """Runs whose worker's call waits for a person."""

    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    return Executor(
        [payer], ScriptedModel([call("pay", {"to": "ann"}), "paid"]),
        tools=[tool(pay, side_effects=True)], store=db,
        planner=lambda task: [("payer", "pay ann")],
    )  # fmt: skip


@IN_CHROMIUM
async def test_in_chromium_the_page_of_a_waiting_run_gone_offers_no_call_to_decide(
    db: Path, browser: Any
) -> None:
    """A run waiting for a person, its session forgotten while its page was open: the
    page said it was gone, and still offered its call's form, whose approval could only
    be refused (no such run). The call goes with the run. The part the page asked for
    as the run went: answered once it was gone, it was refused (404), an error in the
    browser's console; answered before, and come once the page said the run was gone,
    it put the call's form back. Each is held here until the run is gone.

    A stale tab (out of sight, it followed nothing) still offers the call: approving
    it landed on a bare 404 (no run); it now lands on a page saying the run is gone
    and nothing was decided, no error in the console."""
    executor = _waiting(db)
    sessions = [executor.session(name) for name in ("late", "early")]
    runs = [await session.run("Pay ann.") for session in sessions]
    assert [run.status for run in runs] == ["waiting", "waiting"]
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)), poll_s=0.1)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        stale = await _opened(context, f"{server.url}/runs/{runs[0].run_id}")
        await stale.page.evaluate(SEEN_AS, "hidden")
        late, early = [_Watched(await context.new_page()) for _ in runs]
        asked, gone = [asyncio.Event(), asyncio.Event()], asyncio.Event()

        async def answered_late(route: Any) -> None:
            asked[0].set()
            await gone.wait()
            await route.continue_()

        async def answered_early(route: Any) -> None:
            answer = await route.fetch()
            asked[1].set()
            await gone.wait()
            await route.fulfill(response=answer)

        # The page's first update, asked for as its events connect.
        await late.page.route("**/live?shown=1", answered_late)
        await early.page.route("**/live?shown=1", answered_early)
        for watched, run in zip((late, early), runs, strict=True):
            await watched.page.goto(f"{server.url}/runs/{run.run_id}")
            assert await watched.page.is_visible("form.approval")
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in asked)), 30)
        for session in sessions:
            await session.forget()
        for watched in (late, early):
            said = await watched.dataset("gone") or ""
            await _until(functools.partial(watched.dataset, "lost"), said)
        gone.set()
        for watched in (late, early):
            await _until(functools.partial(watched.dataset, "answers"), "1")
            assert await watched.page.query_selector("form.approval") is None
            assert not await watched.page.is_visible("#approvals")
            assert await watched.dataset("updates") == "0"
            assert await watched.dataset("errors") is None
            assert watched.errors == [], "\n".join(watched.errors)
        async with stale.page.expect_navigation() as landed:
            await stale.page.click("form.approval button[value=approve]")
        assert (await landed.value).status == 200
        said = await stale.page.inner_text("p.gone")
        assert said.startswith("This run is no longer in runs.db: it was deleted")
        assert "Nothing was decided" in said
        assert stale.errors == [], "\n".join(stale.errors)
        await context.close()


async def test_a_run_deleted_as_its_page_reads_it_is_gone_not_shown_without_its_calls(
    db: Path,
) -> None:
    """A run deleted between a page's reads of it (its line, then its waiting calls)
    was shown as it was in the reads after: its events said it changed, its calls
    gone, before they said it was gone, and its part showed it so, what the page kept
    once gone. Its line is read last now: it is gone."""
    executor = _waiting(db)
    sessions = [executor.session(name) for name in ("events", "part")]
    followed, shown = [await session.run("Pay ann.") for session in sessions]
    approvals = _Forgetting(RunStore(db))
    app = create_app(db, token=TOKEN, approvals=approvals, poll_s=0.05)
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            address = f"/runs/{followed.run_id}/events?shown=1"
            async with client.stream("GET", address) as events:
                said = events.aiter_lines()
                assert (await anext(said)).startswith("event: change")
                approvals.forgets.append("events")  # as the next look reads its calls
                rest = [line async for line in said if line.startswith("event:")]
            assert rest == ["event: gone"]
            approvals.forgets.append("part")
            part = await client.get(f"/runs/{shown.run_id}/live?shown=1")
            assert part.status_code == 204, part.text
            assert approvals.forgets == []


async def test_what_the_store_does_not_have_is_gone_to_a_page_that_showed_it(db: Path) -> None:
    """A page asks for its events and its parts as one that showed what they are of
    (``?shown=1``), and sends its decisions so: what the store does not have went
    since, and is said so (a 'gone' event, a part of no content, a page saying nothing
    was decided), where a wrong address is refused (404)."""
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            decision = ("/runs/nope/calls/c1/decision", {"decision": "approve"})
            assert (await client.post(decision[0], data=decision[1])).status_code == 404
            told = await client.post(f"{decision[0]}?shown=1", data=decision[1])
            assert told.status_code == 200
            assert "This run is no longer in runs.db" in told.text
            assert "Nothing was decided" in told.text
            for path in ("/runs/nope", "/runs/nope/live", "/sessions/nope"):
                assert (await client.get(path)).status_code == 404
                assert (await client.get(f"{path}?shown=1")).status_code == 204
            for path in ("/runs/nope/events", "/sessions/nope/events"):
                assert (await client.get(path)).status_code == 404
                events = await client.get(f"{path}?shown=1")
                assert events.status_code == 200
                assert events.text.startswith('event: gone\ndata: {"error": "no ')


class _Forgetting(StoreApprovals):
    """The waiting calls of the store's runs, read as a session is forgotten: each
    read forgets the next of ``forgets`` first."""

    def __init__(self, store: RunStore) -> None:
        super().__init__(store)
        self.forgets: list[str] = []

    async def pending(self, run_id: str) -> list[PendingApproval]:
        if self.forgets:
            await StoredSessions(self.store).forget([self.forgets.pop(0)])
        return await super().pending(run_id)


SEEN_AS = """state => {
  Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
  document.dispatchEvent(new Event('visibilitychange'));
}"""
"""Has the page taken for one in a tab out of sight (``hidden``) or back (``visible``)."""


@IN_CHROMIUM
async def test_in_chromium_a_tab_out_of_sight_lets_its_events_go_and_follows_again(
    db: Path, browser: Any
) -> None:
    """A browser keeps six connections to a server, and each page following something
    held one for as long as it was open, in sight or not: past six such tabs, the next
    page of the server waited. A tab out of sight lets its events go; back in sight, it
    follows again and takes what it missed."""
    executor = _executor(db)
    await executor.session("first talk").run("Find the weather in Rome.")
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        runs = await _opened(context, f"{server.url}/")
        ended: list[str] = []
        runs.page.on(
            "requestfailed", lambda r: ended.append(r.url) if "/events/" in r.url else None
        )
        asked: list[str] = []
        runs.page.on("request", lambda r: asked.append(r.url) if "/events/" in r.url else None)
        await runs.page.evaluate(SEEN_AS, "hidden")
        await _until(lambda: _said(ended), "yes")  # its events let go
        later = await executor.session("second talk").run("And in Oslo?")
        assert asked == []
        await runs.page.evaluate(SEEN_AS, "visible")
        await runs.page.wait_for_selector(f'a[href="/runs/{later.run_id}"]', timeout=30_000)
        assert await runs.page.evaluate("performance.getEntriesByType('navigation').length") == 1
        assert await runs.dataset("lost") is None
        await context.close()


async def _said(found: list[str]) -> str:
    return "yes" if found else "no"
