"""A memory in a cassette: its embeddings and its searches.

:class:`RecordingEmbeddings` records each embeddings call (its texts, its vectors or
its error, what each attempt spent), and :class:`ReplayEmbeddings` answers it from the
cassette with no endpoint, paying again what each attempt spent, so that a replayed
run whose roles recall and remember calls no embeddings endpoint either and spends
what the recorded run spent. :class:`RecordingSearches` keeps what each search of the
memory found, and :class:`ReplaySearches` gives it back, so that a replayed run
recalls what the recorded one did, whatever the memory holds by then.
:func:`cassette_memory` puts a memory on a cassette, as an Executor whose models are a
cassette's (:mod:`runtime.models.layers.cassette`) does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from runtime.errors import CassetteError, ModelError
from runtime.limits.spending import Payer, paid_by, payer
from runtime.messages import Usage
from runtime.model import Model
from runtime.models.cassette_errors import RecordedFailure, failure_of, memory_raised
from runtime.models.cassette_held import run_stopping
from runtime.models.cassettes import AttemptSpent, Cassette, CassetteWriter, Embedded, Searched
from runtime.models.layers.cassette import RecordingModel, ReplayModel, current_case
from runtime.models.pricing import Price

__all__ = [
    "RecordingEmbeddings",
    "RecordingSearches",
    "ReplayEmbeddings",
    "ReplaySearches",
    "cassette_memory",
]


class _Attempts:
    """Pays for an embeddings call's attempts while it is recorded: each is refused
    or paid by the payer behind (if any), as it would be, and kept (``kept``)."""

    def __init__(self, behind: Payer | None) -> None:
        self.behind = behind
        self.kept: list[AttemptSpent] = []

    def check(self) -> None:
        if self.behind is not None:
            self.behind.check()

    def spent(self, model: str, usage: Usage, duration_s: float, error: str | None) -> None:
        self.kept.append(AttemptSpent(usage=usage, duration_s=duration_s, error=error))
        if self.behind is not None:
            self.behind.spent(model, usage, duration_s, error)


class RecordingEmbeddings:
    """A memory's embeddings ``inner``, each of whose calls is appended to a cassette:
    its texts, its vectors (or the error it failed with), and what each attempt spent.

    Args:
        inner: The embeddings recorded (a :class:`runtime.memory.Embeddings`).
        cassette: The cassette's :class:`CassetteWriter` (the models' too).

    Raises:
        CassetteError: when the file cannot be written.
    """

    def __init__(self, inner: Any, cassette: CassetteWriter) -> None:
        self.inner, self.writer = inner, cassette
        price = getattr(inner, "price", None)
        self.price = price if isinstance(price, Price) else None  # what a budget counts
        cassette.embeddings(inner.name, self.price)

    @property
    def name(self) -> str:
        name: str = self.inner.name
        return name

    def __repr__(self) -> str:
        return f"RecordingEmbeddings({self.inner!r}, {str(self.writer.path)!r})"

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        attempts = _Attempts(payer())
        try:
            with paid_by(attempts):
                vectors: Sequence[Sequence[float]] = await self.inner.embed(texts)
        except Exception as exc:  # its failure too: the replay fails alike, having spent alike
            self._keep(texts, (), attempts, failure_of(exc))
            raise
        except asyncio.CancelledError:  # the run stopped its worker: a replay holds it so
            if texts and run_stopping(self.writer):
                self._keep(texts, (), attempts, None, cancelled=True)
            raise
        if texts:
            self._keep(texts, vectors, attempts, None)
        return vectors

    def _keep(
        self,
        texts: Sequence[str],
        vectors: Sequence[Sequence[float]],
        attempts: _Attempts,
        error: RecordedFailure | None,
        *,
        cancelled: bool = False,
    ) -> None:
        self.writer.embedded(
            Embedded(
                embeddings=self.name,
                texts=tuple(texts),
                vectors=tuple(tuple(vector) for vector in vectors),
                spent=tuple(attempts.kept),
                error=error,
                case=current_case(),
                cancelled=cancelled,
            )
        )


class ReplayEmbeddings:
    """Answers a memory's embeddings calls from a cassette, with no endpoint behind:
    each call's vectors are those recorded for its texts, and what its attempts spent
    is paid again (so the run's usage and budget count what the recorded run's did).

    Args:
        cassette: The cassette, read once (the models' too).
        name: The embeddings' name, as the memory's file records it.

    Raises:
        CassetteError: when the cassette recorded no embeddings of that name (it was
            recorded without this memory, or by a Honeycomb that recorded none).
        CassetteMismatch: (from a call) when the cassette recorded no call of those
            texts.
    """

    def __init__(self, cassette: Cassette, name: str) -> None:
        if name not in cassette.embeddings:
            recorded = ", ".join(repr(n) for n in sorted(cassette.embeddings)) or "none"
            raise CassetteError(
                f"the run's memory embeds with {name!r}, whose calls the cassette did not "
                f"record (its embeddings: {recorded}): record it again",
                file=str(cassette.path),
            )
        self.cassette, self._name = cassette, name
        self.price = cassette.embeddings[name]

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"ReplayEmbeddings({str(self.cassette.path)!r}, name={self._name!r})"

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        if not texts:
            return []
        who = payer()
        if who is not None:
            who.check()
        worker, case = _asking()[1], current_case()
        recorded = self.cassette.embedding(self._name, texts, case=case, worker=worker)
        for at, attempt in enumerate(recorded.spent):
            if who is not None:
                if at:
                    who.check()  # before a retry, as when recorded
                who.spent(self._name, attempt.usage, attempt.duration_s, attempt.error)
        if recorded.error is not None:
            if who is not None:
                who.check()  # a budget spent refused it when recorded (a retry of it)
            if isinstance(recorded.error, str):  # recorded before its class was kept
                raise ModelError(f"(as recorded) {recorded.error}")
            raise memory_raised(recorded.error)  # what the memory's caller was told then
        if recorded.cancelled:  # until the replayed run stops its worker too
            recorded = await self.cassette.embedding_cancelled(recorded, worker=worker, case=case)
        return [list(vector) for vector in recorded.vectors]


class RecordingSearches:
    """Keeps each search of a memory in a cassette, with the case and worker that
    asked (the tape of :class:`runtime.memory.tape.TapedMemory`)."""

    def __init__(self, cassette: CassetteWriter) -> None:
        self.writer = cassette

    def recorded(self, namespace: str, query: str, k: int) -> None:
        """None: a recording searches the memory."""

    def searched(
        self, namespace: str, query: str, k: int, hits: Sequence[Any], error: Exception | None
    ) -> None:
        run, worker = _asking()
        line = Searched(
            namespace=namespace,
            query=query,
            k=k,
            hits=tuple(msgspec.to_builtins(list(hits))),
            error=None if error is None else failure_of(error),
            worker=worker,
            case=current_case(),
        )
        self.writer.searched(line, run)


class ReplaySearches:
    """Gives each search of a memory what the cassette recorded for it (the tape of
    :class:`runtime.memory.tape.TapedMemory`): its hits, the memories the recorded
    run kept naming the replaying run, or its error, made again."""

    def __init__(self, cassette: Cassette) -> None:
        self.cassette = cassette

    def recorded(
        self, namespace: str, query: str, k: int
    ) -> tuple[Sequence[Any], Exception | None] | None:
        run, worker = _asking()
        found = self.cassette.search(
            namespace, query, k, worker=worker, case=current_case(), run=run
        )
        if found is None:
            return None
        return found.hits, None if found.error is None else memory_raised(found.error)

    def searched(
        self, namespace: str, query: str, k: int, hits: Sequence[Any], error: Exception | None
    ) -> None:
        """A search the cassette did not record, made in the memory: nothing is kept."""


def _asking() -> tuple[str | None, str | None]:
    """The run and the worker whose memory call the current task makes: the caller of
    the payer a worker with memory sets (:mod:`runtime.limits.spending`), if any."""
    caller = getattr(payer(), "caller", None)
    return getattr(caller, "run_id", None), getattr(caller, "worker", None)


def cassette_memory(memory: Any, models: Model | Mapping[str, Model] | None) -> Any:
    """``memory`` on the cassette of ``models`` (what :func:`cassette` made): its
    embeddings recorded in it, or answered from it, and its searches kept in it, or
    answered from it; as it is when none of them is a cassette's, or it is on one
    already. A memory that can be made again so (``with_embeddings``,
    ``with_searches``: an ``SQLiteMemory``, an eval's memory) is; the one given is
    left as it is.

    Raises:
        CassetteError: replaying, when the cassette recorded none of its embeddings.
    """
    if memory is None or hasattr(memory, "tape"):
        return memory
    named = models.values() if isinstance(models, Mapping) else (models,)
    on = next((m for m in named if isinstance(m, ReplayModel | RecordingModel)), None)
    if on is None:
        return memory
    embeddings = getattr(memory, "embeddings", None)
    again = getattr(memory, "with_embeddings", None)
    if (
        embeddings is not None
        and again is not None
        and not isinstance(embeddings, RecordingEmbeddings | ReplayEmbeddings)
    ):
        memory = again(
            ReplayEmbeddings(on.cassette, embeddings.name)
            if isinstance(on, ReplayModel)
            else RecordingEmbeddings(embeddings, on.writer)
        )
    taped = getattr(memory, "with_searches", None)
    if taped is None:
        return memory
    return taped(
        ReplaySearches(on.cassette) if isinstance(on, ReplayModel) else RecordingSearches(on.writer)
    )
