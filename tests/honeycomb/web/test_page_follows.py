"""Every page of ``honeycomb serve`` follows what it shows, by the run page's one
mechanism (its events, then a fetch of its changing parts): the lists of runs and of
sessions take the runs and sessions that start after they opened, and a page whose
run or session is deleted says so."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from honeycomb import Approvals, Executor, OfflineModel, Role, tool
from honeycomb.store import RunStore
from honeycomb.testing import ScriptedModel
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from runtime.testing import call
from tests.honeycomb.web import test_serve
from tests.honeycomb.web.test_serve import _later, _until, _Watched
from tests.support import approvals
from tests.support.asgi_server import ThreadedServer

TOKEN = "test-token-0123456789"

browser = test_serve.browser  # the neighbouring tests' fixture, as it is


def _executor(db: Path) -> Executor:
    roles = [Role(name="planner"), Role(name="researcher", description="Finds facts.")]
    return Executor(roles, OfflineModel(latency=0), store=db)


async def _opened(context: Any, address: str) -> _Watched:
    """A page of ``address``, once it follows what it shows (its first update came)."""
    watched = _Watched(await context.new_page())
    await watched.page.goto(address)
    await _until(functools.partial(_later, watched, 0), "yes")
    return watched


async def test_in_chromium_a_page_whose_session_is_forgotten_says_so(
    db: Path, browser: Any
) -> None:
    """A page left open on a finished run stopped following it once the run ended, and
    still showed it, as if it were there, after its session was forgotten (its run
    deleted with it); so did the session's page. Each now says it is gone, and keeps
    what it showed; so does the page of a session cleared of its turns."""
    executor = _executor(db)
    session, other = executor.session("talk"), executor.session("other")
    answered = await session.run("Find the weather in Rome.")
    await other.run("Find the weather in Oslo.")
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        run = await _opened(context, f"{server.url}/runs/{answered.run_id}")
        await _until(lambda: run.dataset("ended"), "true")
        talk = await _opened(context, f"{server.url}/sessions/talk")
        cleared = await _opened(context, f"{server.url}/sessions/other")
        assert await run.dataset("lost") is None
        await session.forget()
        await other.clear()
        await _until(lambda: cleared.dataset("lost"), await cleared.dataset("gone"))
        await _until(lambda: run.dataset("lost"), await run.dataset("gone"))
        await _until(lambda: talk.dataset("lost"), await talk.dataset("gone"))
        said = await run.page.inner_text("p.lost")
        assert said.startswith("This run is no longer in runs.db: it was deleted")
        assert (await talk.page.inner_text("p.lost")).startswith(
            "This session is no longer in runs.db: it was forgotten, or cleared of its turns."
        )
        assert "Rome" in await talk.page.inner_text("#turns")  # what it showed, kept
        assert await run.page.query_selector("#state [data-status='ok']") is not None
        for watched in (run, talk, cleared):
            assert await watched.dataset("errors") is None
            # Asked for again once gone, its events and its part are refused (404).
            errors = [e for e in watched.errors if not _refused_as_gone(e)]
            assert errors == [], "\n".join(watched.errors)
        await context.close()


def _refused_as_gone(error: str) -> bool:
    """Whether the browser's console ``error`` is of a page's events, or its changing
    part, that the server answered 404: what it shows is gone."""
    said = "Failed to load resource: the server responded with a status of 404 (Not Found)"
    return error.startswith(said) and error.endswith(("/events)", "/live)"))


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


async def test_in_chromium_the_page_of_a_waiting_run_gone_offers_no_call_to_decide(
    db: Path, browser: Any
) -> None:
    """A run waiting for a person, its session forgotten while its page was open: the
    page said it was gone, and still offered its call's form, whose approval could only
    be refused (no such run). The call goes with the run."""

    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "ann"}), "paid"])
    executor = Executor(
        [payer], model, tools=[tool(pay, side_effects=True)], store=db,
        planner=lambda task: [("payer", "pay ann")],
    )  # fmt: skip
    session = executor.session("talk")
    waiting = await session.run("Pay ann.")
    assert waiting.status == "waiting"
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)), poll_s=0.1)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        await (await context.new_page()).goto(f"{server.url}/?token={TOKEN}")
        run = await _opened(context, f"{server.url}/runs/{waiting.run_id}")
        assert await run.page.is_visible("form.approval")
        await session.forget()
        await _until(lambda: run.dataset("lost"), await run.dataset("gone"))
        assert await run.page.query_selector("form.approval") is None
        assert not await run.page.is_visible("#approvals")
        assert await run.dataset("errors") is None
        assert run.errors == [], "\n".join(run.errors)
        await context.close()


SEEN_AS = """state => {
  Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => state});
  document.dispatchEvent(new Event('visibilitychange'));
}"""
"""Has the page taken for one in a tab out of sight (``hidden``) or back (``visible``)."""


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
