"""Tools for the trip demo: a weather forecast, a small travel guide, a calculator and an
outbox. The data is bundled in ``data/`` next to this file and is invented.

The hive loader puts ``examples/trip/`` on ``sys.path``, hence the distinctive module
name. ``HONEYCOMB_DEMO_TOOL_LATENCY`` (seconds, default 0.3) makes the slow tools wait,
so that parallel calls are visible; ``HONEYCOMB_OUTBOX`` (default ``./outbox``) is
where :func:`send_to_outbox` writes.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import os
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from pydantic import Field

from honeycomb import ToolContext, tool

DATA = Path(__file__).parent / "data"
DEFAULT_LATENCY = 0.3
MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 100
MAX_RESULT_BITS = 4096

Day = Literal["friday", "saturday", "sunday"]


async def _simulate_latency() -> None:
    raw = os.environ.get("HONEYCOMB_DEMO_TOOL_LATENCY", str(DEFAULT_LATENCY))
    try:
        seconds = float(raw)
    except ValueError as exc:
        raise ValueError(
            f"HONEYCOMB_DEMO_TOOL_LATENCY must be a number of seconds, got {raw!r}"
        ) from exc
    await anyio.sleep(max(0.0, seconds))


# --- weather ----------------------------------------------------------------------------


@cache
def _forecasts() -> dict[str, dict[str, dict[str, Any]]]:
    loaded: dict[str, dict[str, dict[str, Any]]] = json.loads(
        (DATA / "weather.json").read_text(encoding="utf-8")
    )["cities"]
    return loaded


# Sync tools run in threads, and on CPython 3.11 building an AST keeps a depth count
# in state the threads share: two ast.parse calls at once can fail with
# "SystemError: AST constructor recursion depth mismatch". One at a time.
_PARSING = threading.Lock()


@tool
async def get_weather(city: str, day: Day = "saturday") -> dict[str, Any]:
    """Get the weather forecast for a European city: conditions, high and low temperature
    in °C, and the chance of rain.

    Args:
        city: The city name.
        day: Which day of the coming weekend.

    Raises:
        ValueError: for a city the forecast does not cover, naming the ones it does.
    """
    await _simulate_latency()
    forecasts = _forecasts()
    found = next((name for name in forecasts if name.lower() == city.strip().lower()), None)
    if found is None:
        known = ", ".join(sorted(forecasts))
        raise ValueError(f"no forecast for {city!r}; known cities: {known}")
    day_forecast = forecasts[found][day]
    return {
        "city": found,
        "day": day,
        "conditions": day_forecast["conditions"],
        "high_c": day_forecast["high_c"],
        "low_c": day_forecast["low_c"],
        "rain_chance_pct": day_forecast["rain_chance"],
    }


# --- travel guide -----------------------------------------------------------------------

_STOPWORDS = frozenset(
    {"a", "an", "and", "the", "of", "to", "in", "on", "at", "for", "with", "by", "from"}
    | {"is", "are", "be", "do", "what", "where", "how", "things"}
)


def _terms(text: str) -> set[str]:
    """Lowercase words without a plural ``s``, stopwords left out."""
    words = re.findall(r"[^\W_]+", text.lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words} - _STOPWORDS


@cache
def _guide() -> tuple[tuple[str, str], ...]:
    entries = []
    for path in sorted((DATA / "guide").glob("*.md")):
        title, _, body = path.read_text(encoding="utf-8").partition("\n")
        entries.append((title.lstrip("# ").strip(), " ".join(body.split())))
    return tuple(entries)


def _snippet(body: str, terms: set[str], limit: int = 200) -> str:
    sentences = re.split(r"(?<=[.!?])\s+", body)
    best = max(sentences, key=lambda s: len(_terms(s) & terms))  # first of the best
    return best if len(best) <= limit else best[: limit - 3] + "..."


@tool
async def search_guide(
    query: str, limit: Annotated[int, Field(ge=1, le=10)] = 3
) -> list[dict[str, Any]]:
    """Search the travel guide for things to do, sights, food and tips in a city.

    Args:
        query: What to look for, such as "museums Madrid".
        limit: How many entries to return, 1 to 10.

    Raises:
        ValueError: when the query has no words to search for.
    """
    terms = _terms(query)
    if not terms:
        raise ValueError(f"the query {query!r} has no words to search for")
    await _simulate_latency()
    scored = []
    for title, body in _guide():
        score = 3 * len(terms & _terms(title)) + len(terms & _terms(body))
        if score:
            scored.append((score, title, body))
    scored.sort(key=lambda item: -item[0])  # stable: ties keep the file order
    return [
        {"title": title, "snippet": _snippet(body, terms), "score": score}
        for score, title, body in scored[:limit]
    ]


# --- calculator -------------------------------------------------------------------------

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


@tool
def calculate(expression: str) -> int | float:
    """Calculate an arithmetic expression, such as a trip budget: numbers, + - * / // % **
    (or ^) and parentheses.

    Args:
        expression: The arithmetic expression, for example "3 * 95 + 2 * 40".

    Raises:
        ValueError: for anything but plain arithmetic, or a result too large to compute.
    """
    text = expression.strip().rstrip("=").replace("×", "*").replace("÷", "/").replace("^", "**")
    if not text:
        raise ValueError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(
            f"the expression is {len(text)} characters; at most {MAX_EXPRESSION_CHARS}"
        )
    try:
        with _PARSING:
            tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot read {expression!r} as arithmetic: {exc.msg}") from exc
    value = _evaluate(tree.body)
    if isinstance(value, float):
        value = round(value, 10)
        if value.is_integer() and abs(value) < 1e15:
            return int(value)
    return value  # type: ignore[no-any-return]


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError as exc:
            raise ValueError("division by zero") from exc
        except OverflowError as exc:
            raise ValueError("the result is too large") from exc
        return _checked(value)
    raise ValueError(f"only arithmetic is allowed, not {_describe(node)}")


def _check_power(base: Any, exponent: Any) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"the exponent {exponent} is too large; at most {MAX_EXPONENT}")
    if isinstance(base, int) and abs(base).bit_length() * abs(exponent) > MAX_RESULT_BITS:
        raise ValueError("the result is too large")


def _checked(value: Any) -> Any:
    if isinstance(value, complex):
        raise ValueError("the result is not a real number")
    if isinstance(value, float) and math.isinf(value):
        raise ValueError("the result is too large")
    if isinstance(value, int) and abs(value).bit_length() > MAX_RESULT_BITS:
        raise ValueError("the result is too large")
    return value


def _describe(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return f"the name {node.id!r}"
    if isinstance(node, ast.Call):
        return "a function call"
    if isinstance(node, ast.Attribute):
        return f"the attribute {node.attr!r}"
    if isinstance(node, ast.Constant):
        return f"the value {node.value!r}"
    return f"a {type(node).__name__} expression"


# --- outbox -----------------------------------------------------------------------------


def _slug(text: str, limit: int = 40) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "message"


def _outbox_says(arguments: dict[str, Any]) -> str:
    """What a call of :func:`send_to_outbox` will do, for the person asked to approve it."""
    lines = len(str(arguments.get("body", "")).splitlines())
    subject = str(arguments.get("subject", "")).strip()
    return f"Write the message {subject!r} ({lines} lines) to the outbox, as a markdown file."


@tool(side_effects=True, describe=_outbox_says)
async def send_to_outbox(subject: str, body: str, ctx: ToolContext) -> str:
    """Send a message to the outbox: writes it as a markdown file and returns its path.

    Args:
        subject: A short subject line.
        body: The message, in markdown.

    Raises:
        ValueError: when the subject is empty.
    """
    if not subject.strip():
        raise ValueError("the subject is empty")
    await _simulate_latency()
    folder = anyio.Path(os.environ.get("HONEYCOMB_OUTBOX", "outbox"))
    await folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S-%f")
    path = folder / f"{stamp}-{_slug(subject)}-{_slug(ctx.call_id, 64)}.md"
    sender = ", ".join(
        part
        for part in (ctx.worker and f"worker {ctx.worker}", ctx.run_id and f"run {ctx.run_id}")
        if part
    )
    footer = f"Sent by {sender or 'honeycomb'}, call {ctx.call_id}."
    await path.write_text(f"# {subject.strip()}\n\n{body.strip()}\n\n---\n{footer}\n", "utf-8")
    return str(await path.resolve())
