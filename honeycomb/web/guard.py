"""The guard of ``honeycomb serve``'s app: its token on every request, and what every
answer carries.

Every request needs the server's token: the address printed at the start carries it
once (``?token=``), which the app trades for a cookie and a redirect to the same
address without it; scripts send it as ``Authorization: Bearer``. The cookie is this
server's alone: named with its port and a digest of its token (two servers never log
each other out), scoped to the app's path (``base``: the browser sends it nowhere else
on the host), HttpOnly, SameSite=Strict, and holding a key derived from the token,
never the token itself. A request that changes something, made with the cookie, must
also carry the page's CSRF value (a digest of the token the page holds and a page of
another site cannot read) and come from this origin (:func:`check_forgery`). Pages
fetch nothing from elsewhere: a Content-Security-Policy forbids it. A request refused,
or that failed, is answered with a page of the app's saying why (:class:`Refused`,
:data:`HANDLERS`), with the same headers as any.
"""

from __future__ import annotations

import hashlib
import hmac
from html import escape
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.datastructures import URL
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from honeycomb.web.pages import Links, page
from runtime import StoreError

__all__ = [
    "HANDLERS",
    "AsSent",
    "Guard",
    "Refused",
    "base_path",
    "check_forgery",
    "cookie_name",
    "csrf_value",
    "session_key",
]

SECURITY_HEADERS = {
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


def csrf_value(token: str) -> str:
    """The CSRF value of the pages of a server with ``token``."""
    return _digest(token, "honeycomb csrf")


def session_key(token: str) -> str:
    """What the cookie of a server with ``token`` holds: a key to this server, not the
    token (which a cookie on a shared host may carry further than meant)."""
    return _digest(token, "honeycomb session")


def cookie_name(token: str, port: int | None) -> str:
    """The cookie of the server with ``token`` listening on ``port``: its own, so two
    servers on one host (whose cookies the browser does not tell apart by port)
    never replace each other's."""
    return f"honeycomb-{port or 0}-{_digest(token, 'honeycomb cookie')[:10]}"


def base_path(token: str) -> str:
    """The path ``honeycomb serve`` serves its pages under: the cookie is scoped to
    it, so the browser sends it to no other server of the host at another path, and
    the path, a digest of the token, is not one another server could ask for."""
    return f"/hc-{_digest(token, 'honeycomb path')[:16]}/"


def _digest(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


class Refused(Exception):
    """A request answered with ``status`` and a short page saying why."""

    def __init__(self, status: int, why: str) -> None:
        super().__init__(why)
        self.status = status
        self.why = why
        self.back: str | None = None  # the page it leads back to


class Guard:
    """The token check and the security headers around the whole app: a request
    let through is marked with how it showed the token (``scope["state"]["by"]``:
    ``cookie`` or ``bearer``), for a request that changes something and came with the
    cookie must pass :func:`check_forgery` as well."""

    def __init__(self, app: ASGIApp, *, token: str, base: str) -> None:
        self.app = app
        self.token = token
        self.session = session_key(token)
        self.base = base

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            response = self._checked(request)
        except Refused as refused:
            response = _refusal(refused, Links(base=self.base))
        if response is None:
            await self.app(scope, receive, _with_headers(send))
        else:
            await response(scope, receive, _with_headers(send))

    def _checked(self, request: Request) -> Response | None:
        """None for a request to let through; a response for one answered here."""
        if not request.url.path.startswith(self.base):  # the pages are all under it
            query = f"?{request.url.query}" if request.url.query else ""
            return RedirectResponse(self.base + query, status_code=303)
        given = request.query_params.get("token")
        cookie = cookie_name(self.token, request.url.port)
        if given is not None and request.method == "GET":
            if not _same(given, self.token):
                raise Refused(401, "that token is not this server's")
            bare = URL(str(request.url)).remove_query_params("token")
            response = RedirectResponse(str(bare), status_code=303)
            path = (request.scope.get("root_path") or "").rstrip("/") + self.base
            response.set_cookie(cookie, self.session, httponly=True, samesite="strict", path=path)
            return response
        bearer = request.headers.get("authorization", "")
        state = request.scope.setdefault("state", {})
        if bearer.startswith("Bearer ") and _same_sent(bearer[len("Bearer ") :], self.token):
            state["by"] = "bearer"  # a script's: no page of another site can send it
            return None
        if not _same(request.cookies.get(cookie, ""), self.session):
            raise Refused(401, "this server needs its token: open the address it printed")
        state["by"] = "cookie"
        return None


class AsSent:
    """Routes a request on its path as sent (percent-encoded), not decoded: an id's
    ``/`` (``team%2Fticket-42``, see :func:`~honeycomb.web.pages.segment`) stays inside
    its segment; the routes' ``honeycomb_id`` decodes each id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path")
        if scope["type"] == "http" and raw:  # bytes past ASCII (sent bare) encoded
            path = quote(raw.split(b"?", 1)[0], safe="/%!$&'()*+,;=:@~")
            scope = {**scope, "path": path}
        await self.app(scope, receive, send)


def _same(given: str, wanted: str) -> bool:
    return hmac.compare_digest(given.encode(), wanted.encode())


def _same_sent(header: str, wanted: str) -> bool:
    """Whether a header's value is ``wanted`` as a client sends it, in UTF-8: the
    server reads a header's bytes as Latin-1, so a token past ASCII, read so, is
    compared as the bytes that came."""
    return hmac.compare_digest(header.encode("latin-1"), wanted.encode())


def check_forgery(request: Request, given: str, csrf: str) -> None:
    """Refuse a request the browser sent with the cookie from a page of another site:
    it names another origin, or lacks the CSRF value only this site's pages hold."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if origin is not None:
        source = urlsplit(origin)
        here = f"{request.url.scheme}://{request.url.netloc}"
        if f"{source.scheme}://{source.netloc}" != here:
            raise Refused(403, "a request from another site")
    if not _same(given, csrf):  # text of any characters: compared as bytes
        raise Refused(403, "the page's CSRF value is missing or wrong: reload the page")


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return _refusal(exc, request.app.state.links)


async def _no_such_page(request: Request, exc: Exception) -> Response:
    """An address the app has no page at (``/runs`` with no id), or a method it takes
    not there (a GET of a decision): said as a page of the app's, with its links, not
    Starlette's bare text."""
    assert isinstance(exc, HTTPException)
    what = f"{request.method} {request.url.path}"
    why = (
        f"no page at {what}: the runs, evals and sessions are linked above"
        if exc.status_code == 404
        else f"{exc.detail}: {what}"
    )
    refused = _refusal(Refused(exc.status_code, why), request.app.state.links)
    refused.headers.update(exc.headers or {})  # a 405's Allow
    return refused


async def _store_failed(request: Request, exc: Exception) -> Response:
    """A store that cannot be read (not a run store, newer, gone): said as
    ``honeycomb runs`` says it, as a page with the usual headers."""
    return _refusal(Refused(500, str(exc)), request.app.state.links)


async def _failed(request: Request, exc: Exception) -> Response:
    """A failure of the server's own (logged with its traceback): said as a page with
    the usual headers, as Starlette's last handler sends it outside the guard."""
    return _refusal(Refused(500, "the server failed: its log says why"), request.app.state.links)


def _refusal(refused: Refused, links: Links) -> Response:
    body = f"<h1>{refused.status}</h1><p>{escape(refused.why, quote=True)}</p>"
    if refused.back is not None:
        body += (
            f'<p><a class="back" href="{escape(refused.back, quote=True)}">back to the run</a></p>'
        )
    shown = page(str(refused.status), body, links)
    return HTMLResponse(shown, status_code=refused.status, headers=SECURITY_HEADERS)


def _with_headers(send: Send) -> Send:
    async def sending(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", ()))
            present = {name.lower() for name, _ in headers}
            for name, value in SECURITY_HEADERS.items():
                if name.encode() not in present:
                    headers.append((name.encode(), value.encode()))
            message = {**message, "headers": headers}
        await send(message)

    return sending  # type: ignore[return-value]


HANDLERS = {
    Refused: _refused,
    HTTPException: _no_such_page,
    StoreError: _store_failed,
    Exception: _failed,
}
"""The app's exception handlers: each answer a page of the app's."""
