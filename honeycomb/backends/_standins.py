"""What a worker in a Ray actor shares with the rest of its run, seen from the actor:
stand-ins for what lives at the driver.

- its budget: each model call is reserved at the driver before it is made (the
  model is wrapped); what calls spent is sent back as it is known;
- exclusive locks and the run's tool and model limiters: held at the driver, for
  the time the call runs;
- its journal: an intent is made durable at the driver before the call runs, and so
  is the outcome; the entries of earlier lives come with the worker;
- its checkpoint and events: sent in order, in batches (a turn's state before the
  next turn's journal intents, since the stream keeps order);
- the run's memory, approver, approval log and judge, and its pinned tools: each call
  made at the driver, for the worker whose task is running.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any, cast

import anyio

from honeycomb.backends._link import Link, at_driver
from honeycomb.backends._wire import Pinned
from runtime import (
    ApprovalEntry,
    ApprovalRequest,
    Budget,
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
    Usage,
)
from runtime.memory import DEFAULT_NAMESPACE, MemoryKind
from runtime.model import ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.tools.journal import OnUnknown, arguments_text
from workers import LoopState
from workers.guards import GuardCheck, Judge


class Held:
    """Something held at the driver for the length of an ``async with`` here: an
    exclusive key, or a token of a limiter."""

    def __init__(self, link: Link, what: str, key: str) -> None:
        self._link, self._what, self._key = link, what, key
        self._number: int | None = None

    async def __aenter__(self) -> None:
        self._number = await self._link.ask("hold", self._what, self._key)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._number is not None:
            self._link.send("drop", self._number)


class DriverLocks(LockTable):
    """The driver's lock table, seen from an actor."""

    def __init__(self, link: Link) -> None:
        super().__init__()
        self._link = link

    def lock(self, key: str) -> anyio.Lock:
        return cast(anyio.Lock, Held(self._link, "lock", key))


class DriverLimiter:
    """A limiter of the driver's, seen from an actor (for ``async with`` only)."""

    def __init__(self, link: Link, what: str, key: str) -> None:
        self._link, self._what, self._key = link, what, key
        self._held: list[Held] = []

    async def __aenter__(self) -> None:
        held = Held(self._link, self._what, self._key)
        await held.__aenter__()
        self._held.append(held)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._held.pop().__aexit__(kind, exc, tb)


class DriverBudget(Budget):
    """The run's budget, seen from an actor: the driver reserves each model call (see
    :class:`ReservedModel`) and is told what was spent."""

    def __init__(self, link: Link) -> None:
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


class ReservedModel(WrapperModel):
    """A model whose every call is first reserved in the run's budget at the driver
    (and, when the driver bounds the model's calls in flight, holds a token there)."""

    def __init__(self, inner: Model, link: Link, limited: bool, reserve: bool) -> None:
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
        async with Held(self._link, "model", ""):
            return await self.inner.complete(request)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        await self._reserved()
        if not self._limited:
            return await call_model(self.inner, request, on_text)
        async with Held(self._link, "model", ""):
            return await call_model(self.inner, request, on_text)


class DriverJournal:
    """A worker's journal at the driver: intents and outcomes are durable there
    before this returns."""

    def __init__(
        self,
        link: Link,
        entries: Mapping[tuple[int, str], JournalEntry],
        on_unknown: OnUnknown,
        scope: str,
    ) -> None:
        self._link = link
        self._entries = entries
        self.on_unknown: OnUnknown = on_unknown
        self.scope = scope

    def recorded(self, turn: int, call_id: str) -> JournalEntry | None:
        return self._entries.get((turn, call_id))

    async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
        await self._link.ask("intent", turn, call, json.loads(arguments_text(arguments)))

    async def outcome(self, turn: int, observation: ToolMessage) -> None:
        await self._link.ask("outcome", turn, observation)


class DriverCheckpoint:
    """A worker's checkpoint at the driver: each turn's state, sent in order."""

    def __init__(self, link: Link) -> None:
        self._link = link

    def save(self, state: LoopState) -> None:
        self._link.send("save", state)

    async def flush(self) -> None:
        """Return once the states sent so far are kept at the driver."""
        await self._link.ask("flush")


class DriverMemory:
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
            MemoryRecord, await at_driver("memory", "add", (text,), options | {"worker": worker})
        )

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return cast(MemoryRecord | None, await at_driver("memory", "get", (memory_id,), {}))

    async def search(
        self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5
    ) -> tuple[MemoryHit, ...]:
        options = {"namespace": namespace, "k": k}
        return cast(tuple[MemoryHit, ...], await at_driver("memory", "search", (query,), options))

    async def delete(self, memory_id: str) -> bool:
        return cast(bool, await at_driver("memory", "delete", (memory_id,), {}))

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return cast(
            tuple[MemoryRecord, ...],
            await at_driver("memory", "list", (namespace,), {"limit": limit}),
        )


async def driver_approver(request: ApprovalRequest) -> Decision:
    """The run's approver, at the driver."""
    return cast(Decision, await at_driver("approve", request))


class DriverApprovals:
    """A worker's approval log at the driver: what was asked and decided in its earlier
    lives comes with it; what is kept now is durable there before this returns."""

    def __init__(self, entries: Mapping[tuple[int, str], ApprovalEntry]) -> None:
        self._entries = dict(entries)

    def recorded(self, turn: int, call_id: str) -> ApprovalEntry | None:
        return self._entries.get((turn, call_id))

    async def record(self, entry: ApprovalEntry) -> ApprovalEntry:
        stands = cast(ApprovalEntry, await at_driver("approval", entry))
        self._entries[entry.pending.turn, entry.pending.call_id] = stands
        return stands


class DriverJudge(Judge):
    """The run's judge, at the driver: judge roles think with the run's models, under
    its budget."""

    def __init__(self) -> None:
        super().__init__({}, _no_model)

    async def ask(self, role_name: str, check: GuardCheck) -> tuple[str | None, Usage, str]:
        return cast(tuple[str | None, Usage, str], await at_driver("judge", role_name, check))


def _no_model(role: Any) -> Model:
    raise HoneycombError("a judge's model is at the driver")


def stand_in(pinned: Pinned) -> Tool[Any, Any]:
    """A pinned tool in the actor: it checks only that the arguments are an object with
    the required keys (the driver validates them as the tool does), and its calls are
    made at the driver."""
    name = pinned.options["name"]

    async def call(**kwargs: Any) -> Any:
        return await at_driver("tool", name, kwargs)

    made: Tool[..., Any] = Tool(call, **pinned.options)
    made.context_param = pinned.context_param
    return made
