"""``honeycomb serve``'s web app: the runs of a run store in a browser, a run's page
kept up to date while it goes (server-sent events), and its pending approvals.

Safe by default. Every request needs the server's token: the address printed at the
start carries it once (``?token=``), which the app trades for a cookie (HttpOnly,
SameSite=Strict) and a redirect to the same address without it; scripts send it as
``Authorization: Bearer``. A request that changes something, made with the cookie,
must also carry the page's CSRF value (a digest of the token the page holds and a
page of another site cannot read) and come from this origin. Pages fetch nothing
from elsewhere: a Content-Security-Policy forbids it, and every text of a run is
escaped (:mod:`honeycomb.web.pages`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.datastructures import URL
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from honeycomb.store import RunStore, RunSummary
from honeycomb.web.pages import live_part, page, run_page, runs_page
from runtime import HoneycombError
from runtime.approvals import PendingApproval
from runtime.secrets import add_secret

__all__ = ["COOKIE", "Approvals", "create_app", "csrf_value"]

COOKIE = "honeycomb_token"

_FINISHED = frozenset({"ok", "partial", "failed", "over_budget", "interrupted", "cancelled"})
"""Statuses after which a run's page changes no more (a resume makes it running)."""

_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; "
        # the timeline's bars are placed by style attributes, which run no script
        "style-src-attr 'unsafe-inline'; connect-src 'self'; "
        "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    # Not no-referrer: with it, a browser names its forms' origin "null" (foreign).
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


class Approvals(Protocol):
    """Where the pending calls of a run are read and decided
    (:class:`~honeycomb.web.approvals.StoreApprovals`: in the run store)."""

    async def pending(self, run_id: str) -> list[PendingApproval]: ...

    async def decide(
        self,
        run_id: str,
        call_id: str,
        *,
        approve: bool,
        worker: str | None = None,
        reason: str = "",
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Record the decision.

        Raises:
            HoneycombError: naming why the call cannot be decided.
        """


def csrf_value(token: str) -> str:
    """The CSRF value of the pages of a server with ``token``."""
    return hmac.new(token.encode(), b"honeycomb csrf", hashlib.sha256).hexdigest()


def create_app(
    store: RunStore | str | Path,
    *,
    token: str,
    approvals: Approvals | None = None,
    poll_s: float = 0.5,
) -> Starlette:
    """The web app over ``store``.

    Args:
        store: The run store (a file, created by no read).
        token: What every request must carry (see the module's docstring).
        approvals: Where pending calls are decided; without it runs show none.
        poll_s: How often a run page's events read the store.
    """
    if not token:
        raise ValueError("the web app needs a token")
    site = _Site(
        store=store if isinstance(store, RunStore) else RunStore(store),
        csrf=csrf_value(token),
        approvals=approvals,
        poll_s=poll_s,
    )
    routes = [
        Route("/", site.runs),
        Route("/static/{name}", site.static),
        Route("/runs/{run_id}", site.run),
        Route("/runs/{run_id}/live", site.live),
        Route("/runs/{run_id}/events", site.events),
        Route("/runs/{run_id}/calls/{call_id}/decision", site.decision, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={_Refused: _refused})
    app.add_middleware(_Guard, token=token)
    add_secret(token, "token", owner=app)  # masked in what the runs it resumes show
    return app


@dataclass
class _Site:
    store: RunStore
    csrf: str
    approvals: Approvals | None
    poll_s: float

    async def runs(self, request: Request) -> Response:
        found = await asyncio.to_thread(self.store.runs, 200)
        return HTMLResponse(runs_page(found, self.store.path.name))

    async def run(self, request: Request) -> Response:
        shown = await self._live(request.path_params["run_id"], whole=True)
        return HTMLResponse(shown)

    async def live(self, request: Request) -> Response:
        return HTMLResponse(await self._live(request.path_params["run_id"], whole=False))

    async def _live(self, run_id: str, *, whole: bool) -> str:
        summary = await self.store.summary(run_id)
        stored = await self.store.load(run_id) if summary is not None else None
        if summary is None or stored is None:
            raise _Refused(404, f"no run {run_id!r} in {self.store.path.name}")
        spans = await asyncio.to_thread(self.store.spans, run_id)
        pending = await self._pending(run_id)
        show = run_page if whole else live_part
        return show(summary, stored, spans, pending, self.csrf)

    async def _pending(self, run_id: str) -> list[PendingApproval]:
        return await self.approvals.pending(run_id) if self.approvals is not None else []

    async def events(self, request: Request) -> Response:
        """``change`` whenever what the run page shows changed, ``end`` once the run
        finished; a comment line every few seconds keeps the connection alive."""
        run_id = request.path_params["run_id"]
        if await self.store.summary(run_id) is None:
            raise _Refused(404, f"no run {run_id!r} in {self.store.path.name}")

        async def stream() -> AsyncIterator[str]:
            seen: object = None
            quiet = 0.0
            while not await request.is_disconnected():
                summary, progress = await self._progress(run_id)
                now = (summary, progress, await self._pending(run_id))
                if now != seen:
                    seen, quiet = now, 0.0
                    status = summary.status if summary is not None else "gone"
                    yield _event("change", {"status": status})
                    if status in _FINISHED or summary is None:
                        yield _event("end", {"status": status})
                        return
                elif quiet >= 15.0:
                    quiet = 0.0
                    yield ": still here\n\n"
                await asyncio.sleep(self.poll_s)
                quiet += self.poll_s

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def _progress(self, run_id: str) -> tuple[RunSummary | None, tuple[int, ...]]:
        summary = await self.store.summary(run_id)
        return summary, await asyncio.to_thread(self.store.progress, run_id)

    async def decision(self, request: Request) -> Response:
        if self.approvals is None:
            raise _Refused(404, "this server decides no approvals")
        run_id, call_id = request.path_params["run_id"], request.path_params["call_id"]
        form = await request.form()
        if request.scope["state"].get("by") == "cookie":
            _check_forgery(request, str(form.get("csrf", "")), self.csrf)
        choice = form.get("decision")
        if choice not in ("approve", "deny"):
            raise _Refused(422, "decision: give 'approve' or 'deny'")
        approve = choice == "approve"
        # Arguments go with an approval; a denial sends the form's back unread.
        arguments = _arguments(form.get("arguments")) if approve else None
        worker = form.get("worker")
        try:
            await self.approvals.decide(
                run_id,
                call_id,
                approve=approve,
                worker=worker if isinstance(worker, str) and worker else None,
                reason=str(form.get("reason") or ""),
                arguments=arguments,
            )
        except HoneycombError as exc:
            raise _Refused(409, f"cannot decide {call_id!r}: {exc}") from exc
        return RedirectResponse(f"/runs/{run_id}", status_code=303)

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC.get(name)
        if kind is None:
            raise _Refused(404, f"no file {name!r}")
        text = resources.files("honeycomb.web").joinpath("static", name).read_text("utf-8")
        if name == "serve.css":
            from honeycomb.trace.html import STYLE

            text = STYLE + text
        return Response(text, media_type=kind)


_STATIC = {"serve.css": "text/css", "serve.js": "text/javascript", "icon.svg": "image/svg+xml"}


def _arguments(given: object) -> dict[str, Any] | None:
    """The edited arguments of a form (None: as the model wrote them)."""
    if not isinstance(given, str) or not given.strip():
        return None
    try:
        found = json.loads(given)
    except json.JSONDecodeError as exc:
        raise _Refused(422, f"arguments: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(found, dict):
        raise _Refused(422, "arguments: give a JSON object")
    return found


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


class _Refused(Exception):
    """A request answered with ``status`` and a short page saying why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why


class _Guard:
    """The token check and the security headers around the whole app: a request
    let through is marked with how it showed the token (``scope["state"]["by"]``:
    ``cookie`` or ``bearer``), for a request that changes something and came with the
    cookie must pass :func:`_check_forgery` as well."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = self._checked(request)
        except _Refused as refused:
            response = _refusal(refused)
        if response is None:
            await self.app(scope, receive, _with_headers(send))
        else:
            await response(scope, receive, _with_headers(send))

    def _checked(self, request: Request) -> Response | None:
        """None for a request to let through; a response for one answered here."""
        given = request.query_params.get("token")
        if given is not None and request.method == "GET":
            if not self._is_token(given):
                raise _Refused(401, "that token is not this server's")
            bare = URL(str(request.url)).remove_query_params("token")
            response = RedirectResponse(str(bare), status_code=303)
            response.set_cookie(COOKIE, given, httponly=True, samesite="strict", path="/")
            return response
        bearer = request.headers.get("authorization", "")
        state = request.scope.setdefault("state", {})
        if bearer.startswith("Bearer ") and self._is_token(bearer[len("Bearer ") :]):
            state["by"] = "bearer"  # a script's: no page of another site can send it
            return None
        if not self._is_token(request.cookies.get(COOKIE, "")):
            raise _Refused(401, "this server needs its token: open the address it printed")
        state["by"] = "cookie"
        return None

    def _is_token(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())


def _check_forgery(request: Request, given: str, csrf: str) -> None:
    """Refuse a request the browser sent with the cookie from a page of another site:
    it names another origin, or lacks the CSRF value only this site's pages hold."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is not None:
        source = urlsplit(origin)
        here = f"{request.url.scheme}://{request.url.netloc}"
        if f"{source.scheme}://{source.netloc}" != here:
            raise _Refused(403, "a request from another site")
    if not hmac.compare_digest(given, csrf):
        raise _Refused(403, "the page's CSRF value is missing or wrong: reload the page")


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _Refused)
    return _refusal(exc)


def _refusal(refused: _Refused) -> Response:
    body = f"<h1>{refused.status}</h1><p>{escape(refused.why, quote=True)}</p>"
    return HTMLResponse(page(str(refused.status), body), status_code=refused.status)


def _with_headers(send: Send) -> Send:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {name.lower() for name, _ in headers}
            for name, value in _SECURITY_HEADERS.items():
                if name.encode() not in present:
                    headers.append((name.encode(), value.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return sending  # type: ignore[return-value]
