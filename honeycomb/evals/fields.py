"""What an ``equals`` check compares a structured answer with: an answer of the hive's
aggregator's ``output_schema``, every field of it (``model_dump``). A value that names
a field the answer does not have, or lacks one it has, equals no answer: a mistake of
the cases file, told at the field before any case runs (:func:`field_problem`)."""

from __future__ import annotations

import inspect
import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, RootModel

from runtime import did_you_mean

__all__ = ["field_problem"]


def field_problem(
    value: Any, schema: type[BaseModel], whose: str = "the hive's answer"
) -> tuple[tuple[str | int, ...], str] | None:
    """Where in ``value`` (a mapping written as an answer of ``schema``) it can equal
    no such answer, and why: a field the answer has not, or one it lacks (a field's
    own model's too). None when it may equal one, or is no mapping (a text). ``whose``:
    what the answer of ``schema`` is, said before it."""
    if not isinstance(value, Mapping) or not _dumped_as_fields(schema):
        return None
    fields = _dumped(schema)
    named = f"{schema.__name__} ({', '.join(fields)})"
    named = f"{whose}, {named}," if whose else named
    extra = schema.model_config.get("extra") == "allow"  # its answers keep any field
    for key in value:
        if key not in fields and not extra:
            return (key,), f"{named} has no field {key!r}{did_you_mean(str(key), fields)}"
    missing = [key for key in fields if key not in value]
    if missing:
        lacks = ", ".join(map(repr, missing))
        return (), f"{named} has {lacks} too: equals compares the whole answer"
    for key, annotation in fields.items():
        inner = _model_of(annotation)
        if inner is None:
            continue
        model, many = inner
        given = value[key]
        items = (given if isinstance(given, list) else []) if many else [given]
        for index, item in enumerate(items):
            found = field_problem(item, model, whose="")
            if found is not None:
                place = (key, index) if many else (key,)
                return (*place, *found[0]), found[1]
    return None


def _dumped_as_fields(schema: type[BaseModel]) -> bool:
    """Whether an answer of ``schema`` is dumped as its fields: not a root model's
    root, nor what a serializer of its own makes of it."""
    own = schema.__pydantic_decorators__.model_serializers
    return not issubclass(schema, RootModel) and not own


def _dumped(schema: type[BaseModel]) -> dict[str, Any]:
    """The keys of an answer of ``schema`` as an ``equals`` check sees it dumped
    (``model_dump``), each with its field's type (a computed field's: none read)."""
    by_alias = bool(schema.model_config.get("serialize_by_alias"))
    fields = {
        (field.serialization_alias or field.alias or name) if by_alias else name: field.annotation
        for name, field in schema.model_fields.items()
        if not field.exclude
    }
    for name, computed in schema.model_computed_fields.items():
        fields[(computed.alias or name) if by_alias else name] = None
    return fields


def _model_of(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model a field's value is an answer of, and whether it is a list of them:
    ``Leg``, ``Leg | None``, ``list[Leg]`` (None: no model's, or not known so)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, False
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        given = [a for a in args if a is not type(None)]
        return _model_of(given[0]) if len(given) == 1 else None
    if origin is list and len(args) == 1:
        inner = _model_of(args[0])
        return (inner[0], True) if inner is not None and not inner[1] else None
    return None
