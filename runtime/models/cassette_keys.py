"""How a cassette matches a call: the key of a model request (:func:`request_key`)
and of an embeddings call's texts (:func:`texts_key`), made of what is sent and
answered from, with what differs from run to run written alike on both sides: dates
with a time of day, the folder the run worked in (:data:`CWD`), the run's id
(:data:`RUN`), secrets (see :mod:`runtime.models.cassettes`)."""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from runtime.messages import AssistantMessage, ToolMessage
from runtime.model import ModelRequest
from runtime.models.request_diff import OPTIONS
from runtime.secrets import masked

__all__ = [
    "CWD",
    "MIN_RUN_ID",
    "RUN",
    "canonical",
    "canonical_arguments",
    "canonical_texts",
    "decision_key",
    "here",
    "renamed",
    "request_key",
    "run_of",
    "texts_key",
    "there",
    "told_run",
    "worker_of",
]

CWD = b"<cwd>"
"""What the folder a run worked in is written as."""

RUN = "<run>"
"""What the id of the run that asked is written as, in the texts of its calls (a
memory recalled names the run that kept it), when it is :data:`MIN_RUN_ID`
characters long or more (as the ids Honeycomb makes are: a shorter one could be a
word of the texts)."""

MIN_RUN_ID = 8

_TIMES = re.compile(
    rb"\d{4}-?\d{2}-?\d{2}[T _-]\d{2}:?\d{2}:?\d{2}(?:[.,-]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?"
)
"""A date with its time of day, ISO 8601's or compact (``20261202-103737-625318``)."""


def worker_of(request: ModelRequest) -> str | None:
    """The worker a request's conversation names (``run_id/worker``, or ``worker``)."""
    conversation = request.conversation
    if not conversation:
        return None
    run_id, slash, worker = conversation.partition("/")
    return worker if slash else run_id


def run_of(request: ModelRequest) -> str | None:
    """The run a request's conversation names (``run_id/worker``), when its id is
    long enough to be told from words (:func:`told_run`)."""
    run_id, slash, _ = (request.conversation or "").partition("/")
    return told_run(run_id) if slash else None


def told_run(run_id: str | None) -> str | None:
    """``run_id``, when it is long enough (:data:`MIN_RUN_ID`) to be told from words
    and written :data:`RUN` in a cassette; None when it is not."""
    return run_id if run_id is not None and len(run_id) >= MIN_RUN_ID else None


def renamed(value: Any, old: str, new: str) -> Any:
    """JSON values ``value`` with ``old`` written ``new`` in each of their texts."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list | tuple):
        return [renamed(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: renamed(item, old, new) for key, item in value.items()}
    return value


def canonical(request: ModelRequest) -> dict[str, Any]:
    """What a request's key is made of, as JSON values: its messages with tool call
    ids renumbered in order of appearance, and its options (:data:`OPTIONS`)."""
    ids: dict[str, str] = {}

    def renumbered(call_id: str) -> str:
        return ids.setdefault(call_id, f"call_{len(ids) + 1}")

    messages: list[Any] = []
    for message in masked(request.messages):
        value = msgspec.to_builtins(message)
        if isinstance(message, AssistantMessage) and message.tool_calls:
            value["tool_calls"] = [_call_key(call, renumbered) for call in value["tool_calls"]]
        elif isinstance(message, ToolMessage):
            value["tool_call_id"] = renumbered(message.tool_call_id)
        messages.append(value)
    options = msgspec.to_builtins(masked({name: getattr(request, name) for name in OPTIONS}))
    encoded = msgspec.json.encode({"messages": messages, **options})
    found: dict[str, Any] = msgspec.json.decode(_TIMES.sub(b"<time>", here(encoded)))
    run = run_of(request)
    return found if run is None else renamed(found, run, RUN)


def _call_key(call: dict[str, Any], renumbered: Callable[[str], str]) -> dict[str, Any]:
    """A tool call as its request's key holds it: its id renumbered, and no
    ``extra_content`` when it has none (as calls were keyed before they had one, so
    that the cassettes recorded then still match)."""
    kept = {k: v for k, v in call.items() if k != "extra_content" or v is not None}
    return {**kept, "id": renumbered(call["id"])}


def _cwd() -> bytes | None:
    """The current folder as a JSON string holds it (None: the root, which every
    path starts with)."""
    folder = Path.cwd()
    return msgspec.json.encode(str(folder))[1:-1] if len(folder.parts) > 1 else None


_NAME = rb"\w.~\-\x80-\xff"
"""The bytes of a name in a path: what a folder is not followed nor preceded by, where
it stands whole (UTF-8's of any script included)."""


@functools.cache
def _whole(folder: bytes) -> re.Pattern[bytes]:
    """Where ``folder`` stands whole in JSON: not the start of a longer name (``/app``
    in ``/apple``) nor the end of one (``/app`` in ``example.com/app``), though after
    an escape (a line's end, ``\\n/app``)."""
    before = rb"(?:(?<![" + _NAME + rb"])|(?<=\\[bfnrt]))"
    return re.compile(before + re.escape(folder) + rb"(?![" + _NAME + rb"])")


def here(encoded: bytes) -> bytes:
    """JSON with the current folder written :data:`CWD`, where it stands whole (a path
    under it, or itself; not a longer name it begins, as ``/app`` begins ``/apple``)."""
    folder = _cwd()
    if folder is None or folder not in encoded:
        return encoded
    return _whole(folder).sub(CWD, encoded)


def there(encoded: bytes) -> bytes:
    """JSON with :data:`CWD` written as the current folder."""
    folder = _cwd()
    return encoded.replace(CWD, folder) if folder is not None and CWD in encoded else encoded


def request_key(request: ModelRequest) -> str:
    """The key a request is matched by (see the module's docstring)."""
    encoded = msgspec.json.encode(canonical(request), order="sorted")
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


def canonical_texts(texts: Sequence[str]) -> list[str]:
    """The texts of an embeddings call as they are matched: masked, with dates and
    the current folder written as in a request's key."""
    encoded = msgspec.json.encode(masked(list(texts)))
    found: list[str] = msgspec.json.decode(_TIMES.sub(b"<time>", here(encoded)))
    return found


def texts_key(texts: Sequence[str]) -> str:
    """The key an embeddings call's texts are matched by."""
    encoded = msgspec.json.encode(canonical_texts(texts))
    return hashlib.blake2b(encoded, digest_size=16).hexdigest()


def canonical_arguments(arguments: dict[str, Any]) -> str:
    """A tool call's arguments as a decision on it is matched: JSON, its keys sorted,
    masked, with dates and the current folder written as in a request's key."""
    encoded = msgspec.json.encode(masked(arguments), order="sorted")
    return _TIMES.sub(b"<time>", here(encoded)).decode()


def decision_key(tool: str, arguments: dict[str, Any]) -> str:
    """The key a decision on a call of ``tool`` with ``arguments`` is matched by."""
    return f"{tool}:{canonical_arguments(arguments)}"
