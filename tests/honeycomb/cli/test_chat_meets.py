"""``honeycomb chat`` with the session's other features: its answers streamed."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
from rich.console import Console

from honeycomb import Budgets, GuardCheck, Guards, Policy, Role
from honeycomb.cli.chat import Chat, workers_table
from honeycomb.executor import Executor
from honeycomb.hive import load_hive
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.testing import call
from tests.support.hives import CHATTY, hive
from tests.support.model_requests import role_of


async def test_off_a_terminal_the_answer_is_written_as_it_comes(tmp_path: Path) -> None:
    chatty = load_hive(hive(tmp_path, CHATTY))
    chat = Chat(chatty, Executor.from_hive(chatty), "u1", "plain")
    written: list[tuple[str, int]] = []  # each write, and how many turns had ended

    class Out(io.StringIO):
        def write(self, text: str) -> int:
            written.append((text, len(chat.results)))
            return super().write(text)

    out = Out()
    await chat.talk(io.StringIO("Find the weather in Rome.\n"), out, Console(file=io.StringIO()))
    (result,) = chat.results
    answer = result.answer_text.strip()
    # Its pieces came while its turn was answered, and it was not written again after.
    assert answer in "".join(text for text, ended in written if not ended)
    assert out.getvalue().count(answer) == 1
    assert f"{answer}\n\n  subtask " in out.getvalue()  # then its workers, as ever


async def test_a_turn_with_a_failed_worker_still_shows_what_it_spent() -> None:
    # The table took the summary's last 3 lines as its figures: a "failed" (or "cut
    # off") line pushed the tokens out of it, and both lines the calls too.
    def answer(request: ModelRequest) -> str:
        if role_of(request) == "researcher" and "Oslo" in str(request.messages[-1].content):
            raise RuntimeError("the researcher's bug")
        return "Rome is sunny"

    executor = Executor(
        [Role(name="researcher"), Role(name="aggregator")],
        FunctionModel(answer),
        policy=Policy(failure="best_effort"),
    )
    subtasks = [
        {"role": "researcher", "instruction": "Rome weather"},
        {"role": "researcher", "instruction": "Oslo weather"},
    ]
    result = await executor.run("Rome and Oslo weather", subtasks=subtasks)
    assert result.failures
    table = workers_table(result)
    for figure in ("tokens", "calls", "cost", "failed"):
        assert f"\n  {figure} " in table


async def test_new_and_undo_while_another_process_answers_say_so(tmp_path: Path) -> None:
    # /new raised the session's SessionBusy out of the chat, a traceback that ended it.
    chatty = load_hive(hive(tmp_path, CHATTY))
    store = tmp_path / "runs.db"
    asked, go_on = anyio.Event(), anyio.Event()

    async def slow(request: ModelRequest) -> str:
        asked.set()
        await go_on.wait()
        return "Rome is sunny"

    other = Executor(
        [Role(name="researcher"), Role(name="aggregator")],
        FunctionModel(slow),
        store=store,
        planner=lambda task: [("researcher", task)],
    )  # another process, as far as the store tells
    chat = Chat(chatty, Executor.from_hive(chatty, store=store), "u1", "plain")
    out = io.StringIO()
    async with anyio.create_task_group() as group:
        group.start_soon(other.session("u1").run, "Find the weather in Rome.")
        await asked.wait()
        said = io.StringIO("/new\n/undo\n/history\n")
        assert await chat.talk(said, out, Console(file=io.StringIO())) == 0
        go_on.set()
    assert out.getvalue().count("session 'u1' is answering message 1") == 2
    assert "you:    Find the weather in Rome." in out.getvalue()  # /history went on


async def test_a_store_that_cannot_be_read_mid_chat_is_said_and_the_chat_goes_on(
    tmp_path: Path,
) -> None:
    # The next message looks up the last turn in the store first: its StoreError was
    # raised out of the chat, a traceback that ended it.
    chatty = load_hive(hive(tmp_path, CHATTY))
    store = tmp_path / "runs.db"
    chat = Chat(chatty, Executor.from_hive(chatty, store=store), "u1", "plain")

    class Typed(io.StringIO):
        lines = 0

        def readline(self, size: int | None = -1) -> str:
            self.lines += 1
            if self.lines == 2:  # after the first turn: the file is no store any more
                with store.open("r+b") as file:
                    file.write(b"x" * 100)
            return super().readline(size)

    out = io.StringIO()
    said = Typed("Find the weather in Rome.\nAnd in Oslo?\n/history\n")
    assert await chat.talk(said, out, Console(file=io.StringIO())) == 0
    assert len(chat.results) == 1
    assert out.getvalue().count("runs.db: the file is not a Honeycomb run store") == 2


async def test_the_answer_is_written_alone_when_the_aggregator_called_an_agent(
    tmp_path: Path,
) -> None:
    # Every delta after the aggregation began was written as the answer: the text the
    # aggregator wrote beside its call, and the agent's it called; and since something
    # was written, not the answer itself: 'Let me check.nested notesFinal answer.'
    def answer(request: ModelRequest) -> str | AssistantMessage:
        role = role_of(request)
        if role == "aggregator":
            if any(isinstance(m, ToolMessage) for m in request.messages):
                return "Final answer."
            ask = call("researcher", {"instruction": "check"})
            return AssistantMessage(content="Let me check.", tool_calls=(ask,))
        return "nested notes" if "check" in str(request.messages[-1].content) else "found"

    executor = Executor(
        [Role(name="researcher"), Role(name="aggregator", tools=("agent:researcher",))],
        FunctionModel(answer), planner=lambda task: [("researcher", task)],
    )  # fmt: skip
    chat = Chat(load_hive(hive(tmp_path, CHATTY)), executor, "u1", "plain")
    out = io.StringIO()
    await chat.talk(io.StringIO("Find the weather in Rome.\n"), out, Console(file=io.StringIO()))
    said = out.getvalue()
    assert "nested notes" not in said
    assert "\nFinal answer.\n" in said  # the answer alone, on its own line


async def test_an_answer_of_the_workers_text_the_runs_guard_held_is_written_once(
    tmp_path: Path,
) -> None:
    # The run's output guard checks an answer made of the workers' (concat): their text,
    # held until it passed, came as the run aggregated, and was written as the answer,
    # then the answer itself after it: each worker's text twice.
    executor = Executor(
        [Role(name="researcher")],
        FunctionModel(lambda request: "Rome is sunny"),
        planner=lambda task: [("researcher", task)],
        aggregator="concat",
        guards=Guards(output=(lambda check: None,)),
    )
    chat = Chat(load_hive(hive(tmp_path, CHATTY)), executor, "u1", "plain")
    out = io.StringIO()
    await chat.talk(io.StringIO("Find the weather in Rome.\n"), out, Console(file=io.StringIO()))
    assert out.getvalue().count("Rome is sunny") == 1
    assert "\n## s1 (researcher)\nRome is sunny\n" in out.getvalue()


async def test_a_message_the_runs_guard_refused_is_said_to_be_no_turn(tmp_path: Path) -> None:
    # The chat printed the guard's refusal alone: a person who then typed /undo to take
    # the refused message back took back the message before it, which was kept.
    def refuse_wires(check: GuardCheck) -> str | None:
        return "it asks for a wire" if "wire" in check.text else None

    executor = Executor(
        [Role(name="researcher"), Role(name="aggregator")],
        FunctionModel(lambda request: "Rome is sunny"),
        planner=lambda task: [("researcher", task)],
        guards=Guards(input=(refuse_wires,)),
        policy=Policy(budgets=Budgets(model_calls=1)),
    )
    chat = Chat(load_hive(hive(tmp_path, CHATTY)), executor, "u1", "plain")
    out = io.StringIO()
    said = io.StringIO("Find the weather in Rome.\nPlease wire the funds.\n")
    assert await chat.talk(said, out, Console(file=io.StringIO())) == 0
    over_budget, refused = out.getvalue().split("you> ")[1:3]
    assert "BudgetExceeded" in over_budget  # a turn of the conversation all the same
    assert "no turn" not in over_budget
    assert "GuardrailTripped" in refused
    assert "This message is no turn of the conversation" in refused
    assert [t.message for t in await chat.session.turns()] == ["Find the weather in Rome."]
