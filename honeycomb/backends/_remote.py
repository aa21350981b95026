"""The actor side of the Ray backend: workers running in an actor's event loop, each
talking to the driver through one stream of messages.

A worker here is an ordinary :class:`~workers.Worker`; what it shares with the rest of
the run lives at the driver and is reached through stand-ins:

- its budget: each model call is reserved at the driver before it is made (the
  model is wrapped); what calls spent is sent back as it is known;
- exclusive locks and the run's tool and model limiters: held at the driver, for
  the time the call runs;
- its journal: an intent is made durable at the driver before the call runs, and so
  is the outcome; the entries of earlier lives come with the worker;
- its checkpoint and events: sent in order, in batches (a turn's state before the
  next turn's journal intents, since the stream keeps order).

Every worker of an actor shares the actor's two calls with the driver (see
:class:`Hive`), so a message costs no call of its own: what piles up while the driver
reads one batch is the next batch.

This module imports no Ray: the driver makes the actor class of :class:`Hive`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import importlib
import itertools
import json
import os
import pickle
import threading
from collections.abc import Coroutine, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar, cast

import anyio
from pydantic import BaseModel

from runtime import (
    ApprovalEntry,
    ApprovalRequest,
    Budget,
    BudgetExceeded,
    Decision,
    HoneycombError,
    JournalEntry,
    LockTable,
    MemoryHit,
    MemoryRecord,
    Model,
    Tool,
    ToolCall,
    ToolMessage,
    ToolRegistry,
    Tracer,
    Usage,
)
from runtime.journal import OnUnknown, arguments_text
from runtime.memory import DEFAULT_NAMESPACE, MemoryKind
from runtime.model import ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from workers import LoopState, Role, Worker, WorkerError, WorkerResult, WorkerSetup
from workers.guards import GuardCheck, Judge, ResolvedGuards

__all__ = ["Hive", "Pinned", "RemoteFailure", "WorkerSpec", "portable_error", "raised"]

T = TypeVar("T")

Message = tuple[Any, ...]
"""One message of a worker's stream: ``(kind, *payload)``."""


class RemoteFailure(HoneycombError):
    """What the driver answered a worker's request with, when it failed there (other
    than a budget, which comes back as :class:`BudgetExceeded` itself)."""


def portable_error(exc: BaseException) -> tuple[str, Any]:
    """An error that crosses a process and comes back the same (see :func:`raised`):
    itself, when it pickles and is made again as itself (a tool's ``ModelRetry``, say),
    else as plain values."""
    if isinstance(exc, BudgetExceeded):
        return ("budget", (exc.limit, exc.allowed, exc.used))
    try:
        pickle.dumps(exc)  # its class importable where it goes ...
        again = copy.deepcopy(exc)  # ... and made again from what is pickled
    except Exception:
        again = None
    if type(again) is type(exc) and str(again) == str(exc):
        return ("raised", again)
    return ("error", f"{type(exc).__name__}: {exc}")


def raised(error: tuple[str, Any]) -> Exception:
    """The error :func:`portable_error` made portable."""
    kind, value = error
    if kind == "budget":
        return BudgetExceeded(*value)
    if kind == "raised":
        return cast(Exception, value)
    return RemoteFailure(str(value))


@dataclass(frozen=True, kw_only=True)
class WorkerSpec:
    """One worker to run in an actor: what it is and what it starts from.

    Attributes:
        name: The worker's name (the subtask id).
        run_id: The run it belongs to.
        setup: The key of its role's setup, installed in the actor before.
        model: The key of its model, installed before.
        summarizer: The key of its summarizer, if it has one of its own.
        task: The subtask's instruction.
        inputs: The results of the subtasks it depends on.
        resume: The state it continues from (a checkpoint, or a paused worker's).
        journal: Its journaled calls so far (None: it has no journal).
        on_unknown: What a call with an intent and no outcome does.
        checkpoint: Whether its state is sent to the driver every turn.
        events: Whether its events are sent to the driver; ``text`` for streamed text.
        text: The driver's handlers want answers' text as it is written.
        reserve: Whether model calls are reserved at the driver before they are made
            (the run has limits); else each is counted there as it is made.
        tool_limiter: Whether the run bounds tool calls in flight (at the driver).
        model_limiter: Whether the model's calls in flight are bounded at the driver.
        approvals: Its calls asked about so far and their decisions (None: it keeps
            no approval log); new ones are kept at the driver.
        approver: Whether calls needing approval are decided by the run's approver
            (at the driver; else they wait).
        approval_timeout_s: Seconds a call waits for a decision.
        guards: The run's argument guards (its role's come with its setup).
        judge: Whether guards naming a judge role ask the driver's judge.
    """

    name: str
    run_id: str
    setup: str
    model: str
    summarizer: str | None
    task: str
    inputs: Mapping[str, str] | None
    resume: LoopState | None
    journal: Mapping[tuple[int, str], JournalEntry] | None
    on_unknown: OnUnknown
    checkpoint: bool
    events: bool
    text: bool
    reserve: bool
    tool_limiter: bool
    model_limiter: bool
    approvals: Mapping[tuple[int, str], ApprovalEntry] | None = None
    approver: bool = False
    approval_timeout_s: float | None = None
    guards: ResolvedGuards | None = None
    judge: bool = False


class _Outbox:
    """What an actor's workers have sent one driver and it has not taken yet: every
    worker's messages in one list, in the order they were sent."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Message]] = []
        self.ready = asyncio.Event()

    def post(self, key: str, message: Message) -> None:
        self.messages.append((key, message))
        self.ready.set()

    async def take(self, wait_s: float) -> list[tuple[str, Message]]:
        """Everything posted so far, once there is something (or ``wait_s`` passed)."""
        if not self.messages:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_s):
                    await self.ready.wait()
        taken, self.messages = self.messages, []
        self.ready.clear()
        return taken


class _Link:
    """One worker's side of its stream to the driver: what it sends, and the answers
    it waits for."""

    def __init__(self, key: str, outbox: _Outbox) -> None:
        self._key = key
        self._outbox = outbox
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._ids = itertools.count()

    def send(self, *message: Any) -> None:
        """Send without waiting for an answer (the stream keeps the order)."""
        self._outbox.post(self._key, message)

    async def ask(self, op: str, *args: Any) -> Any:
        """Send a request and wait for the driver's answer.

        Raises:
            BudgetExceeded: when the driver's budget refused it.
            RemoteFailure: when it failed at the driver.
        """
        number = next(self._ids)
        answer = self._waiting[number] = asyncio.get_running_loop().create_future()
        self._outbox.post(self._key, ("ask", number, op, args))
        try:
            return await answer
        except asyncio.CancelledError:
            if not answer.done() or answer.cancelled():
                self.send("forget", number)  # what the driver does for it is cancelled
            raise
        finally:
            self._waiting.pop(number, None)

    def answer(self, number: int, ok: bool, value: Any) -> None:
        found = self._waiting.get(number)
        if found is None or found.done():
            return  # the request was given up (its caller cancelled)
        if ok:
            found.set_result(value)
        else:
            found.set_exception(raised(value))


class _Held:
    """Something held at the driver for the length of an ``async with`` here: an
    exclusive key, or a token of a limiter."""

    def __init__(self, link: _Link, what: str, key: str) -> None:
        self._link, self._what, self._key = link, what, key
        self._number: int | None = None

    async def __aenter__(self) -> None:
        self._number = await self._link.ask("hold", self._what, self._key)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._number is not None:
            self._link.send("drop", self._number)


class _Locks(LockTable):
    """The driver's lock table, seen from an actor."""

    def __init__(self, link: _Link) -> None:
        super().__init__()
        self._link = link

    def lock(self, key: str) -> anyio.Lock:
        return cast(anyio.Lock, _Held(self._link, "lock", key))


class _Limiter:
    """A limiter of the driver's, seen from an actor (for ``async with`` only)."""

    def __init__(self, link: _Link, what: str, key: str) -> None:
        self._link, self._what, self._key = link, what, key
        self._held: list[_Held] = []

    async def __aenter__(self) -> None:
        held = _Held(self._link, self._what, self._key)
        await held.__aenter__()
        self._held.append(held)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._held.pop().__aexit__(kind, exc, tb)


class _Budget(Budget):
    """The run's budget, seen from an actor: the driver reserves each model call (see
    :class:`_Reserved`) and is told what was spent."""

    def __init__(self, link: _Link) -> None:
        super().__init__()
        self._link = link

    def check(self) -> None:
        """Nothing to check here: the driver checks as it reserves."""

    def reserve_model_call(self) -> None:
        """Counted at the driver, as the model call is made."""

    def charge(self, usage: Usage) -> None:
        super().charge(usage)
        self._link.send("charge", usage)

    def charge_tool_calls(self, count: int) -> None:
        super().charge_tool_calls(count)
        self._link.send("tool_calls", count)


class _Reserved(WrapperModel):
    """A model whose every call is first reserved in the run's budget at the driver
    (and, when the driver bounds the model's calls in flight, holds a token there)."""

    def __init__(self, inner: Model, link: _Link, limited: bool, reserve: bool) -> None:
        super().__init__(inner)
        self._link = link
        self._limited = limited
        self._reserve = reserve

    async def _reserved(self) -> None:
        if self._reserve:
            await self._link.ask("reserve")
        else:  # no limit to check: counted, without waiting for the driver
            self._link.send("count")

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await self._reserved()
        if not self._limited:
            return await self.inner.complete(request)
        async with _Held(self._link, "model", ""):
            return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        await self._reserved()
        if not self._limited:
            return await call_model(self.inner, request, on_text)
        async with _Held(self._link, "model", ""):
            return await call_model(self.inner, request, on_text)


class _Journal:
    """A worker's journal at the driver: intents and outcomes are durable there
    before this returns."""

    def __init__(
        self, link: _Link, entries: Mapping[tuple[int, str], JournalEntry], on_unknown: OnUnknown
    ) -> None:
        self._link = link
        self._entries = entries
        self.on_unknown: OnUnknown = on_unknown

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self._entries.get((turn, call_id))

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        await self._link.ask("intent", turn, call, json.loads(arguments_text(arguments)))

    async def outcome(self, turn: int, observation: ToolMessage) -> None:
        await self._link.ask("outcome", turn, observation)


class _Checkpoint:
    """A worker's checkpoint at the driver: each turn's state, sent in order."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    def save(self, state: LoopState) -> None:
        self._link.send("save", state)


_here: ContextVar[_Link] = ContextVar("honeycomb_ray_worker")
"""The stream of the worker whose task is running (for what a role's setup, shared by
all its workers in the actor, does at the driver)."""


async def _at_driver(op: str, *args: Any) -> Any:
    """Ask the driver to do ``op`` for the current worker, and wait for its answer."""
    return await _here.get().ask(op, *args)


class _Memory:
    """The run's long-term memory, seen from an actor: each call is made at the driver
    (where the memory's file is)."""

    async def add(
        self,
        text: str,
        *,
        namespace: str = DEFAULT_NAMESPACE,
        kind: MemoryKind = "note",
        run_id: str | None = None,
        role: str | None = None,
        worker: str | None = None,
    ) -> MemoryRecord:
        options = {"namespace": namespace, "kind": kind, "run_id": run_id, "role": role}
        return cast(
            MemoryRecord, await _at_driver("memory", "add", (text,), options | {"worker": worker})
        )

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return cast(MemoryRecord | None, await _at_driver("memory", "get", (memory_id,), {}))

    async def search(
        self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5
    ) -> tuple[MemoryHit, ...]:
        options = {"namespace": namespace, "k": k}
        return cast(tuple[MemoryHit, ...], await _at_driver("memory", "search", (query,), options))

    async def delete(self, memory_id: str) -> bool:
        return cast(bool, await _at_driver("memory", "delete", (memory_id,), {}))

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return cast(
            tuple[MemoryRecord, ...],
            await _at_driver("memory", "list", (namespace,), {"limit": limit}),
        )


async def _approver(request: ApprovalRequest) -> Decision:
    """The run's approver, at the driver."""
    return cast(Decision, await _at_driver("approve", request))


class _Approvals:
    """A worker's approval log at the driver: what was asked and decided in its earlier
    lives comes with it; what is kept now is durable there before this returns."""

    def __init__(self, entries: Mapping[tuple[int, str], ApprovalEntry]) -> None:
        self._entries = dict(entries)

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self._entries.get((turn, call_id))

    async def record(self, entry: ApprovalEntry) -> None:
        await _at_driver("approval", entry)
        self._entries[entry.pending.turn, entry.pending.call_id] = entry


class _Judge(Judge):
    """The run's judge, at the driver: judge roles think with the run's models, under
    its budget."""

    def __init__(self) -> None:
        super().__init__({}, _no_model)

    async def ask(self, role_name: str, check: GuardCheck) -> tuple[str | None, Usage, str]:
        return cast(tuple[str | None, Usage, str], await _at_driver("judge", role_name, check))


def _no_model(role: Any) -> Model:
    raise HoneycombError("a judge's model is at the driver")


@dataclass(frozen=True)
class Pinned:
    """A pinned tool (see ``Tool.pinned``) as an actor gets it: what the model is told
    of it and how its calls are scheduled, not its function (which holds what is the
    run's process's): its calls are made at the driver, by the tool itself."""

    options: dict[str, Any]
    context_param: str | None

    @classmethod
    def of(cls, found: Tool[Any, Any]) -> Pinned:
        return cls({**found.options(), "parameters": found.schema.parameters}, found.context_param)

    def stand_in(self) -> Tool[Any, Any]:
        """The tool in the actor: it checks only that the arguments are an object with
        the required keys (the driver validates them as the tool does)."""
        name = self.options["name"]

        async def call(**kwargs: Any) -> Any:
            return await _at_driver("tool", name, kwargs)

        made: Tool[..., Any] = Tool(call, **self.options)
        made.context_param = self.context_param
        return made


class Hive:
    """The actor: many workers at once on its event loop; roles, tools (resolved by
    import path) and models are installed once, then shared by its workers.

    A driver talks to it through two calls, whatever the number of workers:
    :meth:`deliver` brings its messages (workers to start, answers, cancellations) and
    :meth:`take` returns what the workers sent since the last take. Each driver's
    messages go in their own outbox (a ``channel``), so a take left waiting by a driver
    that went away never takes another's.

    The workers run on an event loop of the actor's own, in a thread of its own, started
    by ``asyncio.run`` as in any program, not on the loop Ray runs the actor's calls on:
    anyio, which runs sync tools in threads, looks for the loop's root task on every
    such call, and on a loop with none (Ray's) it searches every task, each time.
    """

    def __init__(self) -> None:
        self._setups: dict[str, WorkerSetup] = {}
        self._models: dict[str, Model] = {}
        self._outboxes: dict[str, _Outbox] = {}
        self._workers: dict[str, tuple[_Link, asyncio.Task[None]]] = {}
        started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            started.set()
            await asyncio.Event().wait()  # the actor's life: it ends with its process

        threading.Thread(target=asyncio.run, args=(main(),), name="hive", daemon=True).start()
        started.wait()

    async def _there(self, call: Coroutine[Any, Any, T]) -> T:
        """Run ``call`` on the workers' loop and wait for it here, on Ray's."""
        assert self._loop is not None
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(call, self._loop))

    def pid(self) -> int:
        """The actor's process id (what a fault test kills)."""
        return os.getpid()

    async def install_setup(
        self,
        key: str,
        role: Role,
        tools: Sequence[Tool[Any, Any] | Pinned],
        output_type: type[BaseModel] | None,
    ) -> str | None:
        """A role's setup, from its tools as the driver resolved them (made again here
        from their functions; a pinned tool's calls go back to the driver, and so do a
        memory's); what went wrong, if anything did (as text: not every error can be
        unpickled at the driver)."""
        return await self._there(self._install_setup(key, role, tools, output_type))

    async def _install_setup(
        self,
        key: str,
        role: Role,
        tools: Sequence[Tool[Any, Any] | Pinned],
        output_type: type[BaseModel] | None,
    ) -> str | None:
        try:
            here = ToolRegistry([t.stand_in() if isinstance(t, Pinned) else t for t in tools])
            memory = _Memory() if role.memory is not None else None
            self._setups[key] = WorkerSetup.resolved(role, here, output_type, memory)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    async def install_model(self, key: str, recipe: tuple[str, Any]) -> str | None:
        """Make a model from its recipe (see ``honeycomb.backends.ray.recipe``); what
        went wrong, if anything did."""
        return await self._there(self._install_model(key, recipe))

    async def _install_model(self, key: str, recipe: tuple[str, Any]) -> str | None:
        try:
            kind, value = recipe
            if kind == "object":  # Ray sent the model itself (with cloudpickle)
                self._models[key] = cast(Model, value)
                return None
            path, options = value
            module, _, name = path.rpartition(".")
            cls = getattr(importlib.import_module(module), name)
            self._models[key] = cast(Model, cls(**options))
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    async def deliver(self, channel: str, messages: list[Message]) -> None:
        """A driver's messages, in order: ``("start", key, spec)`` runs a worker,
        ``("answer", key, answers)`` answers its requests, ``("cancel", key)`` cancels
        it and its tool calls."""
        await self._there(self._deliver(channel, messages))

    async def _deliver(self, channel: str, messages: list[Message]) -> None:
        outbox = self._outboxes.setdefault(channel, _Outbox())
        for kind, key, *payload in messages:
            if kind == "start":
                link = _Link(key, outbox)
                task = asyncio.ensure_future(self._work(key, link, payload[0]))
                self._workers[key] = (link, task)
                continue
            found = self._workers.get(key)
            if found is None:
                continue  # it ended meanwhile
            if kind == "answer":
                for number, ok, value in payload[0]:
                    found[0].answer(number, ok, value)
            elif kind == "cancel":
                found[1].cancel()

    async def take(self, channel: str, wait_s: float) -> list[tuple[str, Message]]:
        """What this driver's workers sent since its last take, as ``(key, message)``
        in the order they were sent; waits for the first (at most ``wait_s``)."""
        return await self._there(self._take(channel, wait_s))

    async def _take(self, channel: str, wait_s: float) -> list[tuple[str, Message]]:
        return await self._outboxes.setdefault(channel, _Outbox()).take(wait_s)

    async def _work(self, key: str, link: _Link, spec: WorkerSpec) -> None:
        _here.set(link)  # in this worker's task (and the tasks it starts) only
        try:
            result = await self._worker(link, spec).run(
                spec.task, inputs=spec.inputs, resume=spec.resume
            )
        except Exception as exc:  # a defect here: the worker fails, saying so
            result = WorkerResult(
                worker=spec.name,
                role=self._setups[spec.setup].role.name,
                status="failed",
                error=WorkerError(type=type(exc).__name__, message=str(exc)),
                exception=exc,
            )
        finally:
            self._workers.pop(key, None)
        link.send("done", _portable(result))

    def _worker(self, link: _Link, spec: WorkerSpec) -> Worker:
        model = _Reserved(self._models[spec.model], link, spec.model_limiter, spec.reserve)
        summarizer = (
            _Reserved(self._models[spec.summarizer], link, spec.model_limiter, spec.reserve)
            if spec.summarizer is not None
            else None
        )
        tracer = Tracer(lambda e: link.send("event", e), log=False, text=spec.text)
        journal = (
            _Journal(link, spec.journal, spec.on_unknown) if spec.journal is not None else None
        )
        return Worker(
            self._setups[spec.setup],
            model,
            name=spec.name,
            locks=_Locks(link),
            tool_limiter=(
                cast(anyio.CapacityLimiter, _Limiter(link, "tools", ""))
                if spec.tool_limiter
                else None
            ),
            budget=_Budget(link),
            tracer=tracer if spec.events else None,
            run_id=spec.run_id,
            checkpoint=_Checkpoint(link) if spec.checkpoint else None,
            journal=journal,
            summarizer=summarizer,
            approver=_approver if spec.approver else None,
            approvals=_Approvals(spec.approvals) if spec.approvals is not None else None,
            approval_timeout_s=spec.approval_timeout_s,
            guards=spec.guards,
            judge=_Judge() if spec.judge else None,
        )


def _portable(result: WorkerResult) -> tuple[WorkerResult, tuple[str, Any] | None]:
    """A result that crosses a process: its exception as plain values (many
    exceptions cannot be unpickled)."""
    exc = result.exception
    plain = result.model_copy(update={"exception": None})
    return plain, portable_error(exc) if exc is not None else None
