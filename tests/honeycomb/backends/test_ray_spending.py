"""Where a worker on Ray meets the run's budget and its judges: the same run on both
backends (``backend``: the local one, and two actors of the session's Ray) spends
alike, stops alike and reports the same spend."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from honeycomb import (
    BudgetExceeded,
    Budgets,
    Event,
    Executor,
    Guards,
    Policy,
    Role,
    RunFailed,
    tool,
)
from honeycomb.backends import RayBackend
from honeycomb.errors import ModelHTTPError, ModelTimeout
from honeycomb.events import (
    GuardChecked,
    ModelCallFinished,
    ModelCallRetrying,
    ModelCallStarted,
    WorkerFinished,
)
from honeycomb.run.events import RunFinished
from honeycomb.testing import FunctionModel
from runtime import (
    AssistantMessage,
    ModelRequest,
    ModelResponse,
    RetryingModel,
    RetryPolicy,
    ToolCall,
    Usage,
    UserMessage,
)
from runtime.limits.budget import retried, timed_out
from tests.support.ray_tools import scripted

pytest.importorskip("ray")

# One test process for every test that uses Ray (``ray_session``, tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")

OFTEN = RetryPolicy(attempts=5, initial_wait_s=0.01, max_wait_s=0.01, jitter_s=0.0)


def busy(request: ModelRequest) -> str:
    raise ModelHTTPError(503, "busy")  # retryable


def too_slow(request: ModelRequest) -> str:
    timed_out()  # as an endpoint adapter tells it: the attempt's prompt is spent
    raise ModelTimeout(1.0)  # retryable


async def test_a_remote_call_sends_no_retry_once_its_first_attempt_spent_the_budget(
    backend: RayBackend | None,
) -> None:
    """A call's first attempt times out, its prompt spending the run's tokens, and
    fails with a retryable error: no retry is sent, the budget being spent, and the run
    stops over it. In an actor the worker went on through all five attempts (its
    budget's check was the driver's, made only as its next call was reserved), and the
    run failed with the endpoint's error."""
    heard: list[Event] = []
    ex = Executor(
        [Role(name="w")], RetryingModel(FunctionModel(too_slow), OFTEN), aggregator="concat",
        backend=backend, policy=Policy(budgets=Budgets(total_tokens=5)), on_event=[heard.append],
    )  # fmt: skip
    with anyio.fail_after(60), pytest.raises(BudgetExceeded) as stopped:
        await ex.run("t", subtasks=[("w", "a")])
    assert stopped.value.limit == "total_tokens"
    (retrying,) = [e for e in heard if isinstance(e, ModelCallRetrying)]  # then refused
    assert retrying.attempt == 1
    (finished,) = [e for e in heard if isinstance(e, ModelCallFinished)]
    assert finished.status == "error"


async def test_a_remote_call_retries_the_last_model_call_the_budget_allows(
    backend: RayBackend | None,
) -> None:
    """A retry is the same model call sent again: the run's one model call is
    retried after its 503, in an actor as in one process."""
    failed: list[ModelRequest] = []

    def busy_once(request: ModelRequest) -> str:
        if not failed:
            failed.append(request)
            busy(request)
        return "done"

    ex = Executor(
        [Role(name="w")], RetryingModel(FunctionModel(busy_once), OFTEN), aggregator="concat",
        backend=backend, policy=Policy(budgets=Budgets(model_calls=1)),
    )  # fmt: skip
    with anyio.fail_after(60):
        result = await ex.run("t", subtasks=[("w", "a")])
    assert result.subtasks["s1"].text == "done"
    assert result.usage.model_calls == 1


@tool(terminal=True)
def submit(answer: str) -> str:
    """Submit the final answer."""
    return f"submitted: {answer}"


async def test_a_terminal_tools_turn_runs_after_the_last_model_call_the_budget_allows(
    backend: RayBackend | None,
) -> None:
    """A terminal tool's result is the worker's answer, which no model call reads:
    with model_calls: 1, the one call's turn of submit was refused (no model call left
    to read its result), and the run ended over its budget with nothing submitted."""
    submitting = FunctionModel(
        lambda request: AssistantMessage(
            tool_calls=(ToolCall(id="c1", name="submit", arguments='{"answer": "42"}'),)
        )
    )
    ex = Executor(
        [Role(name="w", tools=("submit",))], submitting, tools=[submit], aggregator="concat",
        backend=backend, policy=Policy(budgets=Budgets(model_calls=1)),
    )  # fmt: skip
    with anyio.fail_after(60):
        result = await ex.run("t", subtasks=[("w", "a")])
    assert result.subtasks["s1"].text == "submitted: 42"
    assert (result.usage.model_calls, result.usage.tool_calls) == (1, 1)


class TellingModel(FunctionModel):
    """A function model that tells its calls of their attempts, as an endpoint does."""

    tells_attempts = True


def judged_after_a_refused_retry(request: ModelRequest) -> ModelResponse | str:
    """A judge's first attempt times out (its prompt spends the run's tokens), and the
    budget refuses its retry; a worker's answer is answered."""
    if "You are a guard" in (request.messages[0].content or ""):
        timed_out()
        retried()  # as a retry policy says it sends another attempt
        return "PASS"
    usage = Usage(input_tokens=10, output_tokens=1)
    return ModelResponse(message=AssistantMessage(content="found"), usage=usage)


def judged_empty(request: ModelRequest) -> ModelResponse:
    """A judge answers nothing it could use (spent all the same)."""
    usage = Usage(input_tokens=10, output_tokens=1)
    if "You are a guard" in (request.messages[0].content or ""):
        return ModelResponse(message=AssistantMessage(content=""), usage=usage)
    return ModelResponse(message=AssistantMessage(content="found"), usage=usage)


@pytest.mark.parametrize(
    ("answer", "budgets", "reason"),
    [
        (judged_after_a_refused_retry, Budgets(total_tokens=40), "budget exceeded"),
        (judged_empty, Budgets(), "the guard raised ModelResponseError"),
    ],
)
async def test_a_judges_error_reports_what_its_call_spent_wherever_its_worker_runs(
    backend: RayBackend | None,
    answer: Callable[[ModelRequest], ModelResponse | str],
    budgets: Budgets,
    reason: str,
) -> None:
    """A judge's call that ends in an error (its retry refused by the budget, an answer
    with no verdict) says what it spent, and its ``guard.checked`` reports it as the
    run's usage counts it. The judge asked at the driver for a worker in an actor sent
    its error back rebuilt without it: the check said no model call and no tokens."""
    heard: list[Event] = []
    ex = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        TellingModel(answer), aggregator="concat", backend=backend,
        policy=Policy(budgets=budgets, failure="best_effort"), on_event=[heard.append],
    )  # fmt: skip
    with anyio.fail_after(60), contextlib.suppress(BudgetExceeded, RunFailed):
        await ex.run("task", subtasks=[("w", "a")])
    (run,) = [e for e in heard if isinstance(e, RunFinished)]
    assert run.usage is not None
    (checked,) = [e for e in heard if isinstance(e, GuardChecked)]
    assert checked.reason is not None
    assert checked.reason.startswith(reason)
    answers = [e for e in heard if isinstance(e, ModelCallFinished)]
    assert checked.model_calls + len(answers) == run.usage.model_calls == 2
    assert checked.input_tokens + sum(e.input_tokens for e in answers) == run.usage.input_tokens
    assert checked.input_tokens > 0


def test_what_a_judges_call_spent_crosses_with_its_error_in_any_form() -> None:
    """A budget's refusal crosses as its fields, an error that does not pickle as its
    text: what the judge's call it ended spent went with neither."""
    from honeycomb.backends._wire import portable_error, raised

    class Unpicklable(Exception):  # a class of a function's: no import path
        pass

    spent = Usage(input_tokens=12, output_tokens=3)
    for error in (BudgetExceeded("total_tokens", 40, 45), Unpicklable("no verdict")):
        error.spent = spent  # type: ignore[attr-defined]
        again = raised(portable_error(error))
        assert str(again).endswith(str(error))
        assert getattr(again, "spent", None) == spent


async def judged_until_cut_off(request: ModelRequest) -> ModelResponse:
    """A judge's first attempt times out (its prompt spent), and its retry hangs until
    the run's wall time cuts it off; a worker's answer is answered."""
    if "You are a guard" in (request.messages[0].content or ""):
        timed_out()
        await anyio.sleep(60)
    usage = Usage(input_tokens=10, output_tokens=1)
    return ModelResponse(message=AssistantMessage(content="found"), usage=usage)


async def test_a_judge_cut_off_by_the_wall_time_reports_its_spend_wherever_its_worker_runs(
    backend: RayBackend | None,
) -> None:
    """The run's wall time cuts a judge's call off: its guard's check is reported
    cancelled, with what the call spent (the prompt of its attempt that timed out), as
    the run's usage counts it. For a worker in an actor, the check reported no tokens:
    its request to the judge at the driver was given up, and what the call spent there
    never came back."""
    heard: list[Event] = []
    if backend is not None:
        await backend.start()  # its actors' start is not the run's time
    ex = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        TellingModel(judged_until_cut_off), aggregator="concat", backend=backend,
        # Room for the role and the model to be installed in the actors, on Ray; in one
        # process the judge is soon there.
        policy=Policy(budgets=Budgets(wall_time_s=3 if backend is not None else 2)),
        on_event=[heard.append],
    )  # fmt: skip
    with anyio.fail_after(60), pytest.raises(BudgetExceeded):
        await ex.run("task", subtasks=[("w", "a")])
    (run,) = [e for e in heard if isinstance(e, RunFinished)]
    assert run.usage is not None
    (checked,) = [e for e in heard if isinstance(e, GuardChecked)]
    assert (checked.status, checked.model_calls) == ("cancelled", 1)
    (answer,) = [e for e in heard if isinstance(e, ModelCallFinished)]
    assert checked.input_tokens > 0
    assert checked.input_tokens + answer.input_tokens == run.usage.input_tokens


class JudgedOnSecondAttempt:
    """A judge whose first attempt meets a 503 and whose retry passes the answer; a
    worker's answer is answered."""

    def __init__(self) -> None:
        self.judged = 0

    def __call__(self, request: ModelRequest) -> ModelResponse:
        usage = Usage(input_tokens=10, output_tokens=1)
        if "You are a guard" in (request.messages[0].content or ""):
            self.judged += 1
            if self.judged == 1:
                raise ModelHTTPError(503, "busy")
            return ModelResponse(message=AssistantMessage(content="PASS"), usage=usage)
        return ModelResponse(message=AssistantMessage(content="found"), usage=usage)


async def test_a_judges_retry_is_told_as_the_checked_turns_wherever_its_worker_runs(
    backend: RayBackend | None,
) -> None:
    """A judge's call retried after a 503 is told as a retry of the checked turn
    (``model_call.retrying``), and its guard's check counts two attempts. For a worker
    in an actor, the judge's call at the driver had nobody to tell: no retry was told,
    and the check said one attempt."""
    heard: list[Event] = []
    model = RetryingModel(FunctionModel(JudgedOnSecondAttempt()), OFTEN)
    ex = Executor(
        [Role(name="w", guards=Guards(output=("reviewer",))), Role(name="reviewer")],
        model, aggregator="concat", backend=backend, on_event=[heard.append],
    )  # fmt: skip
    with anyio.fail_after(60):
        result = await ex.run("task", subtasks=[("w", "a")])
    assert result.subtasks["s1"].text == "found"
    (retrying,) = [e for e in heard if isinstance(e, ModelCallRetrying)]
    assert (retrying.worker, retrying.turn, retrying.attempt) == ("s1", 1, 1)
    assert retrying.error == "ModelHTTPError: HTTP 503: busy"
    (checked,) = [e for e in heard if isinstance(e, GuardChecked)]
    assert (checked.status, checked.attempts, checked.model_calls) == ("ok", 2, 1)
    assert heard.index(retrying) < heard.index(checked)


@tool
def meet(mark: str, until: str) -> str:
    """Make the file ``mark``, then wait for the file ``until`` (in a thread).

    Args:
        mark: The file to make.
        until: The file to wait for.
    """
    Path(mark).touch()
    while not Path(until).exists():
        time.sleep(0.01)
    return "met"


async def test_a_remote_call_the_budget_refuses_is_never_told(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    """Two workers each make a call, then a turn of tool calls; the first to answer
    again takes the run's last model call, and the other's next call is refused. In
    one process that call is refused as it opens, never told; from an actor it was
    told as it opened (``model_call.started``, then ``model_call.finished`` with an
    error): the trace showed four model calls of a run that made three."""
    a_ran, b_ran, a_done = (str(tmp_path / name) for name in ("a_ran", "b_ran", "a_done"))
    heard: list[Event] = []

    def listen(event: Event) -> None:
        heard.append(event)
        if isinstance(event, WorkerFinished) and event.worker == "s1":
            Path(a_done).touch()  # the second worker's turn of tool calls ends

    ex = Executor(
        [Role(name="m", tools=("meet",))], FunctionModel(scripted), tools=[meet],
        aggregator="concat", backend=backend, on_event=[listen],
        policy=Policy(budgets=Budgets(model_calls=3), failure="best_effort"),
    )  # fmt: skip
    first = _script([("meet", {"mark": a_ran, "until": b_ran})])
    second = _script([("meet", {"mark": b_ran, "until": a_done})])
    with anyio.fail_after(60), pytest.raises(BudgetExceeded) as stopped:
        await ex.run("t", subtasks=[("m", first), ("m", second)])
    assert stopped.value.limit == "model_calls"
    assert stopped.value.partial is not None
    assert stopped.value.partial.usage.model_calls == 3
    started = [(e.worker, e.turn) for e in heard if isinstance(e, ModelCallStarted)]
    assert sorted(started) == [("s1", 1), ("s1", 2), ("s2", 1)]
    finished = [(e.worker, e.status) for e in heard if isinstance(e, ModelCallFinished)]
    assert sorted(finished) == [("s1", "ok"), ("s1", "ok"), ("s2", "ok")]


async def spend_in_turn(port: int, request: ModelRequest) -> ModelResponse:
    """Worker ``a`` and worker ``spender`` each ask the test's server at ``port`` what to
    do: ``spender`` answers, spending 50 tokens, once ``a``'s call is under way; ``a``
    fails (retryably) once the spender has finished, and answers, spending nothing, if
    retried."""
    task = next(m for m in request.messages if isinstance(m, UserMessage)).content
    async with await anyio.connect_tcp("127.0.0.1", port) as server:
        await server.send(b"s" if task.startswith("spender") else b"a")
        told = await server.receive()
    if told == b"fail":
        raise ModelHTTPError(503, "busy")
    usage = Usage(input_tokens=40, output_tokens=10) if told == b"spend" else Usage()
    return ModelResponse(message=AssistantMessage(content="done"), usage=usage)


async def test_a_remote_retry_sees_what_another_worker_spent_since_its_call_began(
    backend: RayBackend | None,
) -> None:
    """Worker ``a``'s call fails once the other worker has spent the run's last
    tokens: its retry is not sent, the budget being spent, as in one process. In an
    actor the worker's budget knew only what the run had spent as its call was
    reserved, and the retry went out."""
    a_asked, spent = anyio.Event(), anyio.Event()
    attempts: list[str] = []

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            if await client.receive(1) == b"s":
                await a_asked.wait()
                await client.send(b"spend")
                return
            attempts.append("a")
            a_asked.set()
            await spent.wait()
            await client.send(b"fail" if len(attempts) == 1 else b"answer")

    def listen(event: Event) -> None:
        if isinstance(event, WorkerFinished) and event.worker == "s2":
            spent.set()  # its spending was told before it finished

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        ex = Executor(
            [Role(name="w")], RetryingModel(FunctionModel(partial(spend_in_turn, port)), OFTEN),
            aggregator="concat", backend=backend, on_event=[listen],
            policy=Policy(budgets=Budgets(total_tokens=50)),
        )  # fmt: skip
        async with anyio.create_task_group() as serving:
            serving.start_soon(listener.serve, serve)
            with anyio.fail_after(60), pytest.raises(BudgetExceeded) as stopped:
                await ex.run("t", subtasks=[("w", "a"), ("w", "spender")])
            serving.cancel_scope.cancel()
    assert stopped.value.limit == "total_tokens"
    assert attempts == ["a"]


def _script(*turns: list[tuple[str, dict[str, Any]]]) -> str:
    return json.dumps({"turns": [list(t) for t in turns], "log": None})
