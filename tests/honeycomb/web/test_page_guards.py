"""``honeycomb serve``'s page where it meets output guards: an answer a guard refused is
shown by no view of its run, as the run's stream drops it; nor, while the run's own
output guards have not passed an answer made of the workers' answers (``concat``), are
those answers, neither as the guards check it nor once they refused it."""

from __future__ import annotations

import asyncio
import html
from pathlib import Path

import anyio
import httpx
import pytest

from honeycomb import Executor, GuardCheck, GuardrailTripped, Guards, ModelRequest, Role, tool
from honeycomb.cli.main import main
from honeycomb.testing import FunctionModel, ScriptedModel, call
from honeycomb.web import create_app
from runtime import AssistantMessage, ToolMessage
from tests.honeycomb.web.test_serve import _until
from tests.support.asgi_server import ThreadedServer

TOKEN = "test-token-0123456789"
BEARER = {"authorization": f"Bearer {TOKEN}"}
CODE = "the vault code is 4417"


def no_codes(check: GuardCheck) -> str | None:
    return "it names a vault code" if "vault code" in check.text else None


async def test_answers_a_workers_output_guards_refused_are_not_on_its_page(db: Path) -> None:
    """One worker's first answer is refused and its second accepted; the other's
    guards refuse both, and it fails. Neither refused answer is on the page: each
    stands as refused, beside the corrections that say why."""
    clerk = Role(name="clerk", guards=Guards(output=(no_codes,)), output_retries=1)
    model = ScriptedModel(
        {
            "r1/fixed": [CODE, "I cannot say."],
            "r1/tripped": [CODE, f"{CODE}, still"],
        }
    )
    executor = Executor([clerk], model, store=db, aggregator="concat")
    plan = [("clerk", "say it"), ("clerk", "say it")]
    subtasks = [{"id": name, "role": role, "instruction": text} for name, (role, text) in
                zip(("fixed", "tripped"), plan, strict=True)]  # fmt: skip
    result = await executor.run("the code", subtasks=subtasks, run_id="r1")
    assert result.status == "partial"
    app = create_app(db, token=TOKEN)
    with ThreadedServer(app, name="serve") as server:
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            pages = [(await client.get(path)).text for path in ("/runs/r1", "/runs/r1/live")]
    for page in map(html.unescape, pages):
        assert "4417" not in page
        assert page.count("(an answer its output guards refused)") == 3
        assert page.count("Your answer was not accepted:") == 2
        assert "I cannot say." in page


def _answers(request: ModelRequest) -> str:
    return f"{CODE} ({request.messages[-1].content})"


class _Judge:
    """The run's output guard: it checks the final answer once told to, then passes it
    or refuses it; ``checking`` is set as it begins."""

    def __init__(self, refuses: bool) -> None:
        self.refuses = refuses
        self.checking = asyncio.Event()
        self.go = asyncio.Event()

    async def __call__(self, check: GuardCheck) -> str | None:
        self.checking.set()
        await self.go.wait()
        return "it names a vault code" if self.refuses else None


async def _views(client: httpx.AsyncClient, db: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What the run's views show: its page, the page's live parts, and its trace."""
    shown = [(await client.get(path)).text for path in ("/runs/r1", "/runs/r1/live")]
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["trace", "r1", "--store", str(db)]) == 0
    return "\n".join([*shown, capsys.readouterr().out])


async def _judged(
    executor: Executor,
    plan: list[tuple[str, str]],
    judge: _Judge,
    db: Path,
    capsys: pytest.CaptureFixture[str],
) -> tuple[str, str, str]:
    """Run ``plan`` as run ``r1``: how it ended (its status, or ``tripped``), and what
    its views showed while ``judge`` checked its answer, and once it ended."""

    async def run() -> str:
        try:
            return (await executor.run("t", subtasks=plan, run_id="r1")).status
        except GuardrailTripped:
            return "tripped"

    app = create_app(db, token=TOKEN)
    with ThreadedServer(app, name="serve") as server, anyio.fail_after(30):
        async with httpx.AsyncClient(base_url=server.url, headers=BEARER) as client:
            async with asyncio.TaskGroup() as group:
                running = group.create_task(run())
                await judge.checking.wait()
                checked = await _views(client, db, capsys)
                judge.go.set()
            ended = await _views(client, db, capsys)
    return running.result(), checked, ended


@pytest.mark.parametrize("refuses", [True, False], ids=["refused", "passed"])
async def test_workers_answers_are_shown_once_the_runs_guards_pass_the_answer_made_of_them(
    db: Path, capsys: pytest.CaptureFixture[str], refuses: bool
) -> None:
    judge = _Judge(refuses)
    executor = Executor(
        [Role(name="clerk")],
        FunctionModel(_answers),
        store=db,
        aggregator="concat",
        guards=Guards(output=(judge,)),
    )
    plan = [("clerk", "first"), ("clerk", "second")]
    ended_as, checked, ended = await _judged(executor, plan, judge, db, capsys)
    assert ended_as == ("tripped" if refuses else "ok")
    assert CODE not in checked
    assert "the run&#x27;s output guards have not passed it" in checked
    if refuses:
        assert CODE not in ended
        assert "the run&#x27;s output guards have not passed it" in ended
    else:
        assert f"{CODE} (first)" in ended
        assert f"{CODE} (second)" in ended


async def test_a_worker_whose_answer_its_guard_checks_is_running_on_the_page(db: Path) -> None:
    """A worker that answered at once, its answer under its output guard's check (a
    judge's call may take a while), has no row in the store yet, only its model call's
    span: its timeline's row read ``not started`` beside the bar of that call. It reads
    ``running``, as its run does."""
    judge = _Judge(refuses=False)
    clerk = Role(name="clerk", guards=Guards(output=(judge,)))
    executor = Executor([clerk], FunctionModel(_answers), store=db)
    app = create_app(db, token=TOKEN)
    live = ""

    async def drawn() -> str:  # its model call's span is written within a second
        nonlocal live
        live = (await client.get("/runs/r1/live")).text
        return "yes" if "bar model_call" in live else "no"

    with ThreadedServer(app, name="serve") as server, anyio.fail_after(30):
        async with (
            httpx.AsyncClient(base_url=server.url, headers=BEARER) as client,
            asyncio.TaskGroup() as group,
        ):
            running = group.create_task(executor.run("t", subtasks=[("clerk", "say")], run_id="r1"))
            await judge.checking.wait()
            await _until(drawn, "yes")
            judge.go.set()
    assert running.result().status == "ok"
    row = live.split('data-worker="s1"', 1)[1].split('<div class="row', 1)[0]
    assert '">running</div>' in row
    assert "not started" not in live


@tool
def look(topic: str) -> str:
    """Look a topic up."""
    return f"found {topic}"


def _merges(request: ModelRequest) -> AssistantMessage | str:
    """A worker answers; the aggregator role looks once, then writes the answer."""
    if "aggregator" not in str(request.messages[0].content):
        return "the worker's notes"
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        return AssistantMessage(tool_calls=(call("look", {"topic": "vault"}, id="c1"),))
    return CODE


@pytest.mark.parametrize("refuses", [True, False], ids=["refused", "passed"])
async def test_an_aggregator_roles_answer_is_shown_once_the_runs_guards_pass_it(
    db: Path, capsys: pytest.CaptureFixture[str], refuses: bool
) -> None:
    """The aggregator role's worker, kept in the store with its turns (it called a
    tool), wrote the run's answer: its page shows it neither while the run's output
    guards check it nor once they refused it; the workers it merged are shown."""
    judge = _Judge(refuses)
    executor = Executor(
        [Role(name="clerk"), Role(name="aggregator", tools=("look",))],
        FunctionModel(_merges),
        tools=[look],
        store=db,
        aggregator="aggregator",
        guards=Guards(output=(judge,)),
    )

    ended_as, checked, ended = await _judged(executor, [("clerk", "go")], judge, db, capsys)
    assert ended_as == ("tripped" if refuses else "ok")
    for shown in (checked, *([ended] if refuses else [])):
        assert "4417" not in shown
        assert 'data-worker="aggregate:' in shown  # kept, its answer held
        assert "the worker&#x27;s notes" in shown
    if not refuses:
        assert CODE in ended
    page = ended.split("<h2>workers</h2>", 1)[1]
    assert page.index('data-worker="s1"') < page.index('data-worker="aggregate:')
