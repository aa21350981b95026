"""``honeycomb serve``'s pages of evals: the evals a store keeps, newest first, and one
eval's report, each run linked to its page; with ``?baseline=EVAL_ID``, what changed
from that eval (a form on the page picks it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from html import escape

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from honeycomb.evals import EvalReport
from honeycomb.evals.compare import compare
from honeycomb.evals.html import comparison_table, report_body
from honeycomb.evals.report import well_formed
from honeycomb.store import EvalSummary, RunStore
from honeycomb.web.pages import Links, listed, listing, page

__all__ = ["eval_page", "eval_routes", "evals_page"]


def _e(text: object) -> str:
    """``text`` escaped, each character a page cannot show (NUL, a terminal's escape)
    shown as U+FFFD, as the report's own page shows them."""
    return escape(well_formed(str(text)), quote=True)


def evals_page(
    evals: Sequence[EvalSummary],
    store: str,
    links: Links,
    more: int | None = None,
    asked: int | None = None,
) -> str:
    """The evals in the store, newest first, followed as they are kept; ``more``: the
    store holds more, and the link to them shows that many (None: these are all);
    ``asked``: the rows the page's address asked for (None: as many as unasked)."""
    live = links.listed("evals", asked)
    if not evals:
        shown = f"<p>No evals in {_e(store)} yet (honeycomb eval HIVE CASES).</p>"
        return page("evals", listing("evals", shown), links, live=live, follows="the evals")
    rows = "\n".join(
        f'<tr><td><a href="{_e(links.eval(e.eval_id))}">{_e(e.eval_id)}</a></td>'
        f"<td>{_e(time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(e.started_at)))}</td>"
        f'<td class="status {_result(e)[0]}">{_result(e)[1]}</td><td>{_e(e.name)}</td></tr>'
        for e in evals
    )
    table = (
        f"{listed(len(evals), 'eval', store, links.evals, more)}"
        f'<table class="runs"><thead><tr><th>eval</th><th>started</th><th>result</th>'
        f"<th>cases</th></tr></thead><tbody>\n{rows}\n</tbody></table>"
    )
    return page("evals", listing("evals", table), links, live=live, follows="the evals")


def _result(kept: EvalSummary) -> tuple[str, str]:
    """How an eval ended, as its row says it: its class (a run's status's colour) and
    its word; one stopped before every run was made (Ctrl-C) is interrupted, as the
    CLI says, not failed."""
    if kept.interrupted:
        return "interrupted", "interrupted"
    return ("ok", "passed") if kept.passed else ("failed", "failed")


def eval_page(
    report: EvalReport,
    others: Sequence[EvalSummary],
    links: Links,
    baseline: EvalReport | None = None,
) -> str:
    """One eval's report, a form to pick a baseline among ``others``, and what changed
    from ``baseline`` when one is picked."""
    body = report_body(report, links.run)
    choices = "".join(
        f'<option value="{_e(e.eval_id)}"'
        f"{' selected' if baseline is not None and baseline.eval_id == e.eval_id else ''}>"
        f"{_e(e.eval_id)} · {_e(e.name)}</option>"
        for e in others
        if e.eval_id != report.eval_id
    )
    if choices:
        body += (
            f'<form method="get" action="{_e(links.eval(report.eval_id))}">'
            f'<label>compare with <select name="baseline">{choices}</select></label> '
            f'<button type="submit">compare</button></form>'
        )
    if baseline is not None:
        body += comparison_table(compare(baseline, report))
    return page(f"eval {report.eval_id}", body, links)


def eval_routes(store: RunStore, links: Links) -> list[Route]:
    """The route of an eval's page, under ``links.base`` (the app lists the evals, as
    it lists runs and sessions: :func:`evals_page`)."""

    async def one(request: Request) -> Response:
        try:
            report = await _report(store, request.path_params["eval_id"])
            if report is None:
                return _missing(request.path_params["eval_id"], store, links)
            wanted = request.query_params.get("baseline")
            baseline = await _report(store, wanted) if wanted else None
        except _Unreadable as exc:
            return _unreadable(exc, store, links)
        if wanted and baseline is None:
            return _missing(wanted, store, links)
        others = await asyncio.to_thread(store.evals, 200)
        return HTMLResponse(eval_page(report, others, links, baseline))

    one_eval = links.base + "evals/{eval_id:honeycomb_id}"  # app.py registers honeycomb_id
    return [Route(one_eval, one)]


class _Unreadable(Exception):
    """An eval kept that cannot be read: an earlier version wrote what this one does
    not read."""

    def __init__(self, eval_id: str, reason: str) -> None:
        super().__init__(reason)
        self.eval_id, self.reason = eval_id, reason


async def _report(store: RunStore, eval_id: str) -> EvalReport | None:
    """Eval ``eval_id`` of ``store`` (None: there is none).

    Raises:
        _Unreadable: when it is kept, but cannot be read.
    """
    text = await asyncio.to_thread(store.eval_report, eval_id)
    if text is None:
        return None
    try:
        return EvalReport.from_json(text)
    except ValueError as exc:  # msgspec's errors are ValueErrors
        raise _Unreadable(eval_id, str(exc)) from exc


def _unreadable(problem: _Unreadable, store: RunStore, links: Links) -> Response:
    """A page saying, as ``honeycomb eval compare`` does, that an eval cannot be read
    (a server's error, but one that names its cause, not a trace)."""
    said = f"eval {problem.eval_id} cannot be read: {problem.reason}"
    body = (
        f"<h1>eval {_e(problem.eval_id)}</h1><p>{_e(store.name)}: {_e(said)} (kept by a "
        "version of Honeycomb that wrote what this one does not read).</p>"
    )
    return HTMLResponse(page("eval not readable", body, links), status_code=500)


def _missing(eval_id: str, store: RunStore, links: Links) -> Response:
    body = f"<h1>no such eval</h1><p>No eval {_e(eval_id)} in {_e(store.name)}.</p>"
    return HTMLResponse(page("no such eval", body, links), status_code=404)
