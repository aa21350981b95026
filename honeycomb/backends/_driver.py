"""The driver's side of the Ray backend: each worker's stream, which goes through its
actor's channel (:mod:`._channel`), served from its services (the run's budget,
locks, slots, store, approver, judge) and its memory."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from honeycomb.backends._channel import Channel, RelayedReport
from honeycomb.backends._deltas import Deltas
from honeycomb.backends._pinned import PinnedCalls, asked, decided_elsewhere
from honeycomb.backends._standins import SpentAtDriver, StoodFor
from honeycomb.backends._told import Begin, Opened, Told
from honeycomb.backends._wire import (
    Message,
    RemoteFailure,
    SentDeadline,
    WorkerSpec,
    deadline_again,
    portable_error,
    raised,
)
from honeycomb.run.scheduler import why_stopped
from runtime import (
    AdaptiveLimiter,
    BudgetExceeded,
    Event,
    HoneycombError,
    ModelCallFinished,
    ModelCallRetrying,
    ModelHTTPError,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    logs,
)
from runtime.concurrency import TimedOut, shielded, within
from runtime.errors import CassetteError
from runtime.events import current_call, tell_as_of
from runtime.limits import CallInFlight, Limits, Slots
from runtime.limits.ratelimit import RetryDeadline, retry_deadline
from runtime.models.cassette_cuts import cutting, once_taken, tell_cuts
from runtime.models.cassettes import Cassette, CassetteWriter, Recorded
from runtime.models.layers.budget import spending, spent_by
from runtime.models.layers.cassette import current_case
from runtime.secrets import masked
from workers import LoopState, Worker, WorkerResult

STOP_WAIT_S = 2.0
"""How long a cancelled run waits for each remote worker to say it stopped."""


class Driver:
    """The driver's side of one worker's stream: it answers the worker's requests
    from its services here (the run's budget, locks, slots, store, approver ...) and
    takes its checkpoints, events and result."""

    def __init__(
        self,
        worker: Worker,
        model_slots: Slots | None,
        held: Mapping[str, StoodFor],
        told: Told,
        begin: Begin,
    ) -> None:
        self.worker = worker
        self.services = worker.services
        self.model_slots = model_slots
        self.held = held  # what its models' stand-ins name, by key (limiters, cassettes)
        self.last_state: LoopState | None = None
        self._running: dict[str, str] = {}  # its tool calls under way: call id -> tool
        self._drops: dict[int, asyncio.Event] = {}
        # Attempts that ended in a 429 (the 429), or were never sent (the budget refused)
        self._attempts_ended: dict[int, BaseException] = {}
        self._tools_reserved = 0  # tool calls reserved for its turn under way
        self._helpers: dict[int, asyncio.Task[None]] = {}
        self._context = contextvars.copy_context()
        self._channel: Channel
        self._key: str
        self._finished: asyncio.Future[WorkerResult]
        self._stopped = asyncio.Event()  # it said it stopped, once cancelled
        self._text = Deltas(self.services.tracer)
        self._calls: dict[int, CallInFlight] = {}  # its model calls under way, when told
        self._ended_calls: list[Callable[[], None]] = []  # run as its next call ends
        # Its calls' starts and ends are told under a wall time (call_started).
        self._calls_told = self.services.budget.limits.wall_time_s is not None
        self.pinned = PinnedCalls(worker.setup.tools, worker.setup.policy.max_output_chars)
        self.told = told  # its calls' approval events, across its lives
        self._begin = begin  # told once, as its first life begins there
        limited = self.services.budget.limits != Limits()
        self._opened = Opened(self._emit, holds=limited)

    def _emit(self, event: Event, at: float) -> None:
        """Tell the run's listeners ``event`` of the worker in its context, as in one
        process (its eval case, say): the channel's task that delivers it is the first
        worker's on the actor. It happened at ``at`` (its spans are timed so), which the
        actor said."""
        self._context.run(tell_as_of, self._here(at), self.services.tracer.emit, event)

    def _here(self, at: float) -> float:
        """``at``, a time the actor said, within when the worker was sent and now
        (another machine's clock may be off)."""
        return min(max(at, self._sent_at), time.time())

    async def follow(self, channel: Channel, key: str, spec: WorkerSpec) -> WorkerResult:
        """Run the worker in ``channel``'s actor, serving its stream until its result
        comes.

        Raises:
            RayActorError: when the actor died.
        """
        self._channel, self._key = channel, key
        self._finished = channel.loop.create_future()
        self._sent_at = time.time()
        self.pinned.keep = False
        channel.join(key, self)
        channel.send(("start", key, spec))
        try:
            return await asyncio.shield(self._finished)  # cancelling this leaves it
        except BaseException:
            if not self._finished.done():
                # Cancelled (or the driver failed): the worker and its tool calls are
                # cancelled there too; what it spent until it stops still counts.
                # The seconds used, as its run's wall time (its own limit) cut it off,
                # and whether its run is stopping its workers (a recording keeps the
                # call it cuts off there cancelled, as one here: see DriverCassette).
                used = next((c.used for c in cutting() if c and c.used is not None), None)
                channel.send(("cancel", key, used, why_stopped() is not None))
                await shielded(self._until_stopped())
            raise
        finally:
            channel.leave(key)
            if self.pinned.keep or not self._finished.done():
                # Its actor died, or it was cancelled: the text its cut-off call held
                # back (it may begin a secret) is dropped, as a failed call's is.
                self._text.drop()
            else:
                self._text.flush()
            self._opened.flush()
            for call in self._calls.values():  # cut off with it
                self.services.budget.call_ended(call)
            self._calls.clear()
            helpers = list(self._helpers.values())
            for helper in helpers:  # every lock and token held for it is let go
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _until_stopped(self) -> None:
        """Take what a cancelled worker sends until it says it stopped (what its model
        calls spent, told before), or ends, or its actor is lost; a while at most."""
        stopped: asyncio.Future[Any] = asyncio.ensure_future(self._stopped.wait())
        try:
            with contextlib.suppress(TimedOut), within(STOP_WAIT_S):
                await asyncio.wait((stopped, self._finished), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()

    def tools_running(self) -> tuple[str, ...]:
        """The tools of its calls under way, by what its events said (none when the
        run sends no events), forgotten as it is read: a worker that moves to another
        actor starts them again."""
        running, self._running = self._running, {}
        return tuple(dict.fromkeys(running.values()))

    def lost(self, exc: Exception) -> None:
        """Its actor died (or the channel to it failed): its pinned calls under way go
        on, for its next life."""
        if not self._finished.done():
            self.pinned.keep = True
            self._finished.set_exception(exc)

    def receive(self, message: Message) -> None:
        """One message of the worker's, in the order it sent them."""
        kind = message[0]
        budget = self.services.budget
        if kind == "began":  # it starts there: told then, as of then (its span, started_s)
            self._context.run(tell_as_of, self._here(message[1]), self._begin)
        elif kind == "event":
            _, event, at = message
            if isinstance(event, TextDelta):
                self._text.add(event)
                for call in self._calls.values():  # what a wall time cut off had written
                    if call.turn == event.turn and call.kind == "turn":
                        call.streamed(event.text)
                return
            if isinstance(event, ModelCallRetrying) or (
                isinstance(event, ModelCallFinished) and event.status != "ok"
            ):
                # What a failed or cut-off attempt held back was never shown.
                self._text.drop()
            else:
                self._text.flush()  # the text before it ended
            if isinstance(event, ToolCallStarted):
                self._running[event.call_id] = event.tool
                if self.pinned.going_on(event.tool, event.turn, event.call_id):
                    return  # an earlier life's call, made on: it started once, as its span
            elif isinstance(event, ToolCallFinished):
                self._running.pop(event.call_id, None)
            elif not self.told.first(event):
                return  # told already: as it was sent, or by an earlier life
            self._opened.tell(event, at)
        elif kind == "log":  # an entry Honeycomb logged for it there: logged here
            logs.log_bound(*message[1:])
        elif kind == "save":
            self.last_state = message[1]
            if self.services.store is not None:
                self.services.store.save(message[1])
        elif kind == "count":
            budget.reserve_model_call()  # no limit: it cannot refuse
        elif kind == "charge":
            budget.charge(message[1])
        elif kind == "call_started":  # as its wall time would report it
            _, number, who, what, turn = message
            call = self._calls[number] = CallInFlight(who, what, turn)
            budget.call_started(call)
        elif kind == "call_ended":
            ended = self._calls.pop(message[1], None)
            if ended is not None:
                budget.call_ended(ended)
            if self._ended_calls:  # what waited for its replayed call to end (once_taken)
                taken, self._ended_calls = self._ended_calls, []
                for then in taken:
                    then()
        elif kind == "reserve_tools":  # no limit: it cannot refuse
            budget.reserve_tool_calls_now(message[1])
            self._tools_reserved += message[1]
        elif kind == "release_tools":
            budget.release_tool_calls(message[1])
            self._tools_reserved -= message[1]
        elif kind == "settle_tools":
            budget.settle_tool_calls(message[1], message[2])
            self._tools_reserved -= message[1]
        elif kind == "drop":
            if message[2] is not None:  # a rate limiter's attempt: a 429, or never sent
                self._attempts_ended[message[1]] = raised(message[2])
            self._drops.pop(message[1], asyncio.Event()).set()
        elif kind == "observe":
            _, key, quota, tokens = message
            cast(AdaptiveLimiter, self.held[key]).observe(quota, tokens=tokens)
        elif kind == "record":  # a call of a recording model, made there
            self._record(cast(CassetteWriter, self.held[message[1]]), message[2])
        elif kind == "cut_told":  # the cuts here tell that cassette here where they fall
            writer = cast(CassetteWriter, self.held[message[1]])
            cuts, case = self._context.run(cutting), self._context.run(current_case)
            tell_cuts(writer, cuts, case=case, worker=self.worker.name)
        elif kind == "ask":
            _, number, op, args, options = message
            if op in ("reserve", "reserve_tools", "spent"):  # at once, in order: no await
                ok, value = self._reserve(op, *args)
                if op == "reserve":  # the call opened last: told, or never made
                    self._opened.reserved(ok)
                self._answer_now(number, ok, value)
            else:
                # In a copy of the worker's context here: a pinned tool finds its run,
                # and what one call sets (a hive tool's sub-run, as it runs) is not
                # another's, as each call's task has its own copy in one process.
                helper = self._channel.loop.create_task(
                    self._answer(number, op, args, options), context=self._context.copy()
                )
                self._helpers[number] = helper
                helper.add_done_callback(lambda _: self._helpers.pop(number, None))
        elif kind == "forget":  # its worker gave the request up (and said why, if ...)
            given_up = self._helpers.get(message[1])
            if given_up is not None:
                given_up.cancel(*message[2:])  # (... a decision settled the call asked)
        elif kind == "stopped":  # cancelled: its call under way was cut off
            self._text.drop()
            self._opened.flush()
            self._stopped.set()
        elif kind == "done" and not self._finished.done():
            self._text.flush()
            self._opened.flush()
            plain, error = message[1]
            exception = raised(error) if error is not None else None
            if exception is not None and not isinstance(exception, Exception):
                self._finished.set_exception(exception)  # SystemExit: it stops the run
                return
            update: dict[str, Any] = {"exception": exception}
            if plain.started_at:  # it ran: its span ends as its work did there, not as
                # its result came (its start as the actor saw it, in this process's clock)
                end = self._here(plain.started_at + plain.duration_s)
                update["started_at"] = max(end - plain.duration_s, self._sent_at)
            self._finished.set_result(plain.model_copy(update=update))

    def _record(self, writer: CassetteWriter, recorded: Recorded) -> None:
        """Append a call the worker's recording model made to its cassette here; one
        that cannot be written fails the worker, as the call fails in one process."""
        try:
            writer.call(recorded)
        except CassetteError as exc:
            if not self._finished.done():
                self._finished.set_exception(exc)

    def _answer_now(self, number: int, ok: bool, value: Any) -> None:
        self._channel.send(("answer", self._key, [(number, ok, value)]))

    def _reserve(self, op: str, tools: int = 0, read: bool = True) -> tuple[bool, Any]:
        """Reserve a model call (``reserve``), or a turn's ``tools`` calls
        (``reserve_tools``; ``read``: as :meth:`Budget.reserve_tool_calls` says), in the
        run's budget, or nothing (``spent``: a retry is about to be sent); the answer
        says what the run has spent now (the worker checks a retry against it)."""
        budget = self.services.budget
        try:
            if op == "reserve_tools":
                budget.reserve_tool_calls_now(tools, read=read)
                self._tools_reserved += tools
            elif op == "reserve":
                budget.reserve_model_call()
        except BudgetExceeded as exc:
            return (False, portable_error(exc))
        return (True, self._spent())

    def _spent(self) -> SpentAtDriver:
        """What the run has spent now, for the worker to check its next call against."""
        budget = self.services.budget
        return (budget.usage, budget.elapsed_s)

    def give_back_turn(self) -> None:
        """Its actor died in the middle of a turn, and the worker goes on elsewhere from
        its last checkpoint: the tool calls reserved for that turn are given back (it
        makes them again there, and counts them then)."""
        self.services.budget.release_tool_calls(self._tools_reserved)
        self._tools_reserved = 0

    async def _answer(
        self, number: int, op: str, args: tuple[Any, ...], options: dict[str, Any]
    ) -> None:
        """Answer one request that waits (a lock, a slot, a durable write, a call)."""
        if op == "hold":
            await self._hold(number, *args)
            return
        if op == "services.judge.ask":  # (in this request's own task)
            current_call.set(RelayedReport(self._channel, self._key, number))
        try:
            value = await self._done_here(op, args, options)
        except Exception as exc:
            self._answer_now(number, False, portable_error(exc))
            return
        except asyncio.CancelledError as cut:  # given up: what it spent goes back, if said
            spent = spent_by(cut)
            if spent is not None:
                stopped = spending(RemoteFailure(f"{op} was cut off"), spent)
                self._answer_now(number, False, portable_error(stopped))
            raise
        self._answer_now(number, True, value)

    async def _done_here(self, op: str, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
        """What a worker asks the driver to do for it: call a pinned tool, or what is
        at ``op`` in its services (``services.store.intent``, ``services.approver``)
        or its role's memory (``setup.memory.add``) here."""
        worker = self.worker
        if op == "tool":
            return await self.pinned.call(*args)
        if op == "cassette":  # a replay's answer, from the one cassette here
            key, model, request = args
            if self._calls_told:  # (in this request's own task)
                once_taken.set(self._ended_calls.append)
            return await cast(Cassette, self.held[key]).answered(model, request, **options)
        if op == "cassette_cancelled":  # held until the run stops the worker
            key, model, request = args
            return await cast(Cassette, self.held[key]).cancelled_off(model, request, **options)
        if op == "cassette_cut":  # held until the run's cut falls here
            key, model, call = args
            await cast(Cassette, self.held[key]).cut_off(model, call, **options)
        root, _, path = op.partition(".")
        found: Any = {"services": worker.services, "setup": worker.setup}.get(root)
        for name in path.split(".") if found is not None and path else ():
            found = getattr(found, name, None)
        if not callable(found) or (root == "setup" and not path.startswith("memory.")):
            raise HoneycombError(f"worker {worker.name!r}: no {op!r} to ask for at the driver")
        if op == "services.approver":
            (request,) = args  # asked once across the worker's lives
            return await self.pinned.kept(
                ("(approver)", request.turn, request.call_id), lambda: asked(found, request)
            )
        if op == "services.store.approvals.decided":
            (pending,) = args
            return await decided_elsewhere(found, pending)
        if root == "setup":
            # What a memory keeps or searches for, a worker masks first: in the actor,
            # which knows none of this process's secrets, that masked nothing.
            args, options = masked(args), masked(options)
            with worker.paying_for_memory():  # its embeddings spend the run's budget here
                return await found(*args, **options)
        return await found(*args, **options)

    async def _hold(
        self, number: int, what: str, name: str, deadline: SentDeadline | None = None
    ) -> None:
        """Hold a lock or a slot for the worker until it drops it (or its stream
        ends); the holding and the letting go are in this one task. The answer says
        whether it waited for it (a slot none of which was free; a lock, not known),
        and, for a slot of the model's calls, what the run had spent as it was given:
        its call was reserved a request earlier, and the calls that held the slot since
        may have spent the budget (see :class:`~honeycomb.backends._standins.ReservedModel`)."""
        drop = self._drops[number] = asyncio.Event()
        if what == "limiter":
            limiter = cast(AdaptiveLimiter, self.held[name])
            await self._attempt(number, limiter, drop, deadline_again(deadline))
            return
        held: Any
        if what == "lock":
            held = self.services.locks.lock(name)
        elif what == "tools":
            held = self.services.tool_slots
        else:
            held = self.model_slots
        if held is None:
            self._answer_now(number, True, (number, False))
            return
        async with held as waits:
            given: tuple[Any, ...] = (number, waits is not False)
            if what == "model":
                given += (self._spent(),)
            self._answer_now(number, True, given)
            await drop.wait()

    async def _attempt(
        self,
        number: int,
        limiter: AdaptiveLimiter,
        drop: asyncio.Event,
        deadline: RetryDeadline | None,
    ) -> None:
        """Hold a slot of ``limiter`` for one attempt of the worker's, and tell it how
        the attempt ended: a 429 slows every worker that uses it down; one its budget
        refused once it had the slot was never sent, and teaches it nothing. A
        cool-down or a paced start holds a retry no longer than its ``deadline``, as in
        one process: what the limiter refused it with (``RetryAfterPastDeadline``) is
        its answer. The slot comes with what the run had spent as it was given (see
        :class:`~honeycomb.backends._standins.Held`)."""
        token = retry_deadline.set(deadline)  # in this request's own task
        given = False
        try:
            async with limiter.attempt():
                given = True
                waits = False  # (its waits are the limiter's to tell)
                self._answer_now(number, True, (number, waits, self._spent()))
                await drop.wait()
                ended = self._attempts_ended.pop(number, None)
                if ended is not None:  # a 429 (its body what retries name), or never sent
                    raise ended
        except Exception as exc:
            if given and not isinstance(exc, ModelHTTPError | BudgetExceeded):
                raise
            if not given:  # refused a slot: the worker drops nothing
                self._drops.pop(number, None)
                self._answer_now(number, False, portable_error(exc))
        finally:
            retry_deadline.reset(token)
