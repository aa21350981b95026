"""``Value``: the one recipe for the values Honeycomb passes around.

Messages, tool calls, usage, model requests and responses, loop state, events, spans
and settings are frozen ``msgspec.Struct``s made by keyword. A constructor checks
nothing (type checkers do); what comes from outside (a model's answer, a stored run,
a user's JSON) is decoded and validated by msgspec where it comes in. The values made
every model turn or tool call (messages, requests, responses, loop state, events,
spans) also set ``gc=False``, so the garbage collector never walks them: they cannot
be part of a reference cycle, and tracked they make benchmark B collect a fifth more
often, at about 7% of its CPU.

Pydantic models may hold values as fields (results hold a transcript and usage): a
value validates from its dict or JSON and dumps to them, through msgspec.

:class:`Settings` are the values a person writes (a retry policy, a price, a run's
limits): their constructor checks each field's bounds, declared once in its
annotation, and a hive's spec validates straight into them, with pydantic's errors
field by field. :class:`SettingsModel` is their counterpart for the pydantic models a
person writes (a role, a policy): made in Python with a wrong value, either raises
:class:`~runtime.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import collections.abc
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import msgspec
from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler, ValidationError
from pydantic_core import ErrorDetails, PydanticKnownError, core_schema

from runtime.errors import ConfigError, ConfigErrors, did_you_mean

__all__ = [
    "Settings",
    "SettingsModel",
    "Value",
    "config_error",
    "packed",
    "pydantic_errors",
    "validation_summary",
    "written_fields",
]

V = TypeVar("V", bound=msgspec.Struct)


class Value(msgspec.Struct, frozen=True, kw_only=True):
    """Base of Honeycomb's values: frozen, made by keyword, compared by their fields."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        def validate(value: Any) -> Any:
            if isinstance(value, cls):
                return value
            try:
                return msgspec.convert(value, cls)
            except msgspec.ValidationError as exc:
                raise ValueError(str(exc)) from exc

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(msgspec.to_builtins),
        )


class Settings(Value, frozen=True, kw_only=True):
    """A value a person writes, in Python or in a hive file: a model's retry policy
    and price, a run's limits, how an MCP server and its tools run.

    Each field's bounds are declared once, as ``msgspec.Meta`` in its annotation
    (``attempts: Annotated[int, Meta(ge=1)] = 4``), and hold wherever a value is made:
    in Python, decoded by msgspec, and validated by pydantic as a field of a model (a
    hive's spec), where each mistake is an error at its own field (an unknown or
    missing field, a value out of bounds) in pydantic's words, as a model's field's
    would be. A field whose type is callable is Python's only: a file cannot write one.

    Made in Python, each field is checked against its annotation too (a type checker's
    mistakes: ``args="-m x"`` for a tuple, ``approval="false"`` for a bool, text where
    a number goes), told by the field's type and the type it got, never its value
    (it may be a secret). A list given for a tuple (``args=["-m", "x"]``) is kept as a
    tuple, and a dict given is copied: what its owner then does to the list or the dict
    (a loop that sets ``headers["Authorization"]`` for each server) changes nothing of
    the setting.

    Raises:
        ConfigError: made in Python with a value not of its field's type or out of
            its bounds, at the field (``McpServer.args: must be of type tuple[str,
            ...] (got str)``), as :class:`SettingsModel`'s are (a subclass's own checks
            raise it too; pydantic gets it as a ``ValueError``).
    """

    def __post_init__(self) -> None:
        cls = type(self)
        for name, annotation, is_of in _annotations(cls):
            value = getattr(self, name)
            if not is_of(value):
                expected = f"must be of type {_type_name(annotation)} (got {_kinds(value)})"
                raise ConfigError(expected, field=f"{cls.__name__}.{name}")
            kept = _kept(cls).get(name)
            if kept is not None and isinstance(value, list | dict):
                # Its own, as its field says (a list as a tuple, a dict copied): what
                # the caller then does to its list or dict changes nothing of it.
                msgspec.structs.force_setattr(self, name, kept(value))
        for name, meta in _bounds(cls):
            value = getattr(self, name)
            problem = None if value is None else _out_of_bounds(value, meta)
            if problem is not None:
                raise ConfigError(
                    f"must be {problem} (got {value!r})", field=f"{cls.__name__}.{name}"
                )

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        fields = {
            name: core_schema.typed_dict_field(
                handler.generate_schema(_pydantic_form(info.type)), required=info.required
            )
            for name, info in written_fields(cls).items()
        }
        written = core_schema.typed_dict_schema(fields, extra_behavior="forbid")

        def made(value: Any, validate: core_schema.ValidatorFunctionWrapHandler) -> Any:
            if isinstance(value, cls):
                return value
            if not isinstance(value, Mapping):
                raise PydanticKnownError("dict_type")
            try:
                return cls(**validate(value))
            except ConfigError as exc:  # a check across fields: about the value
                raise ValueError(exc.message if exc.field is None else str(exc)) from exc

        return core_schema.no_info_wrap_validator_function(
            made,
            written,
            serialization=core_schema.plain_serializer_function_ser_schema(_written_builtins),
        )


class SettingsModel(BaseModel):
    """A pydantic model a person writes, in Python or in a hive file: a role, its
    approvals, an Executor's policy.

    Made in Python (``Role(name="a b")``), a wrong value raises :class:`ConfigError`
    naming the model and the field, in pydantic's words, as :class:`Settings` do.
    Validated from data (``model_validate``, or as a field of a hive's spec), it
    raises pydantic's ``ValidationError``, which the hive's loader turns into errors
    at their line and field in the file.

    Raises:
        ConfigError: made in Python with a wrong value (several: ``ConfigErrors``).
    """

    # Its validator is built when a model is first made, not as Honeycomb is imported.
    model_config = ConfigDict(defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc, type(self)) from exc

    # pydantic calls a model's own __init__ when it validates data too, unless the
    # __init__ is marked as its base's: then only a model made in Python comes here,
    # and data validated (a hive's) keeps pydantic's errors, to be placed in its file.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def config_error(exc: ValidationError, model: type[BaseModel] | None = None) -> ConfigError:
    """pydantic's errors about a value made in Python, as one :class:`ConfigError`
    (several: :class:`ConfigErrors`), each naming its field: ``Role.name: String should
    match pattern ... (got 'a b')``. With the ``model`` validated, an unknown field of
    its own is told with the name it may have meant."""
    problems = _validation_problems(exc, model)
    errors = [ConfigError(message, field=field) for field, message in problems]
    return errors[0] if len(errors) == 1 else ConfigErrors(errors)


def _validation_problems(
    exc: ValidationError, model: type[BaseModel] | None = None
) -> list[tuple[str, str]]:
    """Each of pydantic's errors as its field (the model's name, then the path to the
    field: ``Role.approvals.default``) and what is wrong there, in pydantic's words,
    with the value it got."""
    fields = list(model.model_fields) if model is not None else []
    return [_problem(exc.title, error, fields) for error in pydantic_errors(exc)]


def pydantic_errors(exc: ValidationError) -> list[ErrorDetails]:
    """pydantic's errors in ``exc``, less the count it gets wrong: a tuple or list
    whose items failed is also told too short "after validation", counting only the
    items that validated, which would ask for more items where the items are enough
    and only need fixing."""
    errors = exc.errors(include_url=False)
    return [error for error in errors if not _miscounted(error, errors)]


def _miscounted(error: ErrorDetails, errors: list[ErrorDetails]) -> bool:
    """Whether ``error`` is pydantic's ``too_short`` for a sequence long enough whose
    items (some of ``errors``) failed."""
    if error["type"] != "too_short" or not isinstance(error["input"], collections.abc.Sized):
        return False
    least = (error.get("ctx") or {}).get("min_length")
    loc = error["loc"]
    inner = any(len(e["loc"]) > len(loc) and e["loc"][: len(loc)] == loc for e in errors)
    return inner and isinstance(least, int) and len(error["input"]) >= least


def validation_summary(exc: ValidationError) -> str:
    """pydantic's errors on one line, each with its field (``Report.count: Input should
    be greater than or equal to 0 (got -1); ...``), for an error of Honeycomb's that
    says what did not validate."""
    return "; ".join(f"{field}: {message}" for field, message in _validation_problems(exc))


def _problem(title: str, error: ErrorDetails, fields: list[str]) -> tuple[str, str]:
    loc = error["loc"]
    field = title + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)
    message = error["msg"]
    if error["type"] == "extra_forbidden" and loc:
        close = did_you_mean(str(loc[0]), fields) if len(loc) == 1 else ""
        return field, f"unknown field{close}"
    if error["type"] in ("value_error", "assertion_error"):  # our own words
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    elif error["type"] != "missing":
        shown = repr(error["input"])
        message += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return field, message


@functools.cache
def written_fields(cls: type[Settings]) -> dict[str, msgspec.structs.FieldInfo]:
    """The fields of ``cls`` a file may write, by name: all but the callable ones."""
    return {f.name: f for f in msgspec.structs.fields(cls) if not _callable(f.type)}


def _written_builtins(value: Settings) -> Any:
    fields = written_fields(type(value))
    return msgspec.to_builtins({name: getattr(value, name) for name in fields})


@functools.cache
def _bounds(cls: type[Settings]) -> tuple[tuple[str, msgspec.Meta], ...]:
    return tuple((f.name, meta) for f in msgspec.structs.fields(cls) for meta in _metas(f.type))


def _metas(annotation: Any) -> list[msgspec.Meta]:
    """The ``msgspec.Meta`` of an annotation and of its union's members."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extras = typing.get_args(annotation)
        return [e for e in extras if isinstance(e, msgspec.Meta)] + _metas(inner)
    if origin in (typing.Union, types.UnionType):
        return [m for member in typing.get_args(annotation) for m in _metas(member)]
    return []


@functools.cache
def _annotations(cls: type[Settings]) -> tuple[tuple[str, Any, Callable[[Any], bool]], ...]:
    """Each field's name, annotation, and the test of a value's type it says."""
    return tuple((f.name, f.type, _is_of(f.type)) for f in msgspec.structs.fields(cls))


_Container = type[tuple[Any, ...]] | type[dict[Any, Any]]


@functools.cache
def _kept(cls: type[Settings]) -> dict[str, _Container]:
    """The fields of ``cls`` that hold a tuple or a dict, by name, with that type: a
    list given for a tuple is kept as one, a dict given is copied."""
    found = ((f.name, _container(f.type)) for f in msgspec.structs.fields(cls))
    return {name: kind for name, kind in found if kind is not None}


def _container(annotation: Any) -> _Container | None:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _container(args[0])
    if origin in (typing.Union, types.UnionType):
        kinds = [kind for kind in map(_container, args) if kind is not None]
        return kinds[0] if kinds else None
    kind = origin or annotation
    if kind is tuple:
        return tuple
    return dict if kind is dict else None


def _is_of(annotation: Any) -> Callable[[Any], bool]:
    """The test of whether a value is of the type ``annotation`` says, as a type
    checker reads it: a list for a tuple too, an int for a float, never a bool for a
    number. Made once a field: a setting is made in a few microseconds."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _is_of(args[0])
    if origin in (typing.Union, types.UnionType):
        members = [_is_of(member) for member in args]
        return lambda value: any(test(value) for test in members)
    if annotation is None or annotation is type(None):
        return lambda value: value is None
    if origin in (tuple, list, collections.abc.Sequence):
        each = _is_of(args[0] if origin is not tuple or args[-1:] == (...,) else Any)
        return lambda value: isinstance(value, tuple | list) and all(map(each, value))
    if origin in (dict, collections.abc.Mapping):
        key, item = (_is_of(a) for a in args or (Any, Any))
        return lambda value: (
            isinstance(value, dict) and all(key(k) and item(v) for k, v in value.items())
        )
    if origin is collections.abc.Callable:
        return callable
    if annotation is float or annotation is int:
        numbers = int | float if annotation is float else int
        return lambda value: isinstance(value, numbers) and not isinstance(value, bool)
    if annotation is Any or not isinstance(annotation, type):
        return lambda value: True
    return lambda value: isinstance(value, annotation)


def _type_name(annotation: Any) -> str:
    """``annotation`` as Python writes it, without its bounds: ``float | None``,
    ``tuple[str, ...]``, ``dict[str, McpToolSettings]``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(member) for member in args)
    if annotation is None or annotation is type(None):
        return "None"
    if annotation is ...:
        return "..."
    if origin is not None:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(map(_type_name, args))}]"
    return getattr(annotation, "__name__", str(annotation))


def _kinds(value: object) -> str:
    """The types ``value`` holds, not its values (which may be secrets): ``str``,
    ``tuple of int, str``, ``dict of dict``."""
    if isinstance(value, str) or not isinstance(value, tuple | list | dict):
        return type(value).__name__
    items = value.values() if isinstance(value, dict) else value
    inner = ", ".join(sorted({type(item).__name__ for item in items}))
    return f"{type(value).__name__} of {inner}" if inner else type(value).__name__


def _out_of_bounds(value: Any, meta: msgspec.Meta) -> str | None:
    """What ``value`` must be and is not, by ``meta``; None when it is within."""
    if meta.gt is not None and not value > meta.gt:
        return "positive" if meta.gt == 0 else f"more than {meta.gt}"
    if meta.ge is not None and not value >= meta.ge:
        return "0 or more" if meta.ge == 0 else f"at least {meta.ge}"
    if meta.lt is not None and not value < meta.lt:
        return f"less than {meta.lt}"
    if meta.le is not None and not value <= meta.le:
        return f"at most {meta.le}"
    if meta.multiple_of is not None and value % meta.multiple_of:
        return f"a multiple of {meta.multiple_of}"
    if meta.min_length is not None and len(value) < meta.min_length:
        return "not empty" if meta.min_length == 1 else f"at least {meta.min_length} long"
    if meta.max_length is not None and len(value) > meta.max_length:
        return f"at most {meta.max_length} long"
    if meta.pattern is not None and re.search(meta.pattern, value) is None:
        return f"matching {meta.pattern!r}"
    return None


_BOUNDS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")


def _pydantic_form(annotation: Any) -> Any:
    """``annotation`` with its ``msgspec.Meta`` bounds as pydantic's (a ``Field``)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        inner, *extras = typing.get_args(annotation)
        rules = [_pydantic_bounds(e) if isinstance(e, msgspec.Meta) else e for e in extras]
        return typing.Annotated[(_pydantic_form(inner), *rules)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_pydantic_form(a) for a in typing.get_args(annotation))]  # noqa: UP007
    return annotation


def _pydantic_bounds(meta: msgspec.Meta) -> Any:
    bounds = {name: getattr(meta, name) for name in _BOUNDS}
    return Field(**{name: bound for name, bound in bounds.items() if bound is not None})


def _callable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _callable(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_callable(a) for a in typing.get_args(annotation))
    return origin is collections.abc.Callable


def packed(value: msgspec.Struct) -> tuple[Callable[[type[V], bytes], V], tuple[Any, ...]]:
    """``__reduce__`` for a value every field of which msgspec encodes exactly (no
    ``Any``): pickled as one msgpack string rather than struct by struct, which is
    several times faster to send to another process (a Ray actor's results, say)."""
    return _unpacked, (type(value), _PACKER.encode(value))


def _unpacked(cls: type[V], data: bytes) -> V:
    decoder: msgspec.msgpack.Decoder[V] = _unpacker(cls)
    return decoder.decode(data)


@functools.cache
def _unpacker(cls: type[msgspec.Struct]) -> msgspec.msgpack.Decoder[Any]:
    return msgspec.msgpack.Decoder(cls)


_PACKER = msgspec.msgpack.Encoder()
