"""``Value``: the one recipe for the values Honeycomb passes around.

Messages, tool calls, usage, model requests and responses, loop state, events, spans
and settings are frozen ``msgspec.Struct``s made by keyword. A constructor checks
nothing (type checkers do); what comes from outside (a model's answer, a stored run,
a user's JSON) is decoded and validated by msgspec where it comes in. Values that
cannot be part of a reference cycle also set ``gc=False``, so the garbage collector
never walks them.

Pydantic models may hold values as fields (results hold a transcript and usage): a
value validates from its dict or JSON and dumps to them, through msgspec.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Value"]


class Value(msgspec.Struct, frozen=True, kw_only=True):
    """Base of Honeycomb's values: frozen, made by keyword, compared by their fields."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

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
