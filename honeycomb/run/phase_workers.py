"""The workers of a run's planner and aggregator, kept in its store turn by turn as a
subtask's worker is: a resumed run never runs a side-effecting call of theirs twice
(their journal answers it, see :mod:`runtime.tools.journal`), and reads back the
answer of one that had finished rather than ask its model again.

Each is kept under a name of its own in the run, made of what it is for (``plan:R.A``,
the plan's round ``R`` and attempt ``A``; ``aggregate``) and a digest of what it is
asked: ``plan:1.1:3f2a9c1e``, ``aggregate:0b7d44e2``. A resumed run asks the same, and
the worker goes on where it stopped; one asked something else (the results it merges
changed since: a worker the store failed ran again) is another worker, which starts
afresh, and no call of the first is taken for one of its own. The worker's own name,
its role's, is as before: events, spans and cassettes name it so.

The agents it calls (``agent:`` tools) are named after that name, with a store or
without (``aggregate:0b7d44e2/call_1``: each attempt's and round's are its own, and a
recording's are its replay's), and, in a run with a store, kept as a subtask's are: a
resumed run continues them, or reads back the answer of one that had finished
(:mod:`honeycomb.run.agents`).

Its calls, and theirs, cannot wait in the store for a person: the run waits for
decisions in its subtasks' workers only. The run's approver decides them, and the store
keeps each decision, which a resumed run goes on with rather than ask again; with no
approver, or one that decides nothing, they are denied saying why
(:data:`~honeycomb.run.context.NOT_KEPT`, :data:`~honeycomb.run.context.NOT_WAITING`).
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from honeycomb.run.agents import current_run
from honeycomb.run.context import RunContext, unwaited
from honeycomb.run.phase_names import phase_name
from honeycomb.run.plan import Subtask
from honeycomb.run.result import SubtaskResult
from workers import Role, Worker, WorkerResult

if TYPE_CHECKING:
    from honeycomb.run.record import RunRecord
    from honeycomb.run.restore import Resumed

__all__ = ["run_phase_worker"]


async def run_phase_worker(
    context: RunContext,
    role: Role,
    prompt: str,
    *,
    what: str,
    keep: bool = True,
    unkept: Worker | None = None,
    **made: Any,
) -> tuple[Worker, WorkerResult]:
    """A worker of the run's planner or aggregator ``role`` (made as
    :meth:`RunContext.worker` makes it, given ``made``) run on ``prompt``, and its
    result; in a run with a store, kept there under :func:`phase_name` of ``what`` and
    ``prompt``: continued from where an earlier life left it, or its answer read
    back if it had finished. ``keep``: as :meth:`Worker.run` takes it; ``unkept``:
    the worker to run when nothing is kept (made so already), if any.

    Raises:
        ConfigError: when a result read back does not validate as the output type
            asked for (the role's ``output_schema`` changed since).
    """
    runs = current_run()
    name = phase_name(what, prompt)
    if runs is None or runs.context.run_id != context.run_id:  # a sub-run's
        runs = None
    with runs.calling(role.name, name) if runs is not None else contextlib.nullcontext():
        if runs is None or runs.record is None:
            worker = unkept or context.worker(role, **made)
            return worker, await worker.run(prompt, keep=keep)
        return await _kept(context, runs.record, runs.resumed, role, prompt, name, keep, made)


async def _kept(
    context: RunContext,
    record: RunRecord,
    resumed: Resumed | None,
    role: Role,
    prompt: str,
    name: str,
    keep: bool,
    made: dict[str, Any],
) -> tuple[Worker, WorkerResult]:
    from honeycomb.run.restore import retyped  # a run with a store's

    context = replace(context, services=unwaited(context.services))
    ended = resumed.phases.get(name) if resumed is not None else None
    if ended is not None and ended.worker is not None:  # it finished in an earlier life
        worker = context.worker(role, **made)
        return worker, retyped(ended.worker, "output", worker.setup.settings.output_type)
    state = resumed.states.get(name) if resumed is not None else None
    store = record.phase_worker(name, len(state.messages) if state is not None else 0)
    try:
        worker = context.worker(role, store=store, **made)
        started = time.perf_counter()
        result = await worker.run(prompt, resume=state, keep=keep)
    finally:
        record.phase_ended(name)
    if store.written:  # one that kept nothing (no turn of tools) is asked again
        outcome = SubtaskResult(
            subtask=Subtask(id=name, role=role.name, instruction=prompt),
            status=result.status,
            worker=result,
            error=result.error,
            duration_s=time.perf_counter() - started,
        )
        record.phase_finished(outcome)
    return worker, result
