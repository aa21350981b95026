"""Guards: checks on what a worker is given, what it answers and the calls it makes.

A guard is a Python callable (given itself, or by import path ``module:name``), sync
or async, or the name of a role that judges (one model call of that role, answering
``PASS`` or a reason). It is given a :class:`GuardCheck` and returns None (or True) to
pass, or a reason (a string; False is a reason too).

- ``input`` guards check a subtask's instruction (with the session's conversation when
  its role's workers see it) before its worker starts: a reason fails the worker
  (:class:`~runtime.GuardrailTripped`).
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
import re
import time
import traceback
from asyncio import CancelledError
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

import anyio.to_thread
from msgspec.structs import replace
from pydantic import ConfigDict

from runtime import (
    Budget,
    BudgetExceeded,
    ConfigError,
    Event,
    GuardrailTripped,
    HoneycombError,
    Model,
    ModelRequest,
    ModelResponseError,
    SystemMessage,
    Tool,
    ToolCall,
    Tracer,
    Usage,
    UserMessage,
    did_you_mean,
)
from runtime.concurrency import run_together
from runtime.config.imports import import_object, path_meant
from runtime.events import CallReport, current_call
from runtime.limits.budget import CallInFlight
from runtime.models.layers.budget import unanswered_usage
from runtime.tools.define import arguments_text
from runtime.value import SettingsModel, Value
from workers.calls import model_calls

__all__ = [
    "GuardCheck",
    "GuardChecked",
    "GuardKind",
    "GuardRunner",
    "Guards",
    "Judge",
    "Refusal",
    "ResolvedGuards",
    "guard_problem",
    "judge_problems",
    "resolve_guards",
]

GuardKind = Literal["input", "output", "arguments"]
GuardRef = str | Callable[..., Any]
"""A guard as declared: a callable, its import path, or the name of a judge role."""

_ROLE_NAME = r"[A-Za-z0-9_-]{1,64}"

JUDGE_INSTRUCTIONS = (
    "You are a guard. You are shown {what}. If it is acceptable, answer with the single "
    "word PASS. If it is not, answer with one short sentence saying why, and nothing else."
)
_WHAT = {
    "input": "the instruction a worker was given",
    "output": "a worker's answer",
    "arguments": "a tool call a worker wants to make, with its arguments",
}


class Guards(SettingsModel):
    """A role's (or a run's) guards, by kind; each a callable, an import path
    (``module:name``) or a judge role's name."""

    model_config = ConfigDict(
        defer_build=True, frozen=True, extra="forbid", arbitrary_types_allowed=True
    )

    input: tuple[GuardRef, ...] = ()
    output: tuple[GuardRef, ...] = ()
    arguments: tuple[GuardRef, ...] = ()

    def judges(self) -> list[str]:
        """The judge roles the guards name (a name that is no role's name, nor an
        import path, is none: :func:`guard_problem` says what is wrong with it)."""
        refs = (*self.input, *self.output, *self.arguments)
        return [r for r in refs if isinstance(r, str) and _judge_name(r)]

    def refs(self) -> list[tuple[str, GuardRef]]:
        """Each guard with its field (``guards.output[0]``), by kind, in order."""
        kinds = (("input", self.input), ("output", self.output), ("arguments", self.arguments))
        return [(f"guards.{k}[{i}]", ref) for k, refs in kinds for i, ref in enumerate(refs)]


class GuardCheck(Value, frozen=True, kw_only=True):
    """What a guard is asked to check.

    Attributes:
        kind: ``input``, ``output`` or ``arguments``.
        text: The instruction, the answer as text, or the call's arguments as JSON.
        output: The answer's validated output-schema object (output guards of a role
            with one), else the text.
        tool: The tool called (argument guards).
        arguments: The call's validated arguments (argument guards).
        role: The worker's role (None for a run's own guards).
        worker: The worker (None for a run's own guards).
        run_id: The run.
    """

    kind: GuardKind
    text: str
    output: Any = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    role: str | None = None
    worker: str | None = None
    run_id: str | None = None


class Guard(Value, frozen=True, kw_only=True):
    """A resolved guard: a function to call, or a judge role to ask."""

    name: str
    fn: Callable[[GuardCheck], Any] | None = None
    judge: str | None = None


class ResolvedGuards(Value, frozen=True, kw_only=True):
    """Guards by kind, resolved (imported) once."""

    input: tuple[Guard, ...] = ()
    output: tuple[Guard, ...] = ()
    arguments: tuple[Guard, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.input or self.output or self.arguments)

    def with_arguments(self, more: Sequence[Guard]) -> ResolvedGuards:
        """These guards, and ``more`` argument guards (a run's, for every worker)."""
        if not more:
            return self
        return ResolvedGuards(
            input=self.input, output=self.output, arguments=(*self.arguments, *more)
        )


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


def guard_problem(ref: object, roles: Sequence[str] | None = None) -> str | None:
    """What is wrong with a guard reference, if anything: an import path that does not
    import a callable, a callable that cannot be given a check, or a judge that is none
    of ``roles`` (None: not checked)."""
    if callable(ref):
        return _not_a_check(ref, getattr(ref, "__qualname__", repr(ref)))
    if not isinstance(ref, str):
        return f"a guard is a callable, an import path or a role name, not {type(ref).__name__}"
    if ":" in ref:
        try:
            found = import_object(ref)
        except ConfigError as exc:
            return exc.message
        return _not_a_check(found, ref) if callable(found) else f"guard {ref!r} is not callable"
    if not _judge_name(ref):
        return f"guard {ref!r} is neither an import path 'module:name' nor a role name{_meant(ref)}"
    if roles is not None and ref not in roles:
        meant = path_meant(ref)  # a function's bare name, meant as its path
        path = (
            f"its import path: {meant!r}" if meant is not None else "an import path 'module:name'"
        )
        return (
            f"unknown judge role {ref!r}{did_you_mean(ref, roles)}; roles: {', '.join(roles)} "
            f"(or write {path})"
        )
    return None


def _not_a_check(fn: Callable[..., Any], name: str) -> str | None:
    """Why ``fn`` cannot be called with a :class:`GuardCheck` alone, if it cannot."""
    try:
        inspect.signature(fn).bind(None)
    except TypeError:
        short = re.split(r"[:.]", name)[-1]
        short = short if short.isidentifier() else "my_guard"
        return (
            f"guard {name!r} cannot be given a check: it takes one argument, the check "
            f"(def {short}(check: GuardCheck) -> str | None)"
        )
    except ValueError:  # no signature to read (a builtin): it is called as it is
        return None
    return None


def judge_problems(guards: Guards | None, roles: Sequence[str]) -> list[str]:
    """What is wrong with each judge ``guards`` name that is none of ``roles``, after
    its field (``guards.output[0]: unknown judge role ...``)."""
    if guards is None:
        return []
    found = [(field, guard_problem(ref, roles)) for field, ref in guards.refs() if _judge_name(ref)]
    return [f"{field}: {problem}" for field, problem in found if problem is not None]


def _judge_name(ref: object) -> bool:
    """Whether ``ref`` names a judge role: a role's name, not an import path."""
    return isinstance(ref, str) and re.fullmatch(_ROLE_NAME, ref) is not None


def _meant(ref: str) -> str:
    """`` (did you mean 'checks:no_secrets'?)`` for a path written with a dot where its
    colon goes, when the module is found; else empty."""
    meant = path_meant(ref) if "." in ref else None
    return f" (did you mean {meant!r}?)" if meant is not None else ""


def resolve_guards(guards: Guards | None, roles: Sequence[str] | None = None) -> ResolvedGuards:
    """The guards, their import paths imported once.

    Raises:
        ConfigError: for a path that does not import a callable, or a judge that is
            none of ``roles`` (None: judges are not checked), after its field
            (``guards.output[0]: ...``).
    """
    if guards is None:
        return ResolvedGuards()

    def resolved(kind: GuardKind, refs: tuple[GuardRef, ...]) -> tuple[Guard, ...]:
        out = []
        for index, ref in enumerate(refs):
            problem = guard_problem(ref, roles)
            if problem is not None:
                raise ConfigError(f"guards.{kind}[{index}]: {problem}")
            if not isinstance(ref, str):
                out.append(Guard(name=getattr(ref, "__qualname__", repr(ref)), fn=ref))
            elif ":" in ref:
                out.append(Guard(name=ref, fn=import_object(ref)))
            else:
                out.append(Guard(name=ref, judge=ref))
        return tuple(out)

    return ResolvedGuards(
        input=resolved("input", guards.input),
        output=resolved("output", guards.output),
        arguments=resolved("arguments", guards.arguments),
    )


class JudgeRole(Protocol):
    """What a judge reads of its role (a :class:`~workers.Role`)."""

    @property
    def system_prompt(self) -> str: ...
    @property
    def model_timeout(self) -> float | None: ...
    @property
    def max_output_tokens(self) -> int | None: ...


VERDICT_TOKENS = 256
"""The output limit of a judge's call (a role's own ``max_output_tokens`` wins): a
verdict is ``PASS`` or a reason in a sentence or two."""


class Judge:
    """Asks judge roles: one tool-less model call each, under the run's budget, its
    answer limited to what a verdict needs (:data:`VERDICT_TOKENS`).

    Args:
        roles: The roles a guard may name as its judge, by name.
        model_for: The model a role thinks with (given one of ``roles``).
        budget: Checked before each call and charged with what it cost.
        caller: The judge of the run this one's is a sub-run of (a hive called as a
            tool): it asks the judge roles that are not among ``roles`` (those of the
            caller's guards, which check the sub-run's calls too).
    """

    def __init__(
        self,
        roles: Mapping[str, JudgeRole],
        model_for: Callable[[Any], Model],
        budget: Budget | None = None,
        caller: Judge | None = None,
    ) -> None:
        self.roles = roles
        self.model_for = model_for
        self.budget = budget
        self.caller = caller

    async def ask(self, role_name: str, check: GuardCheck) -> tuple[str | None, Usage, str]:
        """The judge's verdict (None: pass, or its reason), its usage and model name.

        Raises:
            BudgetExceeded: when the call would go past the run's budget.
            HoneycombError: when the judge is not a role here, or its model call failed
                or gave no verdict (an empty answer, or one its output limit cut off).
        """
        role = self.roles.get(role_name)
        if role is None and self.caller is not None:
            return await self.caller.ask(role_name, check)
        if role is None:
            raise ConfigError(f"the judge role {role_name!r} is not defined")
        model = self.model_for(role)
        prompt = f"{role.system_prompt}\n\n{JUDGE_INSTRUCTIONS.format(what=_WHAT[check.kind])}"
        limit = role.max_output_tokens or VERDICT_TOKENS
        request = ModelRequest(
            messages=(SystemMessage(content=prompt), UserMessage(content=_shown(check))),
            tool_choice="none",
            timeout=role.model_timeout,
            max_output_tokens=limit,
        )
        # Named with the worker it judges, as the calls in flight are reported: one
        # judge role may be checking several workers' answers at once.
        who = role_name if check.worker is None else f"{role_name} of {check.worker}"
        call = model_calls(model, self.budget, who, kind="judge").open(request)
        try:
            answer = await call.made()
        except BaseException as failure:  # (its cause is the layer's to set)
            spent = unanswered_usage(call) or Usage()  # the attempts its timeout cut off
            raise _spending(call.failed(failure), spent)  # noqa: B904
        try:
            response = call.answered(answer)
        except HoneycombError as failure:  # an answer a layer refused
            raise _spending(failure, unanswered_usage(call) or Usage())  # noqa: B904
        text = (response.message.content or "").strip()
        if not text:  # no verdict: no answer of the worker's could pass it
            why = "empty"
            if response.finish_reason == "length":
                why = _cut_off(role_name, limit, call.request.max_output_tokens or limit)
            error = ModelResponseError(
                f"the judge {role_name!r} gave no verdict: its answer was {why}"
            )
            raise _spending(error, response.usage)
        # Its first word, as a model may write it: "PASS.", "**PASS**", "`PASS`".
        first = text.split(maxsplit=1)[0].strip(_AROUND_A_WORD).upper()
        verdict = None if first == "PASS" else text
        return verdict, response.usage, response.model


def _spending(error: BaseException, usage: Usage) -> BaseException:
    """``error``, ending a judge's call that was made, saying what the call spent (its
    ``spent``: a model error's field, and as well on what cuts the call off or refuses
    its retry): its guard's event reports it, as the run's budget counted it."""
    error.spent = usage  # type: ignore[attr-defined]
    return error


def _spent_by(error: BaseException) -> Usage | None:
    """What the judge's call that ``error`` ended spent (None: none was made, or it is
    not a judge's error)."""
    spent = getattr(error, "spent", None)
    return spent if isinstance(spent, Usage) else None


def _cut_off(role_name: str, asked: int, sent: int) -> str:
    """How a judge's answer was cut off at ``sent``, the output limit its call was sent
    with (a cost cap may have lowered the one it ``asked`` for), and what to raise."""
    if sent < asked:
        fix = ", the limit budgets.cost_per_call left the call at its model's price (raise the cap)"
    else:
        fix = f" (give the role {role_name!r} a higher max_output_tokens)"
    return f"cut off at its output limit of {sent} tokens{fix}"


_AROUND_A_WORD = ".!:,;*_`\"'"
"""What a model writes around a word: punctuation, Markdown's emphasis and code, quotes."""


def _shown(check: GuardCheck) -> str:
    """What a judge reads of a check."""
    if check.kind == "arguments":
        return f"Tool: {check.tool}\nArguments: {check.text}"
    return check.text


class GuardRunner:
    """Runs one worker's (or one run's) guards and reports each check.

    Args:
        guards: The guards.
        tracer: Receives a :class:`GuardChecked` per check.
        judge: Asks the judge roles (None: a judge guard trips, having none to ask).
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
        the text of its error observation (a :class:`~runtime.tools.dispatch.CallGuard`)."""
        found: list[list[Refusal]] = [[] for _ in calls]

        async def one(index: int, call: ToolCall, kwargs: dict[str, Any]) -> None:
            check = self._check(
                "arguments", arguments_text(kwargs), tool=call.name, arguments=kwargs
            )
            try:
                found[index] = await self._all(
                    self.guards.arguments, check, turn=turn, call_id=call.id
                )
            except BudgetExceeded as exc:  # the next model call stops the worker
                found[index] = [Refusal(guard="budget", reason=str(exc), broken=True)]

        coros = [one(i, call, kwargs) for i, (call, _, kwargs) in enumerate(calls)]
        await run_together(None, coros)
        return [_refused_call(refusals) for refusals in found]

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
                    reason, usage, model = await self.judge.ask(guard.judge, check)
                finally:
                    current_call.reset(reported)
            else:
                assert guard.fn is not None
                reason = await self._called(guard, check, turn)
        except BudgetExceeded as exc:  # it refused the judge's call (none made), or a retry
            made = _spent_by(exc)
            spent = (made or usage, "", calls if made is not None else 0, _attempts(report))
            self._report(guard, check, turn, call_id, started, "error", "budget exceeded", spent)
            raise
        except Exception as exc:  # a broken guard trips: the model cannot fix it
            where = _raised_at(guard.fn, exc) if guard.fn is not None else ""
            reason, broken = f"the guard raised {type(exc).__name__}: {exc}{where}", True
            usage = _spent_by(exc) or usage  # a judge's call that gave no verdict spent it
        except BaseException as stopped:  # cut off as its worker was: it ends too
            status, reason = "cancelled", None
            if not isinstance(stopped, CancelledError):  # what stops the process fails it
                status, reason = "error", f"{type(stopped).__name__}: {stopped}"
            spent = (_spent_by(stopped) or usage, "", calls, _attempts(report))
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
    returned, where ``fn`` is defined. Empty when neither is known."""
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
    """A guard's answer as a reason (None: it passed).

    Raises:
        TypeError: for an answer that is neither a pass nor a reason.
    """
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
