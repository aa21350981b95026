"""Guards: checks on what a worker is given, what it answers and the calls it makes.

A guard is a Python callable (given itself, or by import path ``module:name``), sync
or async, or the name of a role that judges (one model call of that role, answering
``PASS`` or a reason). It is given a :class:`GuardCheck` and returns None (or True) to
pass, or a reason (a string; False is a reason too).

- ``input`` guards check a subtask's instruction as its worker is told it (with its
  dependencies' results, the session's conversation when its role's workers see it,
  and the memories its role recalls for it) before its first model call: a reason
  fails the worker (:class:`~runtime.GuardrailTripped`).
- ``output`` guards check a worker's answer before it is accepted (after its output
  schema): a reason goes back to the model as a correction, up to the role's
  ``output_retries``; then the worker fails naming the guard.
- ``arguments`` guards check each tool call, its arguments validated, before any call
  of the turn runs: a reason is the call's error observation.

The guards of one kind run together, and only when nothing can change what they
check. A guard that raises trips at once (the model cannot fix a broken guard), but
for a budget the judge's call went past, which stops the worker as any model call
would. Each check is a :class:`GuardChecked` event (a ``guard`` span), with what a
judge's call cost; that call is charged to the run's budget.
"""

from __future__ import annotations

import copy
import inspect
import time
import traceback
from asyncio import CancelledError
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio.to_thread
from msgspec.structs import replace

from runtime import (
    Budget,
    BudgetExceeded,
    ConfigError,
    Event,
    GuardrailTripped,
    Tool,
    ToolCall,
    Tracer,
    Usage,
)
from runtime.concurrency import run_together
from runtime.events import CallReport, current_call
from runtime.limits.budget import CallInFlight, calls_to_read
from runtime.models.layers.budget import spent_by
from runtime.tools.define import arguments_text
from runtime.value import Value
from workers.guard_specs import (
    Guard,
    GuardCheck,
    GuardKind,
    GuardRef,
    Guards,
    ResolvedGuards,
    guard_problem,
    judge_problems,
    resolve_guards,
    written,
)
from workers.judge import JUDGE_INSTRUCTIONS, VERDICT_TOKENS, Judge, JudgeRole

__all__ = [
    "JUDGE_INSTRUCTIONS",
    "VERDICT_TOKENS",
    "Guard",
    "GuardCheck",
    "GuardChecked",
    "GuardKind",
    "GuardRef",
    "GuardRunner",
    "GuardStarted",
    "Guards",
    "Judge",
    "JudgeRole",
    "Refusal",
    "ResolvedGuards",
    "guard_problem",
    "judge_problems",
    "refusal_text",
    "resolve_guards",
    "tripped",
]


class GuardStarted(Event, frozen=True, kw_only=True):
    """A guard begins to check something (a judge's call may take a while): what it
    checks as its :class:`GuardChecked`, which says how it ended, names it."""

    kind: ClassVar[str] = "guard.started"
    guard: str
    guard_kind: str  # input, output or arguments
    turn: int = 0
    call_id: str = ""


class GuardChecked(Event, frozen=True, kw_only=True):
    """A guard checked something: ``ok`` (it passed), ``tripped`` (it gave a reason)
    or ``error`` (it raised); with its time, and a judge's model call (``model_calls``:
    1, made even when it failed), what it cost and the attempts it took."""

    kind: ClassVar[str] = "guard.checked"
    guard: str
    guard_kind: str  # input, output or arguments
    status: str
    duration_s: float
    turn: int = 0
    call_id: str = ""
    reason: str | None = None
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    model_calls: int = 0
    attempts: int = 1


class Refusal(Value, frozen=True, kw_only=True):
    """A guard that did not pass: its reason, and whether it raised (``broken``)."""

    guard: str
    reason: str
    broken: bool = False


class GuardRunner:
    """Runs one worker's (or one run's) guards and reports each check.

    Args:
        guards: The guards.
        tracer: Receives a :class:`GuardChecked` per check.
        judge: Asks the judge roles (None: its guards may name no judge role, a
            ConfigError as it is made).
        role: The worker's role (None: a run's own guards).
        worker: The worker's name.
        run_id: The run.
        budget: The run's budget, whose wall time, when it runs out, names the
            function guards under way as it names the model calls (``guard NAME of
            WORKER``; a judge's is a model call of its own).
    """

    def __init__(
        self,
        guards: ResolvedGuards,
        *,
        tracer: Tracer,
        judge: Judge | None = None,
        role: str | None = None,
        worker: str | None = None,
        run_id: str | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.guards = guards
        self.tracer = tracer
        if judge is None:
            _needs_no_judge(guards, role)
        self.judge = judge
        self.role = role
        self.worker = worker
        self.run_id = run_id
        self.budget = budget

    def _check(self, kind: GuardKind, text: str, **fields: Any) -> GuardCheck:
        return GuardCheck(
            kind=kind,
            text=text,
            role=self.role,
            worker=self.worker,
            run_id=self.run_id,
            **fields,
        )

    async def input(self, text: str) -> list[Refusal]:
        """The refusals of the input guards for an instruction (none: it passes)."""
        return await self._all(self.guards.input, self._check("input", text), turn=0)

    async def output(self, text: str, output: Any, turn: int) -> list[Refusal]:
        """The refusals of the output guards for an answer (none: it is accepted)."""
        check = self._check("output", text, output=output)
        return await self._all(self.guards.output, check, turn=turn)

    async def check(
        self, calls: Sequence[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[str | None]:
        """The argument guards on a turn's calls, all together: for each call, None or
        the text of its error observation (a :class:`~runtime.tools.dispatch.CallGuard`).

        Raises:
            BudgetExceeded: when the budget refused a judge's call, or the judges spent
                what the turn needed (the model call that reads the calls' results): no
                call of the turn runs then, as none runs when the turn is reserved
                past the budget.
        """
        found: list[list[Refusal]] = [[] for _ in calls]
        stopped: list[BudgetExceeded] = []

        async def one(index: int, call: ToolCall, kwargs: dict[str, Any]) -> None:
            check = self._check(
                "arguments", arguments_text(kwargs), tool=call.name, arguments=kwargs
            )
            try:
                found[index] = await self._all(
                    self.guards.arguments, check, turn=turn, call_id=call.id
                )
            except BudgetExceeded as exc:  # not judged: no verdict to keep
                stopped.append(exc)

        coros = [one(i, call, kwargs) for i, (call, _, kwargs) in enumerate(calls)]
        await run_together(None, coros)
        if stopped:
            raise stopped[0]
        await self._affords([tool for _, tool, _ in calls])
        return [_refused_call(refusals) for refusals in found]

    async def _affords(self, tools: Sequence[Tool[Any, Any]]) -> None:
        """Raise if the judges of a turn's calls spent what the turn needs: a model call
        to read the calls' results, unless one of them is a terminal tool's (its result
        is the answer), as the turn was reserved before they judged.

        Raises:
            BudgetExceeded: naming the limit they reached.
        """
        judged = any(guard.judge is not None for guard in self.guards.arguments)
        if judged and self.budget is not None:
            await self.budget.recheck(calls=calls_to_read(tools))

    async def _all(
        self, guards: Sequence[Guard], check: GuardCheck, *, turn: int, call_id: str = ""
    ) -> list[Refusal]:
        """Every guard on ``check`` at once; the refusals in the guards' order.

        Raises:
            BudgetExceeded: when a judge's call would go past the run's budget.
        """
        results: list[Refusal | BaseException | None] = [None] * len(guards)

        async def one(index: int, guard: Guard) -> None:
            try:
                results[index] = await self._one(guard, check, turn, call_id)
            except BudgetExceeded as exc:
                results[index] = exc

        await run_together(None, [one(i, g) for i, g in enumerate(guards)])
        refusals: list[Refusal] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            if result is not None:
                refusals.append(result)
        return refusals

    async def _one(
        self, guard: Guard, check: GuardCheck, turn: int, call_id: str
    ) -> Refusal | None:
        started = time.perf_counter()
        if self.tracer.enabled:
            self.tracer.emit(
                GuardStarted(
                    worker=self.worker,
                    run_id=self.run_id,
                    guard=guard.name,
                    guard_kind=check.kind,
                    turn=turn,
                    call_id=call_id,
                )
            )
        usage, model = Usage(), ""
        broken = False
        calls = 0  # the judge's model call, as the budget counts it
        report: CallReport | None = None  # its attempts, when anyone listens
        try:
            if guard.judge is not None:
                assert self.judge is not None  # a runner without one has no judge guard
                calls = 1  # made, answered or failed, unless the budget refuses it
                # The retry policy tells the report each retry of the judge's call, as
                # the checked turn's (``model_call.retrying``), as a worker's own call's.
                if self.tracer.enabled:
                    report = CallReport(
                        self.tracer, worker=self.worker, run_id=self.run_id, turn=turn
                    )
                reported = current_call.set(report)
                try:
                    reason, usage, model = await self.judge.ask(guard.judge, check, guard.up)
                finally:
                    current_call.reset(reported)
            else:
                assert guard.fn is not None
                reason = await self._called(guard, check, turn)
        except BudgetExceeded as exc:  # it refused the judge's call (none made), or a retry
            made = spent_by(exc)
            spent = (made or usage, "", calls if made is not None else 0, _attempts(report))
            self._report(guard, check, turn, call_id, started, "error", "budget exceeded", spent)
            raise
        except Exception as exc:  # a broken guard trips: the model cannot fix it
            where = _raised_at(guard.fn, exc) if guard.fn is not None else _judged(guard, exc)
            reason, broken = f"the guard raised {type(exc).__name__}: {exc}{where}", True
            usage = spent_by(exc) or usage  # a judge's call that gave no verdict spent it
        except BaseException as stopped:  # cut off as its worker was: it ends too
            status, reason = "cancelled", None
            if not isinstance(stopped, CancelledError):  # what stops the process fails it
                status, reason = "error", f"{type(stopped).__name__}: {stopped}"
                # KeyboardInterrupt, SystemExit ... stop the run: say who, as a tool's do
                stopped.add_note(f"raised by guard {guard.name!r} of worker {self.worker}")
            spent = (spent_by(stopped) or usage, "", calls, _attempts(report))
            self._report(guard, check, turn, call_id, started, status, reason, spent)
            raise
        status = "ok" if reason is None else "error" if broken else "tripped"
        spent = (usage, model, calls, _attempts(report))
        self._report(guard, check, turn, call_id, started, status, reason, spent)
        return None if reason is None else Refusal(guard=guard.name, reason=reason, broken=broken)

    async def _called(self, guard: Guard, check: GuardCheck, turn: int) -> str | None:
        """A function guard's reason for ``check`` (None: it passed), in flight in
        the run's budget while it runs (a guard that hangs is named when the wall time
        cuts it off)."""
        assert guard.fn is not None
        budget = self.budget
        if budget is None:
            return _reason(await _called(guard.fn, _own_copy(check)))
        who = guard.name if self.worker is None else f"{guard.name} of {self.worker}"
        flying = CallInFlight(who, "guard", turn)
        budget.call_started(flying)
        try:
            return _reason(await _called(guard.fn, _own_copy(check)))
        finally:
            budget.call_ended(flying)

    def _report(
        self,
        guard: Guard,
        check: GuardCheck,
        turn: int,
        call_id: str,
        started: float,
        status: str,
        reason: str | None,
        spent: tuple[Usage, str, int, int] = (Usage(), "", 0, 1),
    ) -> None:
        """Emit a check's ``guard.checked``; ``spent``: its judge's usage, model, model
        calls and the attempts they took (none for a function)."""
        if not self.tracer.enabled:
            return
        usage, model, calls, attempts = spent
        self.tracer.emit(
            GuardChecked(
                worker=self.worker,
                run_id=self.run_id,
                guard=guard.name,
                guard_kind=check.kind,
                status=status,
                duration_s=time.perf_counter() - started,
                turn=turn,
                call_id=call_id,
                reason=reason,
                model=model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost=usage.cost,
                model_calls=calls,
                attempts=attempts,
            )
        )


def _needs_no_judge(guards: ResolvedGuards, role: str | None) -> None:
    """Raise if ``guards`` name a judge role, with no judge to ask it.

    Raises:
        ConfigError: naming the guard, and what to write instead.
    """
    named = [g.name for g in (*guards.input, *guards.output, *guards.arguments) if g.judge]
    if named:
        whose = f"role {role!r}: " if role is not None else ""
        raise ConfigError(
            f"{whose}the guard {named[0]!r} names a judge role, and a worker on its own has "
            "no roles to ask: run it in an Executor that has that role, or give a function "
            "or an import path 'module:name'"
        )


def _attempts(report: CallReport | None) -> int:
    """The attempts a judge's call took, as its report counted them (1 unreported)."""
    return report.attempts if report is not None else 1


async def _called(fn: Callable[[GuardCheck], Any], check: GuardCheck) -> Any:
    """``fn(check)``: an async guard awaited, a sync one in a thread (it may block),
    which a cancelled run does not wait for (a guard only looks)."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    ):
        return await fn(check)
    value = await anyio.to_thread.run_sync(fn, check, abandon_on_cancel=True)
    return await value if inspect.isawaitable(value) else value


def _raised_at(fn: Callable[[GuardCheck], Any], exc: BaseException) -> str:
    """Where in the guard ``fn``'s module ``exc`` was raised, as an import's error says
    it (`` (checks.py, line 12)``); for an answer that is no verdict, raised once ``fn``
    returned, where ``fn`` is defined (a ``functools.partial``'s function). Empty when
    neither is known."""
    fn = written(fn)
    module = getattr(fn, "__module__", None)
    places = [
        (frame.f_code.co_filename, line)
        for frame, line in traceback.walk_tb(exc.__traceback__)
        if frame.f_globals.get("__name__") == module
    ]
    if places:
        file, line = places[-1]
        return f" ({Path(file).name}, line {line})"
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        code = getattr(getattr(type(fn), "__call__", None), "__code__", None)  # noqa: B004
    if code is None:
        return ""
    return f" ({Path(code.co_filename).name}, line {code.co_firstlineno}, where it is defined)"


def _judged(guard: Guard, exc: BaseException) -> str:
    """What says that the judge role of ``guard`` failed, unless ``exc`` names it: a
    model error says which model, and to raise "the role's" limit, not which role."""
    named = f"{guard.judge!r}"
    return "" if named in str(exc) else f"; the judge role {named} gave no verdict"


def _own_copy(check: GuardCheck) -> GuardCheck:
    """``check`` with its own copy of the call's arguments and the answer's output: a
    guard only looks, and one that changes what it is shown (normalising an address
    to compare it) changes neither the call that runs, nor the answer accepted, nor
    what the other guards see."""
    if check.arguments is None and isinstance(check.output, str | None):
        return check
    return replace(
        check, arguments=copy.deepcopy(check.arguments), output=copy.deepcopy(check.output)
    )


def _reason(value: Any) -> str | None:
    """A guard's answer as a reason (None: it passed); numpy's ``bool_`` (``similarity
    > 0.8``), a tensor of one, as the Python bool its ``item()`` is.

    Raises:
        TypeError: for an answer that is neither a pass nor a reason.
    """
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str):
        found = item()
        value = found if isinstance(found, bool) else value
    if value is None or value is True:
        return None
    if value is False:
        return "the guard refused it"
    if isinstance(value, str):
        return value.strip() or None
    raise TypeError(
        f"a guard returns None, True or a reason (a string), not {type(value).__name__}"
    )


def _refused_call(refusals: Sequence[Refusal]) -> str | None:
    if not refusals:
        return None
    why = "; ".join(f"guard {r.guard!r}: {r.reason}" for r in refusals)
    if any(r.broken for r in refusals):  # it judged nothing: no change to the call would pass
        return (
            f"Error: this call was refused, not run ({why}): its guard could not judge it, "
            "and would judge no other call either. Do without it."
        )
    return f"Error: this call was refused, not run ({why}). Change the call or do without it."


def tripped(kind: GuardKind, refusals: Sequence[Refusal], attempts: int = 1) -> GuardrailTripped:
    """The error of guards of ``kind`` that refused (``refusals``, not empty): it names
    a guard that raised, if one did (``broken``: no other answer would pass it,
    whatever the others said), else the first that refused."""
    first = next((r for r in refusals if r.broken), refusals[0])
    return GuardrailTripped(first.guard, kind, first.reason, attempts=attempts, broken=first.broken)


def refusal_text(refusals: Sequence[Refusal]) -> str:
    """The correction a worker is sent for an answer its output guards refused."""
    why = "\n".join(f"- {r.guard}: {r.reason}" for r in refusals)
    return f"Your answer was not accepted:\n{why}\nAnswer again, fixing that."
