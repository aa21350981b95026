"""The innermost tool-call handler: the tool itself, under its time limit.

A call gets its :class:`~runtime.tools.define.ToolContext` if its tool takes one
(its idempotency key made from ``scope``, the run's in every life of it), runs (a
sync tool in a worker thread) under its tool's ``timeout`` (or the policy's
default), and whatever happens becomes its :class:`Outcome`: a tool that raises is
an ``error`` (``ModelRetry`` tells the model what to fix), never a crash, even with
a ``CancelledError`` of its own (its worker not being cancelled; a ``KeyboardInterrupt``
or ``SystemExit`` is no error: it stops the run, as it would the process, with a note
naming the tool); one that
runs past its limit is cancelled and a ``timeout`` that says what happened to it (one
that ends well past it, which a blocked event loop kept from being cancelled, keeps
its result: it ran, and may have had its effect; a warning names it);
what it returns is rendered as text, cut at ``max_output_chars`` (and so is what a
failure says). Calls that wait
for a person's approval inside it (a nested worker's, of a tool that ``nests``)
pause its worker: ``ApprovalNeeded`` goes through; from any other tool it is the
tool's failure.

The time limit is around the tool and nothing else: waiting for a lock or a slot,
or for the journal's write, is not the tool's time, nor, for a tool that ``nests``,
a person's time deciding on a call of its nested workers (their approver's). It is
this handler's, not a layer of its own, so that a call in flight holds one frame
fewer (benchmarks B and E: every tool call has one). A sync side-effecting tool
cannot be interrupted: its thread is waited for to its end (see
:mod:`runtime.tools.threads`), so its observation says its effects may have
happened; one cut before its thread took it up never ran, and says so.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from msgspec.structs import replace

from runtime import logs
from runtime.concurrency import TimedOut, within
from runtime.errors import BudgetExceeded, ModelRetry, NotStarted
from runtime.events import Caller
from runtime.limits.worktime import within_own_time
from runtime.tools.approvals import ApprovalNeeded
from runtime.tools.define import Tool, ToolContext, idempotency_key
from runtime.tools.layers.base import Admitted, Outcome, Prepared
from runtime.tools.render import cut, render
from runtime.tools.threads import RanToItsEnd, ran_to_its_end, run_tool

__all__ = ["STOPS", "RunTool", "Stopped", "known_outcome"]

Stopped = ApprovalNeeded | BudgetExceeded | NotStarted
"""How a call of a tool that nests may end besides its outcome, stopping its worker:
calls its nested workers made wait for a decision (the worker pauses), they spent the
run's budget, or one an earlier life left paused cannot start again (the worker stops
unfinished). From a tool that does not nest, each is the tool's failure."""

STOPS = (ApprovalNeeded, BudgetExceeded, NotStarted)
""":data:`Stopped`, for ``except`` and ``isinstance`` (a union is made anew)."""


class RunTool:
    """Runs a call's tool under its time limit: the last handler of every tool call.

    Args:
        caller: The worker and run its tools' context names.
        max_output_chars: Longer output is cut, with a marker saying how much.
        default_timeout: Seconds a call may take when its tool sets no timeout
            (None: unlimited).
        scope: What its calls' idempotency keys are made from (the journal's scope,
            the run's in every life of it; empty: one of its own).
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = ("_scope", "caller", "default_timeout", "max_output_chars")

    def __init__(
        self,
        caller: Caller,
        max_output_chars: int,
        default_timeout: float | None = None,
        scope: str = "",
    ) -> None:
        self.caller = caller
        self.max_output_chars = max_output_chars
        self.default_timeout = default_timeout
        self._scope = scope

    @property
    def scope(self) -> str:
        """The calls' idempotency keys' scope: the one given, or one of its own, made
        when a tool first takes a context."""
        if not self._scope:
            self._scope = os.urandom(16).hex()
        return self._scope

    async def admit(self, calls: Sequence[Prepared]) -> list[Admitted]:
        return list(calls)

    async def __call__(self, call: Prepared) -> Outcome:
        found = call.tool
        kwargs = self._arguments(call)
        limit = found.timeout if found.timeout is not None else self.default_timeout
        started = 0.0
        if limit is not None and found.side_effects and not found.is_async:
            call = replace(call, begun=threading.Event())  # did its thread take it up, when?
            started = time.perf_counter()
        try:
            if found.ready is not None:  # what it needs first is not its time
                await found.ready()
            if limit is None:
                value = await run_tool(found, kwargs, call.begun)
            elif found.nests:  # a person deciding on a nested worker's call is not its time
                with within_own_time(limit):
                    value = await run_tool(found, kwargs, call.begun)
            else:
                began = time.perf_counter()
                with within(limit):
                    value = await run_tool(found, kwargs, call.begun)
                if time.perf_counter() - began > limit + _HELD_GRACE_S:
                    _held(found.name, limit, began)  # its limit could not stop it
        except STOPS as exc:
            if found.nests:  # its nested workers stop its worker (see Stopped)
                raise
            return self._raised(found, exc)  # only a tool that nests may stop its worker
        except ModelRetry as exc:
            return self._retry(exc)
        except TimedOut as exc:
            if limit is None:  # a limit of the tool's own ran out: its failure
                return self._raised(found, exc)
            # Cancelled, or waited for to its end (a sync side-effecting tool's thread
            # is, see runtime.tools.threads).
            return _timed_out(call, limit, time.perf_counter() - started)
        except asyncio.CancelledError as exc:
            ended = self._cancelled(found, exc)
            if ended is None:
                raise  # the worker is cancelled (its run stopped): the call with it
            return ended
        except Exception as exc:  # a failing tool becomes an observation, never a crash
            return self._raised(found, exc)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit ... stop the run
            # (the worker's cancellation went out above): say who stopped it
            exc.add_note(f"raised by tool {found.name!r} of worker {self.caller.worker}")
            raise
        # Whatever the tool returned, rendering it is not its failure.
        return Outcome(status="ok", content=render(value, self.max_output_chars))

    def _cancelled(self, found: Tool[Any, Any], exc: asyncio.CancelledError) -> Outcome | None:
        """The outcome of a call that ended with ``exc``: None when its worker is
        cancelled (the call goes with it, told how it ended when its thread was waited
        for to its end), else the tool's own failure (it awaited what was cancelled)."""
        task = asyncio.current_task()
        if task is None or task.cancelling():
            ran = ran_to_its_end(exc)
            if ran is not None and ran.began:  # waited for to its end: told with exc
                vars(exc)[_KNOWN] = self._ended(found, ran)
            return None
        return self._raised(found, exc)

    def _ended(self, found: Tool[Any, Any], ran: RanToItsEnd) -> Outcome:
        """The outcome of a call that ran to its end though its worker was cancelled."""
        if ran.error is None:
            return Outcome(status="ok", content=render(ran.value, self.max_output_chars))
        if isinstance(ran.error, ModelRetry):
            return self._retry(ran.error)
        return self._raised(found, ran.error)

    def _retry(self, exc: ModelRetry) -> Outcome:
        message = cut(exc.message, self.max_output_chars, what="message")
        return Outcome(status="error", content=f"Error: {message}", error=message)

    def _raised(self, found: Tool[Any, Any], exc: BaseException) -> Outcome:
        """A tool that raised: its observation says so, what it says cut as its output
        would be (an error quoting a whole input floods no context, span or log)."""
        error = cut(f"{type(exc).__name__}: {exc}", self.max_output_chars, what="error")
        text = f"Error: tool {found.name!r} raised {error}"
        return Outcome(status="error", content=text, error=error)

    def _arguments(self, call: Prepared) -> dict[str, Any]:
        """The call's arguments, with its context if its tool takes one."""
        found, kwargs = call.tool, call.kwargs
        if found.context_param is None:
            return kwargs
        worker, asked = self.caller.worker, call.call
        ctx = ToolContext(
            call_id=asked.id,
            worker=worker,
            run_id=self.caller.run_id,
            turn=call.turn,
            idempotency_key=idempotency_key(self.scope, worker, call.turn, asked.id),
        )
        return {**kwargs, found.context_param: ctx}


def known_outcome(cancelled: BaseException) -> Outcome | None:
    """The outcome of the call that ``cancelled`` (its worker's cancellation) stopped,
    when its tool ran to its end all the same: a sync side-effecting tool's thread is
    waited for (:func:`~runtime.tools.threads.ran_to_its_end`). None: it was cut off,
    and what it did is not known."""
    found = vars(cancelled).get(_KNOWN)
    return found if isinstance(found, Outcome) else None


_KNOWN = "honeycomb_known_outcome"

_HELD_GRACE_S = 0.1
"""How far past its limit a call may end before it is taken to have held the event loop
(an answer and the limit's timer may come due in one pass of the loop)."""


def _held(name: str, timeout: float, began: float) -> None:
    """Warn of a call (begun at ``began``) that ended well past its limit, which
    therefore could not cancel it: the event loop was held up meanwhile, by this call
    (an async tool that blocks: its own ``time.sleep`` or ``requests``, most likely) or
    by another, and so was every call and worker. Its result stands: it ran, and may
    have had its effect, which a timeout would invite the model to have again."""
    took = round(time.perf_counter() - began, 3)
    logs.log(
        "tool_call.held_loop",
        {"tool": name, "timeout_s": timeout, "took_s": took, "advice": _HELD_ADVICE},
        level="warning",
    )


_HELD_ADVICE = (
    "its time limit could not stop it: the event loop was held up meanwhile, as an async "
    "tool that blocks holds it (time.sleep, requests); write such a tool as a plain def: "
    "it runs in a thread"
)


def _timed_out(call: Prepared, timeout: float, elapsed: float) -> Outcome:
    """The outcome of a call its limit ran out on, ``elapsed`` seconds after it began."""
    text = _timeout_text(call, timeout, elapsed)
    return Outcome(status="timeout", content=text, error=text)


def _timeout_text(call: Prepared, timeout: float, elapsed: float) -> str:
    name, begun = call.tool.name, call.begun
    if begun is not None and not begun.is_set():  # it waited for a thread all along
        return (
            f"Error: tool {name!r} timed out after {timeout:g}s before it started: it "
            "did not run, so it had no effect. Call it again if it is still needed."
        )
    if begun is not None:
        # Such a thread is waited for (see runtime.tools.threads), so it ran to its end.
        return (
            f"Error: tool {name!r} timed out after {timeout:g}s. It is a synchronous "
            f"side-effecting tool, which cannot be interrupted: it ran to its end after "
            f"{elapsed:.1f}s, so its effects may have happened, but its result was dropped."
        )
    if call.tool.remote and call.tool.side_effects:
        # Its server was asked to stop it, and may not have: nothing says when it ends.
        return (
            f"Error: tool {name!r} timed out after {timeout:g}s. It runs elsewhere (an MCP "
            "server), which was asked to cancel it but may carry it out regardless: "
            "whether it had any effect is unknown. Check before calling it again."
        )
    return f"Error: tool {name!r} timed out after {timeout:g}s and was cancelled."
