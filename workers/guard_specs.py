"""Guards as declared and as resolved: a role's (or a run's) :class:`Guards` by kind,
each a callable, an import path ``module:name`` or a judge role's name; what is wrong
with one (:func:`guard_problem`, naming what to write); and :func:`resolve_guards`,
which imports them once. What a guard is shown is a :class:`GuardCheck`."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from msgspec.structs import replace
from pydantic import AfterValidator, BeforeValidator, ConfigDict

from runtime import ConfigError, did_you_mean
from runtime.config.imports import import_object, path_meant
from runtime.value import SettingsModel, Value

__all__ = [
    "Guard",
    "GuardCheck",
    "GuardKind",
    "GuardRef",
    "Guards",
    "ResolvedGuards",
    "guard_problem",
    "judge_problems",
    "resolve_guards",
    "written",
]

GuardKind = Literal["input", "output", "arguments"]
GuardRef = str | Callable[..., Any]
"""A guard as declared: a callable, its import path, or the name of a judge role."""

_ROLE_NAME = r"[A-Za-z0-9_-]{1,64}"


def _a_guard(ref: object) -> object:
    """``ref``, if it may be a guard; else one error that says what a guard is (the
    union's own would be two: not a string, and not callable).

    Raises:
        ValueError: for what is neither text nor callable (a number, a mapping).
    """
    if isinstance(ref, str) or callable(ref):
        return ref
    said = _NOT_A_GUARD.format(type(ref).__name__)
    if isinstance(ref, dict) and len(ref) == 1:  # YAML's reading of `checks: no_secrets`
        ((module, name),) = ref.items()
        if module in _NAMING_A_JUDGE:  # `{role: reviewer}`: no module 'role' is meant
            said += f" (a judge role is named alone: '{name}')"
        else:
            said += f" (an import path has no space after its colon: '{module}:{name}')"
    raise ValueError(said)


_NOT_A_GUARD = "a guard is a callable, an import path or a role name, not {}"
_NAMING_A_JUDGE = ("role", "judge")
"""The keys of a mapping written to name a judge role (``{role: reviewer}``)."""
_Declared = Annotated[GuardRef, BeforeValidator(_a_guard)]


def _once_each(refs: tuple[GuardRef, ...]) -> tuple[GuardRef, ...]:
    """``refs``, if none of them is named twice (a judge would be asked, and paid,
    twice for the same text, and give the same verdict).

    Raises:
        ValueError: naming the guard and the two places it is listed at.
    """
    for index, ref in enumerate(refs):
        first = next((i for i, r in enumerate(refs[:index]) if _same(r, ref)), None)
        if first is not None:
            raise ValueError(_twice(ref if isinstance(ref, str) else _name_of(ref), first, index))
    return refs


def _same(one: GuardRef, other: GuardRef) -> bool:
    """Whether two guards as declared are one: the same text, or the same callable (one
    written once by its import path and once as itself is found as they are resolved:
    :func:`resolve_guards`)."""
    return one == other if isinstance(one, str) else _one_function(one, other)


def _one_function(one: object, other: object) -> bool:
    """Whether two callables are one: the same object, or one object's same method
    (``checker.check`` makes a new bound method each time it is written)."""
    return one is other or (inspect.ismethod(one) and inspect.ismethod(other) and one == other)


def _twice(name: str, first: int, index: int) -> str:
    """What is wrong with a kind's guards that list ``name`` at ``first`` and ``index``."""
    return (
        f"the guard {name!r} is listed twice ([{first}] and [{index}]): it would check the "
        "same text twice, a judge asked and paid twice; list it once"
    )


_Listed = Annotated[tuple[_Declared, ...], AfterValidator(_once_each)]


class Guards(SettingsModel):
    """A role's (or a run's) guards, by kind; each a callable, an import path
    (``module:name``) or a judge role's name, listed once in its kind (a guard of two
    kinds checks a text of each)."""

    model_config = ConfigDict(
        defer_build=True, frozen=True, extra="forbid", arbitrary_types_allowed=True
    )

    input: _Listed = ()
    output: _Listed = ()
    arguments: _Listed = ()

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
    """A resolved guard: a function to call, or a judge role to ask, of the run whose
    guard it is: ``up`` runs up from the run it checks (a calling run's argument guard
    checks the calls of the hive it calls as a tool, whose roles are not its own)."""

    name: str
    fn: Callable[[GuardCheck], Any] | None = None
    judge: str | None = None
    up: int = 0

    def same_as(self, other: Guard) -> bool:
        """Whether ``other`` checks as this guard does, to the same verdict: the same
        function (by whatever import path, or as itself), or the same judge role of
        the same run."""
        if self.fn is not None or other.fn is not None:
            return _one_function(self.fn, other.fn)
        return self.judge == other.judge and self.up == other.up


class ResolvedGuards(Value, frozen=True, kw_only=True):
    """Guards by kind, resolved (imported) once."""

    input: tuple[Guard, ...] = ()
    output: tuple[Guard, ...] = ()
    arguments: tuple[Guard, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.input or self.output or self.arguments)

    def with_arguments(self, more: Sequence[Guard]) -> ResolvedGuards:
        """These guards, and ``more`` argument guards (a run's, for every worker), but
        those already among them: a guard both a role and its run name judges each
        call once (twice, it would give the same verdict, its judge paid twice)."""
        added = tuple(g for g in more if not _among(g, self.arguments))
        if not added:
            return self
        return ResolvedGuards(
            input=self.input, output=self.output, arguments=(*self.arguments, *added)
        )

    def without_output(self, checked: Sequence[Guard]) -> ResolvedGuards:
        """These guards (a run's), but the output guards among ``checked``: those of
        the aggregator role, which passed the run's answer as its worker's before the
        run's output guards would check it (again, to the same verdict, a judge paid
        twice)."""
        kept = tuple(g for g in self.output if not _among(g, checked))
        if len(kept) == len(self.output):
            return self
        return ResolvedGuards(input=self.input, output=kept, arguments=self.arguments)

    def with_callers(self, caller: ResolvedGuards) -> ResolvedGuards:
        """These guards of a sub-run (a hive called as a tool), and the argument guards
        of its ``caller``'s run, which check its calls too, each judge of them asked of
        the run whose guard it is (the sub-run may have a role of that name of its own)."""
        lifted = [replace(g, up=g.up + 1) if g.judge is not None else g for g in caller.arguments]
        return self.with_arguments(lifted)


def _among(guard: Guard, guards: Sequence[Guard]) -> bool:
    """Whether ``guard`` is one of ``guards``, however either was written."""
    return any(guard.same_as(other) for other in guards)


def guard_problem(ref: object, roles: Sequence[str] | None = None) -> str | None:
    """What is wrong with a guard reference, if anything: an import path that does not
    import a callable, a callable that cannot be given a check, or a judge that is none
    of ``roles`` (None: not checked)."""
    if callable(ref):
        return _not_a_check(ref, _name_of(ref))
    if not isinstance(ref, str):
        return _NOT_A_GUARD.format(type(ref).__name__)
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


def written(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The callable whose code a guard ``fn`` runs: a ``functools.partial``'s function,
    else ``fn`` itself (what names it, and where what it raised is told)."""
    return fn.func if isinstance(fn, functools.partial) else fn


def _name_of(fn: Callable[..., Any]) -> str:
    """A guard given as a callable, named as its refusals and events name it: a
    function by its qualified name; an object by its class's, a ``functools.partial``
    by its function's. Never by its repr, whose address changes from one process to
    the next: the correction that names it would too, which a cassette then does not
    replay."""
    inner = written(fn)
    name = getattr(inner, "__qualname__", None)
    return name if isinstance(name, str) else type(inner).__qualname__


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
        ConfigError: for a path that does not import a callable, a judge that is none
            of ``roles`` (None: judges are not checked), or a function a kind lists
            twice (by its import path and as itself, or by two paths), after its
            field (``guards.output[0]: ...``).
    """
    if guards is None:
        return ResolvedGuards()

    def resolved(kind: GuardKind, refs: tuple[GuardRef, ...]) -> tuple[Guard, ...]:
        out: list[Guard] = []
        for index, ref in enumerate(refs):
            problem = guard_problem(ref, roles)
            if problem is not None:
                raise ConfigError(f"guards.{kind}[{index}]: {problem}")
            if not isinstance(ref, str):
                guard = Guard(name=_name_of(ref), fn=ref)
            elif ":" in ref:
                guard = Guard(name=ref, fn=import_object(ref))
            else:
                guard = Guard(name=ref, judge=ref)
            # The same function written two ways, which Guards took for two guards.
            same = [i for i, g in enumerate(out) if guard.fn is not None and g.same_as(guard)]
            if same:
                raise ConfigError(f"guards.{kind}[{index}]: {_twice(guard.name, same[0], index)}")
            out.append(guard)
        return tuple(out)

    return ResolvedGuards(
        input=resolved("input", guards.input),
        output=resolved("output", guards.output),
        arguments=resolved("arguments", guards.arguments),
    )
