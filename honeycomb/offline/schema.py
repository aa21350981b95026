"""The offline model's argument rules: values for a tool's parameters, and JSON for an
output schema, read from the text of a task (see :mod:`honeycomb.offline.model`)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from honeycomb.offline.rules import (
    MAX_CALLS,
    PREFIX,
    bullets,
    expression,
    key_phrase,
    numbers,
    places,
    stem,
    words,
)

__all__ = ["FILE_NAME", "ID_PARAM", "arguments", "fill_schema", "resolve", "searches", "values"]

_PLACE_PARAM = re.compile(r"city|place|location|town|destination", re.I)
_EXPR_PARAM = re.compile(r"expr", re.I)
_QUERY_PARAM = re.compile(r"query|topic|text|keyword|search|^q$|term", re.I)
ID_PARAM = re.compile(r"(?:^|_)id$|path|file", re.I)
"""Parameters that name one item: a file, a path, an id. Their values are the items a
text or a result names (see :mod:`honeycomb.offline.follow`), never a phrase of it."""
FILE_NAME = re.compile(r"(?<![\w/.-])[\w-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,6}(?![\w/-])")
_ID_TOKEN = re.compile(r"\b[A-Z]{2,}-\d+\b")


def arguments(root: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """Argument sets for one tool; several when the text names several cities or values."""
    props: dict[str, Any] = root.get("properties", {})
    required = set(root.get("required", ()))
    has_place = any(_PLACE_PARAM.search(n) for n in props)
    fixed: dict[str, Any] = {}
    varying: list[tuple[str, list[Any]]] = []
    for name, prop in props.items():
        found = values(name, resolve(prop, root), text, name in required, has_place)
        if len(found) > 1:
            varying.append((name, found))
        elif found:
            fixed[name] = found[0]
        elif name in required:
            return []
    combos = itertools.product(*(options for _, options in varying))
    names = [name for name, _ in varying]
    return [{**fixed, **dict(zip(names, c, strict=True))} for c in combos][:MAX_CALLS]


def searches(root: dict[str, Any]) -> bool:
    """Whether a tool takes a free-text query (a search)."""
    required = root.get("required", ())
    return any(_QUERY_PARAM.search(n) and not ID_PARAM.search(n) for n in required)


def values(
    name: str, prop: dict[str, Any], text: str, required: bool, has_place: bool = True
) -> list[Any]:
    """Values for one parameter read from the text; empty when it has none to give."""
    kind = prop.get("type", "string")
    if prop.get("enum"):
        return mentioned(prop["enum"], text) or ([prop["enum"][0]] if required else [])
    if kind == "string" and ID_PARAM.search(name):
        pattern = FILE_NAME if re.search("path|file", name, re.I) else _ID_TOKEN
        return list(dict.fromkeys(pattern.findall(text)))
    if kind == "string" and _PLACE_PARAM.search(name):
        return list(places(text))
    if _EXPR_PARAM.search(name):
        found = expression(text)
        return [found] if found else []
    if kind == "string" and _QUERY_PARAM.search(name):
        phrase = key_phrase(text)
        found_places = places(text)
        if has_place or not found_places:
            return [phrase]
        return [phrase if p in phrase else f"{phrase} {p}" for p in found_places]
    if not required:
        return []
    if kind in ("integer", "number"):
        found_numbers = numbers(text) or [1.0]
        return [int(found_numbers[0]) if kind == "integer" else found_numbers[0]]
    if kind == "boolean":
        return [False]
    if kind == "array":
        return [[]]
    return [key_phrase(text)] if kind == "string" else []


def mentioned(options: list[Any], text: str) -> list[Any]:
    """The options (enum values) the text names; "weekend" names Saturday and Sunday."""
    said = {stem(w) for w in words(text)}
    if "weekend" in said:
        said |= {stem("saturday"), stem("sunday")}
    return [o for o in options if isinstance(o, str) and stem(o) in said]


# --- observations and schemas -----------------------------------------------------------


def fill_schema(schema: dict[str, Any], text: str) -> Any:
    """A JSON value that fits ``schema``, taken from ``text``: strings get the text (names
    like title/subject its first line), numbers a number found in it or 0, lists its
    bullet points, booleans false."""
    return _fill(schema, schema, text, "")


def _fill(node: dict[str, Any], root: dict[str, Any], text: str, name: str) -> Any:
    node = resolve(node, root)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        usable = [o for o in options if resolve(o, root).get("type") != "null"]
        return _fill((usable or options)[0], root, text, name)
    kind = node.get("type", "object" if "properties" in node else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        props: dict[str, Any] = node.get("properties", {})
        wanted = node.get("required", [])
        return {key: _fill(props[key], root, text, key) for key in wanted if key in props}
    if kind == "array":
        return _sized(_fill_list(node, root, text), node, root, text)
    return _bounded(_fill_scalar(kind, text, name), node)


def _fill_list(node: dict[str, Any], root: dict[str, Any], text: str) -> list[Any]:
    items = resolve(node.get("items", {}), root)
    kind = items.get("type", "string")
    if kind in ("number", "integer"):
        return [_bounded(_fill_scalar(kind, str(n), ""), items) for n in numbers(text)]
    if kind != "string":
        return []
    return [_bounded(b, items) for b in bullets(text) or [" ".join(text.split())]]


def _sized(found: list[Any], node: dict[str, Any], root: dict[str, Any], text: str) -> list[Any]:
    """``found`` within the array's ``minItems`` and ``maxItems``: cut, or made up to
    its least with items filled from ``text``."""
    least, most = node.get("minItems", 0), node.get("maxItems")
    if len(found) < least:
        found += [_fill(node.get("items", {}), root, text, "")] * (least - len(found))
    return found if most is None else found[:most]


def _bounded(value: Any, node: dict[str, Any]) -> Any:
    """``value`` within the bounds ``node`` gives: a string's length (cut, or padded
    with dots), a number's range (:func:`_in_range`)."""
    if isinstance(value, str):
        value = value[: node.get("maxLength")]
        return value.ljust(node.get("minLength", 0), ".")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if node.get("type") == "integer":
        return _in_range(int(value), node, whole=True)
    return _in_range(float(value), node, whole=False)


def _in_range(value: float, node: dict[str, Any], *, whole: bool) -> Any:
    """``value``, or, out of the range ``node`` gives, the nearest ``whole`` number in
    it (one past an exclusive bound); or a number strictly inside (half way between
    the bounds, or one past the only one)."""
    low, high = node.get("minimum"), node.get("maximum")
    open_low, open_high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if whole:
        low = low if open_low is None else open_low + 1
        high = high if open_high is None else open_high - 1
        open_low = open_high = None
    low = low if open_low is None else open_low
    high = high if open_high is None else open_high
    below = low is not None and (value < low or (value == low and open_low is not None))
    above = high is not None and (value > high or (value == high and open_high is not None))
    if not (below or above):
        return value
    if whole:
        return low if below else high
    if low is not None and high is not None:
        return (low + high) / 2
    if low is not None:
        return low + 1
    return value if high is None else high - 1


def _fill_scalar(kind: str, text: str, name: str) -> Any:
    if kind == "boolean":
        return False
    if kind in ("number", "integer"):
        found = numbers(text)
        value = found[0] if found else 0
        return int(value) if kind == "integer" else value
    if kind == "null":
        return None
    if re.search(r"title|subject|name|headline|city|label", name, re.I):
        return text.removeprefix(PREFIX).strip().splitlines()[0] if text.strip() else ""
    return text


def resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return node
    found: Any = root
    for part in ref[2:].split("/"):
        found = found.get(part, {}) if isinstance(found, dict) else {}
    return found if isinstance(found, dict) else {}
