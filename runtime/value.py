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

A mistake in a value a person wrote is worded once (:func:`worded`), whether it was
made in Python (``Role(tools="x")``) or read from a hive file: pydantic names
Python's types and classes (``Input should be a valid tuple``) and regular
expressions, where the words say what the value should be, with what to write
instead, in the terms of where it was written (a list or a tuple, a dict; a file's
list, mapping and quotes), and an unknown field with the field meant, at any depth.
"""

from __future__ import annotations

import collections.abc
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
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
    "misspelt_not_missing",
    "packed",
    "pydantic_errors",
    "validation_summary",
    "worded",
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
    naming the model and the field, worded as the same mistake in a hive file is
    (:func:`config_error`), in Python's terms. Validated from data (``model_validate``,
    or as a field of a hive's spec), it raises pydantic's ``ValidationError``, which
    the hive's loader turns into errors at their line and field in the file.

    Raises:
        ConfigError: made in Python with a wrong value (several: ``ConfigErrors``).
    """

    # Its validator is built when a model is first made, not as Honeycomb is imported.
    model_config = ConfigDict(defer_build=True)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise config_error(exc, type(self), data) from exc

    # pydantic calls a model's own __init__ when it validates data too, unless the
    # __init__ is marked as its base's: then only a model made in Python comes here,
    # and data validated (a hive's) keeps pydantic's errors, to be placed in its file.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def config_error(
    exc: ValidationError, model: type[BaseModel] | None = None, data: Any = None
) -> ConfigError:
    """pydantic's errors about a value made in Python, as one :class:`ConfigError`
    (several: :class:`ConfigErrors`), each naming its field and worded as a hive
    file's mistakes are (:func:`worded`), in Python's terms:
    ``Role.tools: should be a list or a tuple (got 'x'): ...``. With the ``model``
    validated (and the ``data`` it was given), an unknown field is told with the name
    it may have meant, at any depth, and the fields allowed there."""
    errors = [
        ConfigError(message, field=exc.title + _shown_path(where))
        for where, message in (
            worded(model, error, data, in_python=True)
            for error in misspelt_not_missing(pydantic_errors(exc))
        )
    ]
    return errors[0] if len(errors) == 1 else ConfigErrors(errors)


def validation_summary(exc: ValidationError) -> str:
    """pydantic's errors on one line, each with its field (``Report.count: Input should
    be greater than or equal to 0 (got -1); ...``), for an error of Honeycomb's that
    says what data (a model's answer, a stored value) did not validate: in pydantic's
    words, as it is said to whoever made the data."""
    return "; ".join(_summarized(exc.title, error) for error in pydantic_errors(exc))


def _summarized(title: str, error: ErrorDetails) -> str:
    message = error["msg"]
    if error["type"] == "extra_forbidden" and error["loc"]:
        message = "unknown field"
    elif error["type"] in ("value_error", "assertion_error"):  # our own words
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    elif error["type"] != "missing":
        shown = repr(error["input"])
        message += f" (got {shown if len(shown) <= 60 else shown[:57] + '...'})"
    return f"{title}{_shown_path(error['loc'])}: {message}"


def _shown_path(loc: Sequence[str | int]) -> str:
    """A path into a value as Python writes it after its name: ``.approvals.tools[0]``."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


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


_Path = tuple[str | int, ...]
"""Where a value is inside the data validated: keys and indices."""


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


def misspelt_not_missing(problems: list[ErrorDetails]) -> list[ErrorDetails]:
    """pydantic's ``problems``, less a required field's ``missing`` when its mapping
    holds a misspelling of it (``budget_tokns:``, ``Role(nmae="w")``): that one
    mistake is told once, as the unknown field, with the field meant."""
    unknown: dict[tuple[Any, ...], list[str]] = {}
    for err in problems:
        if err["type"] == "extra_forbidden" and err["loc"]:
            unknown.setdefault(tuple(err["loc"][:-1]), []).append(str(err["loc"][-1]))

    def misspelt(err: ErrorDetails) -> bool:
        written = unknown.get(tuple(err["loc"][:-1]), ())
        return any(did_you_mean(key, [str(err["loc"][-1])]) for key in written)

    return [err for err in problems if not (err["type"] == "missing" and misspelt(err))]


def _repr(where: _Path, given: Any) -> str:
    return repr(given)


def worded(
    model: Any,
    error: ErrorDetails,
    data: Any,
    *,
    in_python: bool,
    shown: Callable[[_Path, Any], str] = _repr,
) -> tuple[_Path, str]:
    """Where pydantic's ``error`` about ``data`` validated as ``model`` is (the path
    into ``data``), and what is wrong there.

    Args:
        model: What ``data`` was validated as (None: not known; the path is then
            pydantic's location as it is).
        error: One of pydantic's errors (see :func:`pydantic_errors`).
        data: What was validated: a file's mapping, or the keywords a model was made
            with (None: not known, the path follows ``model``'s annotations).
        in_python: Whether it was written in Python, where what to write instead is
            said in Python's terms; else in a file's.
        shown: The value an error is about as the message shows it, by where it is
            (``repr``, cut to 60 characters; a file's hides its secrets).
    """
    loc, holder, expected = _located(model, data, error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden" and loc:
        return loc, _unknown(str(loc[-1]), holder)
    if kind == "missing":
        return loc, "this field is required"
    message = str(error["msg"])
    if kind in ("value_error", "assertion_error"):  # our own words
        return loc, message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    fields, shorthand = _model_fields(expected)
    given = error.get("input")
    ctx = error.get("ctx") or {}
    head, tail = _typed(kind, given, fields, ctx, shorthand, in_python)
    message = head or message
    if "input" in error:
        said = shown(loc, given)
        message += f" (got {said if len(said) <= 60 else said[:57] + '...'}){tail}"
    return loc, message


def _unknown(name: str, holder: Any) -> str:
    """An unknown field ``name`` of the model ``holder`` (None: not known), with the
    field it may have meant (or what its model says of such a name: ``fields_meant``,
    ``unknown_field_hint``) and the fields it has."""
    allowed = list(_fields(holder)) if holder is not None else []
    meant = getattr(holder, "fields_meant", {}).get(name)
    close = f" ({meant})" if meant else did_you_mean(name, allowed)
    message = f"unknown field {name!r}{close}"
    hint = getattr(holder, "unknown_field_hint", None)
    if not close and hint:
        message += f" ({hint.format(name=name)})"
    if allowed:
        message += f"; allowed: {', '.join(sorted(allowed))}"
    return message


_MAPPINGS = frozenset(
    {"dict_type", "mapping_type", "model_type", "model_attributes_type", "dataclass_type"}
)
_LISTS = frozenset({"list_type", "tuple_type", "set_type", "frozen_set_type"})


def _typed(
    kind: str,
    given: Any,
    fields: Sequence[str],
    ctx: Mapping[str, Any],
    shorthand: str,
    in_python: bool,
) -> tuple[str, str]:
    """For a value of the wrong type, what it should be (a head in place of
    pydantic's, which names Python's types and classes; empty: pydantic's is kept) and
    what to write instead (a tail after the value, ``""`` when there is nothing to add).

    Args:
        kind: pydantic's error type.
        given: The value as written (only its kind and shape are quoted).
        fields: The fields of the mapping expected there, if it is a model's.
        ctx: pydantic's context of the error (a literal's expected values).
        shorthand: What the model also takes in place of a mapping (``a role's name``).
        in_python: Whether it was written in Python (else in a file).
    """
    if kind in _MAPPINGS:
        return _mapping(given, fields, ctx, shorthand, in_python)
    if kind in _LISTS:
        return _list(given, in_python)
    if kind == "string_type" and isinstance(given, bool) and not in_python:
        return "", (
            ": YAML reads yes, no, on, off, true and false as booleans; write the text in quotes"
        )
    if kind == "string_type" and isinstance(given, int | float) and not isinstance(given, bool):
        return "", ": write it in quotes, as text"
    if kind in ("literal_error", "enum") and isinstance(given, str):
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        return "", did_you_mean(given, choices)
    if kind == "string_pattern_mismatch":
        return _pattern_words(str(ctx.get("pattern", ""))), ""
    return "", ""


def _mapping(
    given: Any, fields: Sequence[str], ctx: Mapping[str, Any], shorthand: str, in_python: bool
) -> tuple[str, str]:
    """Where a mapping (of a model's ``fields``) goes: what it should be, and what to
    write for ``given``."""
    of = f" of {', '.join(fields)}" if fields else ""
    if in_python:
        model = ctx.get("class_name")
        head = f"should be {model}(...), or a dict{of}" if model else f"should be a dict{of}"
        return head + (f", or {shorthand}" if shorthand else ""), ""
    head = f"should be a mapping{of}"
    if shorthand:  # the head says both forms
        return f"{head}, or {shorthand}", ""
    if (
        isinstance(given, list)
        and given
        and all(isinstance(item, Mapping) and "name" in item for item in given)
    ):
        return head, (
            ": write each item as 'NAME:' with its other fields indented under it, in place "
            "of '- name: NAME'"
        )
    lines = "its fields under it, one 'field: value' a line"
    if not fields:
        lines = "'key: value' lines under it"
    return head, f": write {lines}" + (", without '- '" if isinstance(given, list) else "")


def _list(given: Any, in_python: bool) -> tuple[str, str]:
    """Where a list goes: what it should be, and what to write for ``given``."""
    if in_python:
        head = "should be a list or a tuple"
        if isinstance(given, str):
            return head, ": give its items in brackets, even a single one (['a'], not 'a')"
        return head, ": give its items, not a dict" if isinstance(given, Mapping) else ""
    if isinstance(given, Mapping):
        return "should be a list", ": write its items as '- item' lines, not 'key: value'"
    return "should be a list", ": write it in brackets ([a, b]), or as '- item' lines"


_PATTERN = re.compile(r"\^\[(\^?)((?:\\.|[^\]])+)\](\+|\{(\d+),(\d+)\})\$")
r"""A pattern of one character class, repeated: ``^[A-Za-z0-9_-]{1,64}$``, ``^[^\s/]+$``."""
_CLASS_PART = re.compile(r"\\[ws]|[A-Za-z0-9]-[A-Za-z0-9]|\\?.")
_CLASS_WORDS = {
    "\\w": ("letters", "digits", "'_'"),
    "\\s": ("spaces",),
    "A-Z": ("letters",),
    "a-z": ("letters",),
    "0-9": ("digits",),
}


def _pattern_words(pattern: str) -> str:
    """What a text matching ``pattern`` (a regular expression, which a newcomer may not
    read) holds, in words, when the pattern is one character class repeated; empty
    otherwise (pydantic's words are kept)."""
    found = _PATTERN.fullmatch(pattern)
    if found is None:
        return ""
    negated, chars, _, least, most = found.groups()
    words: dict[str, None] = {}  # in order, once each
    for part in _CLASS_PART.findall(chars):
        words.update(dict.fromkeys(_CLASS_WORDS.get(part, (repr(part.lstrip("\\")),))))
    listed = list(words)
    said = ", ".join(listed[:-1]) + f" or {listed[-1]}" if len(listed) > 1 else listed[0]
    if negated:
        return f"should hold no {said}"
    if least is None:
        return f"should hold only {said}"
    return f"should be {least} to {most} characters: {said}"


def _located(model: Any, value: Any, loc: Sequence[Any]) -> tuple[_Path, Any, Any]:
    """The path into the data of a pydantic error location, the model its last part
    is a field of (None if it is not a model's), and the annotation of what is there
    (Any where not known). A model may say where a field it does not know may belong
    in a class attribute ``unknown_field_hint`` (``{name}``: the field), or where a field
    of a name is meant in one named ``fields_meant`` (a name: what to write), and what it
    takes in place of a mapping in one named ``shorthand``. pydantic also puts
    a tag into the location of an error inside a union: the member's name (``str``,
    ``list[str]``, a model's class name) or a tagged union's tag; a tag picks the
    member the rest of the location is in, and a part that is a key or index of the
    data is kept even if it looks like one."""
    out: list[str | int] = []
    holder: Any = None
    current: Any = model
    for part in loc:
        members = _members(current)
        found = _key(value, part)
        if found is _MISSING and (len(members) > 1 or _is_union_tag(part)):
            current = _member_tagged(members, part)
            continue
        if found is _MISSING and value is not None and not isinstance(value, Mapping | list):
            break  # a shorthand (``store: URL``): the error is about the value as written
        holder = _only_model(members)
        if found is not _MISSING:
            value, part = value[found], found
        else:
            value = None
        out.append(part if isinstance(part, str | int) else str(part))
        current = _inner(holder if holder is not None else current, part)
    return tuple(out), holder, current


def _model_fields(annotation: Any) -> tuple[list[str], str]:
    """The fields, as they are written, of the one model ``annotation`` may be, and
    what it takes in place of them (its class attribute ``shorthand``, if any)."""
    model = _only_model(_members(annotation))
    if model is None:
        return [], ""
    return sorted(_fields(model)), str(getattr(model, "shorthand", ""))


_MISSING = object()


def _key(value: Any, part: Any) -> Any:
    """The key or index of ``value`` that ``part`` names (pydantic gives the keys it
    cannot fit in a C integer as text), or ``_MISSING``."""
    if isinstance(value, Mapping):
        if part in value:
            return part
        return next((k for k in value if isinstance(k, int) and str(k) == part), _MISSING)
    if isinstance(value, list | tuple) and isinstance(part, int) and 0 <= part < len(value):
        return part
    return _MISSING


def _is_union_tag(part: Any) -> bool:
    # a union member's name, where the annotation is not known (``Any``, a validator's)
    return isinstance(part, str) and ("[" in part or part in ("str", "int", "float", "bool"))


def _members(annotation: Any) -> list[Any]:
    """The types a value of ``annotation`` may be: one, or a union's members (never
    None, which an error is not about; ``Annotated`` stripped)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _members(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) if a is not type(None) for m in _members(a)]
    return [annotation]


def _is_model(annotation: Any) -> bool:
    """Whether ``annotation`` is a class validated field by field: a pydantic model,
    or :class:`Settings`."""
    return isinstance(annotation, type) and issubclass(annotation, BaseModel | Settings)


def _fields(model: Any) -> dict[str, Any]:
    """The annotations of the fields of a model (see :func:`_is_model`), by the name
    they are written with (a field's alias, where it has one: ``assert``)."""
    if issubclass(model, Settings):
        return {name: info.type for name, info in written_fields(model).items()}
    return {info.alias or name: info.annotation for name, info in model.model_fields.items()}


def _only_model(members: list[Any]) -> Any:
    """The one model among ``members`` (a model, or a model or a scalar), else None."""
    models = [m for m in members if _is_model(m)]
    return models[0] if len(models) == 1 else None


def _member_tagged(members: list[Any], tag: Any) -> Any:
    """The member of a union that pydantic's location ``tag`` names: a model by its
    class name, or by the literal its discriminating field holds; else the union."""
    for member in members:
        if _is_model(member):
            if member.__name__ == tag:
                return member
            for annotation in _fields(member).values():
                if typing.get_origin(annotation) is typing.Literal and tag in typing.get_args(
                    annotation
                ):
                    return member
    return typing.Union[tuple(members)] if len(members) > 1 else members[0]  # noqa: UP007


def _inner(annotation: Any, part: str | int) -> Any:
    """The annotation of what ``part`` names inside a value of ``annotation``: a
    model's field, a mapping's values, a sequence's items (Any where not known)."""
    members = _members(annotation)
    model = _only_model(members)
    if model is not None:
        return _fields(model).get(str(part), Any)
    args = typing.get_args(members[0]) if len(members) == 1 else ()
    if not args:
        return Any
    if typing.get_origin(members[0]) is tuple and args[-1] is not Ellipsis:
        return args[part] if isinstance(part, int) and part < len(args) else Any
    return args[-1] if args[-1] is not Ellipsis else args[0]  # mapping values, items


@functools.cache
def written_fields(cls: type[Settings]) -> dict[str, msgspec.structs.FieldInfo]:
    """The fields of ``cls`` a file may write, by name: all but the callable ones."""
    return {f.name: f for f in msgspec.structs.fields(cls) if not _callable(f.type)}


def _callable(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _callable(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_callable(a) for a in typing.get_args(annotation))
    return origin is collections.abc.Callable
