"""How a run ended, on its page: a run that failed, or that its budget stopped, says
why, as the run's error said it when it ended."""

from __future__ import annotations

import html
from pathlib import Path

import httpx
import pytest

from honeycomb import Budgets, Executor, Policy, Role, tool
from honeycomb.errors import BudgetExceeded, RunFailed
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.web import create_app
from runtime import ModelRequest
from runtime.testing import call
from tests.support.asgi_server import ThreadedServer

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
