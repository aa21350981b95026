"""Running an eval: every case (``repeat`` times) a run of the hive's Executor, at
most ``concurrency`` at once, each scored by its checks as it ends; the report kept
in the Executor's run store by its eval id.

Each case's run is bounded by the hive's own budgets. The eval's
:class:`~honeycomb.evals.budget.EvalBudget` bounds the whole: a run starts only while
it can cover it, with the runs under way (:class:`~honeycomb.evals.budget.Starts`), and
the cases left once it cannot are told as not run.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any

import msgspec

from honeycomb.evals.budget import EvalBudget, Starts, check_priced
from honeycomb.evals.cases import Case, Cases
from honeycomb.evals.checks import Check, Verdict, as_check, verdict
from honeycomb.evals.kept import interrupted, keep_report
from honeycomb.evals.memory import EvalMemory, Sharing, memories_of
from honeycomb.evals.record import (
    Asked,
    CaseRun,
    Judges,
    RunCalls,
    asked_in,
    asked_in_rows,
    case_run,
    tool_uses,
)
from honeycomb.evals.report import Attempt, CaseReport, EvalReport
from honeycomb.evals.undecided import deny_left, deny_undecided
from honeycomb.executor import Executor
from honeycomb.hive import Hive
from honeycomb.run.result import RunResult
from honeycomb.run.sub_runs import may_ask
from honeycomb.store.evals import KEEP_EVAL_RUN, eval_run_id
from honeycomb.trace.format import counted
from runtime import Model, StoreError, Usage
from runtime.concurrency import run_together, shielded
from runtime.models.layers.cassette import cassette_case
from runtime.models.layers.cost_cap import price_of
from runtime.secrets import masked
from workers import Role

__all__ = [
    "Progress",
    "assert_case",
    "evaluate",
    "judges_of",
    "new_eval_id",
    "scored",
]

Progress = Callable[[str, Attempt, int, int], None]
"""Told of each run as it is scored (or taken from the interrupted eval it goes on
with): ``(case id, attempt, runs done, runs in all)``."""


def new_eval_id() -> str:
    """A new eval id: ``ev-`` and 8 hex digits."""
    return f"ev-{os.urandom(4).hex()}"


async def evaluate(
    executor: Executor,
    cases: Cases | Sequence[Case],
    *,
    concurrency: int = 8,
    repeat: int = 1,
    budget: EvalBudget | None = None,
    judges: Judges | None = None,
    eval_id: str | None = None,
    hive: str = "",
    on_run: Progress | None = None,
    keep: bool = True,
    go_on: bool = True,
    memory: Sharing | None = None,
) -> EvalReport:
    """Run every case on ``executor``, score it, and return the report.

    Args:
        executor: Runs each case (``Executor.from_hive``); with a store, each run is
            kept there, and so is the report (by its eval id).
        cases: The cases (:func:`~honeycomb.evals.load_cases`, or :class:`Case`\\ s).
        concurrency: Runs at once, at most.
        repeat: Runs of each case: its pass rate and spread say how steady it is.
        budget: What the whole eval may spend.
        judges: The roles ``judge`` checks ask (default: the Executor's roles, and
            those of the cases' file's ``judges:`` hive: :func:`judges_of`).
        eval_id: Its id (default: a new one). The id of an eval that was interrupted
            and kept in the Executor's store goes on with it (one of the same
            ``hive`` and cases' name): the runs it made of a case of the same id and
            task are taken as they were, not made again.
        hive: What the report names as the hive evaluated.
        on_run: Told of each run as it is scored.
        keep: Keep the report in the Executor's store (when it has one).
        go_on: Go on with the interrupted eval of ``eval_id`` (False: make every run
            anew and replace it, as a recording must: its cassette, started anew,
            holds the calls of the runs made now alone; so do cases that share an
            ``EvalMemory``, whose runs built on a memory that is gone).
        memory: Whose long-term memory each run has, with an Executor given an
            :class:`~honeycomb.evals.memory.EvalMemory`: its ``own``, empty as it
            starts, or one ``shared`` by the cases, empty as the eval starts (default:
            the cases file's ``memory:``, else ``own``).

    Raises:
        ConfigError: for a ``budget`` in dollars when no model of the Executor (nor of
            the hives it calls as tools, nor of the judges) has a price; or what the
            Executor's runs would each raise as they began
            (:meth:`~honeycomb.Executor.check_runnable`).
        ValueError: for a concurrency or repeat below 1, no cases, two cases of one id, or an
            Executor whose roles recall and keep memories in a memory every run shares
            (not an ``EvalMemory``), unless ``memory`` (or the cases file) says
            ``shared``: its cases would recall what each other kept.

    Cancelled (Ctrl-C), it keeps the report of the runs made so far, ``interrupted``,
    in the Executor's store before it lets the cancellation through.
    """
    if concurrency < 1 or repeat < 1:
        raise ValueError(f"concurrency and repeat are at least 1, not {concurrency} and {repeat}")
    listed = cases.cases if isinstance(cases, Cases) else tuple(cases)
    if not listed:  # its report would say it passed: a CI job would be green on nothing
        raise ValueError("no cases to evaluate: an eval of none would pass, having run nothing")
    named = [c if c.id else _renamed(c, f"case-{n}") for n, c in enumerate(listed, 1)]
    ids = [c.id for c in named]
    if len(set(ids)) != len(ids):
        raise ValueError(f"two cases are named {next(i for i in ids if ids.count(i) > 1)!r}")
    if judges is None:  # the cases file's judges: hive, which each of its cases names too
        given = (cases.judges,) if isinstance(cases, Cases) else ()
        hives = [h for h in (*given, *(c.judges for c in listed)) if h is not None]
        judges = judges_of(executor, hives[0] if hives else None)
    judged = any(price_of(model) is not None for model in judges.models)
    check_priced(budget, judged or executor.priced())
    executor.check_runnable()  # once: else every case would fail alike, as it began
    sharing = memory or (cases.memory if isinstance(cases, Cases) else "own")
    each_run, shared = memories_of(executor, sharing)
    named_by_caller, eval_id = bool(eval_id), eval_id or new_eval_id()
    session = _Session(eval_id, executor, judges, budget, len(named) * repeat, on_run, each_run)
    store = executor.store if keep else None
    if named_by_caller and executor.store is not None:
        # Runs of it a killed process left with calls waiting: nobody else denies them.
        await deny_left(executor.store, eval_id)
    earlier = None
    # Cases that share the eval's own memory build on what the runs before kept: that
    # of an interrupted eval is gone, so its runs are not taken, but made again.
    if store is not None and named_by_caller and go_on and shared is None:
        earlier = await interrupted(store, eval_id)
    name = cases.name if isinstance(cases, Cases) else "cases"
    if earlier is not None and (earlier.hive, earlier.name) != (hive, name):
        earlier = None  # an eval of another hive or cases file: its runs are not these
    head = EvalReport(
        eval_id=eval_id,
        name=name,
        hive=hive,
        cases_file=cases.file if isinstance(cases, Cases) else None,
        started_at=time.time() if earlier is None else earlier.started_at,
        repeat=repeat,
        concurrency=concurrency,
    )
    clock = time.perf_counter() - (earlier.wall_s if earlier is not None else 0.0)
    try:
        # The cases' shared memory, if they share one: empty as the eval starts.
        with shared.scope() if shared is not None else _NO_SCOPE:
            await session.run_all(named, repeat, concurrency, earlier)
    except BaseException:  # cancelled, Ctrl-C: what was scored is kept, then it stops
        if store is not None:
            cut = session.report(head, named, time.perf_counter() - clock, interrupted=True)
            with contextlib.suppress(StoreError):  # a store that fails stops no cancel
                await shielded(keep_report(store, cut))
        raise
    report = session.report(head, named, time.perf_counter() - clock)
    if store is not None:  # every run made: cancelled now, it is kept whole still
        await shielded(keep_report(store, report))
    return report


async def assert_case(executor: Executor, case: Case, *, repeat: int = 1) -> CaseReport:
    """Run one case, as a test does (``pytest.mark.parametrize`` over a cases file's
    cases), and return its report; its report is not kept.

    Raises:
        AssertionError: when it fails, naming its run and each failing check's reason.
    """
    report = await evaluate(executor, [case], repeat=repeat, keep=False)
    (found,) = report.cases
    if not found.passed:
        failing = [
            f"{a.run_id}: {v.check}: {v.reason}"
            for a in found.attempts
            for v in a.verdicts
            if not v.passed
        ]
        shown = "\n  ".join(failing or [f"{a.run_id}: score {a.score:.2f}" for a in found.attempts])
        raise AssertionError(f"case {found.id!r} failed:\n  {shown}")
    return found


def judges_of(
    executor: Executor,
    hive: Hive | None,
    models: Model | Mapping[str, Model] | None = None,
) -> Judges:
    """The roles an eval's ``judge`` checks may ask: ``executor``'s, and those of a
    cases file's ``judges:`` ``hive`` on that hive's own models (``models``: in their
    place, as ``Executor.from_hive`` takes them)."""
    if hive is None:
        return Judges(executor.roles, executor.shared.crew.model_for)
    other = Executor.from_hive(hive, models=models, backend=None)

    def model_for(role: Role) -> Model:
        crew = executor.shared.crew if role.name in executor.roles else other.shared.crew
        return crew.model_for(role)

    return Judges({**other.roles, **executor.roles}, model_for)


_NO_SCOPE = contextlib.nullcontext()


def _renamed(case: Case, name: str) -> Case:
    return msgspec.structs.replace(case, id=name)


class _Session:
    """One eval under way: what it spent, what each case's runs found."""

    def __init__(
        self,
        eval_id: str,
        executor: Executor,
        judges: Judges,
        budget: EvalBudget | None,
        total: int,
        on_run: Progress | None,
        memory: EvalMemory | None = None,
    ) -> None:
        self.eval_id = eval_id  # whose runs it makes: their ids say so, if they may ask
        # Whether a call of its runs may wait for a person's approval (in the store).
        self._asks = executor.store is not None and may_ask(executor.shared.crew)
        self.executor = executor
        self.memory = memory
        self.judges = judges
        self.total = total
        self.on_run = on_run
        self.starts = Starts(budget)
        self.done = 0
        self.found: dict[str, list[Attempt | None]] = {}
        self._side_effects: dict[tuple[str, str], bool] = {}

    async def run_all(
        self, cases: Sequence[Case], repeat: int, concurrency: int, earlier: EvalReport | None
    ) -> None:
        """Run each case ``repeat`` times, but the runs ``earlier`` (the same eval,
        interrupted) made of it."""
        self.found = {c.id: [None] * repeat for c in cases}
        if earlier is not None:
            self._reuse(earlier, cases)
        work = [(c, n) for c in cases for n in range(repeat) if self.found[c.id][n] is None]
        queue = iter(work)  # each of at most ``concurrency`` workers takes the next
        workers = [self._worker(queue) for _ in range(min(concurrency, len(work)))]
        await run_together(None, workers)

    def _reuse(self, earlier: EvalReport, cases: Sequence[Case]) -> None:
        """Take the runs ``earlier`` made of each case of the same id and task (its
        checks' verdicts as they were then), as if made now: spent in the eval's
        budget, counted as done, told to ``on_run``."""
        kept = {c.id: c for c in earlier.cases}
        for case in cases:
            found = kept.get(case.id)
            if found is None or found.task != masked(case.task):  # kept masked
                continue
            slots = self.found[case.id]
            for number, attempt in enumerate(found.attempts[: len(slots)]):
                slots[number] = attempt
                self.done += 1
                judged = Usage(
                    input_tokens=attempt.judge_tokens,
                    model_calls=attempt.judge_model_calls,
                    cost=attempt.judge_cost,
                )
                made = Usage(
                    input_tokens=attempt.tokens, model_calls=attempt.model_calls, cost=attempt.cost
                )
                self.starts.spent(made + judged, judged)
                if self.on_run is not None:
                    self.on_run(case.id, attempt, self.done, self.total)

    def attempts(self, case: str) -> tuple[Attempt, ...]:
        """The runs of ``case`` that were made, in order."""
        return tuple(a for a in self.found[case] if a is not None)

    def report(
        self, head: EvalReport, cases: Sequence[Case], wall_s: float, *, interrupted: bool = False
    ) -> EvalReport:
        """``head`` (the eval's id, name ...) with every case's runs made so far: all
        of them, or those made before it was ``interrupted``. Masked as a run's result
        is: a case's task and its checks' texts are the cases file's, which may quote a
        secret (its attempts are masked as they are scored)."""
        stopped = self.starts.stopped
        if interrupted:
            stopped = f"the eval was interrupted ({self.done} of {counted(self.total, 'run')} made)"
        made = [(c, self.attempts(c.id)) for c in cases]
        return masked(
            msgspec.structs.replace(
                head,
                wall_s=wall_s,
                cases=tuple(
                    CaseReport(
                        id=c.id,
                        task=c.task,
                        attempts=attempts,
                        description=c.description,
                        not_run=head.repeat - len(attempts),
                    )
                    for c, attempts in made
                    if attempts
                ),
                not_run=tuple(c.id for c, attempts in made if not attempts),
                stopped=stopped,
                interrupted=interrupted,
            )
        )

    async def _worker(self, queue: Iterator[tuple[Case, int]]) -> None:
        for case, number in queue:
            if not await self.starts.start():
                continue  # the eval's budget cannot cover it: told as not run
            with self.starts.running():
                attempt = await self._attempt(case)
            self.found[case.id][number] = attempt
            self.done += 1
            if self.on_run is not None:
                self.on_run(case.id, attempt, self.done, self.total)

    async def _attempt(self, case: Case) -> Attempt:
        result: RunResult | None = None
        error: Exception | None = None
        calls = RunCalls()
        try:
            # A new run. One whose calls may wait for a person is kept as the eval's
            # before it starts, in any process that reads the store: nobody decides on
            # them (the page and Executor.decide refuse; the eval denies those it
            # leaves waiting, below). Others are given no id: a run given one is
            # looked up in the store first (to be resumed), a wait for its writer.
            # Its model calls are the case's (a cassette records and replays them so).
            # Its memory is its own (when the cases share none): empty as it starts.
            scope = self.memory.scope() if self.memory is not None else _NO_SCOPE
            named = await self._named_run()
            with cassette_case(case.id), scope:
                result = await self.executor.run(case.task, run_id=named, on_event=[calls])
        except Exception as exc:
            # A HoneycombError's partial result, if any, is scored; any other error (a
            # bug in the user's Python planner or aggregator) is this case's alone, and
            # the other cases go on. Cancellation and Ctrl-C stop them all.
            error = exc
        except BaseException:  # cut off: the calls it left waiting are denied first
            await self._deny_undecided(calls.run_id, cut_off=True)
            raise
        found = result if result is not None else getattr(error, "partial", None)
        # One that raised before it had a result is a run of the store still (its
        # trace shows where it failed): its id is the one its first event told.
        run_id = found.run_id if found is not None else calls.run_id
        # A run that ended well lists the calls that wait in its result (one stopped
        # may not): the store is read only when one may have left some.
        if found is None or found.pending or found.status not in ("ok", "partial"):
            await self._deny_undecided(calls.run_id)
        asked = asked_in(found)
        if calls.nested and run_id:
            asked.update(await self._asked_by_nested(run_id, calls.nested))
        judges = self.judges.fresh()
        run = case_run(
            case=case.id,
            task=case.task,
            expected=case.expected,
            run_id=run_id,
            result=result,
            error=error,
            tool_calls=tool_uses(calls, asked, self._has_side_effects),
            judges=judges,
            finished=calls.finished,
        )
        checks = [as_check(c) for c in case.checks] or [_RUN_OK]
        with cassette_case(case.id):  # its judges' calls are the case's too
            verdicts = tuple([await verdict(check, run) for check in checks])
        self.starts.spent(run.usage + judges.spent, judges.spent)
        allowed = any(c.allows_error for c in checks)
        about = tuple(s for c in checks for s in c.statuses)
        # What a check says may quote the case's task or expected answer: masked before
        # anyone is told of it (``on_run``), as the run's result is.
        return masked(scored(case, run, verdicts, judges.spent, allows_error=allowed, allows=about))

    async def _named_run(self) -> str | None:
        """The id of a new run of the eval whose calls may wait for a person, kept as
        the eval's in the store before it starts (None: its calls never wait there).

        Raises:
            StoreError: when the store cannot be written.
        """
        store = self.executor.store
        if store is None or not self._asks:
            return None
        named = eval_run_id(self.eval_id)
        await store.commit((KEEP_EVAL_RUN, (named, self.eval_id)))
        return named

    async def _deny_undecided(self, run_id: str, *, cut_off: bool = False) -> None:
        """Deny the calls run ``run_id`` left waiting for a person (nobody decides for
        an eval: approved later, one would resume the run into its side effect), to
        the end even when the eval is cancelled meanwhile. A store that fails as a run
        is ``cut_off`` does not stop the cancellation.

        Raises:
            StoreError: when the store cannot be read or written (not ``cut_off``).
        """
        store = self.executor.store
        if store is None or not run_id:
            return
        if not cut_off:
            await shielded(deny_undecided(store, run_id))
            return
        with contextlib.suppress(StoreError):
            await shielded(deny_undecided(store, run_id))

    async def _asked_by_nested(self, run_id: str, workers: Sequence[str]) -> Asked:
        """The arguments of the calls nested workers asked for: a run's result holds
        only its subtasks' workers, the run store each nested one's messages (a run
        with no store: not known)."""
        store = self.executor.store
        if store is None:
            return {}
        try:
            stored = await store.load(run_id)
        except StoreError:
            return {}
        found: Asked = {}
        for name in workers:
            kept = stored.workers.get(name) if stored is not None else None
            if kept is not None:
                found.update(asked_in_rows(name, kept.messages))
        return found

    def _has_side_effects(self, role: str, tool: str) -> bool:
        key = (role, tool)
        found = self._side_effects.get(key)
        if found is None:
            found = False
            declared = self.executor.roles.get(role)
            if declared is not None:
                setup = self.executor.shared.crew.setup_for(declared, None)
                listed = setup.tools.get(tool)
                found = bool(listed is not None and listed.side_effects)
            self._side_effects[key] = found
        return found


def _run_ok(answer: Any, run: CaseRun) -> str | None:
    if run.status == "ok":
        return None
    return f"the run ended {run.status}" + (f": {run.error}" if run.error else "")


_RUN_OK = Check(name="status 'ok'", fn=_run_ok)
"""The check of a case that has none: its run ends ``ok``."""


UNANSWERED = frozenset({"error", "failed", "over_budget", "waiting"})
"""How a run may end with no answer: a case whose run did is failed, unless a check is
about that (``status: failed``)."""


def scored(
    case: Case,
    run: CaseRun,
    verdicts: tuple[Verdict, ...],
    judged: Usage,
    *,
    allows_error: bool = False,
    allows: Collection[str] = (),
) -> Attempt:
    """A case's run, scored by its checks' ``verdicts``, what its judges spent
    (``judged``) kept apart from what it spent. A run that ended with no answer
    (:data:`UNANSWERED`: it raised before it had a result, failed, went over budget
    or waits) fails with score 0, whatever its checks found (those of what it did
    not do hold on a run that did nothing: a replay whose request changed, a final
    answer a guard refused), unless a check is about how it ended: ``allows`` names
    it (a ``status`` check's statuses), or, for ``error``, a check ``allows_error``."""
    weight = sum(v.weight for v in verdicts)
    score = sum(v.score * v.weight for v in verdicts) / weight if weight else 1.0
    threshold = case.threshold
    passed = all(v.passed for v in verdicts) if threshold is None else score >= threshold
    allowed = {*allows, *(("error",) if allows_error else ())}
    unanswered = run.answer is None and not run.answer_text
    unscored = run.status in UNANSWERED and unanswered and run.status not in allowed
    if unscored:
        passed, score = False, 0.0  # it did nothing its checks could score
    return Attempt(
        run_id=run.run_id,
        passed=passed,
        score=round(score, 6),
        status=run.status,
        verdicts=verdicts,
        cost=run.usage.cost,
        judge_cost=judged.cost,
        judge_tokens=judged.total_tokens,
        judge_model_calls=judged.model_calls,
        latency_s=run.wall_s,
        critical_path_s=run.critical_path_s,
        tokens=run.usage.total_tokens,
        model_calls=run.usage.model_calls,
        error=run.error,
        unanswered=unscored,
    )
