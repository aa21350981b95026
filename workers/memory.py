"""Long-term memory in a worker: what a role's ``memory:`` asks for.

- ``recall: N`` (default 3; 0: none): before its first turn, a worker searches its
  namespace for its subtask; when something is found, the best N memories go into its
  context as one user message right after the task (:func:`recall_text` is how it
  reads), fitted to what its prompt may take (:func:`recall_room`): the worst left out
  first, the best alone cut. The search is a :class:`MemoryRecalled` event, so a trace
  shows it. The role's input guards read the task first (one they refuse is
  searched for in no memory), then the message (the worker's ``run``). A resumed
  worker does not recall again: the message is part of its saved conversation.
- ``remember: true`` (the default): the role has two more tools, ``recall(query, k)``,
  parallel-safe, and ``remember(text)``, side-effecting and idempotent: journaled like
  any side effect, and the same text is one memory however often it is kept.
- ``store_result: true``: each finished worker's answer is kept, with its run, role and
  subtask (:func:`keep_result`, called by the worker as it ends well).

What a memory's embeddings calls spend counts in the worker's run as what its model
calls spend does (:class:`MemorySpending`, the payer of :mod:`runtime.limits.spending` a worker with
memory sets for as long as it runs): in the run's usage and budget (tokens, and dollars
at the embeddings' price), each call a :class:`MemoryEmbedded` event. A run whose
budget is spent makes no more of them (``BudgetExceeded``: the memory's failure, as
below; the worker's next model call stops it).

A memory that fails (a locked file, an embeddings endpoint that is down, a vector
database out of reach) never fails the worker: the recall is an event with the error,
a tool call an error observation (as any tool's failure is), and a result that cannot
be kept a warning in the log. One that does not answer is given the role's tool
timeout, at the worker's start and end as in its tool calls. A
:class:`~runtime.Memory` is anyone's code, so any ``Exception`` it raises counts as
its failure; cancellation still goes through. A replayed run whose recall asks its
cassette what it did not record (:class:`~runtime.errors.CassetteMismatch`) fails the
worker, as a model call's mismatch does: the run asked otherwise than when recorded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, cast

from msgspec.structs import replace
from pydantic import ConfigDict, Field

from runtime import (
    Budget,
    Event,
    Memory,
    MemoryHit,
    Model,
    ModelRequest,
    Tool,
    ToolContext,
    ToolSchema,
    Tracer,
    Usage,
    UserMessage,
    logs,
    tool,
)
from runtime.concurrency import within
from runtime.errors import CassetteMismatch
from runtime.events import Caller
from runtime.memory import DEFAULT_NAMESPACE
from runtime.model import context_of, request_writer
from runtime.secrets import masked
from runtime.tools.render import cut
from runtime.value import SettingsModel
from workers.context import (
    TokenCounter,
    cut_text,
    estimate_tokens,
    prompt_room,
)
from workers.state import LoopSettings

__all__ = [
    "RECALL_HEADER",
    "MemoryEmbedded",
    "MemoryRecalled",
    "MemorySpending",
    "RoleMemory",
    "keep_result",
    "memory_schemas",
    "memory_tools",
    "recall_at_start",
    "recall_fitted",
    "recall_room",
    "recall_text",
]

RECALL_HEADER = "From memory (what earlier work kept; it may be out of date):"
"""The first line of the message that brings recalled memories into a worker's context."""
RECALLED_CHARS = 1500
"""Characters of each memory a recall shows."""


class RoleMemory(SettingsModel):
    """A role's use of the memory (``memory:`` in its YAML).

    Attributes:
        namespace: Where its memories are kept and searched.
        recall: Memories put into a worker's context at its start (0: none).
        remember: Give the role the ``recall`` and ``remember`` tools.
        store_result: Keep each finished worker's answer.
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    # Not {1,200} in the pattern: Rust's regex compiles a Unicode \w repeated up to 200
    # times into some 27 MB, which every process that builds a Role would carry.
    namespace: str = Field(
        default=DEFAULT_NAMESPACE, pattern=r"^[\w.:/@-]+$", min_length=1, max_length=200
    )
    recall: int = Field(default=3, ge=0, le=20)
    remember: bool = True
    store_result: bool = False


class MemoryRecalled(Event, frozen=True, kw_only=True):
    """A worker searched its memory at its start, for its subtask."""

    kind: ClassVar[str] = "memory.recalled"
    namespace: str
    query: str
    memory_ids: tuple[str, ...]  # the memories put into its context, best first
    duration_s: float
    error: str | None = None


class MemoryEmbedded(Event, frozen=True, kw_only=True):
    """A worker's memory had texts embedded (to keep a memory, or to search): what the
    call spent, as a model call's event says it (it counts in the run's usage and
    budget as a model call's spending does, not among its ``model_calls``)."""

    kind: ClassVar[str] = "memory.embedded"
    model: str
    duration_s: float
    input_tokens: int = 0
    cost: float = 0.0
    # An attempt its timeout cut off: its texts were sent, and count by the estimate.
    error: str | None = None


class MemorySpending:
    """Pays for a worker's memory calls (a :class:`~runtime.limits.spending.Payer`): its
    run's budget refuses them once spent and is charged what they spent, each reported
    as a :class:`MemoryEmbedded` of the worker.

    Args:
        budget: The run's budget.
        caller: The worker, its run, and where its events go.
    """

    __slots__ = ("budget", "caller")

    def __init__(self, budget: Budget, caller: Caller) -> None:
        self.budget, self.caller = budget, caller

    def check(self) -> None:
        self.budget.check(calls=0)  # an embeddings call is none of the run's model_calls

    def spent(self, model: str, usage: Usage, duration_s: float, error: str | None) -> None:
        self.budget.charge(usage)
        caller = self.caller
        if caller.tracer.enabled:
            caller.tracer.emit(
                MemoryEmbedded(
                    worker=caller.worker,
                    run_id=caller.run_id,
                    model=model,
                    duration_s=duration_s,
                    input_tokens=usage.input_tokens,
                    cost=usage.cost,
                    error=error,
                )
            )


def recall_text(hits: Sequence[MemoryHit], header: str = RECALL_HEADER) -> str:
    """Memories as a worker reads them: the header, then each memory under a line that
    says where it came from (``[memory 3f2a… · guide, run 9c1e…]``)."""
    lines = [header]
    for hit in hits:
        record = hit.record
        origin = [
            *((record.role,) if record.role else ()),
            *((f"run {record.run_id}",) if record.run_id else ()),
        ]
        source = f" · {', '.join(origin)}" if origin else ""
        lines += ["", f"[memory {record.id}{source}]", cut(record.text, RECALLED_CHARS)]
    return "\n".join(lines)


def recall_room(
    model: Model, settings: LoopSettings, first: ModelRequest, count: TokenCounter | None
) -> int | None:
    """The tokens a worker's recall may take: half of what its ``first`` request (its
    system prompt, task and tools, as ``model`` is sent them; by ``count``, else the
    estimate) leaves of what that request may take (:func:`~workers.context.prompt_room`:
    its model's context less room for the answer, or its compaction budget, which
    counts the request alone: the answer's calls are the next request's, which
    compaction folds), so that its turns have room too; None: neither its model's
    context nor a budget is known."""
    room = prompt_room(
        settings.compaction, context_of(model), settings.max_output_tokens, tools=False
    )
    if room is None:
        return None
    write = request_writer(model)
    sent = write(first) if write is not None else first
    return max(room - estimate_tokens(sent.messages, sent.tools, count), 0) // 2


def recall_fitted(
    hits: Sequence[MemoryHit], tokens: int, count: TokenCounter | None = None
) -> tuple[MemoryHit, ...]:
    """The best of ``hits`` whose recall message (:func:`recall_text`) takes at most
    ``tokens`` (by ``count``, else the estimate): the worst are left out first, the best
    alone is cut in the middle to fit; none when not even the start of it fits."""

    def size(some: Sequence[MemoryHit]) -> int:
        return estimate_tokens((UserMessage(content=recall_text(some)),), count=count)

    for shown in range(len(hits), 0, -1):
        if size(hits[:shown]) <= tokens:
            return tuple(hits[:shown])
    if not hits:
        return ()
    best = hits[0]
    frame = size((_with_text(best, ""),))
    # A token spare: the estimate rounds once for the whole message.
    text = cut_text(cut(best.record.text, RECALLED_CHARS), tokens - frame - 1, count)
    fitted = _with_text(best, text)
    return (fitted,) if text and size((fitted,)) <= tokens else ()


def _with_text(hit: MemoryHit, text: str) -> MemoryHit:
    return replace(hit, record=replace(hit.record, text=text))


async def recall_at_start(
    memory: Memory,
    settings: RoleMemory,
    task: str,
    *,
    tracer: Tracer,
    worker: str | None,
    run_id: str | None,
    timeout_s: float | None = None,
    room: int | None = None,
    count: TokenCounter | None = None,
) -> UserMessage | None:
    """The message of what ``memory`` holds for ``task`` (None: nothing found, or the
    search failed, or did not answer within ``timeout_s``, the role's tool timeout),
    fitted to ``room`` tokens (by ``count``; :func:`recall_fitted`; None: as found); the
    search is emitted as a :class:`MemoryRecalled`, with the memories put into the
    context. Those left out or cut to fit are logged (``memory.recall_cut``).

    Raises:
        CassetteMismatch: when a replayed run's search asks its cassette for
            embeddings it did not record.
    """
    started = time.perf_counter()
    hits: Sequence[MemoryHit] = ()
    error: str | None = None
    failed: Exception | None = None
    try:
        with within(timeout_s):
            hits = masked(
                await memory.search(masked(task), namespace=settings.namespace, k=settings.recall)
            )
    except Exception as exc:  # any memory's failure (user code): the worker goes on without it
        error, failed = _failure(exc, timeout_s), exc
    if room is not None:
        hits = _fitted(hits, room, count, worker=worker, run_id=run_id)
    if tracer.enabled:
        tracer.emit(
            MemoryRecalled(
                worker=worker,
                run_id=run_id,
                namespace=settings.namespace,
                query=task,
                memory_ids=tuple(h.record.id for h in hits),
                duration_s=time.perf_counter() - started,
                error=error,
            )
        )
    if isinstance(failed, CassetteMismatch):  # a replay asked what was not recorded
        raise failed
    return UserMessage(content=recall_text(hits)) if hits else None


def _fitted(
    hits: Sequence[MemoryHit],
    room: int,
    count: TokenCounter | None,
    *,
    worker: str | None,
    run_id: str | None,
) -> tuple[MemoryHit, ...]:
    """``hits`` fitted to ``room`` (:func:`recall_fitted`), logged when that changed
    them."""
    shown = recall_fitted(hits, room, count)
    if shown != tuple(hits):
        fields = {"run_id": run_id, "worker": worker, "found": len(hits), "shown": len(shown)}
        fields["cut"] = bool(shown) and shown[-1] != hits[len(shown) - 1]
        logs.log("memory.recall_cut", {**fields, "tokens": room})
    return shown


def memory_tools(memory: Memory, settings: RoleMemory, role: str) -> tuple[Tool[Any, Any], ...]:
    """The ``recall`` and ``remember`` tools of a role, on its namespace."""
    namespace = settings.namespace

    async def recall(query: str, k: Annotated[int, Field(ge=1, le=20)] = 3) -> str:
        """Search long-term memory (what earlier work kept) for what matches the query;
        the best k memories, best first.

        Args:
            query: What to look for, in plain words.
            k: How many memories at most.
        """
        hits = masked(await memory.search(masked(query), namespace=namespace, k=k))
        if not hits:
            return f"No memory matches {query!r}."
        return recall_text(hits, header=f"Memories for {query!r}, best first:")

    async def remember(text: str, context: ToolContext) -> str:
        """Keep a note in long-term memory, for later work: a fact, a finding or a
        decision worth knowing next time. The same note is kept once.

        Args:
            text: The note, self-contained (it is read without this conversation).
        """
        record = await memory.add(
            masked(text),
            namespace=namespace,
            run_id=context.run_id,
            role=role,
            worker=context.worker,
        )
        return f"Remembered (memory {record.id})."

    return (
        tool(recall),
        tool(side_effects=True, idempotent=True)(remember),
    )


def memory_schemas(settings: RoleMemory | None, role: str) -> tuple[ToolSchema, ...]:
    """The schemas of the tools a role's memory ``settings`` give its workers (none
    without ``remember``): every request of theirs holds them beside the role's own."""
    if settings is None or not settings.remember:
        return ()
    # Only their schemas are read: no tool of these is called, nor any memory behind it.
    return tuple(t.schema for t in memory_tools(cast(Memory, None), settings, role))


async def keep_result(
    memory: Memory | None,
    settings: RoleMemory | None,
    text: str,
    *,
    run_id: str | None,
    role: str,
    worker: str,
    timeout_s: float | None = None,
) -> None:
    """Keep a finished worker's answer, if its role's memory ``settings`` say
    ``store_result``. A memory that fails, or does not answer within ``timeout_s``
    (the role's tool timeout), is logged (``memory.store_failed``, a warning), never
    raised: the worker's result stands."""
    if memory is None or settings is None or not settings.store_result:
        return
    if not text.strip():
        return
    try:
        with within(timeout_s):
            await memory.add(
                masked(text),
                namespace=settings.namespace,
                kind="result",
                run_id=run_id,
                role=role,
                worker=worker,
            )
    except Exception as exc:  # any memory's failure (user code): the result stands
        fields = {"run_id": run_id, "worker": worker, "error": _failure(exc, timeout_s)}
        logs.log("memory.store_failed", fields, level="warning")


def _failure(exc: Exception, timeout_s: float | None) -> str:
    """A memory's failure as an event or a log entry says it."""
    if isinstance(exc, TimeoutError) and timeout_s is not None:
        return f"TimeoutError: no answer in {timeout_s:g}s (the role's tool_timeout)"
    return f"{type(exc).__name__}: {exc}"
