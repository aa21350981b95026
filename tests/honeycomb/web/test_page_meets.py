"""``honeycomb serve``'s page where it meets the other features: a waiting call whose
tool says what it will do in words that hold a secret, a PostgreSQL store's password,
text that reorders itself, text of very long lines, runs another process writes while
the pages are read, a store that another process makes unreadable while a page
follows a run there, and an edit of a call's arguments that hold a masked secret."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from honeycomb import Approvals, Executor, Role, Subtask, ToolMessage, add_secret, tool
from honeycomb.cli.main import main
from honeycomb.run.decide import pending_of
from honeycomb.store import RunStore, RunSummary
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from runtime import AssistantMessage, ModelRequest, StoreError, ToolCall
from runtime.testing import call
from tests.honeycomb.cli import test_chat_approvals
from tests.honeycomb.web.test_serve import TOKEN, _later, _until, _Watched
from tests.honeycomb.web.test_serve_edges import _payer
from tests.honeycomb.web.test_serve_seams import _serving
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM
from tests.support.postgres import PostgresServer
from tests.support.stores import ON_POSTGRES, Where

# The neighbouring tests' fixtures, as they are.
hive = test_chat_approvals.hive

BEARER = {"authorization": f"Bearer {TOKEN}"}
PASSWORD = "pg-pass-8f3a1c77e2"
"""The database password the tools use, known to the service as a secret."""


@contextlib.asynccontextmanager
async def _page(db: Path, executor: Executor) -> AsyncIterator[httpx.AsyncClient]:
    """A script's client of the page of ``db``'s runs (served on 127.0.0.1 while it is
    open), their calls decided with ``executor``'s tools."""
    decided = StoreApprovals(RunStore(db), tools=lambda run_id: executor.tool_for)
    app = create_app(db, token=TOKEN, approvals=decided)
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            yield client


def _query_executor(db: Path, queries: list[str]) -> Executor:
    """A worker whose two calls, each to a tool that says what it will do naming the
    database (one of them failing to), wait for a person."""

    def where(arguments: dict[str, Any]) -> str:
        return f"Run {arguments['sql']} on postgresql://app:{PASSWORD}@db/prod"

    def failing(arguments: dict[str, Any]) -> str:
        raise RuntimeError(f"cannot reach postgresql://app:{PASSWORD}@db/prod")

    @tool(side_effects=True, describe=where)
    async def query(sql: str) -> str:
        """Run SQL."""
        queries.append(sql)
        return "1 row"

    @tool(side_effects=True, describe=failing)
    async def purge(table: str) -> str:
        """Empty a table."""
        return f"purged {table}"

    asks = AssistantMessage(
        tool_calls=(
            ToolCall(id="q1", name="query", arguments=json.dumps({"sql": "select 1"})),
            ToolCall(id="p1", name="purge", arguments=json.dumps({"table": "old"})),
        )
    )
    role = Role(name="dba", tools=("query", "purge"), approvals=Approvals(tools=("query", "purge")))
    return Executor(
        [role],
        ScriptedModel([asks, "done"]),
        tools=[query, purge],
        store=db,
        aggregator="concat",
    )


async def test_a_tools_words_on_a_waiting_call_show_no_secret_on_the_page(db: Path) -> None:
    """What a tool's ``describe`` says of a call (or its failure) is computed as the
    page is made, not read from the store: it is masked as everything shown is, and
    the call is still decided from the page."""
    add_secret(PASSWORD, "password")
    queries: list[str] = []
    executor = _query_executor(db, queries)
    waiting = await executor.run("tidy the database", subtasks=[("dba", "tidy")], run_id="r1")
    assert waiting.status == "waiting"
    async with _page(db, executor) as client:
        shown = [(await client.get(path)).text for path in ("/runs/r1", "/runs/r1/live")]
        for call_id in ("q1", "p1"):
            answer = await client.post(
                f"/runs/r1/calls/{call_id}/decision", data={"decision": "approve"}
            )
            assert answer.status_code == 303, answer.text
    for page in shown:
        assert PASSWORD not in page
        assert "Run select 1 on postgresql://app:[password hidden]@db/prod" in page
        assert "purge&#x27;s describe failed: RuntimeError: cannot reach" in page
    assert (await executor.resume("r1")).status == "ok"
    assert queries == ["select 1"]


LONG = "QmFzZTY0" * 2500
"""A line of 20,000 characters with nowhere to break it: a blob, a URL, a token."""


@tool(side_effects=True, describe=lambda arguments: f"Upload {arguments['blob']}")
async def upload(blob: str) -> str:
    """Upload a blob."""
    return f"uploaded {len(blob)} characters"


@tool
async def fetch(url: str) -> str:
    """Fetch a URL."""
    return f"fetched {url}"


@IN_CHROMIUM
async def test_in_chromium_very_long_lines_stay_within_the_pages(db: Path, browser: Any) -> None:
    """A run's id, its task, a call's arguments, a tool's result and a waiting call's
    summary, each a line of thousands of characters with no space: each page keeps
    them within its width (broken where they must be), the form of the call too."""
    fetches = AssistantMessage(
        tool_calls=(ToolCall(id="f1", name="fetch", arguments=json.dumps({"url": LONG})),)
    )
    uploads = AssistantMessage(
        tool_calls=(ToolCall(id="u1", name="upload", arguments=json.dumps({"blob": LONG})),)
    )
    role = Role(name="mover", tools=("fetch", "upload"), approvals=Approvals(tools=("upload",)))
    executor = Executor(
        [role],
        ScriptedModel([fetches, uploads, "done"]),
        tools=[fetch, upload],
        store=db,
        aggregator="concat",
    )
    run_id = "run-" + "x" * 300
    waiting = await executor.run(f"move {LONG}", subtasks=[("mover", "move")], run_id=run_id)
    assert waiting.status == "waiting"
    decided = StoreApprovals(RunStore(db), tools=lambda run_id: executor.tool_for)
    app = create_app(db, token=TOKEN, approvals=decided)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context(viewport={"width": 1000, "height": 700})
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/?token={TOKEN}")
        widths = "e => [e.scrollWidth, e.clientWidth]"
        listed, width = await page.eval_on_selector("html", widths)
        assert listed <= width, "the list of runs is wider than the page"
        await page.click("table.runs a")
        await page.wait_for_selector("form.approval")
        await page.click("details.worker summary")  # the transcript, with the calls
        assert LONG in await page.inner_text("details.worker")
        shown, width = await page.eval_on_selector("html", widths)
        assert shown <= width, "the run's page is wider than the page"
        inside, form = await page.eval_on_selector("form.approval", widths)
        assert inside <= form, "the call's form holds text wider than itself"
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


@IN_CHROMIUM
async def test_in_chromium_a_long_answer_and_task_leave_the_timeline_near(
    db: Path, browser: Any
) -> None:
    """A run of many workers whose answers are long has an answer of thousands of
    lines (the task may be as long): they filled the page, and its timeline and workers
    were tens of thousands of pixels down. Each now scrolls in a box of its own, all of
    it there, and the timeline is within the first screens."""
    lines = "\n".join(f"line {n} of the answer" for n in range(3000))
    workers = [("worker", f"part {n}") for n in range(4)]
    executor = Executor(
        [Role(name="worker")], FunctionModel(lambda request: lines), store=db, aggregator="concat"
    )
    task = "\n".join(f"step {n}" for n in range(2000))
    assert (await executor.run(task, subtasks=workers, run_id="long")).status == "ok"
    with ThreadedServer(create_app(db, token=TOKEN), name="serve") as server:
        context = await browser.new_context(viewport={"width": 1000, "height": 700})
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/long?token={TOKEN}")
        timeline = await page.eval_on_selector("h2 + .timeline", "e => e.offsetTop")
        assert timeline < 3 * 700, f"the timeline is {timeline}px down the page"
        for box in ("pre.answer", "h1 + p.task"):
            # Waited for, not read at once: the page's style is applied as it loads (in
            # one loaded CI run the answer's box was read before it was).
            found = f"document.querySelector({box!r})"
            scrolls = f"() => {found}.scrollHeight > {found}.clientHeight"
            await page.wait_for_function(scrolls, timeout=15_000)
        assert "line 2999 of the answer" in await page.inner_text("pre.answer")
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


SPOOF = "IBAN DE44 5001 0517 \u202e5407 3249 31\u202c"
"""An account whose digits a right-to-left override shows reversed where text is drawn
as it is: a person would read ``13 9423 7045`` where the call pays ``5407 3249 31``."""


async def test_a_waiting_calls_text_is_shown_without_what_reorders_or_hides_it(db: Path) -> None:
    """What a person decides on (a call's arguments, the tool's words, the box of its
    arguments) holds none of the characters that reorder or hide text (direction
    overrides, zero-width ones, controls), as the terminal's prompt shows it; the box
    has them as JSON escapes, so sent back as it is it is the model's call, unedited."""
    wired: list[tuple[str, str]] = []

    @tool(side_effects=True, describe=lambda arguments: f"Pay 40 to {arguments['account']}")
    async def pay(account: str, memo: str) -> str:
        """Wire money."""
        wired.append((account, memo))
        return "wired"

    memo = "rent\u200b for\x07 march\u2066"
    asks = AssistantMessage(
        tool_calls=(
            ToolCall(id="w1", name="pay", arguments=json.dumps({"account": SPOOF, "memo": memo})),
        )
    )
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    executor = Executor(
        [role], ScriptedModel([asks, "done"]), tools=[pay], store=db, aggregator="concat"
    )
    waiting = await executor.run("pay the rent", subtasks=[("payer", "pay")], run_id="r1")
    assert waiting.status == "waiting"
    async with _page(db, executor) as client:
        page = (await client.get("/runs/r1")).text
        form = page[page.index('<form class="approval"') : page.index("</form>")]
        box = form[form.index("<textarea") : form.index("</textarea>")]
        sent = html.unescape(box[box.index(">") + 1 :])
        answer = await client.post(
            "/runs/r1/calls/w1/decision", data={"decision": "approve", "arguments": sent}
        )
        assert answer.status_code == 303, answer.text
    hidden = {"\u202e", "\u202c", "\u200b", "\x07", "\u2066"}
    assert not hidden & set(form), form
    assert "IBAN DE44 5001 0517  5407 3249 31" in form  # each as a space, as a terminal
    assert "\\u202e5407" in box
    assert (await executor.resume("r1")).status == "ok"
    assert wired == [(SPOOF, memo)]  # the model's arguments: the box sent back is no edit


@ON_POSTGRES
def test_the_page_of_a_postgresql_stores_server_names_it_without_its_password(
    hive: Path, fast_demo: Path, postgres: PostgresServer
) -> None:
    """``honeycomb serve --store URL`` of a URL holding the store's password: the page
    of a run waiting on nothing left to decide (decided elsewhere) says how it goes
    on, naming the store as the other commands do, without the password."""
    secret = "pg-pass-51e0c3d9aa"
    url = postgres.url().replace("postgres@", f"postgres:{secret}@", 1)
    assert main(["run", str(hive), "--plain", "--store", url, "--run-id", "h1"]) == 3
    [call] = anyio.run(pending_of, RunStore(url), "h1")
    decided = ["approve", "h1", call.call_id, "--store", url, "--worker", call.worker]
    assert main(decided) == 0
    with _serving("--store", url, "--port", "0") as served, httpx.Client() as client:
        pages = [
            client.get(served.address + path, headers=served.bearer)
            for path in ("runs/h1", "runs/h1/live")
        ]
    shown = url.replace(f":{secret}@", "@", 1)
    for page in pages:
        assert page.status_code == 200
        assert secret not in page.text
        assert html.escape(f"honeycomb resume h1 --store '{shown}'") in page.text


@IN_CHROMIUM
async def test_in_chromium_a_page_says_its_store_became_unreadable_and_follows_again(
    db: Path, browser: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store cannot be read while a page follows a waiting run (its file was
    overwritten): the page says so at its top, naming what is wrong with the store (not
    only in its data), and follows its run again once the store can be read. The store
    refuses its reads for as long as the test says: an overwritten file is noticed as
    soon as SQLite reads a page of it again, which a connection's cache may put off."""
    waiting = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="r1")
    assert waiting.status == "waiting"
    unreadable = threading.Event()
    read = RunStore.summary

    async def summary(store: RunStore, run_id: str) -> RunSummary | None:
        if unreadable.is_set():
            raise StoreError("the file is not a Honeycomb run store", path=str(db))
        return await read(store, run_id)

    monkeypatch.setattr(RunStore, "summary", summary)
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)), poll_s=0.1)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        await watched.page.goto(f"{server.url}/runs/r1?token={TOKEN}")
        await _until(lambda: _later(watched, 0), "yes")  # its events are connected
        page = watched.page
        unreadable.set()
        line = "p.lost:not([hidden])"
        await page.wait_for_selector(line, timeout=30_000)

        async def stopped() -> str:  # a busy machine's events may drop first, and be lost
            shown = await page.inner_text(line) if await page.is_visible(line) else ""
            return "yes" if "stopped following" in shown else "no"

        await _until(stopped, "yes")
        said = await page.inner_text(line)
        assert "This page stopped following its run" in said
        assert "the file is not a Honeycomb run store" in said
        unreadable.clear()
        await page.wait_for_selector("p.lost", state="hidden", timeout=30_000)
        assert await page.is_visible("form.approval")
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


async def test_the_pages_load_while_another_process_writes_its_runs(
    store: Where, tmp_path: Path
) -> None:
    """Runs going on in another process, each of several workers writing spans, turns
    and journal entries: every page read meanwhile loads (no 500, no store busy), and a
    run's events follow it to its end."""
    run_ids = ["m0", "m1", "m2"]
    command = [sys.executable, "-m", "tests.support.many_runs", str(store), str(tmp_path)]
    command += ["1", "run", *run_ids]  # their first life, begun anew
    opened = RunStore(store)
    app = create_app(opened, token=TOKEN, approvals=StoreApprovals(opened), poll_s=0.05)
    paths = [
        "/",
        "/sessions",
        *(f"/runs/{run_id}{part}" for run_id in run_ids for part in ("", "/live")),
    ]
    failed: list[tuple[str, int, str]] = []  # and what the page said why
    going = 0  # pages that showed a run still going
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER, timeout=30) as client:
            async with await anyio.open_process(command, stderr=None) as child:
                while child.returncode is None:
                    for path in paths:
                        answer = await client.get(path)
                        going += 'data-status="running"' in answer.text
                        if answer.status_code not in (200, 404):  # 404: not begun yet
                            failed.append((path, answer.status_code, answer.text[-300:]))
                assert child.stdout is not None
                said = json.loads(b"".join([part async for part in child.stdout]))
            events = (await client.get("/runs/m0/events")).text
    assert failed == []
    assert going > 0  # read while the runs went, not only after
    assert said == dict.fromkeys(run_ids, "ok")
    assert events.endswith('event: end\ndata: {"status": "ok"}\n\n')


@IN_CHROMIUM
async def test_in_chromium_an_edit_keeps_a_masked_secret_only_where_it_left_it(
    db: Path, browser: Any
) -> None:
    """The page shows a waiting call's connection string with its password masked. An
    edit that changes that value, its mask in it, is refused naming the argument (the
    call would run with the mask) and the call still waits; one that changes only the
    SQL is approved, and the worker, going on in the run, connects with the password
    itself, not its mask."""
    add_secret(PASSWORD, "password")
    dsn = f"postgresql://app:{PASSWORD}@db/prod"
    ran: list[tuple[str, str]] = []
    idle = asyncio.Event()

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if (request.conversation or "").endswith("/idle"):
            return AssistantMessage(tool_calls=(call("wait", id="w1"),)) if not seen else "waited"
        if not seen:
            asked = {"dsn": dsn, "sql": "delete from old"}
            return AssistantMessage(tool_calls=(call("run_sql", asked, id="q1"),))
        return "done"

    async def run_sql(dsn: str, sql: str) -> str:
        """Run SQL on a database."""
        ran.append((dsn, sql))
        return "3 rows"

    async def wait() -> str:
        """Keep the run going until the test is done deciding."""
        await idle.wait()
        return "waited"

    executor = Executor(
        [
            Role(name="dba", tools=("run_sql",), approvals=Approvals(tools=("run_sql",))),
            Role(name="idle", tools=("wait",)),
        ],
        FunctionModel(answer),
        tools=[tool(run_sql, side_effects=True), tool(wait)],
        store=db,
        aggregator="concat",
    )
    plan = [Subtask(id=name, role=name, instruction="go") for name in ("dba", "idle")]
    running = asyncio.create_task(executor.run("tidy", subtasks=plan, run_id="r1"))
    store = RunStore(db)
    await _until(lambda: _asked(store), "yes")
    decided = StoreApprovals(RunStore(db), tools=lambda run_id: executor.tool_for)
    app = create_app(db, token=TOKEN, approvals=decided, poll_s=0.1)
    try:
        with ThreadedServer(app, name="serve") as server:
            context = await browser.new_context()
            watched = _Watched(await context.new_page())
            page, form = watched.page, "form.approval[data-call='q1']"
            box = f"{form} textarea[name=arguments]"

            async def approve(**edit: str) -> None:
                await page.goto(f"{server.url}/runs/r1?token={TOKEN}")
                shown = json.loads(await page.input_value(box))
                assert shown == {"dsn": SHOWN_DSN, "sql": "delete from old"}
                await page.click(f"{form} details.edit summary")
                await page.fill(box, json.dumps({**shown, **edit}))
                await page.click(f"{form} button[value=approve]")

            await approve(dsn=SHOWN_DSN.replace("/prod", "/test"))
            said = await page.inner_text("body")
            assert "argument 'dsn' holds a secret (shown as [password hidden])" in said
            assert [p.call_id for p in await pending_of(store, "r1")] == ["q1"]  # it waits
            await approve(sql="delete from old where id < 10")
            await page.wait_for_selector(f"{form}", state="detached", timeout=30_000)
            await _until(lambda: _ran(ran), "yes")  # in this life, as a paused worker does
            await context.close()
    finally:
        idle.set()
    assert (await running).status == "ok"
    assert ran == [(dsn, "delete from old where id < 10")]  # the password, not its mask


SHOWN_DSN = "postgresql://app:[password hidden]@db/prod"


async def _asked(store: RunStore) -> str:
    return "yes" if await store.approvals_of("r1") else "no"


async def _ran(ran: list[tuple[str, str]]) -> str:
    return "yes" if ran else "no"


async def test_events_opened_on_a_store_it_cannot_read_say_why(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's events (opened again as it follows its run) on a store the server can
    no longer read say why, as events already open do: they answered HTTP 500, and
    the page said only that, not what is wrong with the store."""
    waiting = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="r1")
    assert waiting.status == "waiting"

    async def summary(store: RunStore, run_id: str) -> RunSummary | None:
        raise StoreError("the file is not a Honeycomb run store", path=str(db))

    monkeypatch.setattr(RunStore, "summary", summary)
    async with _page(db, _payer(db)) as client:
        answer = await client.get("/runs/r1/events")
    assert answer.status_code == 200
    assert "event: failed" in answer.text
    assert "the file is not a Honeycomb run store" in answer.text


async def test_events_whose_read_of_the_waiting_calls_fails_say_why(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's line read, its waiting calls not (a PostgreSQL server gone between
    the two reads): the failure escaped the events, which broke off with a traceback
    in the server's log, and the page said it lost the server, not why."""
    waiting = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="r1")
    assert waiting.status == "waiting"

    async def approvals_of(store: RunStore, run_id: str) -> list[Any]:
        raise StoreError("cannot read the run store: the server closed the connection", path="pg")

    monkeypatch.setattr(RunStore, "approvals_of", approvals_of)
    async with _page(db, _payer(db)) as client:
        answer = await client.get("/runs/r1/events")
    assert answer.status_code == 200
    assert "event: failed" in answer.text
    assert "the server closed the connection" in answer.text


async def test_a_mask_that_was_a_calls_text_reads_as_it_on_the_page(db: Path) -> None:
    """A call's arguments holding a mask as text (what an endpoint's echo of a key was
    masked to as it arrived) are kept with its '[' escaped, to tell it from a secret the
    store masked: the transcript showed '\\u005bpassword hidden]'."""
    add_secret(PASSWORD, "password")
    text = "the key was [password hidden]"
    poster = Role(name="poster", tools=("post",), approvals=Approvals(tools=("post",)))
    executor = Executor(
        [poster], ScriptedModel([call("post", {"text": text}, id="p1"), "posted"]),
        tools=[post], store=db, aggregator="concat",
    )  # fmt: skip
    waiting = await executor.run("post", subtasks=[("poster", "post")], run_id="r1")
    assert waiting.status == "waiting"  # its transcript is the one kept turn by turn
    async with _page(db, executor) as client:
        shown = html.unescape((await client.get("/runs/r1")).text)
    assert '→ post({"text": "the key was [password hidden]"})' in shown
    assert "u005b" not in shown


@tool
async def post(text: str) -> str:
    """Post a text."""
    return "posted"
