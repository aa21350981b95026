"""Every spend of every life of a run counts, in its result and in its budget: what the
planner, the workers and the aggregator spent before the run waited for a person,
was interrupted or killed is counted after it is resumed, never forgotten."""

from __future__ import annotations

import contextlib
import signal
import sqlite3
from pathlib import Path

import anyio
import pytest

from honeycomb import BudgetExceeded, Budgets, Usage
from honeycomb.store import RunStore
from tests.support import approvals
from tests.support.early_kills import Early, answered
from tests.support.processes import killed
from tests.support.spending import TASK, Spending, spent


def counted(usage: Usage) -> tuple[int, int, int, float]:
    return usage.model_calls, usage.input_tokens, usage.output_tokens, round(usage.cost, 6)


def spent_early(calls: Path) -> Usage:
    """What the calls of :mod:`tests.support.early_kills` spent, together."""
    total = Usage()
    for call in answered(calls):
        given, taken = call["usage"]
        total += Usage(input_tokens=given, output_tokens=taken, model_calls=1, cost=0.01)
    return total


def kept(db: Path, run_id: str) -> tuple[int, int, int, float]:
    """What ``honeycomb runs`` says the run spent."""
    found = RunStore(db).find(run_id)
    assert found is not None
    return found.model_calls, found.input_tokens, found.output_tokens, round(found.cost, 6)


async def test_a_run_resumed_after_a_decision_counts_what_its_planner_spent(
    tmp_path: Path,
) -> None:
    db, calls = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    first = Spending(calls).executor(db)
    waiting = await first.run(TASK, run_id="r1")
    assert waiting.status == "waiting"
    assert counted(waiting.usage) == counted(spent(calls))  # planner, payer, reader x2
    await first.decide("r1", "pay_1", approve=True)

    done = await Spending(calls).executor(db).resume("r1")
    assert done.status == "ok"
    assert counted(done.usage) == counted(spent(calls))  # and the payer, the aggregator
    assert done.usage.model_calls == waiting.usage.model_calls + 2
    assert done.usage.input_tokens > waiting.usage.input_tokens
    assert kept(db, "r1") == counted(done.usage)
    with contextlib.closing(sqlite3.connect(db)) as raw:
        lives = raw.execute("SELECT life, model_calls FROM lives ORDER BY life").fetchall()
    assert lives == [(1, 4), (2, 6)]  # each life's row: the whole run's spending by its end


async def test_a_run_resumed_after_an_interruption_counts_what_it_spent_before(
    tmp_path: Path,
) -> None:
    db, calls = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    spending = Spending(calls)
    spending.gate = anyio.Event()  # never set: the read waits until the run is cancelled
    service = spending.executor(db)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: service.run(TASK, run_id="r1"))
            await spending.holding.wait()
            group.cancel_scope.cancel()
    before = spent(calls)
    assert before.model_calls == 3  # the planner, the payer, the reader's first
    assert kept(db, "r1") == counted(before)

    again = Spending(calls).executor(db)
    waiting = await again.resume("r1")
    assert counted(waiting.usage) == counted(spent(calls))
    await again.decide("r1", "pay_1", approve=True)
    done = await again.resume("r1")
    assert done.status == "ok"
    assert counted(done.usage) == counted(spent(calls))
    assert kept(db, "r1") == counted(done.usage)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_a_run_resumed_after_a_crash_counts_what_the_killed_life_spent(
    tmp_path: Path,
) -> None:
    db, calls = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    await killed("tests.support.spending", str(db), str(calls), "r1")
    before = spent(calls)
    assert before.model_calls == 3  # the planner, the payer, the reader's first
    assert kept(db, "r1") == counted(before)  # honeycomb runs: interrupted, all it spent

    again = Spending(calls).executor(db)
    waiting = await again.resume("r1")
    assert waiting.status == "waiting"
    assert counted(waiting.usage) == counted(spent(calls))
    await again.decide("r1", "pay_1", approve=True)
    done = await again.resume("r1")
    assert counted(done.usage) == counted(spent(calls))
    assert kept(db, "r1") == counted(done.usage)
    # The read the kill cut off counts once (its resumed turn made it again, and its
    # outcome is unknown), and the payment once: not the killed life's read as well.
    assert done.usage.tool_calls == 2


async def test_a_resumed_run_stops_at_its_budget_counting_its_earlier_lives(
    tmp_path: Path,
) -> None:
    db, calls = tmp_path / "runs.db", tmp_path / "calls.jsonl"
    first = Spending(calls).executor(db, budgets={"model_calls": 5})
    waiting = await first.run(TASK, run_id="r1")
    assert waiting.usage.model_calls == 4
    await first.decide("r1", "pay_1", approve=True)

    # The payer's call is the 5th; the aggregator's would be the 6th.
    again = Spending(calls).executor(db, budgets={"model_calls": 5})
    with pytest.raises(BudgetExceeded) as stopped:
        await again.resume("r1")
    assert (stopped.value.limit, stopped.value.used) == ("model_calls", 5)
    assert stopped.value.partial is not None
    assert stopped.value.partial.status == "over_budget"
    assert counted(stopped.value.partial.usage) == counted(spent(calls))
    summary = RunStore(db).find("r1")
    assert summary is not None
    assert (summary.status, summary.model_calls) == ("over_budget", 5)


async def test_a_resumed_runs_wall_time_budget_counts_the_time_its_earlier_lives_ran(
    tmp_path: Path,
) -> None:
    """The first life ran 1.1 s (a reader's reading) and ended waiting for a decision;
    resumed under a wall-time budget of 1 s, the run is past it at once: the approved
    payment does not run. The time between the lives, waiting, is no one's."""
    db, effects = tmp_path / "runs.db", tmp_path / "effects.txt"
    first = approvals.executor(db, effects, read_s=1.1)
    waiting = await first.run(approvals.TASK, subtasks=approvals.plan(1), run_id="r1")
    assert waiting.status == "waiting"
    assert waiting.timings.wall_s >= 1.1
    await first.decide("r1", "pay_1", approve=True)
    again = approvals.executor(db, effects, budgets=Budgets(wall_time_s=1.0))
    with pytest.raises(BudgetExceeded) as stopped:
        await again.resume("r1")
    assert stopped.value.limit == "wall_time_s"
    assert stopped.value.used >= 1.1
    assert not effects.exists()


async def killed_then_resumed(folder: Path, moment: str) -> tuple[list[str], Path]:
    """Run :mod:`tests.support.early_kills` killed at ``moment``, then resume it here
    (every spend counted): who the killed life's answered calls were, and the calls
    file."""
    db, calls = folder / "runs.db", folder / "calls.jsonl"
    await killed("tests.support.early_kills", str(db), str(calls), moment)
    before = [c["who"] for c in answered(calls)]
    assert kept(db, "r1")[0] == len(before)  # honeycomb runs: what the killed life spent
    ask = "helper" if moment == "helper" else "look"
    done = await Early(calls, ask=ask).executor(db).resume("r1")
    assert done.status == "ok"
    assert counted(done.usage) == counted(spent_early(calls))
    assert kept(db, "r1") == counted(done.usage)
    return before, calls


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_an_answer_asking_only_parallel_safe_calls_is_kept_before_they_run(
    tmp_path: Path,
) -> None:
    # Killed as the call the answer asked for starts: the answer and what it cost are
    # in the store, so the resumed worker runs the call rather than ask its model again.
    before, calls = await killed_then_resumed(tmp_path, "tool")
    assert before == ["planner", "bee"]
    asked = [(c["who"], c["first"]) for c in answered(calls)]
    assert asked.count(("bee", True)) == 1, asked


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_a_plan_is_kept_before_its_workers_start(tmp_path: Path) -> None:
    # Killed as the first worker's first model call starts, right after the plan.
    before, calls = await killed_then_resumed(tmp_path, "worker")
    assert before == ["planner"]
    assert [c["who"] for c in answered(calls)].count("planner") == 1  # never planned again


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
async def test_an_answer_asking_for_a_nested_worker_is_kept_before_it_starts(
    tmp_path: Path,
) -> None:
    # Killed as the nested helper's first model call starts: the resumed run goes on
    # with that helper, under its name, rather than ask the bee again for a new one.
    before, calls = await killed_then_resumed(tmp_path, "helper")
    assert before == ["planner", "bee"]
    asked = [(c["who"], c["first"]) for c in answered(calls)]
    assert asked.count(("bee", True)) == 1, asked
    helpers = {c["conversation"] for c in answered(calls) if c["who"] == "helper"}
    assert len(helpers) == 1, helpers
