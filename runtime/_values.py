"""Making frozen pydantic values that Honeycomb's own code has just built.

Validation is for what comes from outside: a model's answer, a user's YAML, a tool's
arguments. Values the loop assembles from already-valid parts (an observation, a
request, a result) are made with :func:`trusted`, several times a turn, at a fifth of
the cost. ``tests/runtime/test_values.py`` checks that every such value equals its
validated twin, so a change in pydantic's internals fails the tests, not the users.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["trusted"]

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__


_ALL_FIELDS: dict[type[BaseModel], set[str]] = {}


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of ``cls`` holding ``values``, which must name every field with a
    valid value; nothing is checked.

    Every such instance of a class shares one set of field names: the models are frozen,
    so nothing adds to it in place (a copy gets its own), and the values of a whole
    conversation then cost the garbage collector one object each, not two.
    """
    fields = _ALL_FIELDS.get(cls)
    if fields is None:
        fields = _ALL_FIELDS[cls] = set(cls.model_fields)
    obj = _new(cls)
    _set(obj, "__dict__", values)
    _set(obj, "__pydantic_fields_set__", fields)
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj
