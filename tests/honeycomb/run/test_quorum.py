"""``failure: quorum``: a run that does not raise has the quorum's successes. A plan
smaller than the quorum fails before any worker runs, and a policy whose quorum no
planned plan could reach is refused where it is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor, OfflineModel, Policy, Role, RunFailed
from honeycomb.testing import FunctionModel
from runtime import ConfigError, ModelRequest
from tests.support.hives import errors_of, hive

ROLES = [
    Role(name="planner", description="Plans."),
    Role(name="aggregator", description="Merges."),
    Role(name="researcher", description="Finds facts about cities and their weather."),
]


async def test_a_given_plan_smaller_than_the_quorum_fails_before_any_worker_runs() -> None:
    asked: list[ModelRequest] = []

    async def answer(request: ModelRequest) -> str:
        asked.append(request)
        return "found"

    executor = Executor(ROLES, FunctionModel(answer), policy=Policy(failure="quorum", quorum=3))
    with pytest.raises(RunFailed) as caught:
        await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")])
    assert str(caught.value) == (
        "a quorum of 3 successful subtasks cannot be reached: the plan has only 2"
    )
    assert asked == []  # no worker, no aggregator
    partial = caught.value.partial
    assert partial is not None
    assert {s.status for s in partial.subtasks.values()} == {"cancelled"}


async def test_a_planned_plan_smaller_than_the_quorum_fails_once_it_is_ready() -> None:
    # The offline planner makes one subtask of this task; the quorum is two.
    policy = Policy(failure="quorum", quorum=2, max_subtasks=4)
    executor = Executor(ROLES, OfflineModel(latency=0), policy=policy)
    with pytest.raises(RunFailed, match=r"quorum of 2 .* the plan has only 1$"):
        await executor.run("Find the weather in Lisbon.")


async def test_a_plan_as_big_as_the_quorum_runs() -> None:
    executor = Executor(
        ROLES, FunctionModel(lambda r: "found"), policy=Policy(failure="quorum", quorum=2)
    )
    result = await executor.run("t", subtasks=[("researcher", "a"), ("researcher", "b")])
    assert result.status == "ok"


def test_a_policy_refuses_a_quorum_above_max_subtasks() -> None:
    with pytest.raises(ConfigError, match="quorum is 3 but max_subtasks is 2"):
        Policy(failure="quorum", quorum=3, max_subtasks=2)
    assert Policy(failure="quorum", quorum=2, max_subtasks=2).quorum == 2


def hive_with_policy(tmp_path: Path, policy: str) -> Path:
    """A hive of a planner and a worker on the offline model, with ``policy``."""
    return hive(
        tmp_path,
        f"""\
        name: n
        models:
          o: {{provider: offline, latency: 0}}
        roles:
          planner: {{description: plans}}
          w: {{description: works}}
        policy: {policy}
        """,
    )


def test_a_hive_whose_quorum_is_above_max_subtasks_is_refused_at_its_policy(
    tmp_path: Path,
) -> None:
    path = hive_with_policy(tmp_path, "{quorum: 3, failure: quorum, max_subtasks: 2}")
    (error,) = errors_of(path)
    assert error.startswith(f"{path}:7:1: policy: quorum is 3 but max_subtasks is 2")


def test_a_quorum_above_max_subtasks_is_told_beside_another_mistake_of_the_policy(
    tmp_path: Path,
) -> None:
    told = errors_of(hive_with_policy(tmp_path, "{quorum: 30, failure: quorum, max_workers: 0}"))
    assert any("policy.max_workers" in line for line in told)
    assert any("quorum is 30 but max_subtasks is 20" in line for line in told)
