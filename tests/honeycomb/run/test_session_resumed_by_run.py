"""A session's turn continued by its run's id (``Executor.resume``, as ``honeycomb
resume RUN_ID`` does) goes on as ``session.resume()`` continues it: a turn the run's
input guards refuse as it is resumed is no turn of the conversation any more, and a
turn that waits again for a person still holds the session, to be answered once
decided."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from honeycomb import (
    Approvals,
    Executor,
    GuardCheck,
    GuardrailTripped,
    Guards,
    ModelRequest,
    Role,
    tool,
)
from honeycomb.errors import SessionError
from honeycomb.testing import FunctionModel, call


class Desk:
    """A hive whose run's input guard can be held (the process stopped as it checks a
    message) or made to refuse, and whose planner's requests are kept."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.mode = "pass"
        self.checking = anyio.Event()
        self.planned: list[str] = []
        self.paid: list[int] = []

    async def guard(self, check: GuardCheck) -> str | None:
        if self.mode == "hold":
            self.checking.set()
            await anyio.sleep_forever()
        return "not today" if self.mode == "refuse" else None

    def answer(self, request: ModelRequest) -> object:
        if request.output is not None and request.output.name == "Plan":
            self.planned.append("\n".join(m.content or "" for m in request.messages))
            task = (request.messages[-1].content or "").split("Task: ", 1)[1]
            role = "payer" if task.startswith("Pay") else "writer"
            return json.dumps({"subtasks": [{"id": "s1", "role": role, "instruction": "go"}]})
        if not any(m.role == "tool" for m in request.messages) and "pay" in str(request.tools):
            return call("pay", {"amount": 40}, id="pay_1")
        return "Done."

    def executor(self) -> Executor:
        desk = self

        @tool(side_effects=True)
        async def pay(amount: int) -> str:
            """Pay."""
            desk.paid.append(amount)
            return f"paid {amount}"

        roles = [
            Role(name="planner"),
            Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",))),
            Role(name="writer"),
            Role(name="aggregator"),
        ]
        return Executor(
            roles,
            FunctionModel(self.answer),
            tools=[pay],
            store=self.db,
            guards=Guards(input=(self.guard,)),
            aggregator="concat",
        )


async def test_a_turn_its_input_guards_refuse_as_its_run_resumes_is_no_turn(
    tmp_path: Path,
) -> None:
    desk = Desk(tmp_path / "runs.db")
    session = desk.executor().session("ann")
    desk.mode = "hold"
    async with anyio.create_task_group() as tg:  # stopped as its message is checked
        tg.start_soon(session.run, "Send the secret plans")
        await desk.checking.wait()
        tg.cancel_scope.cancel()
    (cut,) = await session.turns()
    assert cut.status == "interrupted"
    desk.mode = "refuse"
    with pytest.raises(GuardrailTripped):
        await desk.executor().resume(cut.run_id)
    assert await session.turns() == []  # refused: no turn of the conversation
    desk.mode = "pass"
    result = await session.run("Write hello")
    assert result.status == "ok"
    assert [t.message for t in await session.turns()] == ["Write hello"]
    assert "secret plans" not in desk.planned[-1]  # no later turn is told it


async def test_a_turn_that_waits_again_as_its_run_resumes_holds_the_session(
    tmp_path: Path,
) -> None:
    desk = Desk(tmp_path / "runs.db")
    session = desk.executor().session("ann")
    waiting = await session.run("Pay the invoice")
    assert waiting.status == "waiting"
    again = await desk.executor().resume(waiting.run_id)  # undecided: it waits again
    assert again.status == "waiting"
    (turn,) = await session.turns()
    assert turn.status == "waiting"
    with pytest.raises(SessionError) as held:
        await session.run("Write hello")
    # Resumed undecided, it only waits again: the error says to decide its calls first.
    assert str(held.value) == (
        f"session 'ann': message 1 (run {waiting.run_id}) waits for approvals "
        f"(executor.pending({waiting.run_id!r}) lists them); decide them (executor.decide, "
        "honeycomb approve), then session.resume() continues it (honeycomb resume), "
        "session.pop() drops it (its calls denied)"
    )
    await desk.executor().decide(waiting.run_id, "pay_1", approve=True)
    done = await desk.executor().resume(waiting.run_id)
    assert done.status == "ok"
    assert desk.paid == [40]
    (turn,) = await session.turns()
    assert (turn.status, turn.answer) == ("ok", done.answer_text)
    assert (await session.run("Write hello")).status == "ok"
