"""Who decided, as the run store keeps it and the run page shows it: a decision made on
the page of ``honeycomb serve`` is the token holder's who made it (a person on the page,
or a script), from where; behind a service's own sign-in, the user signed in. Never the
user the server's process runs as: the person who decides is at the browser."""

from __future__ import annotations

import asyncio
import getpass
import html
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection

from honeycomb import Approvals, Executor, ModelRequest, Role, Subtask, add_secret, tool
from honeycomb.cli.approve import TerminalApprover
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from runtime import AssistantMessage
from runtime.testing import call
from tests.honeycomb.web.test_serve import _Watched
from tests.honeycomb.web.test_serve_edges import _payer
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}
PAGE = "a person with the token of honeycomb serve, on its page (from 127.0.0.1)"
SCRIPT = "a script with the token of honeycomb serve (from 127.0.0.1)"


PAID: list[str] = []


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    PAID.append(to)
    return f"paid {to}"


async def _waiting(db: Path) -> None:
    """Run ``r1``: workers ``ann`` and ``bob`` each wait on their call ``c1``."""
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "cy"}, id="c1"), "paid"] * 2)
    executor = Executor([role], model, tools=[pay], store=db, aggregator="concat")
    plan = [Subtask(id=name, role="payer", instruction="pay") for name in ("ann", "bob")]
    assert (await executor.run("pay", subtasks=plan, run_id="r1")).status == "waiting"


def _text(page: str) -> str:
    """What a page reads as, its tags left out."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _deciders(db: Path) -> dict[str, str | None]:
    store = RunStore(db)
    try:
        return {e.pending.worker: e.decided_by for e in store.approvals("r1")}
    finally:
        store.close()


async def test_a_decision_on_the_page_is_kept_as_its_token_holders_and_shown(db: Path) -> None:
    await _waiting(db)
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    url = "/runs/r1/calls/c1/decision"
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url) as person:
            await person.get(f"/?token={TOKEN}")  # the printed address: a cookie
            page = (await person.get("/runs/r1")).text
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
            assert csrf is not None
            form = {"decision": "approve", "worker": "ann", "turn": "1", "csrf": csrf[1]}
            sent = await person.post(url, data=form, headers={"origin": server.url})
            assert sent.status_code == 303
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as script:
            form = {"decision": "deny", "worker": "bob", "reason": "not today"}
            assert (await script.post(url, data=form)).status_code == 303
            again = await script.post(url, data={**form, "worker": "ann"})
            shown = _text((await script.get("/runs/r1")).text)
    assert _deciders(db) == {"ann": PAGE, "bob": SCRIPT}
    assert getpass.getuser() not in str(_deciders(db).values())
    assert again.status_code == 409  # the decision that stands, and whose
    assert f"it was decided already (approved by {PAGE} at " in html.unescape(again.text)
    assert f"pay by ann (payer), turn 1: approved by {PAGE} at " in shown
    assert f"pay by bob (payer), turn 1: denied (not today) by {SCRIPT} at " in shown


class _SignedIn(AuthenticationBackend):
    """A service's own sign-in: every request is ann's."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser]:
        return AuthCredentials(["authenticated"]), SimpleUser("ann.lee")


async def test_behind_a_services_sign_in_the_user_signed_in_decides(db: Path) -> None:
    await _waiting(db)
    pages = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    app = AuthenticationMiddleware(pages, backend=_SignedIn())
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            form = {"decision": "approve", "worker": "ann"}
            sent = await client.post("/runs/r1/calls/c1/decision", data=form)
            assert sent.status_code == 303
    assert _deciders(db)["ann"] == "ann.lee (on the page of honeycomb serve, from 127.0.0.1)"


class _Terminal(io.StringIO):
    """What the terminal's prompt writes; ``asked`` is set once it asks about a call."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = asyncio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        if "[a]pprove, [d]eny" in text:
            self.asked.set()
        return written


def _pays_cy(request: ModelRequest) -> str | AssistantMessage:
    if request.messages[-1].role == "tool":
        return "done"
    return call("pay", {"to": "cy"}, id="c1")


@pytest.mark.parametrize("asked", ["as the call is made", "as its waiting run is resumed"])
async def test_a_decision_on_the_page_settles_a_call_the_terminal_asks_about(
    db: Path, asked: str
) -> None:
    """Two deciders of one call: the person at the terminal is asked about it, and it is
    on the page. The page's decision settles it at once: the run goes on with it, the
    terminal's question withdrawn, saying what was decided and by whom."""
    PAID.clear()
    role = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    plan = [("payer", "pay cy")]
    if asked == "as its waiting run is resumed":
        waits = Executor([role], FunctionModel(_pays_cy), tools=[pay], store=db)
        assert (await waits.run("pay", subtasks=plan, run_id="r1")).status == "waiting"
    terminal = _Terminal()
    read_fd, write_fd = os.pipe()
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    with os.fdopen(read_fd) as typed_in, ThreadedServer(app, name="serve") as server:
        prompt = TerminalApprover(typed_in, terminal, by="ann (at the terminal)")
        executor = Executor([role], FunctionModel(_pays_cy), tools=[pay], store=db, approver=prompt)
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as script:
            with anyio.fail_after(30):
                async with asyncio.TaskGroup() as group:
                    going = group.create_task(executor.run("pay", subtasks=plan, run_id="r1"))
                    await terminal.asked.wait()
                    page = (await script.get("/runs/r1")).text
                    assert 'action="/runs/r1/calls/c1/decision?shown=1"' in page
                    form = {"decision": "deny", "worker": "s1", "reason": "not this month"}
                    sent = await script.post("/runs/r1/calls/c1/decision", data=form)
                    assert sent.status_code == 303
        os.write(write_fd, b"a\n")  # typed after: no question is left to answer
    os.close(write_fd)
    assert going.result().status == "ok"
    assert PAID == []
    said = f"withdrawn: the call was denied (not this month) by {SCRIPT}"
    assert said in terminal.getvalue()
    assert _deciders(db) == {"s1": SCRIPT}


class _Tried(StoreApprovals):
    """The store's approvals, with every decision sent to them (approve or not) kept,
    recorded or refused."""

    def __init__(self, store: RunStore) -> None:
        super().__init__(store)
        self.tried: list[bool] = []

    async def decide(self, run_id: str, call_id: str, *, approve: bool, **more: Any) -> None:
        self.tried.append(approve)
        await super().decide(run_id, call_id, approve=approve, **more)


@IN_CHROMIUM
async def test_in_chromium_enter_in_a_denials_reason_does_not_approve(
    db: Path, browser: Any
) -> None:
    """A person typing why they deny a call and pressing Enter approved it: Enter in a
    form's text field sends the form with its first button, approve. The form's first
    button is now a disabled one: Enter sends nothing, and the call is denied with the
    reason typed once its deny is clicked."""
    waiting = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="enter")
    assert waiting.status == "waiting"
    store = RunStore(db)
    decisions = _Tried(store)
    with ThreadedServer(create_app(db, token=TOKEN, approvals=decisions)) as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/enter?token={TOKEN}")
        reason = "form.approval input[name=reason]"
        await page.fill(reason, "not to ann")
        await page.press(reason, "Enter")
        async with page.expect_navigation():
            await page.click("form.approval button[value=deny]", timeout=10_000)
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()
    assert decisions.tried == [False]
    (entry,) = await store.approvals_of("enter")
    assert entry.decision is not None
    assert (entry.decision.approve, entry.decision.reason) == (False, "not to ann")
    store.close()


PASSWORD = "pg-pass-51c0ffee"
"""The database password a call's arguments hold, known to the service as a secret."""


async def test_the_decisions_show_an_edits_arguments_with_its_secrets_masked(db: Path) -> None:
    """A call approved with edited arguments ran with them, but the page said only
    'approved with edited arguments', and its transcript shows the model's: a person
    read that the model's SQL ran. The decision now shows the arguments it ran with,
    as the store keeps them (a password masked)."""
    add_secret(PASSWORD, "password")
    ran: list[str] = []

    @tool(side_effects=True)
    async def run_sql(dsn: str, sql: str) -> str:
        """Run SQL."""
        ran.append(sql)
        return "done"

    dsn = f"postgresql://app:{PASSWORD}@db/prod"
    role = Role(name="dba", tools=("run_sql",), approvals=Approvals(tools=("run_sql",)))
    model = ScriptedModel([call("run_sql", {"dsn": dsn, "sql": "delete from old"}), "tidied"])
    executor = Executor([role], model, tools=[run_sql], store=db, aggregator="concat")
    waiting = await executor.run("tidy", subtasks=[("dba", "tidy")], run_id="r1")
    (asked,) = waiting.pending
    decided = StoreApprovals(RunStore(db), tools=lambda run_id: executor.tool_for)
    edit = {"dsn": "postgresql://app:[password hidden]@db/prod", "sql": "delete from old <b>"}
    with ThreadedServer(create_app(db, token=TOKEN, approvals=decided), name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            form = {"decision": "approve", "arguments": json.dumps(edit)}
            answer = await client.post(f"/runs/r1/calls/{asked.call_id}/decision", data=form)
            assert answer.status_code == 303, answer.text
            assert (await executor.resume("r1")).status == "ok"
            page = (await client.get("/runs/r1")).text
    assert ran == ["delete from old <b>"]
    shown = page[page.index('<ul class="decisions">') : page.index("</ul>")]
    assert "approved with edited arguments" in shown
    boxed = re.sub(r".*<pre[^>]*>|</pre>.*", "", shown, flags=re.S)
    assert json.loads(html.unescape(boxed)) == edit
    assert "&lt;b&gt;" in shown
    assert PASSWORD not in page
