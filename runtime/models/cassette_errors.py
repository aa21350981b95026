"""A model call's failure as a cassette keeps it (:class:`RecordedFailure`), and the error a
replay raises again from it: of the same class, message and fields, so that a run
whose worker failed on its model when recorded (an endpoint down after its retries,
the run going on without it, or a retry its budget refused) fails alike replayed, and
what the rest of the run is told of it is what it was told then."""

from __future__ import annotations

import builtins
from typing import Any

import msgspec

from runtime import errors
from runtime.messages import Usage
from runtime.value import Value

__all__ = ["RecordedFailure", "failure_of", "memory_raised", "raised"]


class RecordedFailure(Value, frozen=True, kw_only=True):
    """What a recorded model call failed with.

    Attributes:
        type: The error's class, of :mod:`runtime.errors` (a ``ModelError``, or the
            ``BudgetExceeded`` that refused a retry).
        args: Its arguments (its message).
        fields: Its fields that JSON holds (``status``, ``retry_after``, ``spent`` ...).
    """

    type: str
    args: tuple[Any, ...] = ()
    fields: dict[str, Any] = msgspec.field(default_factory=dict)


def failure_of(error: Exception) -> RecordedFailure:
    """``error`` as a cassette keeps it: its class, its arguments and, a Honeycomb
    error's, its fields (one JSON cannot hold is left out)."""
    fields: dict[str, Any] = {}
    for name, value in vars(error).items() if isinstance(error, errors.HoneycombError) else ():
        try:
            fields[name] = msgspec.to_builtins(value)
        except TypeError:
            continue
    try:
        args = tuple(msgspec.to_builtins(list(error.args)))
    except TypeError:
        args = (str(error),)
    return RecordedFailure(type=type(error).__name__, args=args, fields=fields)


def raised(failure: RecordedFailure) -> errors.HoneycombError:
    """The error ``failure`` was: of its class, made again from its arguments and
    fields as an error that crossed from another process is (without its
    ``__init__``); a class this Honeycomb does not have is a ``ModelError`` that says
    which it was."""
    cls = getattr(errors, failure.type, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.ModelError | errors.BudgetExceeded)):
        text = failure.args[0] if failure.args else ""
        return errors.ModelError(f"{failure.type}: {text}")
    fields = dict(failure.fields)
    if isinstance(fields.get("spent"), dict):  # a Usage, as JSON holds it
        fields["spent"] = msgspec.convert(fields["spent"], Usage)
    return _made_again(cls, failure.args, fields)


def memory_raised(failure: RecordedFailure) -> Exception:
    """The error a memory failed with, made again: of its class (Honeycomb's, or
    Python's: ``ConnectionError`` ...), with its message and fields, so that a worker
    is told what it was told when recorded; a class of another library is a
    :class:`~runtime.errors.MemoryStoreError` that names it."""
    cls = getattr(errors, failure.type, None) or getattr(builtins, failure.type, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        text = failure.args[0] if failure.args else ""
        return errors.MemoryStoreError(f"(as recorded) {failure.type}: {text}", path="memory")
    if issubclass(cls, errors.HoneycombError):
        return _made_again(cls, failure.args, failure.fields)
    return cls(*failure.args)


def _made_again(
    cls: type[errors.HoneycombError], args: tuple[Any, ...], fields: dict[str, Any]
) -> errors.HoneycombError:
    """An error of ``cls`` with ``args`` and ``fields``, made as one that crossed from
    another process is: without its ``__init__``."""
    error = cls.__new__(cls, *args)
    error.args = args
    vars(error).update(fields)
    return error
