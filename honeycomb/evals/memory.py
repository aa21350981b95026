"""The long-term memory of an eval's runs: each run's own, empty as it starts (or,
when the cases file says ``memory: shared``, one the eval's cases share, empty as the
eval starts), so that no case recalls what another kept, nor what an earlier eval or
a real run kept, and a replayed case asks what it asked when recorded, whatever order
the cases run in.

:class:`EvalMemory` is the memory an Executor is given for an eval
(``Executor.from_hive(hive, memory=EvalMemory(hive.memory()))``, as ``honeycomb eval``
makes it); :func:`~honeycomb.evals.evaluate` says which memory its calls go to, run
by run (:meth:`EvalMemory.scope`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from runtime.errors import MemoryStoreError
from runtime.memory import (
    DEFAULT_NAMESPACE,
    Embeddings,
    Memory,
    MemoryHit,
    MemoryKind,
    MemoryRecord,
)
from runtime.memory.tape import SearchTape, TapedMemory

if TYPE_CHECKING:
    from honeycomb.executor import Executor
    from honeycomb.hive import Hive
    from runtime.memory.sqlite import SQLiteMemory

__all__ = ["EvalMemory", "Sharing", "eval_memory", "memories_of"]

Sharing = Literal["own", "shared"]
"""Whose memory an eval's run has: its ``own`` (the default), or one ``shared`` by the
eval's cases."""


class _Scope:
    """One scope of a group of eval memories: a folder of its own, and in it the
    memory of each member of the group, made as the member is first used."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="honeycomb-eval-memory-"))
        self.memories: dict[EvalMemory, SQLiteMemory] = {}

    def of(self, member: EvalMemory) -> SQLiteMemory:
        found = self.memories.get(member)
        if found is None:  # (no await: one memory a member)
            file = self.folder / f"memory-{len(self.memories)}.db"
            found = self.memories[member] = member._made(file)
        return found

    def close(self) -> None:
        for memory in self.memories.values():
            memory.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class _Group:
    """The eval memories scoped together (:meth:`EvalMemory.beside`), by identity."""


_SCOPES: ContextVar[dict[_Group, _Scope] | None] = ContextVar("eval_memories", default=None)
"""The scope a call is made in, by the group of its :class:`EvalMemory`."""


class EvalMemory:
    """A :class:`~runtime.memory.Memory` whose calls go to the memory of the scope they
    are made in (:meth:`scope`): a new SQLite memory in a folder of its own (its file
    made on first use), with the embeddings and ``max_chars`` of ``like`` (when it is
    an :class:`~runtime.memory.SQLiteMemory`), deleted as the scope ends. Nothing of
    ``like`` is read or written: an eval's memories never reach the hive's file.

    A memory kept here keeps no run id: a recall would show it (``run 9c1e...``), and
    a replayed run, of another id, would then ask otherwise than when recorded.

    Outside any scope (a run of an eval resumed after it), each call raises
    :class:`~runtime.errors.MemoryStoreError`, which a worker takes as a memory that
    fails: it goes on without it.
    """

    def __init__(self, like: Memory | None = None) -> None:
        self.like = like
        self._group = _Group()

    def beside(self, like: Memory | None) -> EvalMemory:
        """An eval's memory for ``like`` (the memory of a hive that a run calls as a
        tool), scoped with this one: each run's own, empty as it starts, as this one."""
        other = EvalMemory(like)
        other._group = self._group
        return other

    def __repr__(self) -> str:
        return f"EvalMemory(like={self.like!r})"

    @property
    def embeddings(self) -> Embeddings | None:
        """The embeddings its scopes' memories embed with (``like``'s), which its
        runs' budgets count as they count ``like``'s."""
        from runtime.memory.sqlite import SQLiteMemory

        return self.like.embeddings if isinstance(self.like, SQLiteMemory) else None

    def with_embeddings(self, embeddings: Embeddings) -> EvalMemory:
        """An eval's memory like this one, whose scopes' memories embed with
        ``embeddings`` (as a cassette records or replays them)."""
        from runtime.memory.sqlite import SQLiteMemory

        like = self.like
        return self.beside(
            like.with_embeddings(embeddings) if isinstance(like, SQLiteMemory) else like
        )

    def with_searches(self, tape: SearchTape) -> TapedMemory:
        """This memory, whose searches are kept on ``tape`` or answered from it, as a
        cassette records or replays them (:mod:`runtime.memory.tape`)."""
        return TapedMemory(self, tape)

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The calls made within go to a memory of this scope's own, empty as it
        starts, deleted as it ends (and so do those of the memories beside it)."""
        scope = _Scope()
        token = _SCOPES.set({**(_SCOPES.get() or {}), self._group: scope})
        try:
            yield
        finally:
            _SCOPES.reset(token)
            scope.close()

    def _made(self, file: Path) -> SQLiteMemory:
        """A new memory in ``file``, with the embeddings and ``max_chars`` of ``like``."""
        from runtime.memory.sqlite import SQLiteMemory  # SQLite loads with a memory's use

        like = self.like
        if isinstance(like, SQLiteMemory):
            return SQLiteMemory(file, embeddings=like.embeddings, max_chars=like.max_chars)
        return SQLiteMemory(file)

    def _memory(self) -> SQLiteMemory:
        scope = (_SCOPES.get() or {}).get(self._group)
        if scope is None:
            raise MemoryStoreError(
                "an eval's runs each have a memory of their own, which ended with the "
                "eval: this run of an eval, made after it, has none",
                path="eval memory",
            )
        return scope.of(self)

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
        """Keep ``text`` in the scope's memory (without ``run_id``: see the class)."""
        return await self._memory().add(
            text, namespace=namespace, kind=kind, role=role, worker=worker
        )

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return await self._memory().get(memory_id)

    async def search(
        self, query: str, *, namespace: str = DEFAULT_NAMESPACE, k: int = 5
    ) -> tuple[MemoryHit, ...]:
        return await self._memory().search(query, namespace=namespace, k=k)

    async def delete(self, memory_id: str) -> bool:
        return await self._memory().delete(memory_id)

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return await self._memory().list(namespace, limit=limit)


def eval_memory(hive: Hive) -> EvalMemory | None:
    """The memory an Executor of ``hive`` is given for an eval: an :class:`EvalMemory`
    like the hive's, when it or a hive it calls as a tool declares one (those then
    have theirs beside it); None when none does."""
    if not _declares_memory(hive):
        return None
    return EvalMemory(hive.memory())


def _declares_memory(hive: Hive) -> bool:
    """Whether ``hive``, or a hive it calls as a tool (however deep), has ``memory:``."""
    return hive.spec.memory is not None or any(_declares_memory(s) for s in hive.hives.values())


def memories_of(
    executor: Executor, sharing: Sharing
) -> tuple[EvalMemory | None, EvalMemory | None]:
    """The :class:`EvalMemory` each run of an eval on ``executor`` has a scope of its
    own in, and the one whose scope the eval's cases share (None: none; with a memory
    that is not an ``EvalMemory``, the runs ``shared`` it as it is).

    Raises:
        ValueError: when the Executor's roles use a memory every run shares, and the
            runs are to have their ``own``: naming them, and the fix.
    """
    held = executor.memory
    if isinstance(held, TapedMemory):  # on a cassette: its searches kept or replayed
        held = held.inner
    if isinstance(held, EvalMemory):
        return (held, None) if sharing == "own" else (None, held)
    users = sorted(name for name, role in executor.roles.items() if role.memory is not None)
    if held is not None and users and sharing == "own":
        raise ValueError(
            f"the roles {', '.join(users)} recall and keep memories in the Executor's "
            "memory, which every run shares: each case's run would recall what the others "
            "kept. Give the Executor a memory of each run's own, "
            "memory=EvalMemory(hive.memory()) (honeycomb.evals.memory), or say the cases "
            "share it on purpose (memory: shared in the cases file, evaluate(..., "
            "memory='shared'))"
        )
    return None, None
