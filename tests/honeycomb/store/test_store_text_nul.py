"""Where the run store (an SQLite file, a PostgreSQL server) meets text that a model or
a tool wrote: whatever characters a run's text holds, the store lists, loads and
continues it as it does any run."""

from __future__ import annotations

from honeycomb import Executor, Role
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from tests.support.stores import Where


def binary_echo(store: Where) -> Executor:
    """A worker whose answer holds a NUL (what a tool reading a binary file may say)."""
    model = FunctionModel(lambda request: "read: PK\x03\x04\x00\x00 (a zip)")
    return Executor([Role(name="w")], model, aggregator="concat", store=store)


async def test_a_run_whose_answer_holds_a_nul_is_listed_with_the_others(store: Where) -> None:
    # On PostgreSQL, listing the runs read each one's wall time out of its stored
    # result as jsonb, which refuses \u0000: that one run failed every listing
    # (honeycomb runs, the page of honeycomb serve) with a StoreError.
    await binary_echo(store).run("t", subtasks=[("w", "read the file")], run_id="zip")
    await binary_echo(store).run("t", subtasks=[("w", "read it again")], run_id="other")
    reader = RunStore(store)
    try:
        listed = {run.run_id: run for run in reader.runs()}
        assert set(listed) == {"zip", "other"}
        assert listed["zip"].status == "ok"
        assert listed["zip"].wall_s is not None
        assert listed["zip"].wall_s > 0
    finally:
        reader.close()
    kept = await binary_echo(store).run("t", subtasks=[("w", "read the file")], run_id="zip")
    assert "PK\x03\x04\x00\x00" in kept.answer_text  # its stored answer, as it was


async def test_a_run_whose_task_holds_a_nul_is_continued_by_its_own_task(store: Where) -> None:
    # PostgreSQL's text holds no NUL, and the store keeps U+FFFD in its place: the run's
    # own task, given again, was refused as "another task".
    task = "summarize the file\x00 please"
    first = await binary_echo(store).run(task, subtasks=[("w", "read the file")], run_id="nul")
    again = await binary_echo(store).run(task, subtasks=[("w", "read the file")], run_id="nul")
    assert again.answer_text == first.answer_text


async def test_a_run_id_holding_a_nul_is_kept_and_resumed_by_it(store: Where) -> None:
    # A run's lease is taken under a lock of its run, which PostgreSQL was given the id
    # as it was: 'PostgreSQL text fields cannot contain NUL', and the run never started.
    first = await binary_echo(store).run("t", subtasks=[("w", "read it")], run_id="job\x00one")
    again = await binary_echo(store).resume("job\x00one")
    assert again.answer_text == first.answer_text
