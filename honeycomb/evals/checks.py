"""Checks: plain callables of a case's answer and its run (:class:`CaseRun`) that
return a bool, a score in [0, 1], a reason it failed (text), or None (it passed);
:class:`Check` holds one with its weight, threshold and time limit, and
:func:`verdict` runs it.
The kinds a cases file writes (:mod:`honeycomb.evals.spec`) are made here too
(:func:`built_check`), each failing with a reason that says what it found."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import math
import re
import threading
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from honeycomb.evals.record import CaseRun, ToolUse
from honeycomb.evals.spec import Amount, CheckSpec, Count, JsonSpec, Texts, ToolCalled
from honeycomb.trace.format import counted
from runtime.concurrency import TimedOut, within
from runtime.secrets import masked
from runtime.value import Value

__all__ = [
    "CHECK_TIMEOUT_S",
    "REASON_CHARS",
    "Check",
    "CheckFn",
    "Score",
    "Verdict",
    "as_check",
    "built_check",
    "verdict",
]

CHECK_TIMEOUT_S = 60.0
"""How long a check of your own (a ``python`` check, a callable) may take, unless it
says otherwise: past it, it fails."""

REASON_CHARS = 2_000
"""The most of a check's reason a report keeps: one that quotes a whole answer (a
``python`` check's ``f"it said {answer}"``) is cut there, as a report keeps each run
of each case, in the store and in JUnit, where the run keeps its answer once."""

CheckFn = Callable[[Any, CaseRun], Any]
"""A check: ``fn(answer, run)`` returning a bool, a score, a reason, None, a
:class:`Score`, or ``(score, reason)``; or an awaitable of one of them."""


class Score(Value, frozen=True, kw_only=True):
    """What a check found: its score in [0, 1] and, when short of 1, why."""

    score: float
    reason: str | None = None


class Verdict(Value, frozen=True, kw_only=True):
    """One check of one run: its name, whether it passed, its score and weight, and
    the reason it did not pass (None when it did)."""

    check: str
    passed: bool
    score: float
    weight: float = 1.0
    reason: str | None = None


class Check(Value, frozen=True, kw_only=True):
    """A check with its name, its ``weight`` in the case's score, and the
    ``threshold`` its score must reach to pass. A run that ended with no answer
    (it raised before it had a result, failed, went over budget, or waits) fails its
    case whatever its checks say, unless one of them is about how it ended: its
    ``statuses`` name it (``status: failed``), or, for a run that raised,
    ``allows_error`` (``status: error``).

    ``timeout_s`` is how long it may take: past it, it fails, naming itself and the
    case, and the eval goes on. Within it, a sync function runs in a thread of its own
    (it may block); past it, that thread cannot be stopped: it is left to end by
    itself (a daemon, it keeps no process from exiting). An async one is cancelled,
    unless it blocks the event loop itself. None: no limit, the function called on the
    event loop (the kinds of a cases file that return at once)."""

    name: str
    fn: Any
    weight: float = 1.0
    threshold: float = 1.0
    allows_error: bool = False
    timeout_s: float | None = CHECK_TIMEOUT_S
    statuses: tuple[str, ...] = ()


def as_check(given: Check | CheckFn) -> Check:
    """A callable as a check named after it (a :class:`Check` as it is)."""
    if isinstance(given, Check):
        return given
    name = getattr(given, "__name__", None) or type(given).__name__
    return Check(name=name, fn=given)


async def verdict(check: Check, run: CaseRun) -> Verdict:
    """Run ``check`` on ``run``; a check that raises fails, its error the reason
    (``pytest.fail()``'s too).

    Raises:
        KeyboardInterrupt, SystemExit, asyncio.CancelledError: raised by the check or
            while it ran: they stop the eval, not only the check.
    """
    broken = True  # it gave no score: it fails, whatever its threshold (even 0)
    try:
        score = _bounded(_as_score(await _found(check, run)))
        broken = False
    except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
        raise  # the eval is being stopped, not this check
    except _NoScore as exc:
        score = Score(score=0.0, reason=str(exc))
    except BaseException as exc:  # a broken check is a failed one, and says why
        # BaseException: pytest.fail() raises Failed, which is no Exception.
        score = Score(score=0.0, reason=f"the check raised {type(exc).__name__}: {exc}")
    passed = not broken and score.score >= check.threshold
    reason = score.reason
    if not passed and reason is None:
        reason = f"score {score.score:.2f} is below its threshold {check.threshold:.2f}"
    return Verdict(
        check=check.name,
        passed=passed,
        score=score.score,
        weight=check.weight,
        reason=None if passed or reason is None else _at_most(reason, REASON_CHARS),
    )


def _at_most(text: str, most: int) -> str:
    """``text``, or its first ``most`` characters and how many more it had: masked
    first, for a secret cut in two is one no mask finds."""
    text = masked(text)
    if len(text) <= most:
        return text
    return f"{text[:most]}… ({counted(len(text) - most, 'more character')})"


class _NoScore(Exception):
    """A check gave no score: it ran past its time limit, or scored NaN (the message
    says so)."""


async def _found(check: Check, run: CaseRun) -> Any:
    """What ``check`` returns on ``run``.

    Raises:
        _NoScore: when it runs past its time limit.
    """
    answer = run.answer if run.answer is not None else run.answer_text
    if check.timeout_s is None:
        found = check.fn(answer, run)
        return await found if inspect.isawaitable(found) else found
    limit = within(check.timeout_s)
    try:
        with limit:
            return await _called(check.fn, answer, run)
    except TimedOut:
        if not limit.expired:  # the check's own TimedOut: its error, not its limit
            raise
    stopped = "its thread cannot be stopped" if not _is_async(check.fn) else "it was cancelled"
    raise _NoScore(
        f"the check {check.name} took longer than its time limit of "
        f"{check.timeout_s:g}s on case {run.case!r} ({stopped})"
    )


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    )


async def _called(fn: Any, answer: Any, run: CaseRun) -> Any:
    """``fn(answer, run)``: an async function awaited; a sync one in a thread of its
    own, a daemon, so that its time limit holds even when it blocks or loops (its
    thread is then left to end by itself, and keeps no process from exiting)."""
    if _is_async(fn):
        return await fn(answer, run)
    loop = asyncio.get_running_loop()
    # What it returned or raised: raised again here (a future cannot hold StopIteration).
    ended: asyncio.Future[tuple[Any, BaseException | None]] = loop.create_future()

    def settle(found: Any, error: BaseException | None) -> None:
        if not ended.done():  # done: cancelled, its time was up
            ended.set_result((found, error))

    def call() -> None:
        found: Any = None
        error: BaseException | None = None
        try:
            found = fn(answer, run)
        except BaseException as exc:  # told to the eval, which judges it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, found, error)

    context = contextvars.copy_context()  # the case's cassette, for one that asks a model
    threading.Thread(target=context.run, args=(call,), name="eval check", daemon=True).start()
    found, error = await ended
    if error is not None:
        raise error
    return await found if inspect.isawaitable(found) else found


def _as_score(found: Any) -> Score:
    if isinstance(found, Score):
        # Made by the check, and not checked as made: its score may be numpy's float64,
        # its reason no text, neither of which a report can be kept with.
        reason = found.reason
        return Score(score=float(found.score), reason=None if reason is None else str(reason))
    if found is None or found is True:
        return Score(score=1.0)
    if found is False:
        return Score(score=0.0, reason="the check returned False")
    if isinstance(found, str):
        return Score(score=1.0) if not found else Score(score=0.0, reason=found)
    if isinstance(found, int | float):
        return Score(score=float(found))
    if isinstance(found, tuple) and len(found) == 2:
        score = _as_score(found[0])
        return Score(score=score.score, reason=str(found[1]) if found[1] else score.reason)
    item = getattr(found, "item", None)
    if callable(item):  # numpy's bool_, int64, float32, a tensor of one value: as Python's
        value = item()
        if isinstance(value, bool | int | float):
            return _as_score(value)
    raise TypeError(
        f"a check returns a bool, a score, a reason, None or (score, reason), not "
        f"{type(found).__name__}"
    )


def _bounded(found: Score) -> Score:
    """``found`` with its score in [0, 1].

    Raises:
        _NoScore: for NaN (a metric's 0/0), which fails the check: no report could
            keep it (JSON has no NaN), nor compare or go on from it.
    """
    if math.isnan(found.score):
        raise _NoScore(found.reason or "the check's score is NaN, not a number")
    if 0.0 <= found.score <= 1.0:
        return found
    return Score(score=min(max(found.score, 0.0), 1.0), reason=found.reason)


# --- the kinds of a cases file ----------------------------------------------------------


def built_check(
    spec: CheckSpec,
    *,
    expected: Any,
    output_schema: type[BaseModel] | None,
    python: Callable[..., Any] | None,
) -> Check:
    """The check a cases file's ``spec`` says (its strings already given the case's
    vars); ``expected``: the case's, ``output_schema``: the hive's answer's model,
    ``python``: the function a ``python`` check names, imported."""
    kind = spec.kind
    fn: CheckFn
    if kind == "equals":
        fn = _equals(expected if spec.equals is None else spec.equals)
    elif kind in ("contains", "icontains", "not_contains"):
        texts = getattr(spec, kind)
        assert isinstance(texts, Texts)
        fn = _contains(texts, fold=kind == "icontains", absent=kind == "not_contains")
    elif kind == "regex":
        fn = _regex(re.compile(spec.regex or ""))
    elif kind == "json":
        fn = _json(spec.json_check or JsonSpec(), output_schema)
    elif kind == "python":
        assert python is not None
        fn = python
    elif kind == "judge":
        assert spec.judge is not None
        fn = _judge(spec.judge.role, spec.judge.rubric)
    elif kind == "status":
        fn = _status(spec.status or ())
    elif kind == "tool_called":
        assert spec.tool_called is not None
        fn = _tool_called(spec.tool_called)
    elif kind == "side_effects":
        assert spec.side_effects is not None
        fn = _side_effects(spec.side_effects)
    else:
        fn = _amount(kind, spec)
    return Check(
        name=_name(spec),
        fn=fn,
        weight=spec.weight,
        threshold=spec.threshold,
        allows_error="error" in (spec.status or ()),
        timeout_s=_timeout(spec),
        statuses=tuple(spec.status or ()),
    )


def _timeout(spec: CheckSpec) -> float | None:
    """A check's time limit: its ``timeout:``, else a ``python`` check's default. The
    other kinds return at once, but ``judge``, bounded by its role's model timeout."""
    if spec.timeout is not None:
        return spec.timeout
    return CHECK_TIMEOUT_S if spec.kind == "python" else None


def _name(spec: CheckSpec) -> str:
    """A check's name as the report shows it: its kind and what it looks for
    (``contains 'Lisbon'``, ``icontains any ['porto', 'madrid']``)."""
    kind = spec.kind
    value = spec.model_dump(mode="json", by_alias=True, exclude_defaults=True).get(kind)
    if kind in _BOUNDED and isinstance(value, dict):
        return f"{kind} {_bounds(value)}"
    if spec.judge is not None:  # not its fields as JSON: the role, then what it asks
        return f"judge {spec.judge.role} {_shown(spec.judge.rubric)}"
    if spec.tool_called is not None:
        return f"tool_called {_call(spec.tool_called)}"
    if isinstance(value, dict) and len(value) == 1:
        key, value = next(iter(value.items()))
        if key != "all":
            return f"{kind} {key} {_shown(value)}"
    return f"{kind} {_shown(value)}" if value is not None else kind


_BOUNDED = ("side_effects", "cost", "latency", "tokens", "model_calls")
"""The kinds of check that bound a number: named by their bounds (``at most 5``)."""


def _bounds(value: dict[str, Any]) -> str:
    """A bound as a name says it: ``exactly 1``, ``at least 2, at most 5``, ``at most 1
    of critical_path``."""
    low, high = value.get("at_least"), value.get("at_most")
    if low is not None and low == high:
        said = f"exactly {low:g}"
    else:
        said = ", ".join(
            f"{word} {bound:g}"
            for word, bound in (("at least", low), ("at most", high))
            if bound is not None
        )
    of = value.get("of")
    return f"{said} of {of}" if of is not None else said


def _call(spec: ToolCalled) -> str:
    """A tool_called check as its name says it: ``get_weather by meteorologist with
    city='Porto', at least 2``."""
    said = spec.name
    if spec.role is not None:
        said += f" by {spec.role}"
    if spec.args:
        said += " with " + ", ".join(f"{k}={v!r}" for k, v in spec.args.items())
    if spec.at_most == 0:
        return _cut(f"{said}, never", 70)
    if spec.at_least != 1 or spec.at_most is not None:
        said += ", " + _bounds({"at_least": spec.at_least, "at_most": spec.at_most})
    return _cut(said, 70)


def _shown(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        return _cut(repr(value), 60)
    return _cut(json.dumps(value, ensure_ascii=False), 60)


def _cut(text: str, most: int = 80) -> str:
    """``text``, or its first ``most`` characters: masked first, as :func:`_at_most`
    (a check's name quotes its cases file, where ``not_contains: ${API_KEY}`` is one)."""
    text = masked(text)
    return text if len(text) <= most else text[: most - 1] + "…"


def _text(answer: Any, run: CaseRun) -> str:
    return run.answer_text if run.answer_text or not isinstance(answer, str) else answer


def _equals(wanted: Any) -> CheckFn:
    shown = repr(wanted) if isinstance(wanted, str) else json.dumps(wanted, ensure_ascii=False)

    def equals(answer: Any, run: CaseRun) -> str | None:
        if isinstance(answer, BaseModel):
            answer = answer.model_dump(mode="json")
        if isinstance(wanted, str):
            same = _text(answer, run).strip() == wanted.strip()
        elif isinstance(answer, str):  # a value (equals: {total: 3}): the answer's JSON
            same = _same(_json_or_none(_text(answer, run)), wanted)
        else:
            same = _same(answer, wanted)
        if same:
            return None
        return f"the answer is {_cut(repr(_text(answer, run)))}, not {_cut(shown)}"

    return equals


_NOT_JSON = object()


def _json_or_none(text: str) -> Any:
    """The value ``text`` is the JSON of (a sentinel when it is none: no value equals it)."""
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


def _same(found: Any, wanted: Any) -> bool:
    """Whether two JSON values are equal as JSON has them: ``true`` is not ``1``."""
    if isinstance(found, bool) or isinstance(wanted, bool):
        return found is wanted
    if isinstance(found, dict) and isinstance(wanted, dict):
        return found.keys() == wanted.keys() and all(_same(found[k], wanted[k]) for k in found)
    if isinstance(found, list | tuple) and isinstance(wanted, list | tuple):
        return len(found) == len(wanted) and all(map(_same, found, wanted))
    return bool(found == wanted)


def _contains(texts: Texts, *, fold: bool, absent: bool) -> CheckFn:
    def contains(answer: Any, run: CaseRun) -> str | None:
        text = _text(answer, run)
        seen = text.casefold() if fold else text
        wanted = texts.all or texts.any
        found = [t for t in wanted if (t.casefold() if fold else t) in seen]
        if absent:
            return f"the answer holds {', '.join(map(repr, found))}" if found else None
        missing = [t for t in wanted if t not in found]
        if texts.all and missing:
            return f"the answer lacks {', '.join(map(repr, missing))}: {_cut(repr(text))}"
        if texts.any and not found:
            return f"the answer holds none of {', '.join(map(repr, wanted))}: {_cut(repr(text))}"
        return None

    return contains


def _regex(pattern: re.Pattern[str]) -> CheckFn:
    def regex(answer: Any, run: CaseRun) -> str | None:
        text = _text(answer, run)
        if pattern.search(text):
            return None
        return f"no match for /{pattern.pattern}/ in {_cut(repr(text))}"

    return regex


def _json(spec: JsonSpec, output_schema: type[BaseModel] | None) -> CheckFn:
    schema = spec.json_schema

    def is_json(answer: Any, run: CaseRun) -> str | None:
        text = answer.model_dump_json() if isinstance(answer, BaseModel) else _text(answer, run)
        try:
            value = json.loads(text)
        except ValueError as exc:
            return f"the answer is not JSON ({exc}): {_cut(repr(text))}"
        if schema == "output_schema" and output_schema is not None:
            try:
                output_schema.model_validate(value)
            except ValueError as exc:
                return f"the answer does not match {output_schema.__name__}: {_first_line(exc)}"
        elif isinstance(schema, dict):
            import jsonschema  # the evals extra: loaded by the first schema checked

            try:
                jsonschema.validate(value, schema)
            except jsonschema.ValidationError as exc:
                where = "/".join(str(p) for p in exc.absolute_path) or "the answer"
                return f"{where}: {exc.message}"
        return None

    return is_json


def _first_line(exc: Exception) -> str:
    lines = str(exc).splitlines()
    return " ".join(line.strip() for line in lines[:3])


def _judge(role: str, rubric: str) -> CheckFn:
    async def judge(answer: Any, run: CaseRun) -> str | None:
        if run.judges is None:
            return f"no judge to ask: the eval has no role {role!r} to grade with"
        text = _text(answer, run)
        if run.status not in ("ok", "partial") and not text.strip():  # it had no answer
            return f"{role}: no answer to grade (the run ended {run.status})"  # nothing spent
        found: str | None = await run.judges.grade(role, rubric, run.task, text)
        return None if found is None else f"{role}: {found}"

    return judge


def _status(wanted: tuple[str, ...]) -> CheckFn:
    def status(answer: Any, run: CaseRun) -> str | None:
        if run.status in wanted:
            return None
        why = f" ({_cut(run.error, 160)})" if run.error else ""
        return f"the run ended {run.status}, not {' or '.join(wanted)}{why}"

    return status


def _matches(use: ToolUse, spec: ToolCalled) -> bool:
    if use.tool != spec.name or (spec.role is not None and use.role != spec.role):
        return False
    given = spec.args or {}
    return all(k in use.arguments and _same(use.arguments[k], v) for k, v in given.items())


def _tool_called(spec: ToolCalled) -> CheckFn:
    def tool_called(answer: Any, run: CaseRun) -> str | None:
        count = sum(1 for use in run.tool_calls if _matches(use, spec))
        most = spec.at_most
        if count >= spec.at_least and (most is None or count <= most):
            return None
        # Which calls it counts is its name's (tool_called get_weather by meteorologist),
        # which the reports show before it.
        wanted = f"at least {spec.at_least}" + (f", at most {most}" if most is not None else "")
        called = sorted({use.tool for use in run.tool_calls})
        seen = f"; the run called: {', '.join(called)}" if called else "; the run called no tool"
        return f"called {counted(count, 'time')}, wanted {wanted}{seen}"

    return tool_called


def _side_effects(spec: Count) -> CheckFn:
    def side_effects(answer: Any, run: CaseRun) -> str | None:
        count = run.side_effects
        low, high = spec.at_least, spec.at_most
        if (low is None or count >= low) and (high is None or count <= high):
            return None
        wanted = "exactly" if low == high else ("at least" if high is None else "at most")
        bound = low if wanted == "at least" or wanted == "exactly" else high
        if low is not None and high is not None and low != high:
            wanted, bound = f"between {low} and", high
        return f"{counted(count, 'side-effecting call')}, wanted {wanted} {bound}"

    return side_effects


_AMOUNTS: dict[str, tuple[Callable[[float], str], Callable[[CaseRun], float]]] = {
    "cost": (lambda value: f"cost ${value:.4f}", lambda run: run.usage.cost),
    "tokens": (lambda value: counted(int(value), "token"), lambda run: run.usage.total_tokens),
    "model_calls": (
        lambda value: counted(int(value), "model call"),
        lambda run: run.usage.model_calls,
    ),
}


def _seconds(measured: str) -> Callable[[float], str]:
    """How an amount of seconds is said: ``wall time 1.25s``."""
    return lambda value: f"{measured} {value:.2f}s"


def _amount(kind: str, spec: CheckSpec) -> CheckFn:
    bound = getattr(spec, kind)
    assert isinstance(bound, Amount)
    if kind == "latency":
        of = getattr(bound, "of", "wall")
        label = _seconds("critical path" if of == "critical_path" else "wall time")
        measure: Callable[[CaseRun], float] = (
            (lambda run: run.critical_path_s) if of == "critical_path" else (lambda run: run.wall_s)
        )
    else:
        label, measure = _AMOUNTS[kind]

    def amount(answer: Any, run: CaseRun) -> str | None:
        value = measure(run)
        if bound.at_most is not None and value > bound.at_most:
            return f"{label(value)}, above {bound.at_most:g}"
        if bound.at_least is not None and value < bound.at_least:
            return f"{label(value)}, below {bound.at_least:g}"
        return None

    amount.__name__ = kind
    return amount
