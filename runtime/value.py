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
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from pydantic_core import core_schema

__all__ = ["Value", "packed"]

V = TypeVar("V", bound=msgspec.Struct)


class Value(msgspec.Struct, frozen=True, kw_only=True):
    """Base of Honeycomb's values: frozen, made by keyword, compared by their fields."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
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
