"""``honeycomb serve`` at its edges: form values it cannot read (JSON past the parser's
limits, a file in place of text), ids of any text (a ``/``, ``..``), a call whose time
to decide ran out, a run decided elsewhere, two decisions continuing one run, a call
its run ended without deciding, and Ctrl-C while a page listens to a waiting run."""

from __future__ import annotations

import asyncio
import html
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from msgspec.structs import replace

from honeycomb import Approvals, Decision, Executor, Policy, Role, Subtask, tool
from honeycomb.approvals import ApprovalEntry
from honeycomb.cli.main import main
from honeycomb.cli.serve import Resumer
from honeycomb.errors import ApprovalError, RunFailed
from honeycomb.run.decide import pending_of
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.web import cookie_name, create_app, csrf_value, session_key
from honeycomb.web.approvals import StoreApprovals
from runtime import AssistantMessage, ModelRequest, StoreError, ToolCall
from runtime.testing import call
from runtime.tools.approvals import PendingApproval
from tests.support import approvals
from tests.support.asgi_server import ThreadedServer
from tests.support.stores import change

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}


class _Recorded:
    """Approvals that wait on one call, ``c1`` of worker ``a``, and record decisions
    (``fail``: each decision raises, as a bug of the server's would)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.made: list[dict[str, Any] | None] = []

    async def pending(self, run_id: str) -> list[PendingApproval]:
        return [
            PendingApproval(
                call_id="c1", worker="a", role="worker", turn=1, tool="send",
                arguments={"to": "ann"}, why="send needs approval", asked_at=0.0,
            )
        ]  # fmt: skip

    async def decide(
        self, run_id: str, call_id: str, *, approve: bool, arguments: Any = None, **_: Any
    ) -> None:
        if self.fail:
            raise RuntimeError("a bug")
        self.made.append(arguments)


def _secure(answer: httpx.Response) -> None:
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ('{"to": ' + "[" * 50_000 + "]" * 50_000 + "}", "arguments: JSON nested too deeply"),
        ('{"to": ' + "9" * 5000 + "}", "arguments: a number in it has too many digits"),
    ],
    ids=["deep", "long-number"],
)
def test_arguments_past_what_json_reads_are_refused_naming_the_field(
    db: Path, arguments: str, said: str
) -> None:
    decisions = _Recorded()
    app = create_app(db, token=TOKEN, approvals=decisions)
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        form = {"decision": "approve", "arguments": arguments}
        answer = client.post("/runs/r1/calls/c1/decision", data=form, headers=BEARER)
    assert answer.status_code == 422
    assert said in answer.text
    _secure(answer)
    assert decisions.made == []


def test_a_scripts_token_past_ascii_opens_the_pages(db: Path) -> None:
    """A token of your own past ASCII, sent as a bearer (in UTF-8, as clients send
    it), opens the pages: the server read the header's bytes as Latin-1 and refused
    every request of a script with 401. Another token is still refused."""
    token = "schlüssel-für-die-seite-42"
    app = create_app(db, token=token)
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        sent = client.get("/", headers={"authorization": b"Bearer " + token.encode()})
        other = "schlüssel-für-die-seite-43".encode()
        refused = client.get("/", headers={"authorization": b"Bearer " + other})
    assert sent.status_code == 200, sent.text
    assert refused.status_code == 401
    _secure(sent)


def test_a_failure_of_the_server_is_a_page_with_the_usual_headers(db: Path) -> None:
    app = create_app(db, token=TOKEN, approvals=_Recorded(fail=True))
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        answer = client.post(
            "/runs/r1/calls/c1/decision", data={"decision": "deny"}, headers=BEARER
        )
    assert answer.status_code == 500
    assert "the server failed" in answer.text
    _secure(answer)


@pytest.mark.parametrize(
    ("method", "path", "status", "said"),
    [
        ("GET", "/runs", 404, "no page at GET /runs: the runs, evals and sessions are"),
        ("GET", "/runs/r1/calls/c1/decision", 405, "Method Not Allowed: GET /runs/r1/"),
    ],
    ids=["no-page", "method"],
)
def test_an_address_with_no_page_is_a_page_of_the_apps_saying_so(
    db: Path, method: str, path: str, status: int, said: str
) -> None:
    """An address the app has no page at, or a method it does not take there, was
    Starlette's bare text (``Not Found``) with no way back; now a page of the app's,
    with its links, saying which address."""
    app = create_app(db, token=TOKEN, approvals=_Recorded())
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        answer = client.request(method, path, headers=BEARER)
    assert answer.status_code == status
    assert answer.headers["content-type"].startswith("text/html")
    assert said in html.unescape(answer.text)
    assert '<a href="/">runs</a>' in answer.text
    _secure(answer)
    if status == 405:
        assert answer.headers["allow"] == "POST"


class _Unwritable(_Recorded):
    """Approvals over a store that cannot be written (another process holds it locked
    past the wait: SQLite's ``database is locked``)."""

    async def decide(self, run_id: str, call_id: str, **_: Any) -> None:
        raise StoreError("cannot write the run store: database is locked", path="runs.db")


def test_a_store_that_cannot_be_written_is_said_as_the_stores_failure(db: Path) -> None:
    """A decision the store could not record was answered 409, as a call decided already
    is: a script that takes 409 for "decided elsewhere" gave up on a call still waiting."""
    app = create_app(db, token=TOKEN, approvals=_Unwritable())
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        answer = client.post(
            "/runs/r1/calls/c1/decision", data={"decision": "approve"}, headers=BEARER
        )
    assert answer.status_code == 500
    assert "runs.db: cannot write the run store: database is locked" in answer.text
    assert "cannot decide" not in answer.text
    _secure(answer)


@pytest.mark.parametrize("field", ["arguments", "reason", "decision", "worker"])
def test_a_file_in_place_of_a_forms_text_is_refused_naming_the_field(db: Path, field: str) -> None:
    """Not dropped: edited arguments sent as a file would approve the model's."""
    decisions = _Recorded()
    app = create_app(db, token=TOKEN, approvals=decisions)
    sent = {"decision": "approve", "worker": "a", "reason": "", "arguments": '{"to": "bob"}'}
    text = {name: value for name, value in sent.items() if name != field}
    files = {field: ("part.json", sent[field].encode(), "application/json")}
    with ThreadedServer(app, name="serve") as server, httpx.Client(base_url=server.url) as client:
        url = "/runs/r1/calls/c1/decision"
        answer = client.post(url, data=text, files=files, headers=BEARER)
        assert answer.status_code == 422
        assert f"{field}: give text, not a file" in answer.text
        twice = client.post(
            url, data={**sent, "arguments": ["{}", '{"to": "bob"}']}, headers=BEARER
        )
        assert twice.status_code == 422
        assert "arguments: give one value, not 2" in twice.text
    assert decisions.made == []


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def _page(app: Any, path: str) -> str:
    """The page at ``path`` of ``app``, served on 127.0.0.1 for the one request."""
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url) as client:
            return (await client.get(path, headers=BEARER)).text


def _payer(db: Path, call_id: str = "call_1", **policy: Any) -> Executor:
    asks = AssistantMessage(
        tool_calls=(ToolCall(id=call_id, name="pay", arguments=json.dumps({"to": "ann"})),)
    )
    return Executor(
        [Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))],
        ScriptedModel([asks, "done"]),
        tools=[pay],
        store=db,
        aggregator="concat",
        policy=Policy(**policy),
    )


async def test_two_tabs_deciding_a_call_at_once_one_wins_the_other_is_told(db: Path) -> None:
    """Two browser tabs send their decisions on one call at the same moment (each
    with the cookie and the page's CSRF value): exactly one is recorded, and the other
    is answered 409 saying what was decided, with a way back to the run's page (it
    was a dead end)."""
    waiting = await _payer(db).run("Pay ann", subtasks=[("payer", "Pay.")], run_id="r1")
    assert waiting.status == "waiting"
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    with ThreadedServer(app, name="serve") as server:
        cookie = {cookie_name(TOKEN, server.port): session_key(TOKEN)}
        tabs = [httpx.AsyncClient(base_url=server.url, cookies=cookie) for _ in range(2)]
        forms = [
            {"decision": "approve", "csrf": csrf_value(TOKEN), "worker": "s1", "turn": "1"},
            {"decision": "deny", "reason": "not ann", "csrf": csrf_value(TOKEN), "worker": "s1"},
        ]
        answers = await asyncio.gather(
            *(
                tab.post("/runs/r1/calls/call_1/decision", data=form)
                for tab, form in zip(tabs, forms, strict=True)
            )
        )
        for tab in tabs:
            await tab.aclose()
    assert sorted(a.status_code for a in answers) == [303, 409]
    [told] = [a for a in answers if a.status_code == 409]
    said = html.unescape(told.text)
    assert "it was decided already (" in said
    assert '<a class="back" href="/runs/r1">back to the run</a>' in told.text
    [entry] = await RunStore(db).approvals_of("r1")
    assert entry.decision is not None


RUN_IDS = ["team/ticket-42", "..", ".", "!..", "50%", "a/../b", "ünï ?#"]


def test_segments_carry_any_id_and_are_never_a_dot_segment() -> None:
    from honeycomb.web.pages import named, segment

    for run_id in [*RUN_IDS, "!.", "~", "%2E%2E"]:
        part = segment(run_id)
        assert "/" not in part
        assert part.lower() not in {".", "..", "%2e", "%2e%2e", ".%2e", "%2e."}
        assert named(part) == run_id


async def test_a_run_of_any_id_has_its_page_and_its_calls_are_decided(db: Path) -> None:
    """Its link in the list opens it (a ``/`` in it, or ``..``, which a browser would
    drop from the address), with its live part and its events; its call (an id with
    ``/``) is decided from the page's form, which leads back to the page."""
    for run_id in RUN_IDS:
        waiting = await _payer(db, "call/1").run("pay", subtasks=[("payer", "pay")], run_id=run_id)
        assert waiting.status == "waiting"
    decided = StoreApprovals(RunStore(db))
    app = create_app(db, token=TOKEN, approvals=decided)
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            listed = (await client.get("/")).text
            for run_id in RUN_IDS:
                shown = re.escape(run_id).replace("&", "&amp;")
                link = re.search(rf'<a href="(/runs/[^"]+)">{shown}</a>', listed)
                assert link is not None, run_id
                page = await client.get(link[1])
                assert page.status_code == 200, run_id
                assert f"<h1>run {run_id}</h1>".replace("&", "&amp;") in page.text
                assert (await client.get(link[1] + "/live")).status_code == 200
                async with client.stream("GET", link[1] + "/events", timeout=10) as events:
                    assert await anext(events.aiter_lines()) == "event: change"
                action = re.search(
                    r'<form class="approval" method="post" action="([^"]+)"', page.text
                )
                assert action is not None
                url = action[1].replace("&amp;", "&")
                answer = await client.post(url, data={"decision": "deny"})
                assert answer.status_code == 303, answer.text
                assert answer.headers["location"] == link[1]
                assert await decided.pending(run_id) == []


async def test_a_call_whose_time_ran_out_is_shown_timed_out_without_a_form(db: Path) -> None:
    # Asked with time to end waiting (asked with 0.2 s, a busy machine's run went on
    # past it, and denied the call), then given in the store the deadline 0.2 s sets.
    waiting = await _payer(db, approval_timeout_s=3600).run(
        "pay", subtasks=[("payer", "pay")], run_id="late"
    )
    assert waiting.status == "waiting"
    change(db, ("UPDATE approvals SET deadline = asked_at + 0.2 WHERE run_id = 'late'", ()))
    decided = StoreApprovals(RunStore(db))
    [call] = await decided.pending("late")
    assert call.deadline is not None
    await asyncio.sleep(max(call.deadline - time.time(), 0.0) + 0.05)  # until it runs out
    assert time.time() >= call.deadline
    app = create_app(db, token=TOKEN, approvals=decided)
    page = await _page(app, "/runs/late")
    assert "<form" not in page
    assert 'class="approval timed-out"' in page
    assert "Its time to decide ran out (approval_timeout_s): the run denies it as it goes" in page
    assert "No call is left to decide" in page  # and how the run goes on


async def test_a_server_that_decides_no_calls_shows_the_waiting_ones_without_a_form(
    db: Path,
) -> None:
    """A service's pages made without approvals (read only) said of a run whose call
    waited 'No call is left to decide: the run goes on once it is resumed', which was
    false. The waiting call is now shown as it waits, with no form, saying where it is
    decided; a decision sent is still refused."""
    waiting = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="read")
    assert waiting.status == "waiting"
    page = await _page(create_app(db, token=TOKEN), "/runs/read")
    assert "No call is left to decide" not in page
    assert '<div class="approval elsewhere"' in page
    assert "This server decides no calls: decide it with <code>honeycomb approve</code>" in page
    assert '<dd data-argument="to"><pre class="text">ann</pre></dd>' in page
    assert "<form" not in page
    with ThreadedServer(create_app(db, token=TOKEN), name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            form = {"decision": "approve"}
            refused = await client.post("/runs/read/calls/call_1/decision", data=form)
    assert refused.status_code == 404
    store = RunStore(db)
    try:
        assert [p.call_id for p in await pending_of(store, "read")] == ["call_1"]
    finally:
        store.close()


async def test_a_decision_on_a_run_the_store_has_not_leads_back_nowhere(db: Path) -> None:
    """A decision sent for a run the store does not have is refused with 404, and its
    page led 'back to the run', another 404; it leads back only to a run there is."""
    await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="here")
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            form = {"decision": "deny"}
            missing = await client.post("/runs/gone/calls/call_1/decision", data=form)
            other = await client.post("/runs/here/calls/none/decision", data=form)
    assert missing.status_code == 404
    assert "has no such run" in missing.text
    assert "back to the run" not in missing.text
    assert other.status_code == 409
    assert '<a class="back" href="/runs/here">back to the run</a>' in other.text


async def test_a_run_decided_elsewhere_is_left_to_its_decider_and_its_page_says_how(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Decided with ``Executor.decide`` (or ``honeycomb approve``), the run is theirs to
    resume: the server's page says so, and the server continues nothing."""
    executor = approvals.executor(db, tmp_path / "effects.txt")
    waiting = await executor.run(approvals.TASK, subtasks=approvals.plan(1), run_id="py")
    assert waiting.status == "waiting"
    await executor.decide("py", "pay_1", approve=True)
    resumer = Resumer(db)
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db), resumer))
    page = await _page(app, "/runs/py")
    assert "<form" not in page
    assert "No call is left to decide: the run goes on once it is resumed" in page
    assert "<code>Executor.resume(&#x27;py&#x27;)</code> in the code that made it" in page
    assert resumer.going == {}
    assert capsys.readouterr().err == ""


async def test_a_form_of_a_decided_call_does_not_decide_a_later_one_under_its_id(
    db: Path,
) -> None:
    """The store tells calls apart by worker, turn and id: a call of a later turn
    under the id of a decided one (as the store is written here) took the decision a
    page not yet updated sent from the decided call's form, arguments nobody had seen."""
    first = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="ids")
    (asked,) = first.pending
    store = RunStore(db)
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(store))
    assert f'name="turn" value="{asked.turn}"' in await _page(app, "/runs/ids")
    await store.keep_approval("ids", ApprovalEntry(pending=asked, decision=Decision.approved()))
    later = replace(asked, turn=asked.turn + 2, arguments={"to": "eve"}, asked_at=time.time())
    await store.keep_approval("ids", ApprovalEntry(pending=later))
    form = {"decision": "approve", "worker": asked.worker}
    url = f"/runs/ids/calls/{asked.call_id}/decision"
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            stale = await client.post(url, data={**form, "turn": str(asked.turn)})
            assert stale.status_code == 409
            assert "reload the page to see it" in stale.text
            assert await pending_of(store, "ids") == [later]  # still waits
            seen = await client.post(url, data={**form, "turn": str(later.turn)})
            assert seen.status_code == 303
    assert await pending_of(store, "ids") == []
    store.close()


async def test_a_run_made_in_python_decided_on_the_page_is_not_said_to_be_resumed_by_it(
    db: Path,
) -> None:
    """Its last call decided on the page, the page said "This server resumes a run whose
    last call is decided on this page" over a run it never resumes (made in Python: the
    server says so on its stderr, and leaves it waiting)."""
    waiting = await _payer(db).run("pay", subtasks=[("payer", "pay")], run_id="py")
    assert waiting.status == "waiting"
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db), Resumer(db)))
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            decided = await client.post(
                "/runs/py/calls/call_1/decision", data={"decision": "approve"}
            )
            assert decided.status_code == 303
            page = (await client.get(decided.headers["location"])).text
    assert "No call is left to decide: the run goes on once it is resumed" in page
    assert "<code>Executor.resume(&#x27;py&#x27;)</code> in the code that made it" in page
    assert "This server resumes" not in page
    found = RunStore(db).find("py")
    assert found is not None
    assert found.status == "waiting"


async def test_two_decisions_ending_a_wait_continue_the_run_once_and_say_so(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each of two calls decided at once asks the server to continue the run: the
    second finds it continued by this process, not by "another process"."""
    executor = approvals.executor(db, tmp_path / "effects.txt")
    await executor.run(approvals.TASK, subtasks=approvals.plan(1), run_id="py")
    resumer = Resumer(db)
    resumer("py")
    resumer("py")
    assert len(resumer.going) == 1
    await resumer.going["py"]
    err = capsys.readouterr().err
    assert "run py: decided; this process continues it already" in err
    assert "another process" not in err


async def test_a_run_left_waiting_on_calls_decided_as_it_ended_is_continued_again(
    db: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run the server continued waited again, on a second call, and that call was
    decided as the continuing ended (the run recorded waiting, the server's task not
    yet done): the decision asked the server to continue it, which said it did already
    and did nothing, and the run stayed ``waiting`` with nothing left to decide."""
    paid: list[str] = []

    @tool(side_effects=True)
    async def pay_twice(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def answer(request: ModelRequest) -> AssistantMessage | str:
        seen = sum(1 for m in request.messages if m.role == "tool")
        if seen == 2:
            return "paid both"
        to = ("ann", "bob")[seen]
        arguments = json.dumps({"to": to})
        return AssistantMessage(
            tool_calls=(ToolCall(id=f"pay_{to}", name="pay_twice", arguments=arguments),)
        )

    def hive_run(source: str, **_: Any) -> Executor:  # as the run's hive file makes it
        return Executor(
            [Role(name="payer", tools=("pay_twice",), approvals=Approvals(tools=("pay_twice",)))],
            FunctionModel(answer),
            tools=[pay_twice],
            store=db,
            aggregator="concat",
            source=source,
        )

    waiting = await hive_run("hive.yaml").run("pay", subtasks=[("payer", "pay")], run_id="h")
    assert [p.call_id for p in waiting.pending] == ["pay_ann"]
    monkeypatch.setattr(Executor, "from_yaml", hive_run)
    resumer = Resumer(db)
    decided = StoreApprovals(RunStore(db), resumer)
    resume = Executor.resume

    async def ending_as_bob_is_decided(self: Executor, run_id: str) -> Any:
        result = await resume(self, run_id)
        if [p.call_id for p in result.pending] == ["pay_bob"]:  # decided as it ends
            await decided.decide(run_id, "pay_bob", approve=True)
        return result

    monkeypatch.setattr(Executor, "resume", ending_as_bob_is_decided)
    await decided.decide("h", "pay_ann", approve=True)
    while resumer.going:  # each continuing, as the server's loop runs it
        await next(iter(resumer.going.values()))
    found = RunStore(db).find("h")
    assert found is not None
    assert found.status == "ok"
    assert paid == ["ann", "bob"]
    assert "run h: ok" in capsys.readouterr().err


@pytest.fixture
async def waiting(db: Path, tmp_path: Path) -> Path:
    """A store with a run made in Python, ``w``, waiting on its payer's call."""
    executor = approvals.executor(db, tmp_path / "effects.txt")
    result = await executor.run(approvals.TASK, subtasks=approvals.plan(1), run_id="w")
    assert result.status == "waiting"
    return db


def test_a_services_server_stops_while_a_page_listens_to_a_waiting_run(waiting: Path) -> None:
    """A service serving the app under uvicorn as it comes (nothing tells the app the
    server stops, and the server waits for the responses under way) stops while a page
    listens to a waiting run, whose events never end of themselves: it waited for them
    for ever. Each response of events now lasts ``stream_s``."""
    app = create_app(waiting, token=TOKEN, poll_s=0.05, stream_s=0.5)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    listening.listen(8)  # a request waits here until the server serves it
    address = f"http://127.0.0.1:{listening.getsockname()[1]}/runs/w/events"
    serving = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[listening])))
    serving.start()
    with httpx.stream("GET", address, headers=BEARER, timeout=30) as events:
        lines = events.iter_lines()  # held: the page listens on
        assert next(lines) == "event: change"
        server.should_exit = True
        serving.join(timeout=10)
    stopped = not serving.is_alive()
    if not stopped:  # left to its timeout: the test ends either way
        server.force_exit = True
        serving.join(timeout=10)
    assert stopped, "the server still waited for the page's events"


def test_ctrl_c_ends_the_events_a_page_listens_to_and_stops_cleanly(waiting: Path) -> None:
    """A page listening to a waiting run (whose events never end on their own) does not
    hold the server up: it stops at once, with nothing on stderr."""
    db = waiting
    command = [sys.executable, "-m", "honeycomb", "serve", "--store", str(db), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    listening = threading.Event()
    try:
        assert process.stdout is not None
        address = re.search(r"(http://\S+/)\?token=(\S+)", process.stdout.readline())
        assert address is not None
        headers = {"authorization": f"Bearer {address[2]}"}

        def listen() -> None:
            with httpx.stream("GET", address[1] + "runs/w/events", headers=headers) as events:
                for line in events.iter_lines():
                    lines.append(line)
                    listening.set()

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert listening.wait(timeout=30)
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    listener.join(timeout=10)
    assert not listener.is_alive()  # the stream ended, without an error
    assert lines[0] == "event: change"
    assert lines[1].startswith('data: {"status": "waiting", "seen": ')
    assert process.returncode == 0
    assert err == ""


async def test_a_call_its_run_ended_without_deciding_is_not_decided_anywhere(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another worker failed (fail fast) while the payer's call waited: the run ended
    ``failed``, the call undecided, and a resumed run fails the same way, so no
    decision would ever be acted on. The page offers no decision on it; one sent to the
    page (409), made with ``honeycomb approve`` (exit 2) or ``Executor.decide`` is
    refused, saying why, and nothing is recorded."""

    async def answer(request: ModelRequest) -> AssistantMessage:
        if (request.conversation or "").endswith("/payer"):
            return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}, id="p1"),))
        deadline = time.monotonic() + 30
        while not await RunStore(db).approvals_of("r1"):  # its call kept waiting first
            assert time.monotonic() < deadline, "the payer never asked"
            await asyncio.sleep(0.02)
        raise RuntimeError("the other worker broke")

    paid: list[str] = []

    async def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    executor = Executor(
        [Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",))), Role(name="x")],
        FunctionModel(answer), tools=[tool(pay, side_effects=True)], store=db,
        aggregator="concat", policy=Policy(failure="fail_fast"),
    )  # fmt: skip
    plan = [Subtask(id=name, role=name, instruction="go") for name in ("payer", "x")]
    with pytest.raises(RunFailed):
        await executor.run("pay", subtasks=plan, run_id="r1")
    store = RunStore(db)
    summary = await store.summary("r1")
    assert summary is not None
    assert summary.status == "failed"
    said = "cannot decide on call 'p1' of run 'r1': the run ended (failed) with this call "
    said += "undecided: a decision now would never be acted on"
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(RunStore(db)))
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            page = (await client.get("/runs/r1")).text
            answer_ = await client.post("/runs/r1/calls/p1/decision", data={"decision": "approve"})
    assert "<form" not in page  # it waits no more: nothing to decide
    assert await StoreApprovals(store).pending("r1") == []
    assert answer_.status_code == 409
    assert said in html.unescape(answer_.text)
    assert await asyncio.to_thread(main, ["approve", "r1", "p1", "--store", str(db)]) == 2
    assert said in capsys.readouterr().err
    with pytest.raises(ApprovalError, match=re.escape(said)):
        await executor.decide("r1", "p1", approve=True)
    assert [e.decision for e in await store.approvals_of("r1")] == [None]  # nothing recorded
    with pytest.raises(RunFailed):
        await executor.resume("r1")  # as it said: it ends the same way
    assert paid == []
