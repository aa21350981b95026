"""Making the values Honeycomb passes around, cheaply.

Validation is for what comes from outside: a model's answer, a user's YAML, a tool's
arguments, a stored run. Values the loop makes from already-valid parts (an
observation, a request, a message) cost what making them costs, several times a turn:

- The messages, usage and model requests and responses are classes made with
  :func:`value_class`: slotted, keyword-only dataclasses, frozen for type checkers (a
  constructor that checks nothing, one object for the garbage collector to track).
  Pydantic validates and dumps them where data crosses a boundary (see
  :mod:`runtime.messages`).
- Events and settings are made with :func:`record`, as are the value classes: a slotted
  dataclass whose equality, hash and repr are three functions shared by every such
  class. Python 3.11's ``dataclass`` writes each of those methods as source and
  compiles it, for every class, as the class is made: for Honeycomb's 31 classes that
  was 4% of the instructions of ``import honeycomb`` (item 23 in
  ``benchmarks/README.md``).
- The pydantic models that results and configuration are made of are made with
  :func:`trusted` when Honeycomb's own code has just built their values: a fifth of
  the cost of validating them. ``tests/runtime/test_values.py`` checks that every such
  value equals its validated twin, so a change in pydantic's internals fails the tests,
  not the users.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

from pydantic import BaseModel, ConfigDict

__all__ = ["record", "trusted", "value_class"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_new = object.__new__
_set = object.__setattr__

_VALIDATION = ConfigDict(extra="forbid")
"""How pydantic reads a value class from outside data: unknown fields are errors."""


@dataclass_transform(field_specifiers=(dataclasses.field,))
def record(
    *, frozen: bool = False, kw_only: bool = False, unsafe_hash: bool = False
) -> Callable[[type[T]], type[T]]:
    """A slotted dataclass, as ``dataclass(slots=True, ...)`` makes it, whose ``__eq__``,
    ``__hash__`` and ``__repr__`` are shared functions that read the class's fields
    (their names, in order, are the class attribute ``_names``).

    They behave as the dataclass's own would: equal when of the same class with equal
    compared fields (compared as a tuple, as a dataclass compares them); hashable when
    frozen or ``unsafe_hash``, with the dataclass's hash (else ``__hash__`` is None);
    the repr names the class and each shown field. Only ``__init__`` (and, frozen,
    ``__setattr__`` and ``__delattr__``) is compiled for the class.
    """

    def make(cls: type[T]) -> type[T]:
        made = dataclasses.dataclass(
            slots=True, frozen=frozen, kw_only=kw_only, eq=False, repr=False
        )(cls)
        fields = dataclasses.fields(made)  # type: ignore[arg-type]
        compared = [f.name for f in fields if f.compare]
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        made._compared = _getter(compared)  # type: ignore[attr-defined]
        made._hashed = _getter(hashed)  # type: ignore[attr-defined]
        made._names = tuple(f.name for f in fields)  # type: ignore[attr-defined]
        made._shown = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
        own = vars(cls)  # what the class defines itself is kept, as dataclass keeps it
        # Python sets __hash__ to None in a class that defines __eq__: not a choice.
        own_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        if "__eq__" not in own:
            made.__eq__ = _fields_equal  # type: ignore[method-assign]
        if not own_hash:
            made.__hash__ = _fields_hash if frozen or unsafe_hash else None  # type: ignore[assignment]
        if "__repr__" not in own:
            made.__repr__ = _fields_repr  # type: ignore[method-assign]
        return made

    return make


def _getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The named fields of an instance as a tuple, as a dataclass compares and hashes
    them (kept as a class attribute: neither an ``attrgetter`` nor a ``staticmethod``
    binds to the instance)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        (name,) = names
        return staticmethod(lambda obj: (getattr(obj, name),))
    return staticmethod(_nothing)


def _nothing(_: object) -> tuple[()]:
    return ()


def _fields_equal(self: Any, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return self._compared(self) == self._compared(other)


def _fields_hash(self: Any) -> int:
    return hash(self._hashed(self))


@reprlib.recursive_repr()
def _fields_repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._shown)
    return f"{self.__class__.__qualname__}({shown})"


_value = record(kw_only=True, unsafe_hash=True)


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
    made = _value(cls)
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
