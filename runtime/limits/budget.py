"""Budgets shared by every worker of a run, checked before each model call."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import Annotated, Protocol

from msgspec import Meta

from runtime.errors import BudgetExceeded
from runtime.messages import Usage
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.value import Settings, Value

__all__ = [
    "Budget",
    "CallInFlight",
    "InFlight",
    "LimitedModel",
    "Limits",
    "Slots",
    "attempting",
    "calls_to_read",
    "limited",
    "retried",
    "timed_out",
    "waited",
]


class Limits(Settings, frozen=True, kw_only=True):
    """What a run may spend across all its workers, the planner and the aggregator
    included (``policy.budgets`` of a hive); ``None`` means unlimited. Checked before
    every model call and every turn of tool calls: going past one ends the run with
    ``BudgetExceeded``, carrying the partial results. Tokens and cost are known only
    once a call answers, so the calls under way when one of those is reached can take
    the run past it (see :meth:`Budget.overspent`).

    Attributes:
        model_calls: Model calls across all workers, each counted as it starts, before
            it waits for room (a slot, its rate limiter): one refused after that wait,
            or cut off in it, counts though it was never sent (its tokens do not).
        total_tokens: Input plus output tokens across all workers.
        tool_calls: Tool calls across all workers that got their answers: run, or
            refused (denied by a person, by a guard ...), not a repeat skipped.
        wall_time_s: Seconds the run has run: a resumed run's lives' together, not
            the time between them (waiting for a decision, or a restart).
        cost: Dollars across all workers (from the models' prices).
        cost_per_call: Dollars one model call may cost at most (from its model's
            price): its output limit is lowered to what its prompt leaves, and a call
            whose prompt alone would cost more is not made (see
            :mod:`runtime.models.layers.cost_cap`).
    """

    model_calls: Annotated[int, Meta(ge=1)] | None = None
    total_tokens: Annotated[int, Meta(ge=1)] | None = None
    tool_calls: Annotated[int, Meta(ge=1)] | None = None
    wall_time_s: Annotated[float, Meta(gt=0)] | None = None
    cost: Annotated[float, Meta(gt=0)] | None = None
    cost_per_call: Annotated[float, Meta(gt=0)] | None = None


class InFlight(Value, frozen=True, kw_only=True):
    """A call that was under way at some moment (a model call, or a function guard's
    check): whose, what it was, for how long, and the tokens it had streamed (None:
    not streamed, not known)."""

    who: str
    kind: str
    turn: int
    seconds: float
    streamed: int | None = None

    def __str__(self) -> str:
        """``planner turn 1 (119.9s, ~2650 tokens streamed)``."""
        streamed = f", ~{self.streamed} tokens streamed" if self.streamed is not None else ""
        detail = f"({self.seconds:.1f}s{streamed})"
        if self.kind == "turn":
            return f"{self.who} turn {self.turn} {detail}"
        if self.kind == "summary":
            return f"{self.who}'s summary call before turn {self.turn} {detail}"
        if self.kind == "session summary":  # in the planner's lane: not the planner's own
            return f"the session's summary call, before the turn is planned {detail}"
        return f"{self.kind} {self.who} {detail}"


class CallInFlight:
    """One call under way, while it is (see :meth:`Budget.call_started`): a model call,
    or a function guard's check, which a stopped run names as it names model calls."""

    # benchmark E: one per model call in flight (A at N=10000 has 10,000), no instance dict
    __slots__ = ("kind", "pieces", "started", "timeouts", "turn", "who")

    def __init__(self, who: str, kind: str, turn: int) -> None:
        """A call of ``who`` (a worker, ``planner``, ``aggregator``), of ``kind``
        (``turn``, ``summary``, ``judge``, ``guard``), in turn ``turn``, starting now."""
        self.who, self.kind, self.turn = who, kind, turn
        self.started = time.monotonic()
        self.pieces: int | None = None  # streamed pieces of text, once one came
        self.timeouts = 0  # attempts its endpoint did not answer in time (:func:`timed_out`)

    def timed_out(self) -> None:
        """An attempt of the call was cut off by its timeout (:func:`timed_out`): counted,
        unless the call streamed text (that attempt's prompt counts with its text)."""
        if self.pieces is None:
            self.timeouts += 1

    def retried(self) -> None:
        """Another attempt of the call is about to be sent (:func:`retried`)."""

    def streamed(self, text: str) -> None:
        """One more piece of the answer's text came (about a token, as servers send)."""
        if text:
            self.pieces = (self.pieces or 0) + 1

    def seen(self, now: float, prefix: str = "") -> InFlight:
        """The call as it is at ``now``, its worker's name after ``prefix``."""
        return InFlight(
            who=f"{prefix}{self.who}",
            kind=self.kind,
            turn=self.turn,
            seconds=now - self.started,
            streamed=self.pieces,
        )


attempting: ContextVar[CallInFlight | None] = ContextVar("honeycomb_attempting", default=None)
"""The model call whose attempts the current task makes, while one is counted (a
:class:`~runtime.models.layers.ModelCall` with a budget or a tracer sets it)."""


def timed_out() -> None:
    """The attempt at an endpoint the current task was making was cut off by its timeout
    (an adapter says so as it gives the attempt up; a model that does says it tells,
    :func:`runtime.model.tells_attempts`): the endpoint had its request, and
    bills the prompt whether or not anyone waits for the answer. An attempt whose stream
    broke off after its endpoint answered 200, before its answer, is told alike: it was
    billed as much. The model call counts
    it (:attr:`CallInFlight.timeouts`; its budget charges it at once) unless it had
    streamed text: then the attempt's prompt and text are counted as the streamed
    call's."""
    call = attempting.get()
    if call is not None:
        call.timed_out()


def retried() -> None:
    """The current task's model call is about to send another attempt (its retry
    policy says so, in a model that tells: :func:`runtime.model.tells_attempts`), or
    its first after a wait for room (:func:`waited`): a run whose budget is spent sends
    none.

    Raises:
        BudgetExceeded: when the call's budget is spent (nothing is sent then).
    """
    call = attempting.get()
    if call is not None:
        call.retried()


def waited() -> None:
    """The current task's model call has room to send an attempt, after a wait for it
    (a slot of the run's ``model_concurrency``, a start of its rate limiter): the calls
    that went first may have spent the budget meanwhile, and a call counted before its
    wait is not sent past it (as a retry is not: :func:`retried`).

    Raises:
        BudgetExceeded: when the call's budget is spent (nothing is sent then).
    """
    retried()


class Ends(Protocol):
    """A tool, as far as a turn's budget goes: whether its result ends its worker."""

    @property
    def terminal(self) -> bool: ...


def calls_to_read(tools: Iterable[Ends]) -> int:
    """The model calls a turn of calls of ``tools`` needs once they ran, for
    :meth:`Budget.check`: one to read their results, none when one of them is a
    terminal tool's (its result is the answer)."""
    return 0 if any(tool.terminal for tool in tools) else 1


class _Spent:
    """What a run has spent and has under way: one for the run, shared by every view of
    its budget (:meth:`Budget.named`)."""

    __slots__ = (
        "cached",
        "calls",
        "cost",
        "input",
        "model_calls",
        "on_spend",
        "output",
        "reasoning",
        "started",
        "tool_calls",
        "tools_running",
    )

    def __init__(self) -> None:
        self.input = self.output = self.model_calls = self.tool_calls = self.reasoning = 0
        self.cached = 0
        self.cost = 0.0
        self.started = time.monotonic()
        self.on_spend: Callable[[], None] | None = None
        # The model calls under way, each with the prefix of the name it is reported by.
        self.calls: dict[CallInFlight, str] = {}
        self.tools_running = 0  # tool calls reserved whose turn has not settled them


class Budget:
    """The spending of one run against its :class:`Limits`.

    :meth:`reserve_model_call` checks every limit and counts the call in the same
    step (no await in between), so concurrent workers cannot all slip past the last
    allowed call. Tokens and cost are known only afterwards and are added by
    :meth:`charge`: calls under way together can take the run past ``total_tokens`` or
    ``cost``, by what they spend; no call starts after that, and :meth:`overspent`
    tells a run that ended past a limit.

    A resumed run's budget starts from what its earlier lives spent (:meth:`restore`),
    its wall time from the time they ran. A sub-run spends its caller's budget as
    :meth:`named` gives it.

    Every refusal it makes names where its limit is set (:meth:`refusal`), as it is
    made: whatever keeps or tells it afterwards (a worker's error, an event, a store)
    says so too.

    Attributes:
        on_spend: Called (in the event loop, with nothing) after each spend is counted:
            what keeps a stored run's spending in its store as it goes.
        settings: Where each limit is set, by its name, as its writer wrote it
            (``policy.budgets.cost at hive.yaml:7``, ``Budgets(cost=0.5)``); a limit
            not in it is named by none.
    """

    def __init__(
        self, limits: Limits | None = None, *, settings: Mapping[str, str] | None = None
    ) -> None:
        self.limits = limits or Limits()
        self.settings: Mapping[str, str] = settings or {}
        self._spent = _Spent()
        self._prefix = ""  # of the names its calls in flight are reported by

    def named(self, prefix: str) -> Budget:
        """This budget as a sub-run of its run spends it (a hive called as a tool): the
        same limits, spending and calls in flight, but the calls made through it are
        reported (:meth:`in_flight`) as the run names their workers: ``prefix`` (of
        this budget's own, for a sub-run's sub-run) and the name the sub-run gives."""
        view = copy.copy(self)  # a Ray actor's budget stays one, told of the same calls
        view._prefix = f"{self._prefix}{prefix}"
        return view

    def refusal(self, refused: BudgetExceeded) -> BudgetExceeded:
        """``refused``, a refusal of one of this budget's limits, naming where the limit
        is set (:attr:`settings`) unless it does already: this budget's own, and one
        made elsewhere (a call's cost cap), as a run first sees it (a Ray actor's budget
        has the run's settings, and a refusal crosses named)."""
        setting = self.settings.get(refused.limit)
        if refused.setting is None and setting is not None:
            refused.set_by(setting)
        return refused

    @property
    def on_spend(self) -> Callable[[], None] | None:
        return self._spent.on_spend

    @on_spend.setter
    def on_spend(self, called: Callable[[], None] | None) -> None:
        self._spent.on_spend = called

    @property
    def usage(self) -> Usage:
        """Everything spent so far."""
        spent = self._spent
        return Usage(
            input_tokens=spent.input,
            output_tokens=spent.output,
            model_calls=spent.model_calls,
            tool_calls=spent.tool_calls,
            cost=spent.cost,
            reasoning_tokens=spent.reasoning,
            cached_input_tokens=spent.cached,
        )

    @property
    def tool_calls_running(self) -> int:
        """Tool calls counted as reserved whose turn has not yet settled them: a store
        keeps the spending without them, for a life cut off in the middle of a turn
        has its resumed run make that turn's calls, and count them, again."""
        return self._spent.tools_running

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._spent.started

    def check(self, *, calls: int = 1) -> None:
        """Raise if any limit is already reached, for a step that makes ``calls`` more
        model calls: a model call, or a turn of tool calls whose answers one reads (1);
        another attempt of a call counted as it was made, or an embeddings call (0:
        neither is one of ``model_calls``, so the last call it allows is retried, and
        its answer kept in a memory).

        Raises:
            BudgetExceeded: naming the limit, what is allowed and what was used.
        """
        refused = self._reached(calls)
        if refused is not None:
            raise self.refusal(refused)

    def _reached(self, calls: int) -> BudgetExceeded | None:
        """What :meth:`check` raises, not yet named (None: nothing is reached)."""
        lim, spent = self.limits, self._spent
        if lim.model_calls is not None and spent.model_calls + calls > lim.model_calls:
            return BudgetExceeded("model_calls", lim.model_calls, spent.model_calls)
        tokens = spent.input + spent.output
        if lim.total_tokens is not None and tokens >= lim.total_tokens:
            return BudgetExceeded("total_tokens", lim.total_tokens, tokens)
        if lim.tool_calls is not None and spent.tool_calls > lim.tool_calls:
            return BudgetExceeded("tool_calls", lim.tool_calls, spent.tool_calls)
        if lim.wall_time_s is not None and self.elapsed_s >= lim.wall_time_s:
            return BudgetExceeded("wall_time_s", lim.wall_time_s, round(self.elapsed_s, 3))
        if lim.cost is not None and spent.cost >= lim.cost:
            return BudgetExceeded("cost", lim.cost, round(spent.cost, 6))
        return None

    async def recheck(self, *, calls: int = 1) -> None:
        """:meth:`check`, after a wait (a person's decision, a judge's, a slot) in which
        the run's other workers may have spent. Awaited, for a budget kept in another
        process asks there what the run has spent now (a Ray actor's worker's).

        Raises:
            BudgetExceeded: as :meth:`check` does.
        """
        self.check(calls=calls)

    def overspent(self) -> BudgetExceeded | None:
        """The error for ``total_tokens`` or ``cost`` if the spending went past it, not
        merely reached it (else None): the calls under way when it was reached still
        add what they spent. The next reservation is refused then; this tells a run
        with no next call that it ended over its budget, not within it."""
        lim, spent = self.limits, self._spent
        tokens = spent.input + spent.output
        over = None
        if lim.total_tokens is not None and tokens > lim.total_tokens:
            over = BudgetExceeded("total_tokens", lim.total_tokens, tokens)
        cost = round(spent.cost, 6)  # as reported: a sum of prices is not exact
        if over is None and lim.cost is not None and cost > lim.cost:
            over = BudgetExceeded("cost", lim.cost, cost)
        return self.refusal(over) if over is not None else None

    def reserve_model_call(self) -> None:
        """Check every limit, then count one model call.

        Raises:
            BudgetExceeded: when a limit is reached; nothing is counted then.
        """
        self.check()
        spent = self._spent
        spent.model_calls += 1
        if spent.on_spend is not None:
            spent.on_spend()

    def call_started(self, call: CallInFlight) -> None:
        """A call starts (a model call, a function guard's check): it is in flight
        until :meth:`call_ended` (what a stopped run reports of its calls)."""
        self._spent.calls[call] = self._prefix

    def call_ended(self, call: CallInFlight) -> None:
        self._spent.calls.pop(call, None)

    def in_flight(self) -> tuple[InFlight, ...]:
        """The calls under way now, the longest first, each named as the run
        names its worker (a sub-run's as :meth:`named` says)."""
        now = time.monotonic()
        seen = (call.seen(now, prefix) for call, prefix in self._spent.calls.items())
        return tuple(sorted(seen, key=lambda c: -c.seconds))

    def in_flight_of(self, worker: str) -> tuple[InFlight, ...]:
        """The calls under way now of the worker this budget's run names ``worker``, as
        :meth:`in_flight` names them: its model calls, its guards' checks and its
        judges' calls (``judge reviewer of s1``), and those of the nested workers and
        sub-runs its tool calls started (``s1/call_1``)."""
        own, now = f"{self._prefix}{worker}", time.monotonic()
        seen = (
            call.seen(now, prefix)
            for call, prefix in self._spent.calls.items()
            # A check names the worker it checks after " of " (a guard's, a judge's).
            if (whose := prefix + call.who.rsplit(" of ", 1)[-1]) == own
            or whose.startswith(f"{own}/")
        )
        return tuple(sorted(seen, key=lambda c: -c.seconds))

    def charge(self, usage: Usage) -> None:
        """Add tokens, tool calls and cost spent (model calls are counted on reserve)."""
        spent = self._spent
        spent.input += usage.input_tokens
        spent.output += usage.output_tokens
        spent.tool_calls += usage.tool_calls
        spent.cost += usage.cost
        spent.reasoning += usage.reasoning_tokens
        spent.cached += usage.cached_input_tokens
        if spent.on_spend is not None:
            spent.on_spend()

    async def reserve_tool_calls(self, count: int, *, read: bool = True) -> None:
        """Check every limit, and that ``count`` more tool calls fit, then count them: a
        turn's calls, before any of them runs (no two workers slip past the last
        allowed call, and no call runs that no model call could read the result of:
        ``read``, unless one of them may end the worker, a terminal tool, whose result
        is its answer). Awaited, for a budget kept in another process (a Ray actor's
        worker's is the driver's) asks there.

        Raises:
            BudgetExceeded: when a limit is reached, or the calls would go past the
                run's ``tool_calls``; nothing is counted then.
        """
        self.reserve_tool_calls_now(count, read=read)

    def reserve_tool_calls_now(self, count: int, *, read: bool = True) -> None:
        """:meth:`reserve_tool_calls`, in this budget itself.

        Raises:
            BudgetExceeded: as :meth:`reserve_tool_calls` does.
        """
        self.check(calls=1 if read else 0)
        allowed, spent = self.limits.tool_calls, self._spent
        if allowed is not None and spent.tool_calls + count > allowed:
            refused = BudgetExceeded(
                "tool_calls",
                allowed,
                spent.tool_calls,
                requested=count,
                running=spent.tools_running,
            )
            raise self.refusal(refused)
        spent.tools_running += count
        self.charge_tool_calls(count)

    def release_tool_calls(self, count: int) -> None:
        """Give back ``count`` reserved tool calls that did not run (a skipped repeat,
        a turn paused for approval)."""
        self._spent.tools_running -= count
        self.charge_tool_calls(-count)

    def settle_tool_calls(self, reserved: int, ran: int) -> None:
        """A turn's ``reserved`` tool calls have their observations: ``ran`` of them
        ran, and the others (skipped repeats) are given back."""
        self._spent.tools_running -= reserved
        self.charge_tool_calls(ran - reserved)

    def charge_tool_calls(self, count: int) -> None:
        spent = self._spent
        spent.tool_calls += count
        if spent.on_spend is not None:
            spent.on_spend()

    def restore(self, usage: Usage, wall_s: float = 0.0) -> None:
        """Count what the earlier lives of a resumed run spent, model calls included,
        and the time they ran (``wall_s``: not the time between them, waiting for a
        decision or a restart)."""
        self.charge(usage)
        self._spent.model_calls += usage.model_calls
        self._spent.started -= wall_s


class Slots(Protocol):
    """A bound on calls in flight, shared by whoever holds it: ``async with slots``
    holds one (a :class:`~runtime.concurrency.LoopSlots`, an ``anyio.CapacityLimiter``;
    in a Ray actor, a slot held at the driver), and says whether it waited for it
    (None: not known)."""

    async def __aenter__(self) -> bool | None: ...

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> bool | None: ...


class LimitedModel(WrapperModel):
    """A model whose calls in flight are bounded by slots shared with other models. A
    call that waited for its slot is sent only while its budget holds (:func:`waited`):
    the calls that held the slots meanwhile may have spent it. One that had it at once
    is not checked again: nothing was spent since it was reserved."""

    tells_attempts = True  # its calls that waited for a slot (runtime.model.tells_attempts)

    def __init__(self, inner: Model, limiter: Slots) -> None:
        super().__init__(inner)
        self.limiter = limiter

    async def complete(self, request: ModelRequest) -> ModelResponse:
        async with self.limiter as waits:
            if waits is not False:
                waited()
            return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        async with self.limiter as waits:
            if waits is not False:
                waited()
            return await call_model(self.inner, request, on_text)


def limited(model: Model, limiter: Slots | None) -> Model:
    """``model`` with its calls in flight bounded by ``limiter`` (None: unbounded)
    instead of by the limiter a :class:`LimitedModel` bounded them with."""
    inner = model.inner if isinstance(model, LimitedModel) else model
    return inner if limiter is None else LimitedModel(inner, limiter)
