"""The tracing layer alone, with a fake next layer."""

from __future__ import annotations

from runtime.events import Caller, Event, ToolCallFinished, ToolCallStarted, Tracer
from runtime.tools.layers import Outcome, Prepared, Traced
from tests.support.layers import Next, look, prepared


class Failing(Next):
    async def __call__(self, call: Prepared) -> Outcome:
        return Outcome(status="error", content="Error: it broke", error="ValueError: broke")


async def test_a_call_is_a_started_and_a_finished_event_with_its_status_and_error() -> None:
    events: list[Event] = []
    caller = Caller(worker="w1", run_id="r1", tracer=Tracer(events.append, log=False))
    await Traced(Next(delay_s=0.01), caller)(prepared(look, 0, turn=3, key="a"))
    await Traced(Failing(), caller)(prepared(look, 1, turn=3, key="b"))
    started, ok, started_again, failed = events
    assert isinstance(started, ToolCallStarted)
    assert isinstance(started_again, ToolCallStarted)
    assert (started.worker, started.run_id, started.turn, started.call_id) == ("w1", "r1", 3, "c0")
    assert isinstance(ok, ToolCallFinished)
    assert isinstance(failed, ToolCallFinished)
    assert (ok.status, ok.error) == ("ok", None)
    assert ok.duration_s >= 0.01 * 0.9
    assert (failed.call_id, failed.status, failed.error) == ("c1", "error", "ValueError: broke")


async def test_with_nobody_listening_a_call_goes_straight_through() -> None:
    inner = Next()
    outcome = await Traced(inner, Caller(tracer=Tracer(log=False)))(prepared(look, key="k"))
    assert outcome.content == "ran c0"
