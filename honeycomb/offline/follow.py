"""Follow-up calls of the offline model (see :mod:`honeycomb.offline.model`): once results
are in, a tool that takes an identifier (a file, a path, a ``*_id``) is called once for
each identifier those results name. "List the files, then review each" and "read the
inbox, classify each message, open a ticket for each" run by this one rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from honeycomb.offline import rules as rules
from honeycomb.offline import schema as schema_rules
from runtime import ToolMessage, ToolSchema

__all__ = ["follow_ups", "identifiers", "per_item"]


def identifiers(param: str, observed: Sequence[ToolMessage]) -> list[str]:
    """The identifiers for ``param`` that the successful results name, in order: file
    names for a file or path, else the values of a same-named (or ``id``) key."""
    found: list[str] = []
    for message in observed:
        if message.status != "ok":
            continue
        try:
            value: Any = json.loads(message.content)
        except ValueError:
            value = message.content
        if re.search(r"path|file", param, re.I):
            found += schema_rules.FILE_NAME.findall(" ".join(_strings(value)))
        else:
            found += [str(v) for k, v in _pairs(value) if k in (param, "id")]
    return list(dict.fromkeys(found))[: rules.MAX_CALLS]


def follow_ups(
    tools: Sequence[ToolSchema], observed: Sequence[ToolMessage]
) -> list[tuple[str, dict[str, Any]]]:
    """(tool, arguments) for each tool not called yet whose identifier parameter the
    results can fill, once per identifier."""
    called = {m.name for m in observed}
    calls: list[tuple[str, dict[str, Any]]] = []
    for schema in tools:
        param = _id_param(schema)
        if schema.name in called or param is None:
            continue
        for item in identifiers(param, observed):
            arguments = _filled(schema, {param: item}, {})
            if arguments is not None:
                calls.append((schema.name, arguments))
    return calls[: rules.MAX_CALLS]


def per_item(
    sender: ToolSchema, observed: Sequence[ToolMessage], subject: str
) -> list[dict[str, Any]]:
    """Arguments for one call of a side-effecting tool per item the results name, when
    the tool takes an identifier: each call gets the item's own fields."""
    param = _id_param(sender)
    if param is None:
        return []
    records: dict[str, dict[str, Any]] = {}
    for record in _records(observed, param):  # an item's later results add to its fields
        records.setdefault(str(record[param]), {}).update(record)
    calls: list[dict[str, Any]] = []
    for item, record in records.items():
        text = "; ".join(f"{k}: {v}" for k, v in record.items() if k != param)
        arguments = _filled(sender, {param: item}, record, subject=f"{subject} {item}", body=text)
        if arguments is not None:
            calls.append(arguments)
    return calls[: rules.MAX_CALLS]


def _id_param(schema: ToolSchema) -> str | None:
    required = schema.parameters.get("required", ())
    return next((p for p in required if schema_rules.ID_PARAM.search(p)), None)


def _filled(
    schema: ToolSchema,
    given: dict[str, Any],
    record: dict[str, Any],
    *,
    subject: str = "",
    body: str = "",
) -> dict[str, Any] | None:
    """``given`` plus the other parameters: from the record's same-named field, a subject
    or body, or the schema's defaults; None when a required one has no value."""
    root = schema.parameters
    required = set(root.get("required", ()))
    arguments = dict(given)
    for name, prop in root.get("properties", {}).items():
        if name in arguments:
            continue
        if name in record and not isinstance(record[name], dict | list):
            arguments[name] = record[name]
        elif subject and re.search(r"subject|title|summary|headline", name, re.I):
            arguments[name] = subject
        elif body and re.search(r"body|content|text|details|note|description", name, re.I):
            arguments[name] = body
        elif name in required:
            values = schema_rules.values(name, schema_rules.resolve(prop, root), "", True)
            if not values:
                return None
            arguments[name] = values[0]
    return arguments


def _records(observed: Sequence[ToolMessage], param: str) -> Iterator[dict[str, Any]]:
    """The result records that carry ``param``, in order."""
    for message in observed:
        if message.status != "ok":
            continue
        try:
            value = json.loads(message.content)
        except ValueError:
            continue
        items = value if isinstance(value, list) else [value]
        yield from (i for i in items if isinstance(i, dict) and param in i)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _pairs(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict | list):
                yield from _pairs(v)
            else:
                yield k, v
    elif isinstance(value, list):
        for v in value:
            yield from _pairs(v)
