"""``honeycomb serve``: the runs of a store over real HTTP on 127.0.0.1 (token, CSRF,
escaping, live events), and in a real headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from honeycomb import Approvals, Executor, Plan, Policy, Role, RunResult, Subtask, ToolMessage, tool
from honeycomb.cli.serve import Resumer, store_approvals
from honeycomb.errors import ApprovalError, RunFailed
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.web import cookie_name, create_app, csrf_value, session_key
from honeycomb.web.approvals import StoreApprovals
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from runtime.tools.approvals import PendingApproval
from tests.support import ROOT, approvals
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM

TOKEN = "test-token-0123456789"
EVIL = '<script>document.documentElement.dataset.injected = "yes"</script>'
PLAN = Plan(
    subtasks=(
        Subtask(id="a", role="worker", instruction="probe a"),
        Subtask(id="b", role="worker", instruction="probe b"),
    )
)


def _executor(db: Path, latency: float, gate: asyncio.Event | None = None) -> Executor:
    """Workers that probe three times; with ``gate``, their second turn waits for it."""

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        await asyncio.sleep(latency)
        turns = sum(isinstance(m, AssistantMessage) for m in request.messages)
        if gate is not None and turns == 1:
            await gate.wait()
        if turns < 3:
            return AssistantMessage(tool_calls=(call("probe", {"n": turns}),))
        return f"found {EVIL}"

    async def probe(n: int) -> str:
        """Probe something."""
        return f"result {n} {EVIL}"

    return Executor(
        [Role(name="worker", description="Probes.", tools=("probe",))],
        FunctionModel(answer),
        tools=[tool(probe)],
        aggregator="concat",
        policy=Policy(max_workers=4),
        store=db,
    )


@pytest.fixture
async def finished(db: Path) -> Path:
    result = await _executor(db, 0.0).run(f"the task {EVIL}", subtasks=PLAN, run_id="r1")
    assert result.status == "ok"
    return db


@pytest.fixture
def server(db: Path) -> Iterator[ThreadedServer]:
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as running:
        yield running


def _client(server: ThreadedServer, **cookies: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, cookies=cookies, follow_redirects=False)


def _signed_in(server: ThreadedServer, key: str = session_key(TOKEN)) -> httpx.Client:
    """A client holding the cookie the server gives for its token (or ``key``)."""
    return _client(server, **{cookie_name(TOKEN, server.port): key})


# --- over HTTP ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/", "/runs/r1", "/runs/r1/live", "/runs/r1/events"])
async def test_every_page_needs_the_token(
    finished: Path, server: ThreadedServer, path: str
) -> None:
    with _client(server) as client:
        refused = client.get(path)
        assert refused.status_code == 401
        assert "needs its token" in refused.text
        assert client.get(path, headers={"authorization": "Bearer wrong"}).status_code == 401
        let_in = client.get(path, headers={"authorization": f"Bearer {TOKEN}"})
        assert let_in.status_code == 200
    with _signed_in(server, "wrong") as client:
        assert client.get(path).status_code == 401
    with _signed_in(server) as client:
        assert client.get(path).status_code == 200


async def test_the_printed_address_trades_the_token_for_a_cookie(
    finished: Path, server: ThreadedServer
) -> None:
    with _client(server) as client:
        assert client.get("/runs/r1?token=wrong").status_code == 401
        traded = client.get("/runs/r1?token=" + TOKEN)
        assert traded.status_code == 303
        assert traded.headers["location"].endswith("/runs/r1")  # the token is not kept
        cookie = traded.headers["set-cookie"].lower()
        assert "httponly" in cookie
        assert "samesite=strict" in cookie
        page = client.get("/runs/r1")  # with the cookie now
        assert page.status_code == 200


async def test_run_text_is_escaped_and_the_page_fetches_nothing_elsewhere(
    finished: Path, server: ThreadedServer
) -> None:
    with _signed_in(server) as client:
        listed = client.get("/")
        page = client.get("/runs/r1")
    assert 'href="/runs/r1"' in listed.text
    for answer in (listed, page):
        assert EVIL not in answer.text
        csp = answer.headers["content-security-policy"]
        assert "default-src 'none'" in csp
        assert "script-src 'self'" in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
    assert "&lt;script&gt;document.documentElement" in page.text
    assert "result 2 &lt;script&gt;" in page.text  # a tool result, as text
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)


async def test_a_run_page_names_a_missing_run(finished: Path, server: ThreadedServer) -> None:
    with _signed_in(server) as client:
        missing = client.get("/runs/nope")
    assert missing.status_code == 404
    assert "no run &#x27;nope&#x27; in runs.db" in missing.text


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/runs/nope/events", "no run &#x27;nope&#x27; in runs.db"),
        ("/runs/a%20b/events", "no run &#x27;a b&#x27; in runs.db"),
        ("/sessions/nope/events", "no session &#x27;nope&#x27; in runs.db"),
    ],
)
async def test_events_of_what_the_store_does_not_have_are_refused_before_they_start(
    finished: Path, server: ThreadedServer, path: str, said: str
) -> None:
    """They were answered 200, as events, whose first said the run was gone: a client
    could not tell a wrong id from a run deleted as it followed it."""
    with _signed_in(server) as client:
        missing = client.get(path, timeout=10)
    assert missing.status_code == 404
    assert not missing.headers["content-type"].startswith("text/event-stream")
    assert said in missing.text


async def test_events_of_a_finished_run_say_so_and_end(
    finished: Path, server: ThreadedServer
) -> None:
    with _signed_in(server) as client:
        events = client.get("/runs/r1/events", timeout=10)
    assert events.headers["content-type"].startswith("text/event-stream")
    change, end = events.text.split("\n\n")[:2]
    assert re.fullmatch(r'event: change\ndata: \{"status": "ok", "seen": "[0-9a-f]{16}"\}', change)
    assert end == 'event: end\ndata: {"status": "ok"}'
    with _signed_in(server) as client:  # asked again: the same, said so
        assert client.get("/runs/r1/events", timeout=10).text.startswith(f"{change}\n\n")


class _Decisions:
    def __init__(self) -> None:
        self.made: list[tuple[str, str, str | None, bool, str, dict[str, Any] | None]] = []

    async def pending(self, run_id: str) -> list[PendingApproval]:
        return [
            PendingApproval(
                call_id="c1", worker="a", role="worker", turn=1, tool="send",
                arguments={"to": EVIL}, why="send needs approval", asked_at=0.0,
            )
        ]  # fmt: skip

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        worker: str | None = None,
        turn: int | None = None,
        reason: str = "",
        arguments: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> None:
        self.made.append((run_id, call_id, worker, approve, reason, arguments))


async def test_a_decision_needs_the_token_and_the_page_csrf_value(finished: Path, db: Path) -> None:
    decisions = _Decisions()
    app = create_app(db, token=TOKEN, approvals=decisions, poll_s=0.1)
    with ThreadedServer(app, name="serve") as server, _client(server) as client:
        with _signed_in(server) as reader:
            page = reader.get("/runs/r1")
        assert "&lt;script&gt;" in page.text
        assert EVIL not in page.text
        csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
        assert csrf is not None
        assert csrf[1] == csrf_value(TOKEN)
        url = "/runs/r1/calls/c1/decision"
        form = {"decision": "deny", "reason": "not now", "csrf": csrf[1], "worker": "a"}
        assert client.post(url, data=form).status_code == 401  # no token
        client.cookies.set(cookie_name(TOKEN, server.port), session_key(TOKEN))
        assert client.post(url, data={**form, "csrf": "forged"}).status_code == 403
        elsewhere = client.post(url, data=form, headers={"origin": "http://evil.example"})
        assert elsewhere.status_code == 403
        assert decisions.made == []
        edited = {**form, "decision": "approve", "arguments": '{"to": "ops"}'}
        assert client.post(url, data=edited).status_code == 303
        bad = client.post(url, data={**edited, "arguments": "{not json"})
        assert bad.status_code == 422
        assert "arguments: not JSON" in bad.text
        with _client(server) as script:
            by_script = script.post(
                url,
                data={"decision": "deny", "reason": "scripted"},
                headers={"authorization": f"Bearer {TOKEN}"},
            )
        assert by_script.status_code == 303
    assert decisions.made == [
        ("r1", "c1", "a", True, "not now", {"to": "ops"}),
        ("r1", "c1", None, False, "scripted", None),
    ]


def test_serve_refuses_another_interface_without_a_long_token(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from honeycomb.cli.main import main

    monkeypatch.delenv("HONEYCOMB_SERVE_TOKEN", raising=False)
    elsewhere = ["serve", "--store", str(db), "--host", "0.0.0.0", "--port", "0"]
    assert main(elsewhere) == 2
    assert "needs a token of your own" in capsys.readouterr().err
    assert main([*elsewhere, "--token", "fifteen-chars!!"]) == 2
    assert "at least 16 characters (--token or HONEYCOMB_SERVE_TOKEN has 15)" in (
        capsys.readouterr().err
    )


def _not_a_run_store(tmp_path: Path) -> Path:
    """An SQLite database of something else."""
    other = tmp_path / "notes.db"
    with contextlib.closing(sqlite3.connect(other)) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.commit()
    return other


def test_serve_refuses_a_file_that_is_not_a_run_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from honeycomb.cli.main import main

    other = _not_a_run_store(tmp_path)
    assert main(["serve", "--store", str(other), "--port", "0"]) == 2
    said = capsys.readouterr().err
    assert main(["runs", "--store", str(other)]) == 2
    assert said == capsys.readouterr().err  # as `honeycomb runs` says it
    assert "is not a Honeycomb run store (an SQLite database with other tables)" in said


def test_a_page_over_a_file_that_is_not_a_run_store_says_so_with_its_headers(
    tmp_path: Path,
) -> None:
    other = _not_a_run_store(tmp_path)
    with (
        ThreadedServer(create_app(other, token=TOKEN), name="serve") as server,
        _signed_in(server) as client,
    ):
        for path in ("/", "/runs/r1", "/runs/r1/live", "/runs/r1/events"):
            answer = client.get(path, timeout=10)
            # The events say it as the failed event that the page follows them with.
            assert answer.status_code == (200 if path.endswith("/events") else 500), path
            assert "is not a Honeycomb run store" in answer.text
            assert "default-src 'none'" in answer.headers["content-security-policy"]
            assert answer.headers["x-content-type-options"] == "nosniff"


async def test_edited_arguments_the_tools_schema_refuses_are_refused_when_decided(
    db: Path, tmp_path: Path
) -> None:
    """As ``honeycomb approve`` refuses them: nothing is recorded, the call still waits."""
    executor = approvals.executor(db, tmp_path / "effects.txt")
    waiting = await executor.run(approvals.TASK, subtasks=approvals.plan(1), run_id="pay")
    assert waiting.status == "waiting"
    decided = StoreApprovals(RunStore(db), tools=lambda run_id: executor.tool_for)
    app = create_app(db, token=TOKEN, approvals=decided, poll_s=0.1)
    url = "/runs/pay/calls/pay_1/decision"
    form = {"decision": "approve", "worker": "payer", "csrf": csrf_value(TOKEN)}
    with ThreadedServer(app, name="serve") as server, _signed_in(server) as client:
        wrong = client.post(url, data={**form, "arguments": '{"to": "ann", "amount": "lots"}'})
        assert wrong.status_code == 422
        assert "argument &#x27;amount&#x27;" in wrong.text
        assert [p.call_id for p in await decided.pending("pay")] == ["pay_1"]
        right = client.post(url, data={**form, "arguments": '{"to": "bob", "amount": 7}'})
        assert right.status_code == 303
        again = client.post(url, data={**form, "arguments": '{"to": "bob", "amount": 7}'})
        assert again.status_code == 409
        assert "decided already" in again.text
        unknown = client.post("/runs/nope/calls/pay_1/decision", data=form)
        assert unknown.status_code == 404  # no such run: not a state of the call
        assert "has no such run" in unknown.text
    assert await decided.pending("pay") == []
    result = await executor.resume("pay")
    assert approvals.payer_saw(result).endswith("paid 7 to bob")


def test_two_servers_on_one_host_keep_their_own_cookies(db: Path) -> None:
    """A browser keeps one cookie jar for every port of a host: each server's cookie
    has a name of its own, is scoped to its path, and holds no token."""
    other = "another-token-0123456789"
    first = create_app(db, token=TOKEN, base="/hc-first/")
    second = create_app(db, token=other, base="/hc-second/")
    with (
        ThreadedServer(first, name="a") as a,
        ThreadedServer(second, name="b") as b,
        httpx.Client(follow_redirects=False) as browser,  # one jar, as a browser's
    ):
        made = browser.get(f"{a.url}/hc-first/?token={TOKEN}")
        assert made.status_code == 303
        cookie = made.headers["set-cookie"]
        assert cookie.startswith(f"{cookie_name(TOKEN, a.port)}={session_key(TOKEN)};")
        assert "Path=/hc-first/" in cookie
        assert TOKEN not in cookie
        assert browser.get(f"{b.url}/hc-second/?token={other}").status_code == 303
        assert browser.get(f"{a.url}/hc-first/").status_code == 200  # still signed in
        assert browser.get(f"{b.url}/hc-second/").status_code == 200
        # The cookie goes to the paths it was made for only: not to the root of the
        # host (where another server may answer), nor to the other server's.
        sent = browser.build_request("GET", f"{a.url}/").headers.get("cookie", "")
        assert session_key(TOKEN) not in sent
        assert browser.get(f"{a.url}/").headers["location"] == "/hc-first/"
        moved = browser.get(f"{a.url}/?token={TOKEN}")
        assert moved.headers["location"] == f"/hc-first/?token={TOKEN}"


def test_the_serve_command_prints_its_address_and_stops_on_ctrl_c(finished: Path) -> None:
    command = [sys.executable, "-m", "honeycomb", "serve", "--store", str(finished), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        address = re.search(r"(http://127\.0\.0\.1:\d+/hc-[0-9a-f]{16}/)\?token=(\S+)", line)
        assert address is not None, line
        answer = httpx.get(address[1], headers={"authorization": f"Bearer {address[2]}"})
        assert answer.status_code == 200
        assert "r1" in answer.text
        assert httpx.get(address[1]).status_code == 401
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""


# --- in a real headless Chromium ------------------------------------------------------


async def _until(read: Callable[[], Awaitable[str | None]], wanted: str) -> None:
    """Wait until ``read()`` gives ``wanted`` (polled from here: the page's CSP forbids
    the string evaluation Playwright's own waiting uses)."""
    deadline = time.monotonic() + 30
    while (found := await read()) != wanted:
        assert time.monotonic() < deadline, f"still {found!r}, not {wanted!r}"
        await asyncio.sleep(0.05)


class _Watched:
    """A browser page with every console error and failed request it had."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _console(self, message: Any) -> None:
        if message.type == "error":  # a resource refused: which, with its status
            where = message.location.get("url")
            self.errors.append(f"{message.text} ({where})" if where else message.text)

    async def dataset(self, name: str) -> str | None:
        found: str | None = await self.page.evaluate(f"document.documentElement.dataset.{name}")
        return found


@IN_CHROMIUM
async def test_in_chromium_the_list_loads_and_a_running_run_updates_live(
    db: Path, server: ThreadedServer, browser: Any, tmp_path: Path
) -> None:
    gate = asyncio.Event()
    executor = _executor(db, latency=0.2, gate=gate)
    running = asyncio.create_task(executor.run("watch me", subtasks=PLAN, run_id="live"))
    store = RunStore(db)
    deadline = time.monotonic() + 20
    while (found := store.find("live")) is None or found.status != "running":
        assert time.monotonic() < deadline
        assert not running.done()
        await asyncio.sleep(0.05)
    context = await browser.new_context()
    watched = _Watched(await context.new_page())
    page = watched.page
    await page.goto(f"{server.url}/?token={TOKEN}")
    assert page.url == server.url + "/"  # the token left the address bar
    await page.click('a[href="/runs/live"]')
    await page.wait_for_selector("#state [data-status='running']")
    # The page's events are connected once it took its first update (the run as it
    # is now): every change from here on reaches it as another.
    await _until(functools.partial(_later, watched, 0), "yes")
    gate.set()  # the workers go on while the page is open
    await page.wait_for_selector("#state [data-status='ok']", timeout=30_000)
    assert (await running).status == "ok"
    assert int(await watched.dataset("updates") or 0) >= 2  # updated without a reload
    assert await page.evaluate("performance.getEntriesByType('navigation').length") == 1
    await _until(lambda: watched.dataset("ended"), "true")
    rows = await page.eval_on_selector_all(".row[data-worker]", "e => e.map(r => r.dataset.worker)")
    assert rows == ["a", "b"]
    await page.click("details[data-worker='a'] summary")
    assert "result 2 <script>" in await page.inner_text("details[data-worker='a']")
    assert await watched.dataset("injected") is None  # the run's text stayed text
    assert await watched.dataset("errors") is None
    assert watched.errors == [], "\n".join(watched.errors)
    await page.screenshot(path=str(tmp_path / "serve-run.png"), full_page=True)
    _keep_screenshot(tmp_path / "serve-run.png")
    await context.close()


MEMO = "Invoice 42\nfor the March trip\n  - train: 38 euros"


def _paying(db: Path, effects: Path, steps: asyncio.Semaphore) -> Executor:
    """A payer whose ``pay`` waits for a person, and a reader that reads three times,
    each read waiting for a step the test allows: the page's updates come when the
    test says."""

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        worker = (request.conversation or "").rsplit("/", 1)[-1]
        seen = [m for m in request.messages if isinstance(m, ToolMessage)]
        if worker == "payer":
            if not seen:
                asked = {"to": "ann", "amount": 120, "memo": MEMO}
                return AssistantMessage(tool_calls=(call("pay", asked, id="pay_1"),))
            return f"payer saw: {seen[-1].content}"
        if len(seen) < 3:
            return AssistantMessage(
                tool_calls=(call("read", {"n": len(seen)}, id=f"r{len(seen)}"),)
            )
        return "read it all"

    async def pay(to: str, amount: int, memo: str) -> str:
        """Pay someone."""
        with effects.open("a") as f:
            f.write(f"paid {amount} to {to}\n")
        return f"paid {amount} to {to}"

    async def read(n: int) -> str:
        """Read something."""
        await steps.acquire()
        return f"page {n}"

    def says(arguments: dict[str, Any]) -> str:
        return f"Pay {arguments['amount']} euros to {arguments['to']}."

    return Executor(
        [
            Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",))),
            Role(name="reader", tools=("read",)),
        ],
        FunctionModel(answer),
        tools=[tool(pay, side_effects=True, describe=says), tool(read)],
        aggregator="concat",
        store=db,
    )


async def _payer_asked(executor: Executor, db: Path) -> asyncio.Task[RunResult]:
    """Run ``pay`` of a :func:`_paying` executor (the reader and the payer) until the
    payer's call waits for a person; the run goes on in the task returned."""
    plan = [
        Subtask(id="payer", role="payer", instruction="pay"),
        Subtask(id="reader", role="reader", instruction="read"),
    ]
    running = asyncio.create_task(executor.run("pay and read", subtasks=plan, run_id="pay"))
    store = RunStore(db)
    deadline = time.monotonic() + 30
    while not await store.approvals_of("pay"):
        assert time.monotonic() < deadline, "the payer never asked"
        await asyncio.sleep(0.05)
    return running


async def _value(page: Any, selector: str) -> str:
    found: str = await page.input_value(selector)
    return found


@IN_CHROMIUM
async def test_in_chromium_approving_a_waiting_call_lets_the_run_finish(
    db: Path, browser: Any, tmp_path: Path
) -> None:
    """The payer's ``pay`` waits for a person while the reader goes on; the page shows
    the call as a person reads it (the tool's own summary, the multi-line memo as
    text), the person edits its arguments while updates of the page arrive, which
    leave what they typed alone, and approves; the run, continued, pays what the
    person chose."""
    effects = tmp_path / "effects.txt"
    steps = asyncio.Semaphore(0)
    executor = _paying(db, effects, steps)
    running = await _payer_asked(executor, db)
    here = asyncio.get_running_loop()
    resumed: list[asyncio.Task[Any]] = []

    def resume(run_id: str) -> None:  # called on the server's loop: continue on ours
        here.call_soon_threadsafe(lambda: resumed.append(here.create_task(executor.resume(run_id))))

    decided = StoreApprovals(RunStore(db), resume, tools=lambda run_id: executor.tool_for)
    app = create_app(db, token=TOKEN, approvals=decided, poll_s=0.1)
    with ThreadedServer(app, name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/pay?token={TOKEN}")
        form = "form.approval[data-call='pay_1']"
        assert "Pay 120 euros to ann." in await page.inner_text(f"{form} .summary")
        memo = await page.inner_text(f"{form} dd[data-argument=memo] pre")
        assert memo == MEMO  # its lines as lines, not one string of escapes
        box, reason = f"{form} textarea[name=arguments]", f"{form} input[name=reason]"
        await page.click(f"{form} details.edit summary")
        edited = '{"to": "ann", "amount": 100, "memo": "paid in full"}'
        typed = [edited[:20], edited[20:40], edited[40:]]
        await page.fill(box, "")
        for part in typed:  # a part typed, then an update of the page arrives
            before = int(await watched.dataset("updates") or 0)
            for field, text in ((box, part), (reason, part[:3])):
                await page.press(field, "End")  # typing goes on where it stopped
                await page.type(field, text)
            steps.release()  # the reader reads once more: the page changes
            await _until(functools.partial(_later, watched, before), "yes")
        assert await _value(page, box) == edited
        assert await _value(page, reason) == "".join(p[:3] for p in typed)
        waiting = await running
        assert waiting.status == "waiting"
        await page.wait_for_selector("#state [data-status='waiting']")
        assert await _value(page, box) == edited
        await page.click(f"{form} button[value=approve]")
        await page.wait_for_selector("#state [data-status='ok']", timeout=30_000)
        assert await page.query_selector(form) is None
        assert await watched.dataset("errors") is None
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()
    assert len(resumed) == 1
    result = await resumed[0]
    assert result.status == "ok"
    assert effects.read_text() == "paid 100 to ann\n"  # once, as the person typed it


async def _later(watched: _Watched, before: int) -> str:
    """``yes`` once the page took an update after ``before`` of them."""
    return "yes" if int(await watched.dataset("updates") or 0) > before else "no"


@IN_CHROMIUM
async def test_in_chromium_a_page_without_the_token_is_refused(
    finished: Path, server: ThreadedServer, browser: Any
) -> None:
    context = await browser.new_context()
    page = await context.new_page()
    answer = await page.goto(f"{server.url}/runs/r1")
    assert answer is not None
    assert answer.status == 401
    assert "needs its token" in await page.inner_text("body")
    await context.close()


def _keep_screenshot(made: Path) -> None:
    """With HONEYCOMB_SCREENSHOTS=1, the screenshot replaces the one docs/serve.md shows."""
    if os.environ.get("HONEYCOMB_SCREENSHOTS") == "1":
        kept = ROOT / "docs" / "images" / "serve-run.png"
        kept.parent.mkdir(exist_ok=True)
        shutil.copyfile(made, kept)


async def test_spans_reach_the_store_while_the_run_goes(db: Path) -> None:
    """A page watching a run draws it from the spans kept so far, so they cannot wait
    for the end of the run (or for a batch to fill)."""
    gate = asyncio.Event()
    running = asyncio.create_task(_executor(db, 0.0, gate).run("t", subtasks=PLAN, run_id="s"))
    store = RunStore(db)
    deadline = time.monotonic() + 20
    try:
        while not [s for s in store.spans("s") if s.kind == "model_call"]:
            assert time.monotonic() < deadline, "no span reached the store while the run went"
            assert not running.done()
            await asyncio.sleep(0.1)
    finally:
        gate.set()
    assert (await running).status == "ok"


async def test_the_server_continues_a_waiting_hive_run_once_its_calls_are_decided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the approved call writes to ./outbox, in this process
    db = tmp_path / "runs.db"
    demo = [sys.executable, "-m", "honeycomb", "demo", "--approve", "--plain", "--latency", "0"]
    waiting = await asyncio.to_thread(
        subprocess.run, [*demo, "--store", str(db), "--run-id", "d1"], capture_output=True,
        text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert waiting.returncode == 3, waiting.stderr  # off a terminal: the run waits
    store = RunStore(db)
    decided = store_approvals(store)  # as `honeycomb serve` decides: the hive's tools known
    resumer = decided.resume
    assert isinstance(resumer, Resumer)
    [call_] = await decided.pending("d1")
    assert call_.tool == "send_to_outbox"
    assert call_.summary is not None
    assert call_.summary.startswith("Write the message ")  # the tool's own words
    with pytest.raises(ApprovalError, match="argument 'subject'"):
        await decided.decide("d1", call_.call_id, approve=True, arguments={"subject": 5})
    assert await decided.pending("d1") == [call_]  # nothing recorded
    await decided.decide("d1", call_.call_id, approve=True)
    going = list(resumer.going.values())
    assert len(going) == 1
    await going[0]
    found = store.find("d1")
    assert found is not None
    assert found.status == "ok"
    assert "run d1: ok" in capsys.readouterr().err
    [sent] = (tmp_path / "outbox").iterdir()  # the approved call ran, here, once
    assert sent.name.endswith(".md")


def test_a_run_another_process_carries_on_is_not_told_as_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run a decision left waiting on nothing may go on by itself (a decision
    recorded as it ended): the server then finds it leased (RunBusy), which means it
    goes on elsewhere, not that it cannot."""
    from honeycomb.cli.main import main

    db = tmp_path / "runs.db"
    demo = ["demo", "--approve", "--plain", "--latency", "0", "--store", str(db)]
    assert main([*demo, "--run-id", "d2"]) == 3  # off a terminal, it waits
    capsys.readouterr()

    async def resume_while_held() -> None:
        holder = RunStore(db)
        lease = await holder.take_lease("d2")  # as the run's own process holds it
        try:
            await Resumer(db).resume("d2")
        finally:
            holder.let_go(lease)
            await holder.commit(holder.released(lease))

    asyncio.run(resume_while_held())
    err = capsys.readouterr().err
    assert "cannot continue it" not in err
    assert f"run d2: another process carries it on (pid {os.getpid()} on host " in err


def test_a_continued_run_that_fails_is_told_as_continued(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run the server continued, which then failed, went on: the line says so, not
    that it could not be continued."""
    from honeycomb.cli.main import main

    db = tmp_path / "runs.db"
    demo = ["demo", "--approve", "--plain", "--latency", "0", "--store", str(db)]
    assert main([*demo, "--run-id", "d3"]) == 3  # off a terminal, it waits
    capsys.readouterr()

    async def failing(self: Executor, run_id: str) -> None:
        raise RunFailed("its only subtask failed; nothing to aggregate")

    monkeypatch.setattr(Executor, "resume", failing)
    asyncio.run(Resumer(db).resume("d3"))
    err = capsys.readouterr().err
    assert "run d3: continued, and failed: its only subtask failed" in err
    assert "cannot continue it" not in err


async def test_a_run_made_in_python_is_left_waiting_with_a_hint(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    executor = approvals.executor(db, tmp_path / "effects.txt")
    waiting = await executor.run(approvals.TASK, subtasks=approvals.plan(1), run_id="py")
    assert waiting.status == "waiting"
    await Resumer(db).resume("py")
    assert "Executor.resume('py')" in capsys.readouterr().err
    found = RunStore(db).find("py")
    assert found is not None
    assert found.status == "waiting"
