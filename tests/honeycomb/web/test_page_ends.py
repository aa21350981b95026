"""How a run ended, on its page: a run that failed, or that its budget stopped, says
why, as the run's error said it when it ended; and its page follows it as it is
continued."""

from __future__ import annotations

import asyncio
import functools
import html
from pathlib import Path
from typing import Any

import httpx
import pytest

from honeycomb import Budgets, Executor, Policy, Role, Subtask, ToolMessage, tool
from honeycomb.errors import BudgetExceeded, RunFailed
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.web import create_app
from runtime import AssistantMessage, ModelRequest
from runtime.testing import call
from tests.honeycomb.web.test_serve import _later, _until, _Watched
from tests.support.asgi_server import ThreadedServer
from tests.support.chromium import IN_CHROMIUM

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}


@tool
async def look(topic: str) -> str:
    """Look a topic up."""
    return f"found {topic}"


def _failing(request: ModelRequest) -> str:
    raise ValueError("the model is down")


@pytest.mark.parametrize(
    ("ending", "status", "said"),
    [
        ("failed", "failed", "RunFailed: its only subtask failed; nothing to aggregate"),
        ("over_budget", "over_budget", "BudgetExceeded: budget exceeded: model_calls used 1"),
    ],
)
async def test_the_page_of_a_run_that_did_not_succeed_says_why(
    db: Path, ending: str, status: str, said: str
) -> None:
    """The page said the status alone (`over_budget`, with no word of which budget), for
    the store's reading of a run left out the error it kept."""
    role = Role(name="looker", tools=("look",))
    if ending == "failed":
        model: FunctionModel | ScriptedModel = FunctionModel(_failing)
        policy = Policy()
    else:
        model = ScriptedModel([call("look", {"topic": "bees"}), "Bees."])
        policy = Policy(budgets=Budgets(model_calls=1))
    executor = Executor([role], model, tools=[look], store=db, policy=policy)
    with pytest.raises((RunFailed, BudgetExceeded)):
        await executor.run("Look up bees", subtasks=[("looker", "Look.")], run_id="r1")
    app = create_app(db, token=TOKEN)
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            page = await client.get("/runs/r1")
            live = await client.get("/runs/r1/live")
    assert page.status_code == live.status_code == 200
    assert f'data-status="{status}"' in page.text
    for shown in (page.text, live.text):
        state = html.unescape(shown.split('<div id="state"', 1)[1].split("</div>", 1)[0])
        assert said in state, state


@IN_CHROMIUM
async def test_in_chromium_the_page_of_a_failed_run_follows_it_as_it_is_continued(
    db: Path, browser: Any
) -> None:
    """A run that failed is continued like any other (``honeycomb resume``): its page,
    open as it is continued, shows it going on and ending ok. The page stopped
    following a failed run as it did an answered one, and said `failed` until it was
    reloaded."""
    down = True

    def answer(request: ModelRequest) -> str:
        if down and "aggregator" in (request.conversation or ""):
            raise ValueError("the model is down")
        return "Bees dance."

    executor = Executor(
        [Role(name="looker"), Role(name="aggregator")], FunctionModel(answer), store=db
    )
    with pytest.raises(RunFailed):
        await executor.run("Look up bees", subtasks=[("looker", "Look.")], run_id="r1")
    with ThreadedServer(create_app(db, token=TOKEN, poll_s=0.1), name="serve") as server:
        context = await browser.new_context()
        watched = _Watched(await context.new_page())
        page = watched.page
        await page.goto(f"{server.url}/runs/r1?token={TOKEN}")
        await page.wait_for_selector("#state [data-status='failed']")
        await _until(functools.partial(_later, watched, 0), "yes")  # it follows the run
        down = False
        assert (await executor.resume("r1")).status == "ok"
        await page.wait_for_selector("#state [data-status='ok']", timeout=30_000)
        assert "Bees dance." in await page.inner_text("#live pre.answer")
        await _until(lambda: watched.dataset("ended"), "true")
        assert await page.evaluate("performance.getEntriesByType('navigation').length") == 1
        assert watched.errors == [], "\n".join(watched.errors)
        await context.close()


async def test_the_page_of_a_cancelled_run_says_it_was_cancelled_and_keeps_its_work(
    db: Path,
) -> None:
    """A run whose task was cancelled (in a process that goes on) is ``interrupted``:
    its page says it was cancelled, not that its process is gone (as it said), and
    keeps what its finished worker wrote."""
    started = asyncio.Event()

    @tool
    async def dig(topic: str) -> str:
        """Dig a topic up, for ever."""
        started.set()
        await asyncio.Event().wait()
        return topic

    roles = [Role(name="looker", tools=("look",)), Role(name="digger", tools=("dig",))]
    model = FunctionModel(_by_worker)
    executor = Executor(roles, model, tools=[look, dig], store=db, aggregator="concat")
    plan = [  # the digger digs once the looker's outcome is kept
        Subtask(id="s1", role="looker", instruction="Look."),
        Subtask(id="s2", role="digger", instruction="Dig.", depends_on=("s1",)),
    ]
    running = asyncio.create_task(executor.run("Bees", subtasks=plan, run_id="r1"))
    await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    with ThreadedServer(create_app(db, token=TOKEN), name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            page = html.unescape((await client.get("/runs/r1")).text)
    assert 'data-status="interrupted"' in page
    assert "The run stopped before it finished (it was cancelled: Ctrl-C, a signal" in page
    assert "its process is gone" not in page
    assert "Bees dance." in page  # the looker's answer, in its transcript


def _by_worker(request: ModelRequest) -> AssistantMessage | str:
    """The looker looks and answers; the digger digs."""
    seen = any(isinstance(m, ToolMessage) for m in request.messages)
    if (request.conversation or "").endswith("s2"):
        return AssistantMessage(tool_calls=(call("dig", {"topic": "bees"}),))
    return (
        "Bees dance." if seen else AssistantMessage(tool_calls=(call("look", {"topic": "bees"}),))
    )
