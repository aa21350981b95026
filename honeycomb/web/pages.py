"""The pages of ``honeycomb serve``, as HTML: the runs, and one run with its timeline,
its workers' transcripts, its pending approvals and the decisions made on its calls.

Everything a run holds (task, answers, tool results, errors, a call's arguments) is
untrusted and is escaped here, once; the page's script puts the parts it fetches into
the page as the HTML this module made, and reads nothing else as HTML.

A run page has parts that change while the run goes, fetched again on a change
(:func:`live_parts`): ``#state`` (its status and spending) and ``#live`` (its answer,
the decisions on its calls, timeline and workers), which the page's script replaces
whole; and, between them, ``#approvals``, the calls waiting for a person, whose forms
the script keeps as they are while their calls wait (what a person typed stays),
adding and removing forms only.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import time
import unicodedata
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, unquote

from honeycomb.run.conversation import Turn
from honeycomb.run.shown import answers_held, stored_timeline, worker_statuses
from honeycomb.store import RunSummary, StoredRun, StoredWorker
from honeycomb.trace.format import counted, format_cost, format_took, printable, shown_value
from honeycomb.trace.html import timeline_section
from honeycomb.trace.spans import Span
from honeycomb.web.approvals import decidable
from runtime.tools.approvals import ApprovalEntry, PendingApproval
from runtime.value import Value
from workers.guards import refusal_text

__all__ = [
    "Links",
    "box_text",
    "listed",
    "listing",
    "live_parts",
    "named",
    "page",
    "run_page",
    "runs_page",
    "segment",
    "session_page",
    "sessions_page",
]

_DOTS = (".", "..")


def segment(name: str) -> str:
    """``name`` (an id: any text) as one segment of an address: percent-encoded, a
    ``/`` in it too; ``.`` and ``..``, which browsers drop from a path however encoded,
    start with a ``!`` (which the encoding never leaves bare). :func:`named` reads it
    back from the path as sent (the app routes on it: the decoded one splits at the
    ``/`` of an id)."""
    encoded = quote(name, safe="")
    return f"!{encoded}" if encoded in _DOTS else encoded


def named(part: str) -> str:
    """The id a :func:`segment` of a path as sent carries."""
    return unquote(part[1:] if part in ("!.", "!..") else part)


class Links(Value, frozen=True, kw_only=True):
    """The addresses of the app's pages, under the path it is served at."""

    base: str = "/"

    def run(self, run_id: str) -> str:
        return f"{self.base}runs/{segment(run_id)}"

    def decision(self, run_id: str, call_id: str) -> str:
        return f"{self.run(run_id)}/calls/{segment(call_id)}/decision"

    def static(self, name: str) -> str:
        return f"{self.base}static/{name}"

    @property
    def evals(self) -> str:
        return f"{self.base}evals"

    def eval(self, eval_id: str) -> str:
        return f"{self.base}evals/{segment(eval_id)}"

    @property
    def sessions(self) -> str:
        return f"{self.base}sessions"

    def session(self, session_id: str) -> str:
        return f"{self.base}sessions/{segment(session_id)}"

    def listed(self, kind: str, limit: int | None) -> str:
        """The events of the list of ``kind`` (``runs``, ``sessions``, ``evals``), of ``limit``
        rows as its address asked (None: as many as a list shows unasked)."""
        return f"{self.base}events/{kind}" + (f"?limit={limit}" if limit is not None else "")


def page(
    title: str,
    body: str,
    links: Links | None = None,
    *,
    live: str | None = None,
    part: str | None = None,
    gone: str | None = None,
    follows: str | None = None,
) -> str:
    """A whole page; ``live``: the address of the events that keep it up to date
    (:mod:`honeycomb.web.follow`), ``part``: where its changing parts (``.part``) are
    fetched (None: the page's own address), ``gone``: what it says once what it shows
    is no longer in the store, ``follows``: what it follows, as its lines about
    following it say it (``its run``)."""
    links = links or Links()
    said = {"live": live, "part": part, "gone": gone, "follows": follows}
    watch = "".join(f' data-{name}="{_e(text)}"' for name, text in said.items() if text)
    return f"""<!DOCTYPE html>
<html lang="en"{watch}>
<head>
<meta charset="utf-8">
<title>{_e(title)} · honeycomb</title>
<link rel="icon" href="{_e(links.static("icon.svg"))}">
<link rel="stylesheet" href="{_e(links.static("serve.css"))}">
<script src="{_e(links.static("serve.js"))}" defer></script>
</head>
<body>
<nav><a href="{_e(links.base)}">runs</a> · <a href="{_e(links.evals)}">evals</a> ·
<a href="{_e(links.sessions)}">sessions</a></nav>
{body}
<div id="tip" hidden></div>
</body>
</html>
"""


def runs_page(
    runs: Sequence[RunSummary],
    store: str,
    links: Links,
    more: int | None = None,
    asked: int | None = None,
) -> str:
    """The runs in the store, newest first, followed as they start and go; ``more``:
    the store holds more, and the link to them shows that many (None: these are all);
    ``asked``: the rows the page's address asked for (None: as many as unasked)."""
    live = links.listed("runs", asked)
    if not runs:
        shown = listing("runs", f"<p>No runs in {_e(store)} yet.</p>")
        return page("runs", shown, links, live=live, follows="the runs")
    head = "".join(
        f"<th>{name}</th>"
        for name in ("run", "started", "status", "took", "ran", "workers", "calls", "cost", "task")
    )
    rows = "\n".join(_run_row(run, links) for run in runs)
    table = (
        f"{listed(len(runs), 'run', store, links.base, more)}"
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>\n{rows}\n</tbody></table>'
    )
    return page("runs", listing("runs", table), links, live=live, follows="the runs")


def listing(title: str, shown: str) -> str:
    """A list's heading, and the list as the part of its page that changes (the page
    follows the store: its ``live``, :meth:`Links.listed`)."""
    return f'<h1>{title}</h1><div id="listed" class="part">{shown}</div>'


def listed(shown: int, noun: str, store: str, address: str, more: int | None) -> str:
    """The line above a list (of runs, sessions, evals): the store's, newest first, or,
    when the store holds more than it shows, that it does, with a link to a longer list."""
    if more is None:
        return f'<p class="muted">{_e(store)}, newest first</p>'
    return (
        f'<p class="muted more">the newest {counted(shown, noun)} in {_e(store)} (it holds '
        f'more): <a href="{_e(address)}?limit={more}">show the newest {more}</a></p>'
    )


def _run_row(run: RunSummary, links: Links) -> str:
    took, ran = format_took(run.duration_s, run.wall_s)
    return (
        f'<tr data-run="{_e(run.run_id)}">'
        f'<td><a href="{_e(links.run(run.run_id))}">{_e(run.run_id)}</a></td>'
        f"<td>{_e(_when(run.started_at))}</td>"
        f'<td class="status {_e(run.status)}">{_e(run.status)}</td>'
        f"<td>{took}</td><td>{ran}</td><td>{run.workers}</td><td>{run.model_calls}</td>"
        f'<td>{_e(format_cost(run.cost))}</td><td class="task">{_e(_cut(run.task, 120))}</td>'
        "</tr>"
    )


def sessions_page(
    sessions: Sequence[tuple[Any, ...]],
    store: str,
    links: Links,
    more: int | None = None,
    asked: int | None = None,
) -> str:
    """The conversations in the store (rows of ``SESSION_COLUMNS``), newest first,
    followed as they start and go; ``more``, ``asked``: as :func:`runs_page`'s."""
    live = links.listed("sessions", asked)
    if not sessions:
        shown = listing("sessions", f"<p>No sessions in {_e(store)} yet.</p>")
        return page("sessions", shown, links, live=live, follows="the sessions")
    rows = "\n".join(
        f'<tr><td><a href="{_e(links.session(sid))}">{_e(sid)}</a></td><td>{turns}</td>'
        f'<td>{_e(_when(last_at))}</td><td class="task">{_e(_cut(last, 120))}</td></tr>'
        for sid, turns, _, last_at, last in sessions
    )
    head = "<tr><th>session</th><th>turns</th><th>last message</th><th>it said</th></tr>"
    table = (
        f"{listed(len(sessions), 'session', store, links.sessions, more)}"
        f'<table class="runs"><thead>{head}</thead><tbody>\n{rows}\n</tbody></table>'
    )
    return page("sessions", listing("sessions", table), links, live=live, follows="the sessions")


def session_page(session_id: str, turns: Sequence[Turn], links: Links, store: str) -> str:
    """One conversation: each message, its answer, and the run that answered it;
    followed as it takes turns, until it is forgotten (``store``: where it was)."""
    parts = []
    for turn in turns:
        answer = turn.answer if turn.answer is not None else f"(no answer: {turn.status})"
        parts.append(
            f'<section class="turn"><h2>#{turn.turn} · <a href="{_e(links.run(turn.run_id))}">'
            f'run {_e(turn.run_id)}</a> · <span class="status {_e(turn.status)}">'
            f"{_e(turn.status)}</span> · {_e(format_cost(turn.cost))} · "
            f"{_e(_when(turn.started_at))}</h2>"
            f'<p class="task">{_e(turn.message)}</p><pre class="answer">{_e(answer)}</pre>'
            "</section>"
        )
    body = f'<h1>session {_e(session_id)}</h1><div id="turns" class="part">{"".join(parts)}</div>'
    gone = f"This session is no longer in {store}: it was forgotten. The page shows it as it was."
    live = links.session(session_id) + "/events"
    return page(f"session {session_id}", body, links, live=live, gone=gone, follows="its session")


def run_page(
    summary: RunSummary,
    run: StoredRun,
    spans: Sequence[Span],
    pending: Sequence[PendingApproval],
    csrf: str,
    links: Links,
    *,
    hint: str | None = None,
    decided: Sequence[ApprovalEntry] = (),
    unable: str | None = None,
    deciding: bool = True,
    store: str = "the store",
) -> str:
    """One run: what it is, then the parts that change while it goes (``store``: its
    store's name, said once the run is no longer there)."""
    body = f'<h1>run {_e(run.run_id)}</h1><p class="task">{_e(run.task)}</p>' + live_parts(
        summary,
        run,
        spans,
        pending,
        csrf,
        links,
        hint=hint,
        decided=decided,
        unable=unable,
        deciding=deciding,
    )
    gone = (
        f"This run is no longer in {store}: it was deleted (its session forgotten, say). "
        "The page shows it as it was."
    )
    address = links.run(run.run_id)
    return page(
        f"run {run.run_id}",
        body,
        links,
        live=f"{address}/events",
        part=f"{address}/live",
        gone=gone,
        follows="its run",
    )


def live_parts(
    summary: RunSummary,
    run: StoredRun,
    spans: Sequence[Span],
    pending: Sequence[PendingApproval],
    csrf: str,
    links: Links,
    *,
    hint: str | None = None,
    decided: Sequence[ApprovalEntry] = (),
    unable: str | None = None,
    deciding: bool = True,
) -> str:
    """What the run page shows that changes while the run goes: its status
    (``#state``), the calls waiting for a person (``#approvals``), and its answer,
    the decisions made on its calls (``decided``: who made each, and when), timeline
    and workers (``#live``). ``hint``: the command that continues the run (None: it
    was not started from a hive file, and its code continues it); ``unable``: why the
    server could not continue it once its calls were decided; ``deciding``: whether
    this server decides calls (without, the waiting ones are shown with no form)."""
    timeline = stored_timeline(run, spans, summary.status)
    lives = len(timeline.lives)
    took, ran = format_took(summary.duration_s, timeline.wall_s if spans else summary.wall_s)
    said = [f"took {took}"] if summary.duration_s is not None else []
    if ran != "-":
        said.append(f"ran {ran}" + (f" in {lives} lives" if lives > 1 else ""))
    took = "".join(f" · {part}" for part in said)
    status = (
        f'<p class="state" data-status="{_e(summary.status)}">'
        f'<span class="status {_e(summary.status)}">{_e(summary.status)}</span>{took}'
        f" · {counted(summary.model_calls, 'model call')} · "
        f"{counted(summary.input_tokens + summary.output_tokens, 'token')} · "
        f"{_e(format_cost(summary.cost))}</p>"
    )
    if run.error is not None and summary.status == run.status:  # why it ended so
        status += f'<p class="error why-ended">{_e(run.error)}</p>'
    trace = timeline_section(timeline) if spans else '<p class="muted">No spans yet.</p>'
    statuses = worker_statuses(run, summary.status)
    return (
        f'<div id="state" class="part">{status}</div>'
        + _approvals(
            summary,
            pending,
            csrf,
            links,
            hint,
            cancelled=run.status == "interrupted",
            unable=unable,
            deciding=deciding,
        )
        + f'<div id="live" class="part">{_answer(run.result)}{_decisions(decided)}'
        + f"<h2>timeline</h2>{trace}"
        + _workers(
            run.workers,
            statuses,
            [row.name for row in timeline.rows],
            held=answers_held(run, summary.status),
        )
        + "</div>"
    )


def _answer(result: str | None) -> str:
    if result is None:
        return ""
    text = json.loads(result).get("answer_text") or ""
    return f'<h2>answer</h2><pre class="answer">{_e(text)}</pre>' if text else ""


def _decisions(decided: Sequence[ApprovalEntry]) -> str:
    """The decisions made on the run's calls, in the order the calls asked: the call,
    what was decided (a denial's reason; an edit's arguments, as the store keeps them:
    the call ran with these, not the model's the transcript shows), by whom and when."""
    items = []
    for entry in decided:
        call, d = entry.pending, entry.decision
        if d is None:
            continue
        verdict, edited = ("approved" if d.approve else "denied"), ""
        if d.approve and d.arguments is not None:
            verdict += " with edited arguments"
            edited = f'<pre class="json edited">{_e(box_text(d.arguments))}</pre>'
        elif not d.approve and d.reason:
            verdict += f" ({d.reason})"
        at = f" at {_when(entry.decided_at)}" if entry.decided_at is not None else ""
        items.append(
            f'<li data-call="{_e(call.call_id)}" data-worker="{_e(call.worker)}">'
            f"<b>{_read(call.tool)}</b> by {_read(call.worker)} ({_read(call.role)}), turn "
            f'{call.turn}: <span class="decision">{_read(verdict)}</span> by '
            f'<span class="decided-by">{_read(entry.decided_by or "someone")}</span>{_e(at)}'
            f"{edited}</li>"
        )
    return f'<h2>decisions</h2><ul class="decisions">{"".join(items)}</ul>' if items else ""


def _approvals(
    summary: RunSummary,
    pending: Sequence[PendingApproval],
    csrf: str,
    links: Links,
    hint: str | None,
    *,
    cancelled: bool = False,
    unable: str | None = None,
    deciding: bool = True,
) -> str:
    """The calls that wait for a person, each with its form, or said timed out once its
    time to decide ran out; and for a run that waits on no call a person can still
    decide, or that stopped before it finished (``cancelled``, or its process gone), how
    it goes on. Each item has a ``data-key``: the page's script keeps an item while its
    key comes again, so a form keeps what was typed in it. ``unable``: why this server
    could not continue the run, said while it waits to be continued."""
    now = time.time()
    items = [_approval(summary.run_id, call, csrf, links, now, deciding) for call in pending]
    to_decide = any(decidable(call, now) for call in pending)
    if unable is not None and summary.status in ("waiting", "interrupted"):
        items.append(
            f'<p class="approval error" data-key="{_e("unable" + chr(10) + unable)}">'
            f"This server could not continue it: {_e(unable)}</p>"
        )
    if summary.status == "interrupted":
        items.append(_cut_off(summary, hint, to_decide, cancelled=cancelled))
    elif summary.status == "waiting" and not to_decide:
        items.append(_resume_hint(summary, hint))
    hidden = "" if items else " hidden"
    return (
        f'<section id="approvals"{hidden}><h2>approvals</h2>'
        f'<div class="approvals">{"".join(items)}</div></section>'
    )


def _approval(
    run_id: str, call: PendingApproval, csrf: str, links: Links, now: float, deciding: bool
) -> str:
    """A call waiting for a person: who calls which tool, what it will do (in the
    tool's words, if it says), why it asks, its arguments as a person reads them (a
    string as its text), and the form: the arguments to edit as JSON, a reason, the
    two choices. A call whose time to decide ran out has no form, nor has one on a
    server that decides no calls (not ``deciding``): each says so."""
    can_decide = decidable(call, now)
    due = "decide by" if can_decide else "was due"
    deadline = f" · {due} {_e(_when(call.deadline))}" if call.deadline is not None else ""
    summary = f'<p class="summary">{_read(call.summary)}</p>' if call.summary else ""
    told = (
        f"<p><b>{_read(call.tool)}</b> by {_read(call.worker)} ({_read(call.role)}), turn "
        f"{call.turn} · asked {_e(_when(call.asked_at))}{deadline}</p>{summary}"
        f'<p class="why">{_read(call.why)}</p>{_arguments(call.arguments)}'
    )
    who = f'data-call="{_e(call.call_id)}" data-worker="{_e(call.worker)}"'
    if not can_decide:
        key = _e(f"timed out\n{_call_key(call)}")
        return (
            f'<div class="approval timed-out" data-key="{key}" {who}>{told}'
            '<p class="error">Its time to decide ran out (approval_timeout_s): the run denies '
            "it as it goes on, or once it is resumed.</p></div>"
        )
    if not deciding:
        key = _e(f"elsewhere\n{_call_key(call)}")
        return (
            f'<div class="approval elsewhere" data-key="{key}" {who}>{told}'
            '<p class="muted">It waits for a person. This server decides no calls: decide '
            "it with <code>honeycomb approve</code>, or <code>Executor.decide</code> in the "
            "code that made the run.</p></div>"
        )
    arguments = box_text(call.arguments)
    rows = sum(1 + len(line) // 90 for line in arguments.splitlines())  # as it wraps
    key = _e(f"waits\n{_call_key(call)}")
    return (
        f'<form class="approval" method="post" action="{_e(links.decision(run_id, call.call_id))}" '
        f'data-key="{key}" {who}>{told}'
        # The form's default button, disabled: Enter in the reason's field (a denial's)
        # sends nothing, where it sent the first button's choice, approve.
        '<button type="submit" disabled hidden></button>'
        f'<input type="hidden" name="csrf" value="{_e(csrf)}">'
        f'<input type="hidden" name="worker" value="{_e(call.worker)}">'
        f'<input type="hidden" name="turn" value="{call.turn}">'
        '<details class="edit"><summary>edit the arguments (JSON)</summary>'
        f'<textarea name="arguments" rows="{min(max(rows, 3), 16)}" spellcheck="false">'
        f"{_e(arguments)}</textarea></details>"
        '<label>reason (for a denial)<input type="text" name="reason"></label>'
        '<button type="submit" name="decision" value="approve">approve</button> '
        '<button type="submit" name="decision" value="deny">deny</button>'
        "</form>"
    )


def _call_key(call: PendingApproval) -> str:
    """What tells a call apart from every other of its run, as the store does: its
    worker, turn and id (an id alone is not promised to be unique)."""
    return f"{call.worker}\n{call.turn}\n{call.call_id}"


def _how(summary: RunSummary, hint: str | None) -> str:
    """How the run is continued: ``hint`` (the command), or in the code that made it."""
    if hint is not None:
        return f"<code>{_e(hint)}</code>"
    return f"<code>Executor.resume({_e(repr(summary.run_id))})</code> in the code that made it"


def _cut_off(summary: RunSummary, hint: str | None, to_decide: bool, *, cancelled: bool) -> str:
    """A run that stopped before it finished goes on once it is resumed: one
    ``cancelled`` (its process stored it so as it stopped it: Ctrl-C, a signal, its task
    cancelled, a server stopped while it continued it), or whose process is gone
    (killed). With calls still to decide, this server continues a run of a hive file
    once they are decided on this page (one made in Python is its code's to
    continue)."""
    if to_decide and hint is not None:
        then = "Once its calls are decided on this page, this server continues it; or continue it "
    elif to_decide:
        then = "Once its calls are decided, continue it "
    else:
        then = "Continue it "
    why = (
        "it was cancelled: Ctrl-C, a signal, or the code that ran it cancelled it"
        if cancelled
        else "its process is gone"
    )
    return (
        '<p class="approval error" data-key="cut off">The run stopped before it finished '
        f"({why}). {then}with {_how(summary, hint)}.</p>"
    )


def _resume_hint(summary: RunSummary, hint: str | None) -> str:
    """A waiting run with nothing left to decide goes on when it is resumed: this
    server resumes the runs of a hive file whose last call is decided on its page, not
    those decided elsewhere (whoever decided them resumes them); one made in Python is
    its code's to resume (``honeycomb serve`` does not, decided on its page or not)."""
    how = _how(summary, hint)
    then = (
        ""
        if hint is None
        else " This server resumes a run whose last call is decided on this page."
    )
    return (
        '<p class="approval muted" data-key="resume">No call is left to decide: the run goes '
        f"on once it is resumed ({how}).{then}</p>"
    )


def _arguments(arguments: dict[str, Any]) -> str:
    if not arguments:
        return '<p class="muted">no arguments</p>'
    items = []
    for name, value in arguments.items():
        text, is_text = shown_value(value)
        kind = "text" if is_text else "json"
        items.append(
            f'<dt>{_read(name)}</dt><dd data-argument="{_e(name)}"><pre class="{kind}">'
            f"{_read(text)}</pre></dd>"
        )
    return f'<dl class="arguments">{"".join(items)}</dl>'


def _workers(
    workers: dict[str, StoredWorker],
    statuses: dict[str, str],
    order: Sequence[str],
    *,
    held: bool,
) -> str:
    """The workers, each with its transcript, in ``order`` (the timeline's rows: the
    plan's), any other after by name; ``held``: without their answers (the run's answer
    is made of them, and its output guards have not passed it)."""
    if not workers:
        return ""
    place = {name: index for index, name in enumerate(order)}
    parts = "\n".join(
        _worker(name, workers[name], statuses.get(name, workers[name].status), held=held)
        for name in sorted(workers, key=lambda name: (place.get(name, len(place)), name))
    )
    return f"<h2>workers</h2>{parts}"


def _worker(name: str, worker: StoredWorker, status: str, *, held: bool) -> str:
    finished = json.loads(worker.result) if worker.result is not None else None
    done = (finished or {}).get("worker") or {}
    if done.get("transcript"):
        messages = list(done["transcript"].get("messages", ()))
    else:
        messages = [m for _, batch in sorted(worker.messages) for m in json.loads(batch)]
    if held:
        messages = [_HELD if _answers(m) else m for m in messages]
    error = (finished or {}).get("error")
    messages = _without_refused(messages, tripped=_output_tripped(error))
    why = f'<p class="error">{_e(error["type"])}: {_e(error["message"])}</p>' if error else ""
    turns = done.get("turns") or (worker.state or {}).get("turn") or 0
    return (
        f'<details class="worker" data-worker="{_e(name)}">'
        f'<summary><b>{_e(name)}</b> <span class="status {_e(status)}">'
        f"{_e(status)}</span> · {counted(int(turns), 'turn')}</summary>"
        f"{why}{_transcript(messages)}</details>"
    )


_CORRECTION = refusal_text(()).partition("\n")[0]
"""How the correction a worker is sent for an answer its output guards refused begins."""

_REFUSED = {"role": "assistant", "content": "(an answer its output guards refused)"}
"""What stands for such an answer: as the run's stream drops it, no view shows it."""


def _without_refused(messages: list[dict[str, Any]], *, tripped: bool) -> list[dict[str, Any]]:
    """``messages`` with each answer the worker's output guards refused in its place:
    one the worker was sent a correction for, and its last when they tripped."""
    shown = []
    for index, message in enumerate(messages):
        after = messages[index + 1] if index + 1 < len(messages) else None
        refused = tripped if after is None else _corrects(after)
        shown.append(_REFUSED if refused and _answers(message) else message)
    return shown


def _corrects(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return message.get("role") == "user" and str(content or "").startswith(_CORRECTION)


_HELD = {
    "role": "assistant",
    "content": "(its answer is held: the run's answer is made of its workers' answers, "
    "and the run's output guards have not passed it)",
}
"""What stands for a worker's answer while it is held."""


def _answers(message: dict[str, Any]) -> bool:
    """Whether ``message`` is an answer of its worker's: the model's text without a
    call (a call's text beside it is not)."""
    return message.get("role") == "assistant" and not message.get("tool_calls")


def _output_tripped(error: dict[str, Any] | None) -> bool:
    """Whether a worker failed of its output guards (its last answer refused)."""
    return (
        error is not None
        and error.get("type") == "GuardrailTripped"
        and str(error.get("message", "")).startswith("output guard")
    )


def _transcript(messages: Iterable[dict[str, Any]]) -> str:
    shown = "\n".join(_message(m) for m in messages)
    return f'<div class="transcript">{shown}</div>'


def _message(message: dict[str, Any]) -> str:
    role = str(message.get("role", "?"))
    parts: list[str] = []
    if message.get("content"):
        parts.append(f"<pre>{_e(_text(message['content']))}</pre>")
    for call in message.get("tool_calls") or ():
        # A mask that is a call's own text is kept with its '[' escaped (to tell it from
        # a secret the store masked: runtime.tools.unmasking); the same JSON, read so.
        arguments = str(call.get("arguments", "")).replace("\\u005b", "[")
        parts.append(f'<p class="call">→ {_e(str(call.get("name", "")))}({_e(arguments)})</p>')
    label = role
    if role == "tool":
        label = f"{message.get('name', 'tool')} · {message.get('status', '')}"
    return f'<div class="msg {_e(role)}"><span class="who">{_e(label)}</span>{"".join(parts)}</div>'


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(text: str) -> str:
    return escape(text, quote=True)


def _read(text: str) -> str:
    """Text of a call a person decides on, as the terminal's prompt shows it: the
    characters that reorder or hide what is drawn (controls, direction overrides,
    zero-width ones) each a space, so what is read is what the call does."""
    return _e(printable(text))


def box_text(arguments: dict[str, Any]) -> str:
    """A call's arguments in the box that edits them: JSON, with the characters that
    reorder or hide what is drawn as JSON escapes (``\\u202e``), which read back as the
    same arguments: sent back as it is, the box is no edit."""
    text = json.dumps(arguments, indent=2, ensure_ascii=False)
    return _format_characters().sub(lambda found: _json_escape(found[0]), text)


@functools.cache
def _format_characters() -> re.Pattern[str]:
    """Unicode's format characters (direction overrides and isolates, zero-width ones):
    JSON leaves them as they are, controls it escapes."""
    found = (chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    return re.compile("[" + "".join(map(re.escape, found)) + "]")


def _json_escape(character: str) -> str:
    code = ord(character)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # past the first plane: a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
