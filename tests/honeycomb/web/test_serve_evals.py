"""``honeycomb serve``'s eval pages: the evals of the store, one eval's report with its
runs linked, and what changed from a baseline picked on the page; everything escaped,
and the token needed as for every page."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from honeycomb import Executor, Role, ToolMessage, tool
from honeycomb.evals import Case, CaseRun, EvalReport, evaluate, runner
from honeycomb.evals.kept import keep_report
from honeycomb.evals.undecided import DECIDED_BY, deny_undecided
from honeycomb.hive import load_hive
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, call
from honeycomb.web import create_app
from honeycomb.web.approvals import StoreApprovals
from honeycomb.web.pages import segment
from runtime import ModelRequest
from runtime.events import ApprovalRequested, Event
from tests.honeycomb.web.test_serve import _Watched
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM
from tests.support.evals import tiny_hive
from tests.support.model_requests import Answer
from tests.support.serving import served

TOKEN = "a-token-for-the-eval-pages"
EVIL = "<script>x</script>"


@pytest.fixture
async def store(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    executor = Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=RunStore(db))

    def greets(answer: str, run: CaseRun) -> bool:
        return "Lisbon" in answer

    def never(answer: str, run: CaseRun) -> str:
        return f"not {EVIL}"

    cases = [Case(id=EVIL, task="Say hello to Lisbon", checks=(greets,))]
    await evaluate(executor, cases, eval_id="ev-good")
    broken = [Case(id=EVIL, task="Say hello to Lisbon", checks=(never,))]
    await evaluate(executor, broken, eval_id="ev-bad")
    return db


@pytest.fixture
def client(store: Path) -> Iterator[httpx.Client]:
    with served(store, TOKEN) as client:
        yield client


def test_the_evals_page_lists_the_evals_newest_first(client: httpx.Client) -> None:
    page = client.get("/evals")
    assert page.status_code == 200
    assert page.text.index("ev-bad") < page.text.index("ev-good")
    assert '<a href="/evals/ev-good">ev-good</a>' in page.text
    assert '<a href="/evals">evals</a>' in client.get("/").text  # from every page


async def test_an_interrupted_eval_is_listed_interrupted_not_failed(tmp_path: Path) -> None:
    """The list said an eval stopped by Ctrl-C failed, where the CLI says interrupted."""
    db = tmp_path / "runs.db"
    runs = RunStore(db)
    stopped = "the eval was interrupted (0 of 1 run made)"
    cut = EvalReport(eval_id="ev-cut", name="trip", hive="h", interrupted=True, stopped=stopped)
    await keep_report(runs, cut)
    runs.close()
    with served(db, TOKEN) as client:
        page = client.get("/evals").text
        report = client.get("/evals/ev-cut").text
    assert '<td class="status interrupted">interrupted</td>' in page
    assert "failed" not in page
    assert '<span class="status interrupted">interrupted</span>: 0 of 0 cases passed' in report


def test_an_eval_page_shows_its_report_with_its_runs_linked_and_escaped(
    client: httpx.Client, store: Path
) -> None:
    page = client.get("/evals/ev-bad")
    assert page.status_code == 200
    assert EVIL not in page.text
    assert "&lt;script&gt;x&lt;/script&gt;" in page.text
    assert "0 of 1 case passed" in page.text
    (run,) = [r.run_id for r in RunStore(store).runs() if r.run_id in page.text][:1]
    assert f'<a href="/runs/{segment(run)}">{run}</a>' in page.text
    assert client.get(f"/runs/{segment(run)}").status_code == 200


async def test_a_case_whose_run_never_began_links_to_no_run(tmp_path: Path) -> None:
    """A case whose run raised before it began (an empty task) has no run id: its row
    linked to the list of runs with an empty link, which reads as nothing. It says so."""
    db = tmp_path / "runs.db"
    executor = Executor.from_hive(load_hive(tiny_hive(tmp_path)), store=RunStore(db))
    cases = [Case(id="blank", task="   ")]
    report = await evaluate(executor, cases, eval_id="ev-blank")
    assert (report.cases[0].attempts[0].status, report.cases[0].attempts[0].run_id) == (
        "error",
        "",
    )
    with served(db, TOKEN) as client:
        page = client.get("/evals/ev-blank")
    (row,) = re.findall(r"<tr><td>blank</td>.*?</tr>", page.text)
    assert "<a " not in row
    assert "none (it raised before it began)" in row


def test_an_eval_compared_with_a_baseline_shows_the_regression(client: httpx.Client) -> None:
    page = client.get("/evals/ev-bad", params={"baseline": "ev-good"})
    assert page.status_code == 200
    assert "<h2>against ev-good</h2>" in page.text
    assert "1 newly failing, 0 newly passing" in page.text
    # The totals' deltas, as the command gives them: p95 beside p50.
    assert re.search(r"· p50 [+-]\d+\.\d\ds · p95 [+-]\d+\.\d\ds</p>", page.text)
    assert '<option value="ev-good" selected>' in page.text


def test_an_unknown_eval_is_a_404_and_the_token_is_needed(client: httpx.Client) -> None:
    assert client.get("/evals/ev-none").status_code == 404
    assert client.get("/evals/ev-bad", params={"baseline": "ev-none"}).status_code == 404
    refused = client.get("/evals", headers={"authorization": "Bearer wrong"})
    assert refused.status_code == 401


def test_the_evals_page_says_when_the_store_holds_more_than_it_lists(
    client: httpx.Client,
) -> None:
    """The evals page listed the newest 200 and said nothing of the others (its
    ``?limit=`` unread), where the runs and sessions say the store holds more and link
    to them; now it lists as they do."""
    page = client.get("/evals", params={"limit": "1"})
    assert page.status_code == 200
    assert "the newest 1 eval in runs.db (it holds more)" in page.text
    assert '<a href="/evals?limit=2">show the newest 2</a>' in page.text
    assert "ev-bad" in page.text
    assert "ev-good" not in page.text
    every = client.get("/evals", params={"limit": "2"}).text
    assert "ev-good" in every
    assert "it holds more" not in every
    assert client.get("/evals", params={"limit": "0"}).status_code == 422


def _paying_eval(db: Path, paid: list[str], asked: asyncio.Event, go_on: asyncio.Event) -> Executor:
    """A payer whose payment asks a person (``asked`` is set as it waits in the store),
    beside a holder that keeps the run going until ``go_on``."""

    @tool(side_effects=True, approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    @tool
    async def hold() -> str:
        """Hold on."""
        await go_on.wait()
        return "held"

    def answer(request: ModelRequest) -> Answer:
        told = [m.content for m in request.messages if isinstance(m, ToolMessage)]
        if told:
            return f"told: {told[-1]}"
        holder = str(request.messages[0].content).startswith("You are the holder worker")
        return call("hold", {}) if holder else call("pay", {"to": "bob"})

    def waits(event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            asked.set()

    return Executor(
        [Role(name="payer", tools=("pay",)), Role(name="holder", tools=("hold",))],
        FunctionModel(answer),
        tools=[pay, hold],
        planner=lambda task: [("payer", "Pay bob."), ("holder", "Hold on.")],
        aggregator="concat",
        store=db,
        on_event=[waits],
    )


@IN_CHROMIUM
async def test_in_chromium_an_evals_call_is_shown_waiting_but_nobody_decides_it(
    tmp_path: Path, browser: Any
) -> None:
    """While an eval went, the page offered its runs' calls to decide: approved there,
    the run took the decision up and paid, and the case's verdict was a click's. The
    page shows the call with no form, a decision sent anyway is refused, and the eval
    denies the call as its run ends, waiting."""
    db = tmp_path / "runs.db"
    paid: list[str] = []
    asked, go_on = asyncio.Event(), asyncio.Event()
    executor = _paying_eval(db, paid, asked, go_on)
    store = RunStore(db)
    app = create_app(db, token=TOKEN, approvals=StoreApprovals(store, resume=lambda run: None))
    async with executor:
        going = asyncio.create_task(evaluate(executor, [Case(id="pay", task="Pay bob.")]))
        await asyncio.wait_for(asked.wait(), 30)
        await store.flush()
        (run,) = store.runs()
        (waiting,) = await store.approvals_of(run.run_id)
        call_id = waiting.pending.call_id
        with ThreadedServer(app, name="serve") as server:
            context = await browser.new_context()
            watched = _Watched(await context.new_page())
            page = watched.page
            await page.goto(f"{server.url}/runs/{segment(run.run_id)}?token={TOKEN}")
            shown = await page.inner_text("#approvals")
            assert "pay by s1 (payer)" in shown  # it is shown waiting
            assert "nobody decides it: it is a call of an eval's run" in " ".join(shown.split())
            assert await page.locator("#approvals form").count() == 0  # nothing to click
            assert watched.errors == [], "\n".join(watched.errors)
            await context.close()
            # A decision sent all the same (a script, a page opened before) is refused.
            address = f"{server.url}/runs/{segment(run.run_id)}/calls/{segment(call_id)}/decision"
            async with httpx.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client:
                sent = await client.post(address, data={"decision": "approve"})
        assert sent.status_code == 409
        assert "nobody decides on an eval's calls" in html.unescape(sent.text)
        go_on.set()
        report = await going
    (attempt,) = report.cases[0].attempts
    assert (attempt.run_id, attempt.status) == (run.run_id, "waiting")
    (entry,) = await store.approvals_of(run.run_id)
    assert entry.decided_by == DECIDED_BY  # the eval's denial, not a person's approval
    assert paid == []
    store.close()


async def test_an_evals_run_left_waiting_says_how_it_goes_on_once_its_calls_are_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page of an eval's run that ended waiting, its call not yet denied (its eval
    killed as it ended), said 'No call is left to decide' beside the call that waits. It
    shows the call alone, and how the run goes on once the call is denied."""
    db = tmp_path / "runs.db"
    asked, go_on = asyncio.Event(), asyncio.Event()
    go_on.set()
    executor = _paying_eval(db, [], asked, go_on)

    async def left(store: RunStore, run_id: str) -> int:
        return 0  # as if the eval had been killed before it denied the call

    monkeypatch.setattr(runner, "deny_undecided", left)
    async with executor:
        report = await evaluate(executor, [Case(id="pay", task="Pay bob.")])
    run_id = report.cases[0].attempts[0].run_id
    address = f"/runs/{segment(run_id)}"
    with served(db, TOKEN) as client:
        waits = html.unescape(client.get(address).text)
        store = RunStore(db)
        (entry,) = await store.approvals_of(run_id)
        assert await deny_undecided(store, run_id) == 1
        store.close()
        denied = html.unescape(client.get(address).text)
    # No process carries the run on: a person may deny the call, or the eval gone on
    # with denies it (its page said nobody decides it, and no denial was taken).
    eval_id = report.eval_id
    said = " ".join(waits.split())
    assert f"nobody approves it: it is a call of a run of eval {eval_id}" in said
    assert f"honeycomb approve {run_id} {entry.pending.call_id} --deny" in said
    assert f"honeycomb eval HIVE CASES --eval-id {eval_id}" in said
    assert "No call is left to decide" not in waits
    assert "nobody approves it" not in denied
    assert "No call is left to decide: the run goes on once it is resumed" in denied


async def test_a_call_a_killed_eval_left_waiting_denied_on_the_page_does_not_resume_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Denied through the server once no process carried the run on, the call of an
    eval's run set the server continuing the run: after its eval, as its own."""
    db = tmp_path / "runs.db"
    asked, go_on = asyncio.Event(), asyncio.Event()
    go_on.set()
    executor = _paying_eval(db, [], asked, go_on)

    async def left(store: RunStore, run_id: str) -> int:
        return 0  # as if the eval had been killed before it denied the call

    monkeypatch.setattr(runner, "deny_undecided", left)
    async with executor:
        report = await evaluate(executor, [Case(id="pay", task="Pay bob.")])
    run_id = report.cases[0].attempts[0].run_id
    store = RunStore(db)
    resumed: list[str] = []
    approvals = StoreApprovals(store, resume=resumed.append)
    (waiting,) = await approvals.pending(run_id)
    await approvals.decide(run_id, waiting.call_id, approve=False, by="ann")
    (entry,) = await store.approvals_of(run_id)
    assert entry.decided_by == "ann"
    assert resumed == []  # the eval's to go on with, not the server's
    store.close()
