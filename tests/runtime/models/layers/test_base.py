"""Model-call layers around one await: their order, a refusal, a failed answer, a
translated error, cancellation, and no frame of theirs while the model works."""

from __future__ import annotations

import asyncio
import gc
import inspect

import pytest

from runtime.errors import BudgetExceeded, ModelCallError, ModelResponseError
from runtime.events import Caller, Tracer
from runtime.limits import Budget
from runtime.messages import UserMessage
from runtime.model import ModelRequest, ModelResponse
from runtime.models.layers import Budgeted, Checked, ModelCall, ModelCalls, ModelLayer, Traced
from runtime.testing import FunctionModel, ScriptedModel
from runtime.tools.define import ToolRegistry
from runtime.tools.dispatch import Dispatcher
from workers.calls import model_calls
from workers.loop import AgentLoop
from workers.services import Services

ASK = ModelRequest(messages=(UserMessage(content="hi"),), turn=1)


class Noted(ModelLayer):
    """Notes each of its parts, and can refuse a call or fail its answer."""

    def __init__(self, name: str, notes: list[str], *, refuse: bool = False) -> None:
        self.name, self.notes, self.refuse = name, notes, refuse

    def opened(self, call: ModelCall) -> None:
        self.notes.append(f"{self.name} opened")
        if self.refuse:
            raise BudgetExceeded("model_calls", 1, 1)

    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        self.notes.append(f"{self.name} answered")
        return response

    def failed(self, call: ModelCall, error: BaseException) -> BaseException:
        self.notes.append(f"{self.name} failed: {type(error).__name__}")
        return error


class Failing(Noted):
    def answered(self, call: ModelCall, response: ModelResponse) -> ModelResponse:
        self.notes.append(f"{self.name} refused the answer")
        raise ModelResponseError("no good")


async def test_layers_open_outermost_first_and_close_innermost_first() -> None:
    notes: list[str] = []
    layers = (Noted("outer", notes), Noted("inner", notes))
    await ModelCalls(ScriptedModel(["ok"]), layers).complete(ASK)
    assert notes == ["outer opened", "inner opened", "inner answered", "outer answered"]


async def test_a_refused_call_is_never_made_and_the_layers_that_opened_see_why() -> None:
    notes: list[str] = []
    model = ScriptedModel(["never"])
    layers = (Noted("outer", notes), Noted("refusing", notes, refuse=True), Noted("inner", notes))
    with pytest.raises(BudgetExceeded):
        await ModelCalls(model, layers).complete(ASK)
    assert notes == ["outer opened", "refusing opened", "outer failed: BudgetExceeded"]
    assert model.requests == []


async def test_an_answer_a_layer_fails_is_an_error_to_the_layers_outside_it() -> None:
    notes: list[str] = []
    layers = (Noted("outer", notes), Failing("checking", notes), Noted("inner", notes))
    with pytest.raises(ModelResponseError):
        await ModelCalls(ScriptedModel(["ok"]), layers).complete(ASK)
    assert notes[3:] == [
        "inner answered",
        "checking refused the answer",
        "outer failed: ModelResponseError",
    ]


async def test_an_error_a_layer_translates_is_what_the_layers_outside_and_the_caller_see() -> None:
    notes: list[str] = []

    def broken(request: ModelRequest) -> str:
        raise KeyError("oops")

    layers = (Noted("outer", notes), Checked())
    with pytest.raises(ModelCallError) as raised:
        await ModelCalls(FunctionModel(broken), layers).complete(ASK)
    assert isinstance(raised.value.__cause__, KeyError)
    assert notes == ["outer opened", "outer failed: ModelCallError"]


async def test_a_cancelled_call_is_no_longer_in_flight_and_every_layer_saw_it_end() -> None:
    notes: list[str] = []
    budget = Budget()
    started = asyncio.Event()

    async def slow(request: ModelRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    layers = (Noted("outer", notes), Budgeted(), Traced(), Checked())
    calls = ModelCalls(FunctionModel(slow), layers, budget=budget, who="w1")
    task = asyncio.ensure_future(calls.complete(ASK))
    await started.wait()
    assert [c.who for c in budget.in_flight()] == ["w1"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert budget.in_flight() == ()
    assert notes == ["outer opened", "outer failed: CancelledError"]


async def test_a_worker_waiting_on_its_model_holds_no_frame_of_a_layer() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def waiting(request: ModelRequest) -> str:
        started.set()
        await release.wait()
        return "done"

    budget = Budget()
    services = Services(budget=budget)
    loop = AgentLoop(
        FunctionModel(waiting), Dispatcher(ToolRegistry()), worker="w1", services=services
    )
    task = asyncio.ensure_future(loop.run("go"))
    await started.wait()
    held = awaiting(task.get_coro())
    release.set()
    await task
    assert held[:2] == ["AgentLoop.run", "AgentLoop._think"]
    assert not [name for name in held if name.startswith(("ModelCalls", "Budgeted", "Checked"))]
    assert budget.usage.model_calls == 1


def test_a_worker_s_loop_is_its_turns_call_site_and_holds_no_object_for_it() -> None:
    # What every worker holds, 10,000 of them hold at once (benchmark E): the loop keeps
    # its turns' layers itself, as composed in one place.
    budget = Budget()
    loop = AgentLoop(
        ScriptedModel([]), Dispatcher(ToolRegistry()), worker="w1", services=Services(budget=budget)
    )
    composed = model_calls(loop.model, budget, "w1", caller=None)
    assert loop.layers == composed.layers
    assert (loop.who, loop.kind, loop.caller) == ("w1", "turn", None)
    assert not [held for held in gc.get_referents(loop) if isinstance(held, ModelCalls)]


def awaiting(coro: object) -> list[str]:
    """The coroutines ``coro`` waits in, outermost first."""
    held = []
    while inspect.iscoroutine(coro):
        held.append(coro.cr_code.co_qualname)
        coro = coro.cr_await
    return held


def test_the_tracer_layer_needs_a_listener_to_be_composed() -> None:
    quiet = model_calls(ScriptedModel([]), Budget(), "w1", caller=None)
    assert [type(layer) for layer in quiet.layers] == [Budgeted, Checked]
    caller = Caller(worker="w1", tracer=Tracer(lambda event: None, log=False))
    watched = model_calls(ScriptedModel([]), Budget(), "w1", caller=caller)
    assert [type(layer) for layer in watched.layers] == [Budgeted, Traced, Checked]
