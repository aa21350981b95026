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
    if not isinstance(value, Mapping) or issubclass(schema, RootModel):  # dumped as its root
        return None
    fields = _dumped(schema)
    named = f"a {schema.__name__} ({', '.join(fields)})"
    named = f"{whose}, {named}," if whose else named
    extra = schema.model_config.get("extra") == "allow"  # its answers keep any field
    for key in value:
        if key not in fields and not extra:
            return (key,), f"{named} has no field {key!r}{did_you_mean(str(key), fields)}"
    missing = [name for name in fields if name not in value]
    if missing:
        lacks = ", ".join(map(repr, missing))
        return (), f"{named} has {lacks} too: equals compares the whole answer"
    for key, field in schema.model_fields.items():
        inner = _model_of(field.annotation)
        if inner is None or key not in value:
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


def _dumped(schema: type[BaseModel]) -> list[str]:
    """The keys of an answer of ``schema`` as an ``equals`` check sees it dumped."""
    fields = [name for name, field in schema.model_fields.items() if not field.exclude]
    return [*fields, *schema.model_computed_fields]


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
