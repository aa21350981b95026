"""Making the values Honeycomb passes around, cheaply.

Validation is for what comes from outside: a model's answer, a user's YAML, a tool's
arguments, a stored run. Values the loop makes from already-valid parts (an
observation, a request, a message) cost what making them costs, several times a turn:

- The messages, usage and model requests and responses are classes made with
  :func:`value_class`: slotted, keyword-only dataclasses, frozen for type checkers (a
  constructor that checks nothing, one object for the garbage collector to track).
  Pydantic validates and dumps them where data crosses a boundary (see
  :mod:`runtime.messages`).
- The pydantic models that results and configuration are made of are made with
  :func:`trusted` when Honeycomb's own code has just built their values: a fifth of
  the cost of validating them. ``tests/runtime/test_values.py`` checks that every such
  value equals its validated twin, so a change in pydantic's internals fails the tests,
  not the users.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, dataclass_transform

from pydantic import BaseModel, ConfigDict

__all__ = ["trusted", "value_class"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_new = object.__new__
_set = object.__setattr__

_VALIDATION = ConfigDict(extra="forbid")
"""How pydantic reads a value class from outside data: unknown fields are errors."""


@dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def value_class(cls: type[T]) -> type[T]:
    """``cls`` as a value: a slotted, keyword-only dataclass with equality and a hash.

    The one place that decides how values are made. Type checkers see the class as
    frozen (``frozen_default=True`` above), so assigning to a field is a type error;
    at run time it is not enforced, because a frozen dataclass's ``__init__`` sets
    each field through ``object.__setattr__``, which doubles the cost of every message,
    request and response (B measured 7% fewer instructions per turn frozen, 16%
    unfrozen). Values are read-only by contract, like events.
    """
    made = dataclasses.dataclass(slots=True, kw_only=True, unsafe_hash=True)(cls)
    made.__pydantic_config__ = _VALIDATION  # type: ignore[attr-defined]
    return made


_ALL_FIELDS: dict[type[BaseModel], set[str]] = {}


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """An instance of the pydantic model ``cls`` holding ``values``, which must name
    every field with a valid value; nothing is checked.

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
