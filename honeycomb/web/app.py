"""``honeycomb serve``'s web app: the runs of a run store in a browser, each page kept
up to date while what it shows goes (server-sent events: :mod:`honeycomb.web.follow`),
a run's pending approvals; the evals kept there, and what changed between two
(:mod:`honeycomb.web.evals`).

Safe by default: every request needs the server's token, a request that changes
something made with the cookie its CSRF value, and the pages fetch nothing from
elsewhere (:mod:`honeycomb.web.guard`); every text of a run is escaped
(:mod:`honeycomb.web.pages`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from honeycomb.run.session import StoreRows
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions
from honeycomb.trace.html import STYLE
from honeycomb.web.approvals import StoreApprovals, decidable, decider
from honeycomb.web.calls import box_text
from honeycomb.web.evals import eval_routes, evals_page
from honeycomb.web.follow import Look, Looker, follow, went
from honeycomb.web.guard import HANDLERS, AsSent, Guard, Refused, check_forgery, csrf_value
from honeycomb.web.pages import (
    Links,
    live_parts,
    named,
    run_page,
    runs_page,
    segment,
    session_page,
    sessions_page,
    undecided_page,
)
from runtime import ApprovalError, ArgumentsError, HoneycombError, StoreError
from runtime.secrets import add_secret
from runtime.tools.approvals import MaskedEdit, PendingApproval

__all__ = ["Approvals", "create_app", "end_streams"]

_FINISHED = frozenset({"ok", "partial"})
"""Statuses after which a run's page changes no more: a run that ended with an answer
returns it when resumed, and runs nothing. Not ``failed``, ``over_budget``,
``interrupted`` (a process gone) nor ``waiting``: such a run goes on once resumed
(here or elsewhere), and its page follows it."""


class _Id(Convertor[str]):
    """An id in a route (``{run_id:honeycomb_id}``): one segment of the path as sent,
    which :func:`~honeycomb.web.pages.segment` made of any text (a ``/`` in it too)."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return named(value)

    def to_string(self, value: str) -> str:
        return segment(value)


register_url_convertor("honeycomb_id", _Id())


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
        turn: int | None = None,
        reason: str = "",
        arguments: dict[str, Any] | None = None,
        by: str | None = None,
    ) -> None:
        """Record the decision, made by ``by`` (who decided through the page:
        :func:`~honeycomb.web.approvals.decider`) on the call of ``worker`` and ``turn``
        (None: as the call id alone picks it).

        Raises:
            HoneycombError: naming why the call cannot be decided.
        """


def create_app(
    store: RunStore | str | Path,
    *,
    token: str,
    approvals: Approvals | None = None,
    poll_s: float = 0.5,
    stream_s: float = 30.0,
    base: str = "/",
    resume_hint: Callable[[str], str] | None = None,
    not_continued: Callable[[str], str | None] | None = None,
) -> Starlette:
    """The web app over ``store``.

    Args:
        store: The run store (a file, created by no read).
        token: What every request must carry (see the module's docstring).
        approvals: Where pending calls are decided; without it the pages decide none
            (the waiting calls are shown, read from the store, without a form).
        poll_s: How often a page's events read the store.
        stream_s: How long one response of a page's events lasts; the page then
            asks for the next at once. A server that stops waits for the responses
            under way, and none tells the app it stops (``honeycomb serve`` ends them
            at once: :func:`end_streams`): a service's stops within this.
        base: The path the pages live under (``/`` or ``/a/path/``); the cookie is
            scoped to it.
        resume_hint: The command that continues a run, by its id, said on the page
            of a run that goes on only once resumed (default: ``honeycomb resume ID
            --store STORE``).
        not_continued: Why the server could not continue a run, by its id, once
            its calls were decided (None: it did, or did not try), said on the
            run's page (``honeycomb serve``: a hive file that no longer loads ...).
    """
    if not token:
        raise ValueError("the web app needs a token")
    if not (base.startswith("/") and base.endswith("/")):
        raise ValueError(f"base: a path that starts and ends with '/', not {base!r}")
    links = Links(base=base)
    opened = store if isinstance(store, RunStore) else RunStore(store)
    site = _Site(
        store=opened,
        csrf=csrf_value(token),
        approvals=approvals,
        # Without approvals to decide with, the waiting calls are still shown, read only.
        shown=approvals if approvals is not None else StoreApprovals(opened),
        poll_s=poll_s,
        stream_s=stream_s,
        links=links,
        hint=resume_hint or functools.partial(_resume_command, opened.where),
        not_continued=not_continued or _continued,
    )
    run = base + "runs/{run_id:honeycomb_id}"
    routes = [
        Route(base, site.runs),
        Route(base + "static/{name}", site.static),
        Route(run, site.run),
        Route(run + "/live", site.live),
        Route(run + "/events", site.events),
        Route(run + "/calls/{call_id:honeycomb_id}/decision", site.decision, methods=["POST"]),
        Route(base + "evals", site.evals),
        *eval_routes(site.store, links),
        Route(base + "sessions", site.sessions),
        Route(base + "sessions/{session_id:honeycomb_id}", site.session),
        Route(base + "sessions/{session_id:honeycomb_id}/events", site.session_events),
        Route(base + "events/runs", site.runs_events),
        Route(base + "events/sessions", site.sessions_events),
        Route(base + "events/evals", site.evals_events),
    ]
    app = Starlette(routes=routes, exception_handlers=dict(HANDLERS))
    app.state.links = links  # for the pages that say why a request was refused
    app.state.site = site  # for end_streams
    app.add_middleware(Guard, token=token, base=base)
    app.add_middleware(AsSent)  # outermost: the guard's redirects keep an id's '/'
    add_secret(token, "token", owner=app)  # masked in what the runs it resumes show
    return app


def end_streams(app: Starlette) -> None:
    """End the run events the pages of ``app`` (made by :func:`create_app`) listen to,
    each at its next look at the store (``poll_s``), and those asked for later at once:
    a server that stops does this first, for a stream left open holds its stop up
    until the server cancels it. A page whose events end tries again later, and
    follows its run once a server answers."""
    site: _Site = app.state.site
    site.ending = True


@dataclass
class _Site:
    store: RunStore
    csrf: str
    approvals: Approvals | None
    shown: Approvals  # where the waiting calls a page shows are read
    poll_s: float
    stream_s: float
    links: Links
    hint: Callable[[str], str]
    not_continued: Callable[[str], str | None]
    ending: bool = False  # a flag, not an event: the app may serve on several loops

    async def runs(self, request: Request) -> Response:
        limit = _limit(request)
        found = await asyncio.to_thread(self.store.runs, limit + 1)  # one more: are there?
        more = _more(found, limit)
        return HTMLResponse(
            runs_page(found[:limit], self.store.name, self.links, more, _asked(request))
        )

    async def evals(self, request: Request) -> Response:
        limit = _limit(request)
        found = await asyncio.to_thread(self.store.evals, limit + 1)
        more, asked = _more(found, limit), _asked(request)
        shown = evals_page(found[:limit], self.store.name, self.links, more, asked)
        return HTMLResponse(shown)

    async def sessions(self, request: Request) -> Response:
        limit = _limit(request)
        found = await asyncio.to_thread(StoredSessions(self.store).sessions, limit + 1)
        more, asked = _more(found, limit), _asked(request)
        shown = sessions_page(found[:limit], self.store.name, self.links, more, asked)
        return HTMLResponse(shown)

    async def session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        # As a session reads them: a turn whose run was resumed on its own has its answer.
        turns = await StoreRows.of(self.store).turns(session_id)
        if not turns:
            return went(request, f"no session {session_id!r} in {self.store.name}")
        return HTMLResponse(session_page(session_id, turns, self.links, self.store.name))

    async def run(self, request: Request) -> Response:
        return await self._live(request, whole=True)

    async def live(self, request: Request) -> Response:
        return await self._live(request, whole=False)

    async def _live(self, request: Request, *, whole: bool) -> Response:
        """The run's page, or its changing parts; its line read last, as its events
        read it (:meth:`events`)."""
        run_id = request.path_params["run_id"]
        gone = f"no run {run_id!r} in {self.store.name}"
        stored = await self.store.load(run_id)
        if stored is None:
            return went(request, gone)
        spans = await asyncio.to_thread(self.store.spans, run_id)
        pending = await self._pending(run_id)
        decided = await self.store.approvals_of(run_id)
        summary = await self.store.summary(run_id)
        if summary is None:
            return went(request, gone)
        hint = self.hint(run_id) if summary.source is not None else None
        show = functools.partial(run_page, store=self.store.name) if whole else live_parts
        shown = show(
            summary,
            stored,
            spans,
            pending,
            self.csrf,
            self.links,
            hint=hint,
            decided=decided,
            unable=self.not_continued(run_id),
            deciding=self.approvals is not None,
        )
        return HTMLResponse(shown)

    async def _pending(self, run_id: str) -> list[PendingApproval]:
        return await self.shown.pending(run_id)

    async def events(self, request: Request) -> Response:
        """The run page's events (:mod:`honeycomb.web.follow`): ``end`` once the run
        ended with an answer (:data:`_FINISHED`), ``gone`` once (or while) the store
        does not have it (deleted: its session forgotten, say)."""
        run_id = request.path_params["run_id"]

        async def look() -> Look | None:
            progress = await asyncio.to_thread(self.store.progress, run_id)
            pending = await self._pending(run_id)
            # Its line read last: the store deletes a run whole, at once, so a run it
            # has then was whole in the reads before (read first, a run deleted
            # between them was a change, its calls gone, before it was gone).
            summary = await self.store.summary(run_id)
            if summary is None:
                return None
            # A call whose time to decide runs out changes the page, not the store;
            # so does this server's failing to continue the run.
            unable = self.not_continued(run_id)
            shown = (summary, progress, pending, [decidable(p) for p in pending], unable)
            return Look(shown=shown, status=summary.status, ended=summary.status in _FINISHED)

        return await self._follow(request, look, f"no run {run_id!r} in {self.store.name}")

    async def runs_events(self, request: Request) -> Response:
        """The list of runs' events: a change as a run starts, goes on or ends."""
        return await self._listed(request, self.store.runs)

    async def evals_events(self, request: Request) -> Response:
        """The list of evals' events: a change as an eval is kept."""
        return await self._listed(request, self.store.evals)

    async def sessions_events(self, request: Request) -> Response:
        """The list of sessions' events: a change as a session starts or takes a turn."""
        return await self._listed(request, StoredSessions(self.store).sessions)

    async def _listed(self, request: Request, read: Callable[[int], Sequence[object]]) -> Response:
        """The events of a list whose rows ``read(limit)`` reads (as its page, with one
        row past its ``?limit=``: whether the store holds more changes it too)."""
        limit = _limit(request)

        async def look() -> Look:
            return Look(shown=await asyncio.to_thread(read, limit + 1))

        return await self._follow(request, look, "")

    async def session_events(self, request: Request) -> Response:
        """A session page's events: a change as it takes a turn or its run goes on,
        ``gone`` once it is forgotten."""
        session_id = request.path_params["session_id"]
        rows = StoreRows.of(self.store)

        async def look() -> Look | None:
            turns = await rows.turns(session_id)
            return Look(shown=turns) if turns else None

        gone = f"no session {session_id!r} in {self.store.name}"
        return await self._follow(request, look, gone)

    async def _follow(self, request: Request, look: Looker, gone: str) -> Response:
        return await follow(
            request,
            look,
            gone=gone,
            poll_s=self.poll_s,
            stream_s=self.stream_s,
            ending=lambda: self.ending,
        )

    async def decision(self, request: Request) -> Response:
        """A decision on a call: recorded, and the browser sent back to the run's page;
        refused (decided already, by another tab say), a page saying why that leads
        back to the run's page. Sent from the page of a run deleted since (its form's
        ``?shown=1``), a page saying it is gone and nothing was decided; a run the
        store does not have is refused (404) to any other client."""
        run_id = request.path_params["run_id"]
        try:
            return await self._decision(request)
        except Refused as refused:
            if refused.status != 404 or await self.store.summary(run_id) is not None:
                refused.back = self.links.run(run_id)  # not to a run there is none of
            raise

    async def _decision(self, request: Request) -> Response:
        if self.approvals is None:
            raise Refused(404, "this server decides no approvals")
        run_id, call_id = request.path_params["run_id"], request.path_params["call_id"]
        form = await self._form(request, run_id, call_id)
        if request.scope["state"].get("by") == "cookie":
            check_forgery(request, _field(form, "csrf"), self.csrf)
        choice = _field(form, "decision")
        if choice not in ("approve", "deny"):
            raise Refused(422, "decision: give 'approve' or 'deny'")
        approve = choice == "approve"
        # Arguments go with an approval; a denial sends the form's back unread.
        arguments = _arguments(_field(form, "arguments")) if approve else None
        worker = _field(form, "worker") or None
        turn = await self._same_call(run_id, call_id, worker, _field(form, "turn"))
        try:
            await self.approvals.decide(
                run_id,
                call_id,
                approve=approve,
                worker=worker,
                turn=turn,
                reason=_field(form, "reason"),
                arguments=arguments,
                by=decider(request),
            )
        except ApprovalError as exc:
            # Arguments the tool refuses are the form's to mend; a run the store does
            # not have is not found; anything else (decided already, no such call, too
            # late) is the call's state.
            if isinstance(exc.__cause__, (ArgumentsError, MaskedEdit)):
                raise Refused(422, str(exc)) from exc
            if await self.store.summary(run_id) is None:
                # Sent from its page, it went since (deleted as the page was open).
                gone = undecided_page(run_id, self.store.name, self.links)
                return went(request, str(exc), HTMLResponse(gone))
            raise Refused(409, str(exc)) from exc
        except StoreError:
            raise  # the store's failure, said as every page says it: not the call's state
        except HoneycombError as exc:
            raise Refused(409, f"cannot decide {call_id!r}: {exc}") from exc
        return RedirectResponse(self.links.run(run_id), status_code=303)

    async def _same_call(
        self, run_id: str, call_id: str, worker: str | None, turn: str
    ) -> int | None:
        """The turn of the form's call (None: a script's decision, by its id and worker
        alone). Refuse a form of a call decided already when a later call of its worker
        waits under its id (the store tells calls apart by worker, turn and id, not by
        id): the decision would go to a call whose arguments the person has not seen."""
        if not turn:
            return None
        if not (turn.isascii() and turn.isdigit()):
            raise Refused(422, f"turn: give a whole number, not {turn[:40]!r}")
        waiting = [
            call.turn
            for call in await self._pending(run_id)
            if call.call_id == call_id and worker in (None, call.worker)
        ]
        if waiting and int(turn) not in waiting:
            raise Refused(
                409,
                f"cannot decide {call_id!r}: the call shown (of turn {turn}) was decided "
                f"already, and a later call of its worker waits under its id (turn "
                f"{waiting[0]}): reload the page to see it",
            )
        return int(turn)

    async def _form(self, request: Request, run_id: str, call_id: str) -> FormData:
        """The form of a decision on ``call_id``, read with room for the call's
        arguments as the page shows them (a form past it, or of more fields than a
        decision has, is refused naming why)."""
        shown = max(
            (
                len(box_text(call.arguments).encode())
                for call in await self._pending(run_id)
                if call.call_id == call_id
            ),
            default=0,
        )
        # Percent-encoded, a byte of the arguments may take three.
        limit = _FORM_FIELD + 3 * shown
        try:
            return await request.form(
                max_files=_FORM_FIELDS, max_fields=_FORM_FIELDS, max_part_size=limit
            )
        except HTTPException as exc:  # Starlette's answer to a form past its limits
            if "exceeded maximum size" in exc.detail:
                raise Refused(
                    422,
                    f"arguments: larger than the {limit // 1024} KB a decision on this call "
                    "sends (its arguments and room to edit them)",
                ) from exc
            raise Refused(422, f"the form cannot be read: {exc.detail}") from exc

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        kind = _STATIC.get(name)
        if kind is None:
            raise Refused(404, f"no file {name!r}")
        text = resources.files("honeycomb.web").joinpath("static", name).read_text("utf-8")
        if name == "serve.css":
            text = STYLE + text
        return Response(text, media_type=kind)


_LISTED = 200
"""The rows a list of runs, sessions or evals shows unless its address asks for more."""

_MOST_LISTED = 100_000
"""The most rows a list shows (``?limit=``), as ``honeycomb runs --limit`` lists."""


def _limit(request: Request) -> int:
    """The rows a list shows: its ``?limit=`` (1 to :data:`_MOST_LISTED`), else
    :data:`_LISTED`."""
    given = request.query_params.get("limit")
    if given is None:
        return _LISTED
    if not (given.isascii() and given.isdigit() and 1 <= int(given) <= _MOST_LISTED):
        raise Refused(422, f"limit: give a whole number from 1 to {_MOST_LISTED}, not {given!r}")
    return int(given)


def _asked(request: Request) -> int | None:
    """The rows a list's address asked for (None: it asked for none)."""
    return _limit(request) if "limit" in request.query_params else None


def _more(found: Sequence[object], limit: int) -> int | None:
    """How many rows the list's link to more would show: None when ``found`` (read
    with one row past ``limit``) holds no more."""
    return min(limit * 2, _MOST_LISTED) if len(found) > limit else None


_FORM_FIELD = 1024 * 1024
"""Bytes a field of a decision's form may hold past three times its call's arguments."""

_FORM_FIELDS = 16
"""Fields a decision's form may have (it has five)."""


def _continued(run_id: str) -> str | None:
    """A server that says nothing of continuing runs (it does not, or always can)."""
    return None


def _resume_command(where: str, run_id: str) -> str:
    """The command that continues ``run_id`` of the store at ``where``."""
    return shlex.join(["honeycomb", "resume", run_id, "--store", where])


_STATIC = {"serve.css": "text/css", "serve.js": "text/javascript", "icon.svg": "image/svg+xml"}


def _field(form: FormData, name: str) -> str:
    """The text of the form's field ``name`` ('' without one). A file sent in its place
    (a multipart file part) or several values are refused, never read as none: a file
    of edited arguments, dropped, would approve the model's."""
    given = form.getlist(name)
    if len(given) > 1:
        raise Refused(422, f"{name}: give one value, not {len(given)}")
    text = given[0] if given else ""
    if not isinstance(text, str):
        raise Refused(422, f"{name}: give text, not a file")
    return text


def _arguments(given: str) -> dict[str, Any] | None:
    """The edited arguments of a form (None: as the model wrote them)."""
    if not given.strip():
        return None
    try:
        found = json.loads(given)
    except json.JSONDecodeError as exc:
        raise Refused(422, f"arguments: not JSON ({exc.msg} at line {exc.lineno})") from exc
    except RecursionError as exc:
        raise Refused(422, "arguments: JSON nested too deeply to read") from exc
    except ValueError as exc:  # Python's limit: a number of more than 4300 digits
        raise Refused(422, "arguments: a number in it has too many digits to read") from exc
    if not isinstance(found, dict):
        raise Refused(422, "arguments: give a JSON object")
    return found
