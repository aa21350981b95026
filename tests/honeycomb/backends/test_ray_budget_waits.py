"""A worker that waited (for a person's decision, for a slot of ``model_concurrency``)
checks the run's budget again as its wait ends, wherever it runs: what the other
workers spent meanwhile counts (``backend``: the local one, and two actors of the
session's Ray)."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import anyio.abc
import pytest

from honeycomb import BudgetExceeded, Budgets, Event, Executor, Policy, Role, tool
from honeycomb.backends import RayBackend
from honeycomb.backends._driver import Driver
from honeycomb.events import ModelCallStarted, ToolCallStarted, WorkerFinished
from honeycomb.testing import FunctionModel
from runtime import (
    AssistantMessage,
    Model,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from runtime.limits.ratelimit import AdaptiveLimiter, RateLimitedModel
from runtime.tools.approvals import ApprovalRequest, Decision
from workers import Approvals

pytest.importorskip("ray")

# One test process for every test that uses Ray (``ray_session``, tests/conftest.py).
pytestmark = pytest.mark.xdist_group("ray")


@tool(side_effects=True)
def send(to: str) -> str:
    """Send a payment."""
    return f"sent to {to}"


def _answer(text: str = "", tokens: int = 0, calls: tuple[ToolCall, ...] = ()) -> ModelResponse:
    usage = Usage(input_tokens=tokens)
    return ModelResponse(message=AssistantMessage(content=text, tool_calls=calls), usage=usage)


async def _told(port: int, who: bytes) -> bytes:
    """What the test's server at ``port`` tells ``who`` (once it is its turn)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as server:
        await server.send(who)
        return await server.receive()


async def pay_or_spend(port: int, request: ModelRequest) -> ModelResponse:
    """The payer asks for a payment, and says ``paid`` once it reads its result; the
    spender spends the run's 50 tokens when the test's server at ``port`` says so."""
    task = next(m for m in request.messages if isinstance(m, UserMessage)).content
    if task.startswith("spend"):
        await _told(port, b"s")
        return _answer("spent", tokens=50)
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return _answer("paid")
    return _answer(calls=(ToolCall(id="c1", name="send", arguments='{"to": "ann"}'),))


async def test_an_approved_call_does_not_run_once_another_worker_spent_the_budget(
    backend: RayBackend | None,
) -> None:
    """While a person decides on the payer's payment, the spender spends the run's
    tokens, and the model call left to read the payment's result with them: the
    approved payment is not sent, and the payer stops over budget. In an actor the
    payer's budget knew only what the run had spent as its turn was reserved, and the
    payment went out."""
    asked, spent = anyio.Event(), anyio.Event()
    heard: list[Event] = []

    async def approver(request: ApprovalRequest) -> Decision:
        asked.set()
        await spent.wait()
        return Decision.approved()

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            await client.receive(1)
            await asked.wait()
            await client.send(b"go")

    def listen(event: Event) -> None:
        heard.append(event)
        if isinstance(event, WorkerFinished) and event.worker == "s2":
            spent.set()  # its spending was told before it finished

    roles = [
        Role(name="payer", tools=("send",), approvals=Approvals(tools=("send",))),
        Role(name="spender"),
    ]
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        ex = Executor(
            roles, FunctionModel(partial(pay_or_spend, port)), tools=[send], approver=approver,
            aggregator="concat", backend=backend, on_event=[listen],
            policy=Policy(budgets=Budgets(total_tokens=50)),
        )  # fmt: skip
        async with anyio.create_task_group() as serving:
            serving.start_soon(listener.serve, serve)
            with anyio.fail_after(60), pytest.raises(BudgetExceeded) as stopped:
                await ex.run("t", subtasks=[("payer", "pay ann"), ("spender", "spend")])
            serving.cancel_scope.cancel()
    assert stopped.value.limit == "total_tokens"
    assert not [e for e in heard if isinstance(e, ToolCallStarted)]
    assert stopped.value.partial is not None
    assert stopped.value.partial.subtasks["s1"].status == "over_budget"


async def spend_first(port: int, request: ModelRequest) -> ModelResponse:
    """Each call tells the test's server at ``port`` it is sent, and spends the run's
    50 tokens when the server says so."""
    await _told(port, b"c")
    return _answer("spent", tokens=50)


@pytest.mark.parametrize("room", ["model_concurrency", "rate_limiter"])
async def test_a_call_that_waited_for_a_slot_is_not_sent_once_the_budget_is_spent(
    backend: RayBackend | None, monkeypatch: pytest.MonkeyPatch, room: str
) -> None:
    """Under model_concurrency: 1, or a rate limiter's max_concurrency: 1, the second
    worker's call, reserved, waits for the slot while the first one's spends the run's
    tokens: it is not sent, and the run stops over budget. In an actor the call,
    reserved at the driver before it waited, was sent once it had the slot, past the
    budget (the rate limiter's slot, held at the driver, was not checked at all). The
    driver's answer giving the slot says what the run has spent then: no call asks it
    again."""
    asked: list[str] = []  # of the driver (on Ray)
    reserve = Driver._reserve

    def counted(self: Driver, op: str, *args: Any) -> tuple[bool, Any]:
        asked.append(op)
        return reserve(self, op, *args)

    monkeypatch.setattr(Driver, "_reserve", counted)

    stopped, sent = await _spent_first(backend, room)
    assert stopped.limit == "total_tokens"
    assert sent == ["call"]
    assert asked == ([] if backend is None else ["reserve", "reserve"])


async def _spent_first(backend: RayBackend | None, room: str) -> tuple[BudgetExceeded, list[str]]:
    """How a run of two workers stops, and the calls it sent, one at a time (under
    ``model_concurrency`` or a rate limiter's ``max_concurrency``: ``room``): each call
    spends the run's 50 tokens (:func:`spend_first`) once both calls have started, the
    other one reserved (told it started)."""
    sent: list[str] = []
    opened: list[str] = []
    both_opened = anyio.Event()

    async def serve(client: anyio.abc.SocketStream) -> None:
        async with client:
            await client.receive(1)
            sent.append("call")
            await both_opened.wait()
            await client.send(b"go")

    def listen(event: Event) -> None:
        if isinstance(event, ModelCallStarted):
            opened.append(event.worker)
            if len(opened) == 2:
                both_opened.set()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        model: Model = FunctionModel(partial(spend_first, port))
        if room == "rate_limiter":
            model = RateLimitedModel(model, AdaptiveLimiter(max_concurrency=1))
        ex = Executor(
            [Role(name="w")], model, aggregator="concat", backend=backend, on_event=[listen],
            policy=Policy(
                model_concurrency=1 if room == "model_concurrency" else None,
                budgets=Budgets(total_tokens=50),
            ),
        )  # fmt: skip
        async with anyio.create_task_group() as serving:
            serving.start_soon(listener.serve, serve)
            with anyio.fail_after(60), pytest.raises(BudgetExceeded) as stopped:
                await ex.run("t", subtasks=[("w", "a"), ("w", "b")])
            serving.cancel_scope.cancel()
    return stopped.value, sent


async def test_a_call_given_its_slot_once_the_budget_is_spent_is_not_sent(
    backend: RayBackend | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under model_concurrency: 1 on Ray a call is reserved, then given its slot, in
    two requests to the driver: when the other worker's call spent the run's tokens
    between the two and gave the slot back, the second call had it at once, without
    waiting, and was sent past the budget (it failed CI once). Here the driver takes
    the second request for the slot only once the first call's spending is told: the
    call is not sent, and the run stops over budget, as in one process."""
    charged = anyio.Event()
    holds: list[str] = []
    hold, receive = Driver._hold, Driver.receive

    async def held_late(self: Driver, number: int, what: str, *more: Any) -> None:
        if what == "model":
            holds.append(self.worker.name)
            if len(holds) > 1:
                await charged.wait()
        await hold(self, number, what, *more)

    def told(self: Driver, message: Any) -> None:
        receive(self, message)
        if message[0] == "charge":
            charged.set()

    monkeypatch.setattr(Driver, "_hold", held_late)
    monkeypatch.setattr(Driver, "receive", told)

    stopped, sent = await _spent_first(backend, "model_concurrency")
    assert stopped.limit == "total_tokens"
    assert sent == ["call"]
    assert len(holds) == (0 if backend is None else 2)
