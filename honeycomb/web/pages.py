"""The pages of ``honeycomb serve``, as HTML: the runs, and one run with its timeline,
its workers' transcripts, its pending approvals and the decisions made on its calls
(those two drawn by :mod:`honeycomb.web.calls`).

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

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import quote, unquote

from honeycomb.run.conversation import Turn
from honeycomb.run.phase_names import phase_of
from honeycomb.run.shown import answers_held, stored_timeline, worker_statuses
from honeycomb.store import RunSummary, StoredRun, StoredWorker
from honeycomb.trace.format import counted, format_cost, format_took
from honeycomb.trace.html import timeline_section
from honeycomb.trace.spans import Span
from honeycomb.web.calls import approvals, decisions, escaped, when
from runtime.tools.approvals import ApprovalEntry, PendingApproval
from runtime.value import Value
from workers.guards import refusal_text

__all__ = [
    "Links",
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
    "undecided_page",
]

_DOTS = (".", "..")

_e = escaped
_when = when


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
    gone = (
        f"This session is no longer in {store}: it was forgotten, or cleared of its turns. "
        "The page shows it as it was."
    )
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
    gone = f"{_run_gone(store)} The page shows it as it was."
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


def _run_gone(store: str) -> str:
    return f"This run is no longer in {store}: it was deleted (its session forgotten, say)."


def undecided_page(run_id: str, store: str, links: Links) -> str:
    """What a decision sent from the page of a run the store no longer has lands on:
    the run went after the page showed it, and nothing was decided."""
    body = (
        f"<h1>run {_e(run_id)}</h1>"
        f'<p class="error gone">{_e(_run_gone(store))} Nothing was decided: there is no '
        "run to decide its call for.</p>"
    )
    return page(f"run {run_id}", body, links)


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
        + approvals(
            summary,
            pending,
            csrf,
            links.decision,
            hint,
            cancelled=run.status == "interrupted",
            unable=unable,
            deciding=deciding,
            eval_id=run.eval_id,
        )
        + f'<div id="live" class="part">{_answer(run.result)}{decisions(decided)}'
        + f"<h2>timeline</h2>{trace}"
        + _workers(
            run.workers,
            statuses,
            [row.name for row in timeline.rows],
            held=lambda worker: answers_held(run, worker, summary.status),
        )
        + "</div>"
    )


def _answer(result: str | None) -> str:
    if result is None:
        return ""
    text = json.loads(result).get("answer_text") or ""
    return f'<h2>answer</h2><pre class="answer">{_e(text)}</pre>' if text else ""


def _workers(
    workers: dict[str, StoredWorker],
    statuses: dict[str, str],
    order: Sequence[str],
    *,
    held: Callable[[str], bool],
) -> str:
    """The workers, each with its transcript: its planner's first, then in ``order``
    (the timeline's rows: the plan's), any other after by name, its aggregator's last;
    those ``held`` says (by name) without their answers (the run's answer is made of
    them, and its output guards have not passed it)."""
    if not workers:
        return ""
    place = {name: index for index, name in enumerate(order)}

    def placed(name: str) -> tuple[int, str]:
        if name in place:
            return place[name], name
        phase = phase_of(name)
        return -1 if phase == "plan" else len(order) + (phase == "aggregate"), name

    parts = "\n".join(
        _worker(name, workers[name], statuses.get(name, workers[name].status), held=held(name))
        for name in sorted(workers, key=placed)
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


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
