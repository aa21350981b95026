"""The calls of a run page of ``honeycomb serve`` that a person decides (``#approvals``):
each waiting call with its form, or said timed out, or decided elsewhere; how a run
that waits on no call a person can still decide goes on; and the decisions made on
its calls. A call's text reads as the terminal's prompt shows it: what would make it
read otherwise than the call does (a direction override, a zero-width character) is a
space, and a JSON escape in the box of its arguments (:func:`box_text`).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from honeycomb.store import RunSummary
from honeycomb.trace.format import printable, shown_value
from honeycomb.web.approvals import decidable
from runtime.tools.approvals import ApprovalEntry, PendingApproval

__all__ = ["approvals", "box_text", "decisions", "escaped", "when"]

Decision = Callable[[str, str], str]
"""The address a decision on a call is sent to, by its run's id and the call's."""


def escaped(text: str) -> str:
    """``text`` as HTML shows it, quotes too."""
    return escape(text, quote=True)


def when(at: float) -> str:
    """A moment (``time.time()``) as the pages say it, in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


_e = escaped
_when = when


def decisions(decided: Sequence[ApprovalEntry]) -> str:
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


def approvals(
    summary: RunSummary,
    pending: Sequence[PendingApproval],
    csrf: str,
    decision: Decision,
    hint: str | None,
    *,
    cancelled: bool = False,
    unable: str | None = None,
    deciding: bool = True,
    eval_id: str | None = None,
) -> str:
    """The calls that wait for a person, each with its form, or said timed out once its
    time to decide ran out; and for a run that waits on no call a person can still
    decide, or that stopped before it finished (``cancelled``, or its process gone), how
    it goes on. Each item has a ``data-key``: the page's script keeps an item while its
    key comes again, so a form keeps what was typed in it. ``unable``: why this server
    could not continue the run, said while it waits to be continued. ``eval_id``: the
    eval the run is of (nobody decides its calls: the eval denies them)."""
    now = time.time()
    by_eval = eval_id is not None
    evals = None if eval_id is None else (eval_id, summary.status == "running")
    items = [
        _approval(summary.run_id, call, csrf, decision, now, deciding, evals) for call in pending
    ]
    to_decide = not by_eval and any(decidable(call, now) for call in pending)
    if unable is not None and summary.status in ("waiting", "interrupted"):
        items.append(
            f'<p class="approval error" data-key="{_e("unable" + chr(10) + unable)}">'
            f"This server could not continue it: {_e(unable)}</p>"
        )
    if summary.status == "interrupted":
        items.append(_cut_off(summary, hint, to_decide, cancelled=cancelled))
    elif summary.status == "waiting" and not to_decide and not (by_eval and pending):
        items.append(_resume_hint(summary, hint))
    hidden = "" if items else " hidden"
    return (
        f'<section id="approvals"{hidden}><h2>approvals</h2>'
        f'<div class="approvals">{"".join(items)}</div></section>'
    )


def _of_an_eval(
    run_id: str, call: PendingApproval, who: str, told: str, eval_id: str, going: bool
) -> str:
    """A call of a run of eval ``eval_id``, which nobody decides: while the run goes,
    the eval denies it as the run ends; once no process carries it on (the eval's was
    killed), a person may deny it, or the eval gone on with denies it."""
    key = _e(f"eval\n{going}\n{_call_key(call)}")
    said = (
        "It waits, and nobody decides it: it is a call of an eval's run, whose case says "
        "what the run does with no person to ask (it ends waiting, and the eval denies "
        "the call)."
    )
    if not going:
        said = (
            f"It waits, and nobody approves it: it is a call of a run of eval {_e(eval_id)}, "
            "which no longer carries the run on (its process stopped before it denied the "
            f"call). Deny it (<code>honeycomb approve {_e(shlex.quote(run_id))} "
            f"{_e(shlex.quote(call.call_id))} --deny</code>), or go on with the eval "
            f"(<code>honeycomb eval HIVE CASES --eval-id {_e(shlex.quote(eval_id))}</code>), "
            "which denies it."
        )
    return (
        f'<div class="approval elsewhere" data-key="{key}" {who}>{told}'
        f'<p class="muted">{said}</p></div>'
    )


def _approval(
    run_id: str,
    call: PendingApproval,
    csrf: str,
    decision: Decision,
    now: float,
    deciding: bool,
    evals: tuple[str, bool] | None = None,
) -> str:
    """A call waiting for a person: who calls which tool, what it will do (in the
    tool's words, if it says), why it asks, its arguments as a person reads them (a
    string as its text), and the form: the arguments to edit as JSON, a reason, the
    two choices. A call whose time to decide ran out has no form, nor has one of an
    eval's run (``evals``: the eval's id, and whether the run goes: nobody decides it),
    or on a server that decides no calls (not ``deciding``): each says so."""
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
    if evals is not None:
        return _of_an_eval(run_id, call, who, told, *evals)
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
    # Sent as by a page that showed the run: a run deleted since is said gone, not 404.
    action = f"{decision(run_id, call.call_id)}?shown=1"
    return (
        f'<form class="approval" method="post" action="{_e(action)}" '
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
