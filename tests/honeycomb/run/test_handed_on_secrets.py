"""What one subtask hands on to another model (a dependent subtask, a lead planning in
rounds, the aggregator role) never holds a secret: its answer and why it failed are
masked, as everything Honeycomb writes or shows is."""

from __future__ import annotations

import json

from honeycomb import Executor, Role
from honeycomb.planning import RolePlanner
from honeycomb.testing import FunctionModel, call
from runtime import AssistantMessage, ModelRequest, ToolMessage, UserMessage
from runtime.secrets import add_secret

SECRET = "db-password-0123456789"


async def test_no_secret_of_a_result_or_a_failure_reaches_another_model() -> None:
    add_secret(SECRET, "password")
    told: dict[str, list[str]] = {"lead": [], "worker": [], "merger": []}

    async def answer(request: ModelRequest) -> str:
        users = [m.content for m in request.messages if isinstance(m, UserMessage)]
        if request.output is not None and request.output.name == "Plan":
            told["lead"].append(users[-1])
            if "Planning round" in users[-1]:
                return json.dumps({"subtasks": []})
            return json.dumps(
                {
                    "subtasks": [
                        {"id": "s1", "role": "r", "instruction": "log in", "depends_on": []},
                        {"id": "s2", "role": "r", "instruction": "read it", "depends_on": []},
                        {"id": "s3", "role": "r", "instruction": "use", "depends_on": ["s2"]},
                    ]
                }
            )
        if "Merge" in (request.messages[0].content or "") or "merger" in users[0]:
            told["merger"].append(users[-1])
            return "merged"
        told["worker"].append(users[0])
        if users[0].startswith("log in"):
            raise ValueError(f"could not log in with {SECRET}")
        return f"the password is {SECRET}"

    executor = Executor(
        [Role(name="lead"), Role(name="r"), Role(name="merger", instructions="Merge them.")],
        FunctionModel(answer),
        planner=RolePlanner("lead", rounds=2, roles=["r"]),
        aggregator="merger",
    )
    result = await executor.run("Find the password.")

    assert result.subtasks["s1"].status == "failed"
    assert result.subtasks["s3"].ok
    second_round = told["lead"][-1]
    assert "could not log in with [password hidden]" in second_round  # why s1 failed
    assert "the password is [password hidden]" in second_round  # s2's answer
    dependent = next(t for t in told["worker"] if t.startswith("use"))
    assert "the password is [password hidden]" in dependent  # s3's input, s2's answer
    (merged,) = told["merger"]
    assert "could not log in with [password hidden]" in merged
    everything = [*told["lead"], *told["worker"], *told["merger"]]
    assert not [t for t in everything if SECRET in t]


class Caller:
    """A lead that calls ``tool`` twice, once to read the password and once to fail
    to, and keeps what it is told of each (``observed``)."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.observed: list[str] = []

    async def __call__(self, request: ModelRequest) -> AssistantMessage | str:
        seen = [str(m.content) for m in request.messages if isinstance(m, ToolMessage)]
        if seen:
            self.observed.extend(seen)
            return "done"
        return AssistantMessage(
            tool_calls=(
                call(self.tool, {"instruction": "read it"}, id="k1"),
                call(self.tool, {"instruction": "fail to read it"}, id="k2"),
            )
        )

    def told_nothing_secret(self) -> None:
        """It was told the answer and the failure, each with the password masked."""
        assert len(self.observed) == 2
        assert "the password is [password hidden]" in self.observed[0]
        assert "could not log in with [password hidden]" in self.observed[1]
        assert not [t for t in self.observed if SECRET in t]


def keeper_says(task: str) -> str:
    """The keeper's answer to ``task``: the password, or a failure quoting it."""
    if "fail" in task:
        raise ValueError(f"could not log in with {SECRET}")
    return f"the password is {SECRET}"


async def test_no_secret_of_a_nested_workers_answer_or_failure_reaches_its_caller() -> None:
    """A worker called as an ``agent:`` tool hands its answer (or why it has none) to
    its caller's model, as a subtask hands on its own: masked."""
    add_secret(SECRET, "password")
    lead = Caller("keeper")

    async def answer(request: ModelRequest) -> AssistantMessage | str:
        me = str(request.messages[0].content)
        task = next(str(m.content) for m in request.messages if isinstance(m, UserMessage))
        return keeper_says(task) if me.startswith("You are the keeper") else await lead(request)

    executor = Executor(
        [Role(name="lead", tools=("agent:keeper",)), Role(name="keeper")],
        FunctionModel(answer),
        aggregator="concat",
    )
    await executor.run("Find the password.", subtasks=[("lead", "find it")])
    lead.told_nothing_secret()


async def test_no_secret_of_a_hive_tools_answer_or_failure_reaches_its_caller() -> None:
    """A hive called as a tool hands its answer (or why it has none) to its caller's
    model: masked, as what a run returns and raises is."""
    add_secret(SECRET, "password")
    lead = Caller("facts")

    async def keeper(request: ModelRequest) -> str:
        users = [str(m.content) for m in request.messages if isinstance(m, UserMessage)]
        if request.output is not None and request.output.name == "Plan":
            planned = {"id": "s1", "role": "keeper", "instruction": users[0], "depends_on": []}
            return json.dumps({"subtasks": [planned]})
        return keeper_says(users[0])

    hive = Executor(
        [Role(name="planner"), Role(name="keeper")],
        FunctionModel(keeper),
        planner="planner",
        aggregator="concat",
    )
    executor = Executor(
        [Role(name="lead", tools=("facts",))],
        FunctionModel(lead),
        tools=[hive.as_tool("facts", "Finds facts.")],
        aggregator="concat",
    )
    await executor.run("Find the password.", subtasks=[("lead", "find it")])
    lead.told_nothing_secret()
