"""How a page of ``honeycomb serve`` follows what it shows (a run, a session, the list
of runs or of sessions): server-sent events that say when it changed, so the page
fetches its changing parts again; one mechanism for every page.

The events of a page: ``change`` first, then whenever what it shows changed (with
``seen``, a digest of it: a page that shows it already, asking again, fetches
nothing), ``end`` once nothing will change but its going (a run that
ended with an answer), ``gone`` once what it shows is no longer in the store (a run
deleted, its session forgotten), ``failed`` when the store cannot be read, ``again``
after ``stream_s`` (the page asks for the events again); a comment line every few
seconds keeps the connection alive.

A page asks for its events and its changing parts, and sends its decisions, as one
that showed what they are of (``?shown=1``): what the store no longer has went since,
and is said so (a ``gone`` event, a part of no content, a page saying nothing was
decided), never refused as an address the store never had (404, the answer to any
other client: a wrong id), which a browser logs as an error in a state the page
expects.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from honeycomb.web.guard import Refused
from runtime import StoreError
from runtime.value import Value

__all__ = ["Look", "Looker", "follow", "went"]


class Look(Value, frozen=True, kw_only=True):
    """What a page shows now: ``shown``, any value msgspec encodes (what the page's
    changing parts are made of); ``status``, said with each change; ``ended``: it will
    change no more (its page then asks now and then whether it is still there)."""

    shown: Any
    status: str = ""
    ended: bool = False


Looker = Callable[[], Awaitable[Look | None]]
"""Reads what a page shows (None: it is no longer in the store).

Raises:
    StoreError: when the store cannot be read.
"""


async def follow(
    request: Request,
    look: Looker,
    *,
    gone: str,
    poll_s: float,
    stream_s: float,
    ending: Callable[[], bool],
) -> StreamingResponse:
    """The events of a page that ``look`` reads (every ``poll_s``); ``gone``: what its
    ``gone`` event says; ``ending``: whether the server stops (the events end at once).

    Raises:
        Refused: 404, saying ``gone``, when what the page shows is not in the store as
            its events are asked for, by a client that did not show it (:func:`went`).
    """
    first = await _look(look)
    if first is None and not _shown(request):
        raise Refused(404, gone)

    async def stream() -> AsyncIterator[str]:
        now: Look | StoreError | None = first
        last, quiet = None, 0.0
        until = time.monotonic() + stream_s
        while not ending() and not await request.is_disconnected():
            if time.monotonic() >= until:
                yield _event("again", {})
                return
            if isinstance(now, StoreError):  # said to the page, which keeps what it shows
                yield _event("failed", {"error": str(now)})
                return
            if now is None:
                yield _event("gone", {"error": gone})
                return
            digest = _digest(now)
            if digest != last:
                last, quiet = digest, 0.0
                yield _event("change", {"status": now.status, "seen": digest})
            elif quiet >= 15.0:
                quiet = 0.0
                yield ": still here\n\n"
            if now.ended:
                yield _event("end", {"status": now.status})
                return
            await asyncio.sleep(poll_s)
            quiet += poll_s
            now = await _look(look)

    return StreamingResponse(stream(), media_type="text/event-stream")


def went(request: Request, gone: str, said: Response | None = None) -> Response:
    """The answer to ``request`` for what the store does not have, to a page that
    showed it (it went since): ``said``, else no content (204: the page's events say
    it went).

    Raises:
        Refused: 404, saying ``gone``, to any other client.
    """
    if not _shown(request):
        raise Refused(404, gone)
    return said if said is not None else Response(status_code=204)


def _shown(request: Request) -> bool:
    """Whether ``request`` is a page's that showed what it asks about."""
    return request.query_params.get("shown") == "1"


async def _look(look: Looker) -> Look | StoreError | None:
    """What ``look`` reads, or why the store could not be read."""
    try:
        return await look()
    except StoreError as exc:
        return exc


def _event(name: str, data: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def _digest(look: Look) -> str:
    """A digest of what a page shows: equal while it shows the same."""
    shown = msgspec.json.encode([look.shown, look.status, look.ended])
    return hashlib.sha256(shown).hexdigest()[:16]
