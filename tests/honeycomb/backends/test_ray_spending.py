"""Where a worker on Ray meets the run's budget and its judges: the same run on both
backends (``backend``: the local one, and two actors of the session's Ray) spends
alike, stops alike and reports the same spend."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest

from honeycomb import BudgetExceeded, Budgets, Event, Executor, Policy, Role
from honeycomb.backends import RayBackend
from honeycomb.errors import ModelHTTPError, ModelTimeout
from honeycomb.events import ModelCallFinished, ModelCallRetrying
from honeycomb.testing import FunctionModel
from runtime import ModelRequest, RetryingModel, RetryPolicy
from runtime.limits.budget import timed_out

pytest.importorskip("ray")

# One test process for every test that uses Ray (``ray_session``, tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

OFTEN = RetryPolicy(attempts=5, initial_wait_s=0.01, max_wait_s=0.01, jitter_s=0.0)


def busy(request: ModelRequest) -> str:
    raise ModelHTTPError(503, "busy")  # retryable


def too_slow(request: ModelRequest) -> str:
    timed_out()  # as an endpoint adapter tells it: the attempt's prompt is spent
    raise ModelTimeout(1.0)  # retryable


@pytest.mark.parametrize(
    ("answer", "budgets", "limit"),
    [
        (busy, Budgets(model_calls=1), "model_calls"),
        (too_slow, Budgets(total_tokens=5), "total_tokens"),
    ],
)
async def test_a_remote_call_sends_no_retry_once_its_first_attempt_spent_the_budget(
    backend: RayBackend | None,
    answer: Callable[[ModelRequest], str],
    budgets: Budgets,
    limit: str,
) -> None:
    """A call's first attempt takes the run's one model call (or its timeout spends
    the run's tokens), and fails with a retryable error: no retry is sent, the budget
    being spent, and the run stops over it. In an actor the worker went on through all
    five attempts (its budget's check was the driver's, made only as its next call was
    reserved), and the run failed with the endpoint's error."""
    heard: list[Event] = []
    ex = Executor(
        [Role(name="w")], RetryingModel(FunctionModel(answer), OFTEN), aggregator="concat",
        backend=backend, policy=Policy(budgets=budgets), on_event=[heard.append],
    )  # fmt: skip
    with anyio.fail_after(60), pytest.raises(BudgetExceeded) as stopped:
        await ex.run("t", subtasks=[("w", "a")])
    assert stopped.value.limit == limit
    (retrying,) = [e for e in heard if isinstance(e, ModelCallRetrying)]  # then refused
    assert retrying.attempt == 1
    (finished,) = [e for e in heard if isinstance(e, ModelCallFinished)]
    assert finished.status == "error"
