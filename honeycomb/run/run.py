"""One call of :meth:`honeycomb.Executor.run`: its phases (plan, workers, aggregate),
its record in the run store, and its result."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from msgspec.structs import replace

from honeycomb.run.agents import NestedRuns
from honeycomb.run.aggregator import aggregate, aggregator_role, keep_answers
from honeycomb.run.context import RunContext
from honeycomb.run.events import (
    AggregationFinished,
    AggregationStarted,
    PlanReady,
    RoundPlanned,
    RoundStarted,
    RunFinished,
    RunStarted,
)
from honeycomb.run.plan import Plan, on_failed_problems, plan_problems
from honeycomb.run.planner import (
    RoundPlanner,
    StaticPlanner,
    SubtaskSpec,
    as_plan,
    checked,
    follow_up_with,
    plan_with,
)
from honeycomb.run.policy import Policy
from honeycomb.run.result import (
    PlanRound,
    RunResult,
    RunTimings,
    SubtaskResult,
    answer_as_text,
    answers_withheld,
    rounds_of,
    run_timings,
    timings_of,
    why_failed,
)
from honeycomb.run.scheduler import Scheduler, stopped_error, stopped_status
from runtime import (
    Budget,
    BudgetExceeded,
    ConfigError,
    ContextBudgetTooSmall,
    EventHandler,
    GuardrailTripped,
    HoneycombError,
    ModelError,
    PlanError,
    RunBusy,
    RunFailed,
    Tracer,
)
from runtime.concurrency import TimedOut, innermost, shielded, within
from runtime.errors import RunMismatch
from runtime.events import HeldText, event_time
from runtime.limits.cut import RunCut, keep_cut, run_cut
from runtime.limits.retry_policy import wall_time_ends
from workers.guards import GuardKind, GuardRunner, Judge, Refusal, tripped

if TYPE_CHECKING:
    from pydantic import BaseModel

    from honeycomb.run.record import RunRecord
    from honeycomb.run.restore import Resumed
    from honeycomb.run.session import Converse
    from honeycomb.run.shared import Shared
    from honeycomb.trace.spans import Span
    from honeycomb.trace.timeline import Timeline

__all__ = ["Run"]


class Run:
    """One call of :meth:`Executor.run`: its phases, record and result.

    Args:
        shared: What the Executor's runs share (roles, models, policy, store ...).
        task: The task.
        run_id: The run's id.
        handlers: Called with every event of this run, after the Executor's own.
        text: The handlers also get the answers' text as it is written (models that
            can stream do, as :class:`~runtime.events.TextDelta` events).
        within: The run this one is a sub-run of (a hive called as a tool): it
            spends that run's budget (its own hive's budgets, wall time included, do
            not apply) and holds its locks and tool and model limiters.
        quiet: Of the Executor's handlers, those it gives none of its events: for a
            sub-run, those that record its caller's spans, where its own go already
            (:class:`~honeycomb.trace.spans.SubRunSpans`).
        converse: The conversation before the task, when the run answers a message
            of a session (:mod:`honeycomb.run.session`): asked once, as it plans.
    """

    def __init__(
        self,
        shared: Shared,
        task: str,
        run_id: str,
        handlers: Sequence[EventHandler],
        *,
        text: bool = False,
        within: RunContext | None = None,
        converse: Converse | None = None,
        quiet: Sequence[object] = (),
    ) -> None:
        self.shared = shared
        self.converse = converse
        self.task = task
        self.run_id = run_id
        self.handlers, self.text = handlers, text  # for a life that continues this one
        policy = shared.policy
        reporting = shared.reporting
        self.record: RunRecord | None = None
        if reporting.store is not None and within is None:  # a sub-run keeps no store
            # The run store's modules (and sqlite3) load with the first run that keeps one.
            from honeycomb.run.record import RunRecord

            self.record = RunRecord(reporting.store, run_id, policy.on_unknown_outcome)
        own = [h for h in reporting.handlers if not any(h is q for q in quiet)]
        every = [*own, *handlers]
        spans = None
        if reporting.trace and within is None:  # spans (and their module) only if recorded
            from honeycomb.trace.spans import SpanRecorder

            # The span recorder takes every event last, after the callers' handlers. A
            # backend's workers' events come later than they happened (a Ray actor's,
            # in batches): they are timed by when they did; here, now is when (the
            # clock a call fewer an event: benchmark F).
            clock = event_time if shared.backend is not None else time.time
            kept = self.record.span if self.record is not None else None
            spans = SpanRecorder(kept, clock=clock)
            every.append(spans)
        self.tracer = Tracer(*every, log=reporting.log_events, text=text)
        base = shared.services
        crew = shared.crew
        if within is not None:  # a sub-run: under its caller's budget, locks and slots
            base = base.within(within.services)
            crew = crew.under(within.services.model_slots)
        budget = base.budget  # a sub-run's is its caller's
        if within is None:  # it names where each limit is set in every refusal it makes
            budget = Budget(policy.budgets, settings=shared.budget_settings())
        judge = Judge(crew.roles, crew.model_for, budget, within.services.judge if within else None)
        guards, merger = base.guards, aggregator_role(shared.phases.aggregator)
        if guards.output and merger is not None:  # its answer, its own guards passed
            guards = guards.without_output(crew.setup_for(crew.roles[merger], None).guards.output)
        self.guards = GuardRunner(
            guards, tracer=self.tracer, judge=judge, run_id=run_id, budget=budget
        )
        services = replace(
            base,
            run_id=run_id,
            tracer=self.tracer,
            budget=budget,
            judge=judge,
            models=crew.models,
        )
        self.context = RunContext(
            services=services,
            crew=crew,
            policy=policy,
            spans=spans,
            # A sub-run (a hive called as a tool) runs its workers where its caller's do.
            backend=within.backend if within is not None else shared.backend,
            aggregator=aggregator_role(shared.phases.aggregator),
            kept=self.record is not None,
            holds_answers=bool(self.guards.guards.output)
            and aggregator_role(shared.phases.aggregator) is None,
        )
        self.plan = Plan(subtasks=())
        self.scheduler: Scheduler | None = None
        self.times = {"plan": 0.0, "workers": 0.0, "aggregate": 0.0}
        self.spans = spans
        self.started = time.perf_counter()
        self.resumed: Resumed | None = None
        self.earlier_spans: list[Span] = []
        self.rounds: list[PlanRound] = []
        self.lead: RoundPlanner | None = None  # the planner of a run planned in rounds
        self.rounds_ended: str | None = None
        self._round: int | None = None  # the round its lead plans now, not yet in rounds
        self.answer_cut_off = False  # the aggregator's answer ended at its output limit
        self.most: int | None = None  # the most subtasks the plan can come to (None: its own)
        self.within = within is not None
        self.caller = within.run_id if within is not None else None  # whose call runs it
        self._current: tuple[str, float] | None = None  # the phase under way, since when

    async def execute(
        self, subtasks: Plan | Sequence[SubtaskSpec] | None, *, resumable: bool, steal: bool
    ) -> RunResult:
        if self.record is not None:
            done = await self._open_record(resumable, steal, subtasks)
            if done is not None:
                return done
        self.tracer.emit(RunStarted(run_id=self.run_id, task=self.task, caller=self.caller))
        nested = NestedRuns(lambda: self.context, self.record, self.resumed)
        try:
            with nested.active():  # the run's agent tools run their workers in it
                result = await self._within_wall_time(subtasks)
        except (BudgetExceeded, RunFailed, GuardrailTripped) as exc:
            await self._fail(exc)
            raise
        except PlanError as exc:
            # A resumed run's plan that no longer fits its roles: what its earlier lives
            # ran is its partial result. A plan that failed before any subtask ran has none.
            if self.scheduler is not None or self._restored():
                await self._fail(exc)
            else:
                await self._finished("failed", None, exc)
            raise
        except HoneycombError as exc:
            await self._finished("failed", None, exc)
            raise
        except asyncio.CancelledError as exc:
            await self._interrupted(exc)
            raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit ... from a tool or model
            stopped = innermost(exc)
        else:
            await self._finished(result.status, result, None)
            if result.status == "waiting":
                return await self._decided_meanwhile(result)
            return result
        if isinstance(stopped, Exception):  # an error that came out of a task group
            await self._finished("failed", None, stopped)
        else:
            await self._interrupted(stopped)
        raise stopped  # itself, not the exception group of a task it was raised in

    async def _decided_meanwhile(self, waiting: RunResult) -> RunResult:
        """The result of a run that ended waiting, unless the calls a paused worker
        waits on were all decided meanwhile, elsewhere (another process), too late for
        its scheduler to see: then the run goes on at once, in a life of its own (the
        end of this one is recorded: a process that decided after it, seeing the run
        waiting, may take it on first, and then it is that one's to continue).

        Raises:
            PlanError, RunFailed, BudgetExceeded: as the continued run raises them.
        """
        from honeycomb.run.decide import decided_among, waits_on

        if self.record is None or self.within:
            return waiting
        found = await self.record.store.approvals_of(self.run_id)
        paused = [o.worker.pending for o in waiting.subtasks.values() if o.worker is not None]
        if not any(decided_among(found, waits_on(pending)) for pending in paused):
            return waiting
        going_on = Run(
            self.shared,
            self.task,
            self.run_id,
            self.handlers,
            text=self.text,
            converse=self.converse,
        )
        try:
            return await going_on.execute(None, resumable=True, steal=False)
        except RunBusy as exc:
            if exc.taken_over:
                raise
            return waiting  # another process took it on

    async def _within_wall_time(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
        """The run's phases under its wall-time budget, if it has one: the time its
        lives ran together, so a resumed run has what its earlier lives left. A sub-run
        (a hive called as a tool) sets no deadline of its own: it spends its caller's
        budget, whose run's deadline bounds it, as every other limit of that budget.

        Raises:
            BudgetExceeded: when the budget's own deadline passed (a TimeoutError raised
                inside the run, by a planner, an aggregator or a store, stays itself).
        """
        budget = self.context.budget
        wall = budget.limits.wall_time_s
        if wall is None or self.within:
            return await self._phases(subtasks)
        deadline = within(None)
        # What was in flight when the deadline passed, seen before the calls it
        # cancels end (it is taken, then the run cancelled, in one callback); the
        # workers it cuts off are stopped by the budget, and say so as they end.
        exceeded: list[BudgetExceeded] = []

        def expire(used: float | None = None) -> None:
            used = round(budget.elapsed_s, 3) if used is None else used
            over = BudgetExceeded("wall_time_s", wall, used, budget.in_flight())
            exceeded.append(budget.refusal(over))
            if self.scheduler is not None and self.scheduler.stopped is None:
                self.scheduler.stopped = exceeded[0]
            deadline.expire()
            cut.fell(used)

        # A replay cuts the run where its recording was cut (runtime.limits.cut); a
        # recording keeps where it falls, even before any call (its handler is told).
        cut = RunCut(expire)
        keep_cut(self.tracer.handlers, cut)
        # The budget's elapsed time counts the earlier lives of a resumed run.
        loop = asyncio.get_running_loop()
        left = wall - budget.elapsed_s
        timer = loop.call_at(loop.time() + left, cut.now)
        # A model call's retries end there too: none waits for a Retry-After past it.
        ends = wall_time_ends.set(time.monotonic() + left)
        cutting = run_cut.set(cut)
        try:
            with deadline:
                return await self._phases(subtasks)
        except TimedOut:
            if not deadline.expired:
                raise
        finally:
            timer.cancel()
            wall_time_ends.reset(ends)
            run_cut.reset(cutting)
        raise exceeded[0]  # (the deadline expires only through expire)

    async def _interrupted(self, exc: BaseException) -> None:
        """Record the run as interrupted, whatever stops it (cancellation, Ctrl-C, a
        tool's SystemExit ...): every finished worker is kept, and a resume continues."""
        why = None if isinstance(exc, asyncio.CancelledError) else exc
        try:
            await shielded(self._finished("interrupted", None, why))
        except HoneycombError as error:  # the run stops anyway, for what stops it
            exc.add_note(f"Honeycomb could not record the run as interrupted: {error}")

    async def _open_record(
        self, resumable: bool, steal: bool, subtasks: Plan | Sequence[SubtaskSpec] | None
    ) -> RunResult | None:
        """Take the run's lease and start its record, or pick up the stored run of the
        same id: return its result if it ended with one, else remember what to
        continue from (refused if ``subtasks`` are not the plan its earlier lives ran)."""
        record = self.record
        assert record is not None
        await record.store.open()
        await record.take(steal=steal)
        try:
            done = await self._pick_up(record, resumable, subtasks)
        except BaseException:
            await shielded(record.release())
            raise
        if done is not None:
            await record.release()
        return done

    def _answer_type(self) -> type[BaseModel] | None:
        """The type of the run's answer: the Executor's ``output_type``, else the
        ``output_schema`` of the role that merges, if it has one."""
        phases, crew = self.shared.phases, self.shared.crew
        role = crew.roles.get(aggregator_role(phases.aggregator) or "")
        if phases.output_type is not None or role is None:
            return phases.output_type
        return crew.setup_for(role, None).settings.output_type

    async def _pick_up(
        self, record: RunRecord, resumable: bool, subtasks: Plan | Sequence[SubtaskSpec] | None
    ) -> RunResult | None:
        from honeycomb.run.restore import restore, retyped, stored_result

        stored = await record.store.load(self.run_id) if resumable else None
        if stored is not None:
            other = record.store.another_task(stored.task, self.task)
            if other is not None:
                raise RunMismatch(
                    self.run_id,
                    f"run {self.run_id!r} in {record.store.where} was started with another "
                    f"task ({other[:60]!r}); resume it with its own task, or use a new run_id",
                    task=other,
                )
            if subtasks is not None and stored.plan:
                _same_plan(subtasks, stored.plan, self.run_id, record.store.where)
            done = stored_result(stored)
            if done is not None:
                return retyped(done, "answer", self._answer_type())
            self.resumed = restore(stored)
            # What the earlier lives took, for the figures of every life (run_timings).
            self.earlier_spans = await asyncio.to_thread(record.store.spans, self.run_id)
            record.use_journals(self.resumed.journals)
            record.use_approvals(self.resumed.approvals)
            earlier = self._earlier()
            self.context.budget.restore(
                self.resumed.spent, wall_s=earlier.wall_s if earlier is not None else 0.0
            )
        # A sub-run (a hive called as a tool) spends its caller's budget: the caller's
        # record keeps it.
        budget = None if self.within else self.context.budget
        source, held = self.shared.reporting.source, self._held()
        record.started(self.task, source, resumed=self.resumed, budget=budget, held=held)
        return None

    async def _phases(self, subtasks: Plan | Sequence[SubtaskSpec] | None) -> RunResult:
        given = subtasks is not None
        ran = self.resumed.plan if self.resumed is not None else None  # by earlier lives
        if self.resumed is not None and ran is not None:
            given = self.resumed.given  # as the earlier life was: given it, or planned
            subtasks = ran  # the plan of the earlier life: never re-planned
            self.plan = ran  # what its earlier lives ran, whatever its check says
        lead = None if given else self.shared.phases.planner
        if not isinstance(lead, RoundPlanner) or lead.rounds < 2:
            lead = None  # planned once
        self.lead = lead
        planner = self.shared.phases.planner if subtasks is None else StaticPlanner(subtasks)
        if planner is None:
            raise ConfigError(
                "no planner: pass subtasks=..., define a role named 'planner', or give "
                "the Executor a planner"
            )
        began = self._phase("plan")
        if self.guards.guards.input and ran is None:
            _tripwire("input", await self.guards.input(self.task))  # before anything runs
        if self.converse is not None:  # the session's conversation, within its budget
            conversation = await self.converse(self.context)
            self.context = replace(self.context, conversation=conversation)
        if self.resumed is not None and ran is not None:
            self.plan = checked(ran, self.context, finished=self.resumed.finished)
        else:
            self.plan = await plan_with(planner, self.task, self.context)
        self.times["plan"] = time.perf_counter() - began
        self._phase(None)
        self.tracer.emit(
            PlanReady(run_id=self.run_id, plan=self.plan, duration_s=self.times["plan"])
        )
        if self.record is not None:
            await self.record.planned(self.plan, given=given)
        self.rounds = rounds_of(self.plan)

        self.most = self._most(lead)
        held = self._hold_answer_text()
        outcomes = await self._workers({}, self.resumed)
        if lead is not None and not _waiting(outcomes):
            outcomes = await self._rounds(lead, outcomes)
        if _waiting(outcomes):  # nothing else can proceed: no answer yet
            waiting = self._result("waiting", outcomes)
            # Nor have its guards passed one made of the answers of its workers so far.
            return answers_withheld(waiting) if self._held() == "workers" else waiting
        _check_quorum(self.shared.policy, outcomes)
        if not any(o.ok for o in outcomes.values()):
            failed = f"all {len(outcomes)} subtasks" if len(outcomes) > 1 else "its only subtask"
            why = why_failed(outcomes.values())
            raise RunFailed(f"{failed} failed; nothing to aggregate{why}")

        began = self._phase("aggregate")
        self.tracer.emit(AggregationStarted(run_id=self.run_id, results=len(outcomes)))
        context = self.context
        if held is not None:  # the aggregator's text, with the workers' if it holds them
            context = replace(context, services=replace(context.services, tracer=held))
        phases = self.shared.phases
        answer, self.answer_cut_off, keep = await aggregate(
            phases.aggregator, self.task, list(outcomes.values()), context, phases.output_type
        )
        if self.guards.guards.output:  # the final answer, whatever made it
            _tripwire("output", await self.guards.output(answer_as_text(answer), answer, 0))
        await keep()  # in the aggregator role's memory: never an answer a guard refused
        if self.context.holds_answers:  # the workers' answers it was made of, so too
            await keep_answers(list(outcomes.values()), self.context)
        overspent = self.context.budget.overspent()
        if overspent is not None:  # the aggregator's (or its judges') calls went past a limit
            raise overspent
        if held is not None:
            held.release()
        self.times["aggregate"] = time.perf_counter() - began
        self._phase(None)
        self.tracer.emit(
            AggregationFinished(run_id=self.run_id, duration_s=self.times["aggregate"])
        )
        status = "ok" if all(o.ok for o in outcomes.values()) else "partial"
        return self._result(status, outcomes, answer)

    def _held(self) -> str | None:
        """What the run holds back until its output guards pass its answer, as its
        record says it for every view of it (as the stream holds its text,
        :meth:`_hold_answer_text`): ``workers`` when its answer is made of its workers'
        answers (``concat``, a function); ``aggregate`` when an aggregator role writes
        it anew (its worker's answer is the run's); None when no output guard checks
        the answer."""
        if not self.guards.guards.output:
            return None
        return "workers" if self.context.holds_answers else "aggregate"

    def _hold_answer_text(self) -> HeldText | None:
        """The hold of the final answer's text until the run's output guards pass it
        (None: no guard checks it, or nobody reads it). An aggregator role writes the
        answer anew, so its text alone is held; any other aggregator (``concat``, a
        function) makes it of the workers' answers, so their text is held from the
        start: a worker's text that the run's guards refuse never reaches a listener."""
        if not (self.guards.guards.output and self.tracer.text):
            return None
        held = HeldText(self.tracer)
        if self.context.aggregator is None:  # a function, or concat
            services = replace(self.context.services, tracer=held)
            self.context = replace(self.context, services=services)
        return held

    async def _workers(
        self, earlier: dict[str, SubtaskResult], resumed: Resumed | None = None
    ) -> dict[str, SubtaskResult]:
        """Run the subtasks of the plan not in ``earlier`` (the rounds before); every
        outcome so far, in plan order."""
        self.scheduler = Scheduler(
            self.plan,
            self.context,
            self.shared.policy,
            record=self.record,
            resumed=resumed,
            earlier=earlier,
            most=self.most,
        )
        began = time.perf_counter()
        if self.record is not None:  # a decision recorded here is heard at once
            self.shared.bells[self.run_id] = self.record.bell
        try:
            return await self.scheduler.run()
        finally:
            self.shared.bells.pop(self.run_id, None)
            self.times["workers"] += time.perf_counter() - began

    async def _rounds(
        self, lead: RoundPlanner, outcomes: dict[str, SubtaskResult]
    ) -> dict[str, SubtaskResult]:
        """Ask the lead for more rounds until it is done, or ``rounds``, ``max_subtasks``
        or a budget stop it; every outcome so far, in plan order.

        Raises:
            RunFailed: when the lead fails to plan a round (an invalid round, or its
                model could not be reached) and the failure policy is ``fail_fast``
                (else the run goes on with what it has).
            BudgetExceeded: when the lead's calls go past the run's budget.
        """
        policy = self.shared.policy
        number = self.rounds[-1].round if self.rounds else 1
        while not _waiting(outcomes):
            room = policy.max_subtasks - len(self.plan.subtasks)
            if number >= lead.rounds or room <= 0:
                self.rounds_ended = "rounds" if number >= lead.rounds else "max_subtasks"
                break
            number += 1
            self.tracer.emit(RoundStarted(run_id=self.run_id, round=number))
            began = self._phase("plan")
            self._round = number
            try:
                added = await follow_up_with(
                    lead,
                    self.task,
                    self.plan,
                    list(outcomes.values()),
                    round=number,
                    room=room,
                    context=self.context,
                )
                added = self._checked_round(added, number, room, outcomes)
            except (
                PlanError,
                ModelError,
                GuardrailTripped,
                ContextBudgetTooSmall,
                ConfigError,
            ) as exc:
                # No valid round, no answer at all (nor a prompt its context budget holds,
                # or one its role's token counter could count), or its own guards could
                # not judge one: the rounds end with what ran.
                took = time.perf_counter() - began
                self.times["plan"] += took
                self._phase(None)
                error = f"{type(exc).__name__}: {exc}"
                self.rounds.append(PlanRound(round=number, error=error))
                self._round = None
                self.tracer.emit(
                    RoundPlanned(
                        run_id=self.run_id,
                        round=number,
                        added=Plan(subtasks=()),
                        duration_s=took,
                        error=error,
                    )
                )
                self.rounds_ended = "lead_failed"
                if policy.failure == "fail_fast":
                    raise RunFailed(
                        f"the lead failed to plan round {number} ({exc}); failure policy is "
                        "fail_fast"
                    ) from exc
                break
            took = time.perf_counter() - began
            self.times["plan"] += took
            self._phase(None)
            ids = added.ids
            self.rounds.append(PlanRound(round=number, added=ids))
            self._round = None
            self.tracer.emit(
                RoundPlanned(run_id=self.run_id, round=number, added=added, duration_s=took)
            )
            if not ids:
                self.rounds_ended = "done"
                break
            self.plan = Plan(subtasks=(*self.plan.subtasks, *added.subtasks))
            if self.record is not None:
                await self.record.planned(self.plan, given=False)  # kept before it runs
            self.most = self._most(lead)
            outcomes = await self._workers(outcomes)
        return outcomes

    def _most(self, lead: RoundPlanner | None) -> int | None:
        """The most subtasks the plan can come to while its latest round runs: up to
        max_subtasks while rounds are still to come, else its own (None)."""
        last = self.rounds[-1].round if self.rounds else 1
        if lead is None or last >= lead.rounds:
            return None
        return self.shared.policy.max_subtasks

    def _checked_round(
        self, added: Plan, number: int, room: int, outcomes: Mapping[str, SubtaskResult]
    ) -> Plan:
        """The lead's round, its subtasks marked with it, if it fits the plan so far
        and its ``outcomes``: whatever planner made it (a lead of your own too).

        Raises:
            PlanError: naming every problem (ids used before, unknown roles,
                dependencies on nothing or on a subtask that did not succeed, cycles,
                too many subtasks).
        """
        own = tuple(s.model_copy(update={"round": number}) for s in added.subtasks)
        marked = Plan(subtasks=own)
        if not marked.subtasks:
            return marked  # the lead is done
        whole = Plan(subtasks=(*self.plan.subtasks, *marked.subtasks))
        # The rounds before ran to their end: their roles may be gone (a resumed run's).
        problems = plan_problems(whole, list(self.context.roles), finished=outcomes)
        failed = {i for i, o in outcomes.items() if not o.ok}
        problems += on_failed_problems(marked, failed)  # it would be skipped, never run
        if len(marked.subtasks) > room:
            problems.append(
                f"round {number} adds {len(marked.subtasks)} subtasks; {room} more allowed "
                "(the policy's max_subtasks)"
            )
        if problems:
            raise PlanError(problems)
        return marked

    def _result(
        self, status: str, outcomes: Mapping[str, SubtaskResult], answer: Any = None
    ) -> RunResult:
        timings = self._timings(outcomes)
        pending = [p for o in outcomes.values() if o.worker is not None for p in o.worker.pending]
        return RunResult(
            run_id=self.run_id,
            pending=pending,
            rounds=list(self.rounds),
            rounds_ended=self.rounds_ended,
            task=self.task,
            status=status,
            answer=answer,
            answer_text=answer_as_text(answer),
            answer_cut_off=self.answer_cut_off,
            plan=self.plan,
            subtasks=dict(outcomes),
            usage=self.context.budget.usage,
            max_workers=self.shared.policy.max_workers,
            timings=timings,
        )

    def _timings(self, outcomes: Mapping[str, SubtaskResult]) -> RunTimings:
        """The run's timings over every life. Told by its spans if it records them,
        this life's ending now (and its spans end then): every view of the run, the
        trace and the web page, says the same. Else from what this life measured,
        and what the spans of the earlier lives say."""
        if self.spans is not None:
            from honeycomb.trace.timeline import measure

            spans = [*self.earlier_spans, *self.spans.rows_until()]
            return timings_of(measure(spans, self.plan.subtasks))
        return run_timings(
            wall_s=self._elapsed(),
            plan_s=self.times["plan"],
            workers_s=self.times["workers"],
            aggregate_s=self.times["aggregate"],
            outcomes=outcomes,
            plan=self.plan,
            earlier=self._earlier(),
            restored=self.resumed.finished if self.resumed else (),
        )

    def _earlier(self) -> Timeline | None:
        """The earlier lives of a resumed run, as their spans tell them."""
        if not self.earlier_spans:
            return None
        from honeycomb.trace.timeline import build_timeline

        return build_timeline(self.earlier_spans, self.plan.subtasks)

    def _phase(self, phase: str | None) -> float:
        """Now; the run is in ``phase`` (plan, aggregate) from now on (None: in none of
        them), so that a run stopped in the middle of one counts its time there."""
        now = time.perf_counter()
        self._current = (phase, now) if phase is not None else None
        return now

    async def _fail(self, exc: BudgetExceeded | RunFailed | GuardrailTripped | PlanError) -> None:
        if isinstance(exc, BudgetExceeded):  # one not made by the budget (a function's)
            self.context.budget.refusal(exc)  # (a sub-run's budget is its caller's)
        if self._current is not None:  # stopped in the middle of planning or aggregating
            phase, began = self._current
            self.times[phase] += time.perf_counter() - began
            self._current = None
        outcomes = self.scheduler.outcomes if self.scheduler is not None else self._restored()
        stopped, why = stopped_status(exc), stopped_error(exc)
        # Those it stopped: the wall-time budget interrupts mid-phase, and a resumed run
        # may stop before its scheduler starts them again.
        for subtask in self.plan.subtasks:
            outcomes.setdefault(
                subtask.id, SubtaskResult(subtask=subtask, status=stopped, error=why)
            )
        # In plan order, as a phase that ends orders them, not in the order they ended.
        outcomes = {s.id: outcomes[s.id] for s in self.plan.subtasks}
        status = "over_budget" if isinstance(exc, BudgetExceeded) else "failed"
        if self.lead is not None and self.rounds_ended is None:  # it stopped the rounds
            self.rounds_ended = _rounds_stopped_by(exc)
        if self._round is not None:  # as its lead planned a round: the round's end too
            self.rounds.append(PlanRound(round=self._round, error=f"{type(exc).__name__}: {exc}"))
            self._round = None
        exc.partial = self._result(status, outcomes)
        if self._held() == "workers":  # its guards never passed the answer made of them
            exc.partial = answers_withheld(exc.partial)
        await self._finished(status, exc.partial, exc)

    def _restored(self) -> dict[str, SubtaskResult]:
        """The outcomes of the subtasks a resumed run's earlier lives finished (none for
        a new run)."""
        return dict(self.resumed.finished) if self.resumed is not None else {}

    async def _finished(
        self, status: str, result: RunResult | None, exc: BaseException | None
    ) -> None:
        error = None if exc is None else "; ".join([f"{type(exc).__name__}: {exc}", *_notes(exc)])
        self.tracer.emit(
            RunFinished(
                run_id=self.run_id,
                status=status,
                wall_s=self._elapsed(),
                result=result,
                error=error,
                usage=None if self.within else self.context.budget.usage,
            )
        )
        await self._close_record(status, result, error)  # after the last span is queued

    async def _close_record(self, status: str, result: RunResult | None, error: str | None) -> None:
        if self.record is not None:
            await self.record.finished(status, result, self.context.budget.usage, error)

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started


def _rounds_stopped_by(exc: HoneycombError) -> str | None:
    """What ``rounds_ended`` says of a run planned in rounds that ``exc`` stopped before
    they ended: ``budget``, wherever it ran out; ``failed``, a subtask's failure under
    the failure policy; None: a guard stopped the run before its rounds began."""
    if isinstance(exc, BudgetExceeded):
        return "budget"
    return "failed" if isinstance(exc, RunFailed) else None


def _notes(exc: BaseException) -> list[str]:
    """What was added to ``exc`` on its way (which tool raised it ...)."""
    return [str(note) for note in getattr(exc, "__notes__", ())]


def _waiting(outcomes: Mapping[str, SubtaskResult]) -> bool:
    return any(o.status == "waiting" for o in outcomes.values())


def _check_quorum(policy: Policy, outcomes: Mapping[str, SubtaskResult]) -> None:
    """Under ``failure: quorum``, fail a run whose workers all ended with fewer
    successes than the quorum: a lead whose rounds ended early can leave a plan smaller
    than it (the scheduler stops a plan that cannot reach it as soon as it knows).

    Raises:
        RunFailed: naming the quorum and the successes.
    """
    needed = policy.quorum
    if policy.failure != "quorum" or needed is None:
        return
    succeeded = sum(1 for o in outcomes.values() if o.ok)
    if succeeded < needed:
        raise RunFailed(
            f"a quorum of {needed} successful subtasks was not reached: {succeeded} of "
            f"{len(outcomes)} succeeded{why_failed(outcomes.values())}"
        )


def _tripwire(kind: GuardKind, refusals: list[Refusal]) -> None:
    """Stop the run if a run's own guard refused its task or its final answer.

    Raises:
        GuardrailTripped: naming the guard that refused (one that raised, if any:
            ``broken``), and its reason.
    """
    if refusals:
        raise tripped(kind, refusals)


def _same_plan(
    subtasks: Plan | Sequence[SubtaskSpec], stored: str, run_id: str, where: str
) -> None:
    """Refuse subtasks given to a stored run that are not the plan (``stored``, as
    JSON) its earlier lives ran: a run goes on with its own plan, and answers for it;
    other subtasks would be another run's.

    Raises:
        RunMismatch: naming the first subtask that differs, and how.
        PlanError: when ``subtasks`` are no plan.
    """
    given, ran = as_plan(subtasks, "the plan given"), Plan.model_validate_json(stored)
    if given.subtasks == ran.subtasks:
        return
    if given.ids != ran.ids:
        how = f"its subtasks are {', '.join(ran.ids)}; those given are {', '.join(given.ids)}"
    else:
        first = next(g for g, r in zip(given.subtasks, ran.subtasks, strict=True) if g != r)
        kept = ran[first.id]
        fields = [f for f in type(first).model_fields if getattr(first, f) != getattr(kept, f)]
        how = f"subtask {first.id!r} differs in its {' and '.join(fields)}"
    raise RunMismatch(
        run_id,
        f"run {run_id!r} in {where} was started with another plan ({how}); resume it "
        "without subtasks= (it goes on with its own plan), or use a new run_id",
    )
