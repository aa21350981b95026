"""A lead planning in rounds, resumed with other roles to give work to than its earlier
rounds had (a role given work then is now a judge): its new rounds are checked for the
roles of their own subtasks, and the earlier ones stand as they ran."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Guards, ModelRequest, Role
from honeycomb.errors import PlanError
from honeycomb.planning import RolePlanner
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import UserMessage
from tests.support.stores import finished_in_store


class Team:
    """A lead and two roles on one function model: round 1 gives s1 to the reviewer
    and s2 to the researcher (which waits at ``gate``, when there is one); round 2
    adds s3 for the researcher; round 3 is done. Judges pass."""

    def __init__(self, gate: anyio.Event | None = None) -> None:
        self.gate = gate
        self.holding = anyio.Event()

    async def answer(self, request: ModelRequest) -> str:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if "You are a guard" in (request.messages[0].content or ""):
            return "PASS"
        if request.output is not None and request.output.name == "Plan":
            found = re.search(r"Planning round (\d+)", users[-1])
            number = int(found.group(1)) if found else 1
            subtasks = {
                1: [
                    {"id": "s1", "role": "reviewer", "instruction": "Review the old notes."},
                    {"id": "s2", "role": "researcher", "instruction": "Hold, then look."},
                ],
                2: [{"id": "s3", "role": "researcher", "instruction": "Look again."}],
            }.get(number, [])
            return json.dumps({"subtasks": subtasks})
        if "Hold" in users[0] and self.gate is not None:
            self.holding.set()
            await self.gate.wait()
        return "found"

    def executor(self, store: Path, roles: list[Role], planner: RolePlanner) -> Executor:
        return Executor(
            roles, FunctionModel(self.answer), planner=planner, aggregator="concat", store=store
        )


async def test_a_resumed_lead_is_not_refused_for_a_role_its_earlier_rounds_gave_work(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    lead = Role(name="lead")
    first = Team(anyio.Event())  # s2 waits: the run is cut off in round 1
    roles = [lead, Role(name="researcher"), Role(name="reviewer")]
    planner = RolePlanner("lead", rounds=3, roles=("researcher", "reviewer"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: first.executor(db, roles, planner).run("Study.", run_id="r1"))
        with anyio.fail_after(10):
            await first.holding.wait()
            await finished_in_store(db, "r1", "s1")
        tg.cancel_scope.cancel()

    # Resumed where the reviewer judges the researcher, and is no longer given work.
    judged = [lead, Role(name="researcher", guards=Guards(output=("reviewer",))), roles[2]]
    second = Team()
    result = await second.executor(db, judged, RolePlanner("lead", rounds=3)).run(
        "Study.", run_id="r1"
    )
    assert result.status == "ok"
    assert [(r.round, r.added, r.error) for r in result.rounds] == [
        (1, ("s1", "s2"), None),
        (2, ("s3",), None),
        (3, (), None),
    ]
    assert result.rounds_ended == "done"


async def test_a_resumed_run_whose_plan_no_longer_fits_its_roles_keeps_what_ran(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    lead = Role(name="lead")
    first = Team(anyio.Event())  # s2 waits: the run is cut off in round 1, s1 finished
    roles = [lead, Role(name="researcher"), Role(name="reviewer")]
    async with anyio.create_task_group() as tg:
        run = first.executor(db, roles, RolePlanner("lead", rounds=3)).run
        tg.start_soon(lambda: run("Study.", run_id="r1"))
        with anyio.fail_after(10):
            await first.holding.wait()
            await finished_in_store(db, "r1", "s1")
        tg.cancel_scope.cancel()

    # Resumed without the researcher: s2, its subtask, cannot run; s1's result stands.
    second = Team()
    executor = second.executor(db, [lead, roles[2]], RolePlanner("lead", rounds=3))
    with pytest.raises(PlanError, match="unknown role 'researcher'") as caught:
        await executor.run("Study.", run_id="r1")
    partial = caught.value.partial
    assert partial is not None
    assert partial.status == "failed"
    assert [(i, s.status) for i, s in partial.subtasks.items()] == [
        ("s1", "ok"),
        ("s2", "cancelled"),  # not run again: a resume with its role continues it
    ]
    error = partial.subtasks["s2"].error
    assert error is not None
    assert error.message.startswith("the run stopped: invalid plan: subtask 's2': unknown role")
    assert partial.subtasks["s1"].handed_on == "found"
    assert partial.plan.ids == ("s1", "s2")
    assert partial.usage.model_calls == 3  # the earlier life's: the lead's, s1's, s2's cut off
    stored = await RunStore(db).load("r1")
    assert stored is not None
    assert stored.status == "failed"

    # Resumed with its roles again, it goes on from there.
    third = Team()
    result = await third.executor(db, roles, RolePlanner("lead", rounds=3)).run(
        "Study.", run_id="r1"
    )
    assert result.status == "ok"
    assert [(i, s.status) for i, s in result.subtasks.items()] == [
        ("s1", "ok"),
        ("s2", "ok"),
        ("s3", "ok"),
    ]
