"""A worker's services in a Ray actor (:func:`served`): what of them was sent
(:class:`~honeycomb.backends._wire.SentServices`), and stand-ins for the rest, which
lives at the driver.

- its budget: each model call is reserved at the driver before it is made (the
  model is wrapped); what calls spent is sent back as it is known;
- exclusive locks and the run's tool and model slots: held at the driver, for the
  time the call runs;
- its store: its checkpoint (each turn's state, sent in order, in batches), its
  journal (an intent made durable at the driver before the call runs, and so is the
  outcome; the entries so far come with the worker) and its approval log;
- its events: sent in order, in batches;
- the run's memory, approver and judge, and its pinned tools: each call made at the
  driver, by its path in the worker's services there (:func:`~._link.at_driver`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn, TypeAlias, cast

import anyio

from honeycomb.backends._link import Link, at_driver, here
from honeycomb.backends._wire import Pinned, SentServices, portable_deadline, portable_error
from runtime import (
    ApprovalEntry,
    Budget,
    BudgetExceeded,
    HoneycombError,
    JournalEntry,
    LockTable,
    Model,
    ModelHTTPError,
    PendingApproval,
    Tool,
    ToolCall,
    ToolMessage,
    Tracer,
    Usage,
)
from runtime.limits import CallInFlight, Limits
from runtime.limits.budget import waited
from runtime.limits.cut import RunCut
from runtime.limits.quota import QuotaLeft
from runtime.limits.ratelimit import AdaptiveLimiter, retry_deadline
from runtime.model import ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.models.cassettes import Cassette, CassetteWriter, Recorded
from runtime.tools.define import arguments_text
from runtime.tools.journal import OnUnknown, Verdict
from workers import LoopState
from workers.guards import GuardCheck, Judge
from workers.services import Services


def served(
    sent: SentServices, link: Link, model: Model, summarizer: tuple[str, Model] | None
) -> tuple[Model, Services]:
    """A worker's model and services in the actor: its models reserve each call at the
    driver, and what lives there is asked for there."""
    at = sent.at_driver
    budget, slots = DriverBudget(link, sent.limits, sent.budget_settings), "model_slots" in at
    reserving = budget if sent.limits != Limits() else None
    link.heard = budget.told if reserving is not None else None
    models = {}
    if summarizer is not None:
        models[summarizer[0]] = ReservedModel(summarizer[1], link, slots, reserving)
    # Each event with when it happened: they reach the run in batches, late while a
    # tool here holds the event loop (or its threads the GIL), and are timed so there.
    # It holds text as the driver's does: a held answer's call is made whole.
    events = Tracer(
        lambda e: link.send("event", e, time.time()),
        log=False,
        text=sent.text,
        holds_text=sent.held,
    )
    return ReservedModel(model, link, slots, reserving), Services(
        run_id=sent.run_id,
        tracer=events if "events" in at else Tracer(log=False),  # the driver logs events
        budget=budget,
        locks=DriverLocks(link),
        tool_slots=DriverSlots(link, "tools") if "tool_slots" in at else None,
        approver=AtDriver("services.approver") if "approver" in at else sent.nobody,
        approval_timeout_s=sent.approval_timeout_s,
        guards=sent.guards,
        judge=DriverJudge() if "judge" in at else None,
        models=models,
        store=DriverStore(link, sent) if sent.journal is not None else None,
        cannot_wait=sent.cannot_wait,
    )


class Held:
    """Something held at the driver for the length of an ``async with`` here: an
    exclusive key, one of the run's slots, or an attempt's slot of a rate limiter
    (which is told when the attempt ended in a 429). A slot of the model's calls or of
    a rate limiter comes with what the run had spent as it was given, which the
    worker's budget is told (:attr:`Link.heard`): the calls that held it before may
    have spent the budget since this call was reserved."""

    def __init__(self, link: Link, what: str, key: str, *more: Any) -> None:
        self._link, self._what, self._key, self._more = link, what, key, more
        self._number: int | None = None

    async def __aenter__(self) -> bool:
        """Hold it there: True when it waited for it (a slot, none free then)."""
        self._number, waits, *spent = await self._link.ask(
            "hold", self._what, self._key, *self._more
        )
        if spent and self._link.heard is not None:
            self._link.heard(spent[0])
        return bool(waits)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._number is None:
            return
        if self._what == "limiter" and isinstance(exc, ModelHTTPError) and exc.status == 429:
            self._link.send("drop", self._number, portable_error(exc))
        else:
            self._link.send("drop", self._number, None)


class _Attempt(Held):
    """An attempt's slot of the driver's rate limiter: once given (after a slot, a
    cool-down, a paced start there), the attempt is sent only while its model call's
    budget holds, as in one process (:func:`~runtime.limits.budget.waited`); one it
    refuses is not an attempt the limiter learns from."""

    async def __aenter__(self) -> bool:
        waits = await super().__aenter__()
        try:
            waited()
        except BudgetExceeded as refused:
            self._link.send("drop", self._number, portable_error(refused))
            raise
        return waits


class DriverLimiter:
    """A rate limiter (an endpoint's, a :class:`~runtime.RateLimitedModel`'s) seen
    from an actor: each attempt holds a slot of the driver's limiter, shared by every
    worker that uses it wherever it runs, and what an attempt learnt goes back to it (a
    429, which slows every worker down; the quota an answer reported). A cool-down is
    sat out at the driver, before the slot is given."""

    def __init__(self, key: str) -> None:
        self.key = key

    @property
    def cooldown_left_s(self) -> float:
        return 0.0

    @property
    def cooled_by(self) -> ModelHTTPError | None:  # no cool-down here: the driver's
        return None

    def attempt(self) -> Held:
        # A cool-down or a paced start there holds a retry no longer than its
        # deadline, which the retry policy set here for this attempt.
        return _Attempt(here.get(), "limiter", self.key, portable_deadline(retry_deadline.get()))

    def observe(self, quota: QuotaLeft | None, *, tokens: int | None = None) -> None:
        here.get().send("observe", self.key, quota, tokens)


class DriverCassette:
    """A recording's cassette (a :class:`~runtime.models.cassettes.CassetteWriter`)
    seen from an actor: each call a recording model makes here is appended to the
    driver's, the one file every worker's calls go to, masked there with the driver's
    secrets. Its model was recorded at the driver, as it was made."""

    def __init__(self, key: str) -> None:
        self.key = key

    def call(self, recorded: Recorded) -> None:
        here.get().send("record", self.key, recorded)

    def stopping(self) -> bool:
        """Whether the run of the worker asking is stopping its workers, as the
        driver said as it cancelled the worker here: a call cut off then is recorded
        ``cancelled`` (see :func:`~runtime.models.cassette_held.run_stopping`)."""
        return here.get().stopping

    def cut(self, used: float, case: str | None, worker: str | None = None) -> None:
        """Nothing is sent: the run's wall time (the worker's limit) is cut at the
        driver, whose cut tells the writer there (see :class:`CutAtDriver`)."""


class CutAtDriver(RunCut):
    """The cuts of the run's wall time and of the worker's time limit, seen from an
    actor: they fall at the driver, which says so (:meth:`fell`, the seconds used) as
    it cancels the worker here, so that a recording model's call cut off is recorded
    ``cut``; a cassette told of them here (:meth:`tell`) is the driver's, which the
    cuts there tell."""

    __slots__ = ("_link", "_told_there")

    def __init__(self, link: Link) -> None:
        super().__init__(self._falls_there)
        self._link = link
        self._told_there: set[str] = set()

    def tell(self, told: Callable[[float], None], key: object) -> None:
        if isinstance(key, DriverCassette) and key.key not in self._told_there:
            self._told_there.add(key.key)
            self._link.send("cut_told", key.key)

    def _falls_there(self, used: float | None) -> None:
        raise AssertionError("the run's wall time is cut at the driver, not in an actor")


class DriverReplay:
    """A replay's cassette (a :class:`~runtime.models.cassettes.Cassette`) seen from an
    actor: each answer is asked of the driver's, which gives each recorded call once
    across every worker of every actor (a copy in each would give the first to each)."""

    def __init__(self, key: str, path: Path) -> None:
        self.key, self.path = key, path

    async def answered(
        self, model: str, request: ModelRequest, *, worker: str | None, case: str | None
    ) -> Recorded:
        found: Recorded = await at_driver(
            "cassette", self.key, model, request, worker=worker, case=case
        )
        return found

    async def cancelled_off(
        self, model: str, request: ModelRequest, *, worker: str | None, case: str | None
    ) -> Recorded:
        """A call its worker was cancelled in when recorded: held by the driver's
        cassette until the run stops the worker here (it is cancelled then), or answered
        there as a later life of its run answered it.

        Raises:
            CassetteMismatch: when nothing stops it and no later life answered it.
        """
        found: Recorded = await at_driver(
            "cassette_cancelled", self.key, model, request, worker=worker, case=case
        )
        return found

    async def cut_off(
        self, model: str, call: Recorded | None, *, worker: str | None, case: str | None
    ) -> NoReturn:
        """A call the recorded run's wall time cut off: held by the driver's cassette
        until the run's cut falls there (its worker here is cancelled then).

        Raises:
            CassetteMismatch: when the replayed run has no wall-time budget to cut.
        """
        await at_driver("cassette_cut", self.key, model, call, worker=worker, case=case)
        raise AssertionError("unreachable: only the run's cut ends the wait")


StoodFor: TypeAlias = AdaptiveLimiter | CassetteWriter | Cassette
"""What the stand-ins of a worker's models in an actor stand for, at the driver."""


class DriverLocks(LockTable):
    """The driver's lock table, seen from an actor."""

    def __init__(self, link: Link) -> None:
        super().__init__()
        self._link = link

    def lock(self, key: str) -> anyio.Lock:
        return cast(anyio.Lock, Held(self._link, "lock", key))


class DriverSlots:
    """The run's slots of ``what`` (``tools``, ``model``) at the driver, seen from an
    actor: each ``async with`` holds one there."""

    def __init__(self, link: Link, what: str) -> None:
        self._link, self._what = link, what
        self._held: list[Held] = []

    async def __aenter__(self) -> bool:
        held = Held(self._link, self._what, "")
        waits = await held.__aenter__()
        self._held.append(held)
        return waits

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._held.pop().__aexit__(kind, exc, tb)


class DriverBudget(Budget):
    """The run's budget, seen from an actor: the driver reserves each model call (see
    :class:`ReservedModel`) and each turn's tool calls, and is told what was spent and
    given back; its limits are the run's, and so is where each is set (its refusals
    here name it, as the driver's do).

    Each reservation's answer says what the run had spent then (:meth:`told`), and so
    does the driver's answer before each retry of a model call (:meth:`heard_now`) and
    after each wait (:meth:`recheck`): :meth:`check` checks that, with what this worker
    spent since, so that a retry is not sent, nor a call once it waited, once the run's
    budget is spent, by whichever worker, as in one process."""

    def __init__(
        self, link: Link, limits: Limits, settings: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(limits, settings=settings)
        self._link = link
        self._ask = limits != Limits()  # no limit to check: counted without waiting
        # A wall time that runs out tells the model calls it cut off: the driver's.
        self._tells_calls = limits.wall_time_s is not None
        self._heard = _Heard(self)  # one for every view of it (:meth:`named`)

    def check(self, *, calls: int = 1) -> None:
        """Raise if the run's budget, as last told, with what this worker spent since,
        is spent (for ``calls`` more model calls, as :meth:`Budget.check` says).

        Raises:
            BudgetExceeded: naming the limit, what is allowed and what was used.
        """
        self._heard.budget.check(calls=calls)

    async def heard_now(self) -> None:
        """Ask the driver what the run has spent now (before a retry: see
        :data:`~runtime.limits.retry.before_retry`), for :meth:`check` to check."""
        if self._ask:
            self.told(await self._link.ask("spent"))

    async def recheck(self, *, calls: int = 1) -> None:
        """:meth:`check`, with what the driver says the run has spent now: the other
        workers and the judges spent there while this one waited (for a person's
        decision, its judges; a slot's answer says it: :class:`ReservedModel`).

        Raises:
            BudgetExceeded: as :meth:`check` does.
        """
        await self.heard_now()
        self.check(calls=calls)

    def told(self, spent: SpentAtDriver | None) -> None:
        """What the run had spent as the driver answered a reservation (None: not
        said)."""
        if spent is not None:
            self._heard.told(*spent)

    def reserve_model_call(self) -> None:
        """Counted at the driver, as the model call is made."""

    def call_started(self, call: CallInFlight) -> None:
        super().call_started(call)
        if self._tells_calls:
            self._link.send("call_started", id(call), call.who, call.kind, call.turn)

    def call_ended(self, call: CallInFlight) -> None:
        super().call_ended(call)
        if self._tells_calls:
            self._link.send("call_ended", id(call))

    async def reserve_tool_calls(self, count: int, *, read: bool = True) -> None:
        """Reserved in the run's budget at the driver before any call of the turn runs
        (no two workers of any actor slip past the last allowed call), and counted
        here, as the worker's.

        Raises:
            BudgetExceeded: when the run's budget refused them.
        """
        if self._ask:
            self.told(await self._link.ask("reserve_tools", count, read))
        else:
            self._link.send("reserve_tools", count)
        super().reserve_tool_calls_now(count, read=read)

    def release_tool_calls(self, count: int) -> None:
        super().release_tool_calls(count)
        self._link.send("release_tools", count)

    def settle_tool_calls(self, reserved: int, ran: int) -> None:
        super().settle_tool_calls(reserved, ran)
        self._link.send("settle_tools", reserved, ran)

    def charge(self, usage: Usage) -> None:
        super().charge(usage)
        self._heard.budget.charge(usage)
        self._link.send("charge", usage)


SpentAtDriver = tuple[Usage, float]
"""What a run had spent as the driver answered a reservation: its usage, and the
seconds of wall time it had run."""


class _Heard:
    """The run's spending as a worker in an actor last heard of it, and what the worker
    spent since: a budget of the run's limits, made again each time it is told."""

    def __init__(self, budget: Budget) -> None:
        self.limits, self.settings = budget.limits, budget.settings  # its refusals named
        self.budget = Budget(self.limits, settings=self.settings)

    def told(self, usage: Usage, elapsed_s: float) -> None:
        heard = Budget(self.limits, settings=self.settings)
        heard.restore(usage, wall_s=elapsed_s)
        self.budget = heard


class ReservedModel(WrapperModel):
    """A model whose every call is first reserved in the run's budget at the driver
    (and, when the driver bounds the model's calls in flight, holds a slot there)."""

    def __init__(
        self, inner: Model, link: Link, limited: bool, budget: DriverBudget | None
    ) -> None:
        """``budget``: the worker's, told what the run had spent as each call is
        reserved (None: the run has no limit, and each call is counted there, without
        waiting)."""
        super().__init__(inner)
        self._link = link
        self._limited = limited
        self._budget = budget

    def __repr__(self) -> str:  # what errors name: the model, as without Ray
        return repr(self.inner)

    async def _reserved(self) -> None:
        if self._budget is not None:
            self._budget.told(await self._link.ask("reserve"))
        else:  # no limit to check: counted, without waiting for the driver
            self._link.send("count")

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self._reserved()
        if not self._limited:
            return await self.inner.complete(request)
        async with self._slot():
            return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        await self._reserved()
        if not self._limited:
            return await call_model(self.inner, request, on_text)
        async with self._slot():
            return await call_model(self.inner, request, on_text)

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """A slot of the run's model calls in flight, held at the driver; the call,
        reserved before, is sent only while the run's budget holds as the slot is
        given, as in one process a call that waited for it (see
        :class:`~runtime.limits.LimitedModel`): the calls that held the slots since its
        reservation may have spent it, whether this one waited for the slot or asked
        for it only once they were done (its reservation and its slot are two requests
        here, where one process takes both at once).

        Raises:
            BudgetExceeded: when the run's budget was spent meanwhile (nothing is sent).
        """
        async with Held(self._link, "model", ""):  # (its budget told what was spent)
            if self._budget is not None:
                self._budget.check(calls=0)  # counted as it was reserved
            yield


class DriverStore:
    """A worker's part of the run's store, at the driver: its checkpoint (each turn's
    state, sent in order), its journal and approval log (what was kept so far comes
    with the worker; what is kept now is durable there before this returns)."""

    def __init__(self, link: Link, sent: SentServices) -> None:
        self._link = link
        self._entries: Mapping[tuple[int, str], JournalEntry] = sent.journal or {}
        self.on_unknown: OnUnknown = sent.on_unknown
        self.scope = sent.scope
        self.approvals = DriverApprovals(sent.decisions or {})

    def save(self, state: LoopState) -> None:
        self._link.send("save", state)

    async def flush(self) -> None:
        """Return once the states sent so far are kept at the driver."""
        await self._link.ask("services.store.flush")

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self._entries.get((turn, call_id))

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        plain = json.loads(arguments_text(arguments))  # as JSON values: what any process reads
        await self._link.ask("services.store.intent", turn, call, plain)

    async def outcome(self, turn: int, observation: ToolMessage) -> None:
        await self._link.ask("services.store.outcome", turn, observation)

    async def judged(self, turn: int, verdicts: Sequence[Verdict]) -> None:
        plain = [(c, json.loads(arguments_text(a)), text) for c, a, text in verdicts]
        await self._link.ask("services.store.judged", turn, plain)


class DriverApprovals:
    """A worker's approval log at the driver: what was asked and decided in its earlier
    lives comes with it; what is kept now is durable there before this returns."""

    def __init__(self, entries: Mapping[tuple[int, str], ApprovalEntry]) -> None:
        self._entries = dict(entries)

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self._entries.get((turn, call_id))

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        stands = cast(ApprovalEntry, await at_driver("services.store.approvals.record", entry))
        self._entries[entry.pending.turn, entry.pending.call_id] = stands
        return stands

    async def decided(self, pending: PendingApproval) -> ApprovalEntry:
        found = cast(ApprovalEntry, await at_driver("services.store.approvals.decided", pending))
        self._entries[pending.turn, pending.call_id] = found
        return found


class AtDriver:
    """Something that lives at the driver, seen from an actor: calling it (or one of
    its methods) makes the call there, by its path in the worker's services
    (``services.approver``) or setup (``setup.memory``), and waits for the answer."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> AtDriver:
        return AtDriver(f"{self._path}.{name}")

    async def __call__(self, *args: Any, **options: Any) -> Any:
        return await at_driver(self._path, *args, **options)


class DriverJudge(Judge):
    """The run's judge, at the driver: judge roles think with the run's models, under
    its budget."""

    def __init__(self) -> None:
        super().__init__({}, _no_model)

    async def ask(
        self, role_name: str, check: GuardCheck, up: int = 0
    ) -> tuple[str | None, Usage, str]:
        # Cut off here (its worker cancelled, the run's wall time out), it is cut off
        # there too, and says what it spent, which its guard reports.
        answer = await here.get().ask_spending("services.judge.ask", role_name, check, up)
        return cast(tuple[str | None, Usage, str], answer)


def _no_model(role: Any) -> Model:
    raise HoneycombError("a judge's model is at the driver")


_CONTEXT = "_honeycomb_call"
"""Where a pinned tool that takes no context is given its call's here: the driver knows
each call by its turn and call id (see :class:`~._pinned.PinnedCalls`)."""


def stand_in(pinned: Pinned) -> Tool[Any, Any]:
    """A pinned tool in the actor: it checks only that the arguments are an object with
    the required keys (the driver validates them as the tool does), and its calls are
    made at the driver, each with its context (its turn and call id), whether or not
    the tool takes it."""
    name, own = pinned.options["name"], pinned.context_param

    async def call(**kwargs: Any) -> Any:
        context = kwargs.get(own) if own is not None else kwargs.pop(_CONTEXT, None)
        return await at_driver("tool", name, kwargs, context)

    made: Tool[..., Any] = Tool(call, **pinned.options)
    made.context_param = own or _CONTEXT
    return made
