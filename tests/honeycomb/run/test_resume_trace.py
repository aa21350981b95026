"""A life killed early keeps its trace: the spans of what it spent are committed with
(or before) what the store says it spent, so a process killed with SIGKILL within its
first second leaves a ``cut off`` life in the stored trace, and the trace of the
resumed run counts every model call and token its result counts."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from honeycomb import Usage
from honeycomb.store import RunStore
from honeycomb.tracing import Life, build_timeline
from tests.support.early_kills import MOMENTS, Early, answered
from tests.support.processes import killed

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def spent(life: Life) -> tuple[int, int, int, float]:
    return life.model_calls, life.input_tokens, life.output_tokens, round(life.cost, 6)


def counted(usage: Usage) -> tuple[int, int, int, float]:
    return usage.model_calls, usage.input_tokens, usage.output_tokens, round(usage.cost, 6)


@pytest.mark.parametrize("moment", MOMENTS)
async def test_a_life_killed_early_keeps_the_spans_of_what_it_spent(
    tmp_path: Path, moment: str
) -> None:
    # Killed right after the store committed the plan (worker), or an answer asking
    # for a tool call (tool) or for a nested worker (helper): each well within the
    # second that spans otherwise wait to be written in a batch.
    db, calls = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    await killed("tests.support.early_kills", str(db), str(calls), moment)
    store = RunStore(db)
    found = store.find("r1")
    assert found is not None
    assert found.model_calls == len(answered(calls))  # what the store says it spent
    lives = build_timeline(store.spans("r1")).lives
    assert [life.status for life in lives] == ["cut off"]  # not lost with its process
    [cut] = lives
    kept = (found.model_calls, found.input_tokens, found.output_tokens, round(found.cost, 6))
    assert spent(cut) == kept  # its spans tell all that, no less

    ask = "helper" if moment == "helper" else "look"
    done = await Early(calls, ask=ask).executor(db).resume("r1")
    assert done.status == "ok"
    first, second = build_timeline(store.spans("r1")).lives
    assert (first.status, second.status) == ("cut off", "ok")
    assert spent(first) == kept
    whole = Usage(
        model_calls=first.model_calls + second.model_calls,
        input_tokens=first.input_tokens + second.input_tokens,
        output_tokens=first.output_tokens + second.output_tokens,
        cost=first.cost + second.cost,
    )
    assert counted(whole) == counted(done.usage)  # the trace and the result agree
