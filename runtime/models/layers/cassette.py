"""Record a model's calls in a cassette, and answer them again from it with no model
behind (:mod:`runtime.models.cassettes` says what the file holds and how a request is
matched), so that a run made once on a real model reruns offline, deterministic and
free: a regression test, an eval in CI.

    models = cassette(hive.models(), record="runs/trip.cassette.jsonl")  # a real run
    models = cassette(hive.models(), replay="runs/trip.cassette.jsonl")  # no network

A model's own layer, made with it (as its price and retries are), and outermost of
them: a recording keeps what the model answered once its retries are done, at its
price; a replay stands in for the whole of it, so nothing of the model is built,
held or asked for a key. The layers a worker adds (budget, trace, checks) go around
either as around any model, so a replayed run is counted, traced and checked as the
recorded one was.

A memory's embeddings are recorded in the same cassette and answered from it
(:mod:`runtime.models.layers.cassette_embeddings`), so that a replayed run whose roles
recall and remember calls no embeddings endpoint either, and spends what the recorded
run's calls spent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import overload

from runtime.errors import BudgetExceeded, HoneycombError, ModelCallError, ModelError
from runtime.limits.budget import attempting, retried, timed_out
from runtime.limits.cut import RunCut
from runtime.messages import AssistantMessage
from runtime.model import Model, ModelRequest, ModelResponse, TextSink, WrapperModel, call_model
from runtime.models.cassette_cuts import cutting, tell_cuts
from runtime.models.cassette_errors import failure_of, raised
from runtime.models.cassette_held import run_stopping
from runtime.models.cassettes import (
    Cassette,
    CassetteWriter,
    Recorded,
    worker_of,
)
from runtime.models.layers.cost_cap import price_of
from runtime.models.pricing import Price

__all__ = ["RecordingModel", "ReplayModel", "cassette", "cassette_case", "current_case"]

_case: ContextVar[str | None] = ContextVar("honeycomb_cassette_case", default=None)


@contextmanager
def cassette_case(name: str | None) -> Iterator[None]:
    """The model calls made in the block, and in the tasks it starts, are those of
    case ``name`` (an eval's): a recording keeps the name with each call, a replay
    prefers the calls recorded for it and names it when a request was not recorded."""
    token = _case.set(name)
    try:
        yield
    finally:
        _case.reset(token)


def current_case() -> str | None:
    """The case the model calls made here are those of (:func:`cassette_case`)."""
    return _case.get()


class RecordingModel(WrapperModel):
    """``inner``, each of whose calls is appended to a cassette as it ends: the
    request, the answer (or the model error it failed with, once its retries were
    done, or the run's budget's refusal of a retry), the pieces of its text when
    streamed, and its attempts that its endpoint did not answer in time. An exception
    of ``inner``'s own (a model of one's own, not a Honeycomb error) is raised and kept
    as the :class:`~runtime.errors.ModelCallError` a run makes of it, naming ``inner``,
    so that its replay fails alike.

    Args:
        inner: The model recorded.
        cassette: The file (started anew) or a :class:`CassetteWriter` that several
            models share.
        name: The model's name in the cassette (a hive's name for it).

    Raises:
        CassetteError: when the file cannot be written.
    """

    def __init__(
        self, inner: Model, cassette: str | Path | CassetteWriter, *, name: str = "default"
    ) -> None:
        super().__init__(inner)
        self.name = name
        self.writer = cassette if isinstance(cassette, CassetteWriter) else CassetteWriter(cassette)
        price = price_of(inner)
        self.writer.model(name, price if isinstance(price, Price) else None)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self._made(request, None)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        return await self._made(request, on_text)

    async def _made(self, request: ModelRequest, on_text: TextSink | None) -> ModelResponse:
        """The inner model's answer (its text streamed to ``on_text``, when given, and
        its pieces kept), recorded as the call ends: answered, failed, or cut off by
        its run's wall time."""
        pieces: list[str] = []
        call, cuts = attempting.get(), self._told_of_cuts(request)
        before = call.timeouts if call is not None else 0
        try:
            if on_text is None:
                response = await self.inner.complete(request)
            else:
                response = await call_model(self.inner, request, _kept(pieces, on_text))
        except _ENDED as exc:  # kept too: its replay fails alike
            self._keep(request, None, _streamed(pieces, on_text), before, exc)
            raise
        except asyncio.CancelledError:
            # Its run's (worker's) time ran out: cut; or the run stopped its worker
            # (another worker failed, say): a replay holds it until it is stopped too.
            cut = any(cut.used is not None for cut in cuts)
            if cut or run_stopping(self.writer):
                streamed = _streamed(pieces, on_text)
                self._keep(request, None, streamed, before, cut=cut, cancelled=not cut)
            raise
        except Exception as exc:  # the model's own (not Honeycomb's): named as the run does
            if isinstance(exc, HoneycombError):
                raise  # a failure of the run's, not the model's: the run says why
            error = ModelCallError(self.inner, exc)
            self._keep(request, None, _streamed(pieces, on_text), before, error)
            raise error from exc
        self._keep(request, response, _streamed(pieces, on_text), before)
        return response

    def _told_of_cuts(self, request: ModelRequest) -> tuple[RunCut, ...]:
        """The cuts of the run calling's wall time and of its worker's time limit (none
        when it has neither), which tell the cassette where they fall."""
        cuts = cutting()
        tell_cuts(self.writer, cuts, case=_case.get(), worker=worker_of(request))
        return tuple(cut for cut in cuts if cut is not None)

    def _keep(
        self,
        request: ModelRequest,
        response: ModelResponse | None,
        pieces: tuple[str, ...] | None,
        before: int,
        error: ModelError | BudgetExceeded | None = None,
        *,
        cut: bool = False,
        cancelled: bool = False,
    ) -> None:
        """Record a call that ended: its answer, or its ``error``, or that its run's
        wall time ``cut`` it off, or that its worker was ``cancelled`` under it, and the
        attempts its endpoint did not answer in time (counted past ``before``)."""
        if error is None and not (cut or cancelled) and not isinstance(response, ModelResponse):
            return  # the checks outside will say why
        call = attempting.get()
        self.writer.call(
            Recorded(
                model=self.name,
                request=request,
                response=response or ModelResponse(message=AssistantMessage(content="")),
                worker=worker_of(request),
                case=_case.get(),
                pieces=pieces,
                timeouts=call.timeouts - before if call is not None else 0,
                error=failure_of(error) if error is not None else None,
                cut=cut,
                cancelled=cancelled,
            )
        )


def _kept(pieces: list[str], on_text: TextSink) -> TextSink:
    """``on_text``, each piece kept in ``pieces`` as it passes."""

    def sink(text: str) -> None:
        pieces.append(text)
        on_text(text)

    return sink


def _streamed(pieces: list[str], on_text: TextSink | None) -> tuple[str, ...] | None:
    """The pieces a call's text streamed in (None: it was not streamed)."""
    return None if on_text is None else tuple(pieces)


class ReplayModel:
    """Answers each call from a cassette, with no model behind it and no network: a
    streamed call gets its text in the pieces recorded (whole, if it was recorded
    unstreamed); its usage and cost are those recorded, and the attempts its endpoint
    did not answer in time are counted again; a call that failed when recorded raises
    what it raised, and one whose retry the budget refused asks the budget for that
    retry again (refused by it, spent alike; else refused as recorded); a call its
    run's wall time cut off is held, its text streamed, until the replayed run is cut
    where the recorded one was (:mod:`runtime.models.cassette_cuts`); one its worker
    was cancelled in (the run stopped it), until the replay's is
    (:mod:`runtime.models.cassette_held`).

    Args:
        cassette: The file, or a :class:`Cassette` read once that several models
            share (each recorded call is then given once across them).
        name: The model's name in the cassette.

    Raises:
        CassetteError: when the file cannot be read or is not a cassette.
        CassetteMismatch: (from a call) when the cassette recorded no call like it.
    """

    def __init__(self, cassette: str | Path | Cassette, *, name: str = "default") -> None:
        self.cassette = cassette if isinstance(cassette, Cassette) else Cassette(cassette)
        self.name = name
        self.price = self.cassette.prices.get(name)
        # It tells its call of the attempts that timed out when recorded, if any did
        # (runtime.model.tells_attempts: a call of a model that tells costs more).
        self.tells_attempts = any(c.timeouts for c in self.cassette.calls if c.model == name)

    def __repr__(self) -> str:
        return f"ReplayModel({str(self.cassette.path)!r}, name={self.name!r})"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        recorded = await self._recorded(request)
        if recorded.cut or recorded.cancelled:
            recorded = await self._cut_off(recorded, request)
        return _ended(recorded)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        recorded = await self._recorded(request)
        pieces = recorded.pieces
        if pieces is None and recorded.error is None:
            pieces = (recorded.response.message.content or "",)
        for piece in pieces or ():
            if piece:
                on_text(piece)
        if recorded.cut or recorded.cancelled:  # once the text it had streamed was shown
            recorded = await self._cut_off(recorded, request)
            for piece in recorded.pieces or (recorded.response.message.content or "",):
                if piece:  # a later life's answer: its text, as that life streamed it
                    on_text(piece)
        return _ended(recorded)

    async def _cut_off(self, recorded: Recorded, request: ModelRequest) -> Recorded:
        """Hold a call the recorded run's wall time cut off until the replayed run is
        cut where it was (:meth:`Cassette.cut_off`); one its worker was cancelled in,
        until the replay's is, or else answer it as a later life of its run did
        (:meth:`Cassette.cancelled_off`)."""
        worker, case = worker_of(request), _case.get()
        if recorded.cancelled:
            return await self.cassette.cancelled_off(self.name, request, worker=worker, case=case)
        await self.cassette.cut_off(self.name, recorded, worker=worker, case=case)
        raise AssertionError("unreachable: only the run's cut ends the wait")

    async def _recorded(self, request: ModelRequest) -> Recorded:
        recorded = await self.cassette.answered(
            self.name, request, worker=worker_of(request), case=_case.get()
        )
        for _ in range(recorded.timeouts):  # billed when recorded: counted alike
            timed_out()
        return recorded


_ENDED = (ModelError, BudgetExceeded)
"""What a model call recorded may end with besides an answer: a model error once its
retries were done, or the run's budget refusing a retry
(:func:`runtime.limits.budget.retried`)."""


def _ended(recorded: Recorded) -> ModelResponse:
    """What a recorded call answered; or, raised, what it failed with (a retry its
    budget refused is asked of the replay's budget first, which refuses it with its
    own numbers when it is spent as the recording's was)."""
    if recorded.error is None:
        return recorded.response
    if recorded.error.type == BudgetExceeded.__name__:
        retried()
    raise raised(recorded.error)


@overload
def cassette(
    models: Model,
    *,
    record: str | Path | CassetteWriter | None = None,
    replay: str | Path | None = None,
) -> Model: ...


@overload
def cassette(
    models: Mapping[str, Model],
    *,
    record: str | Path | CassetteWriter | None = None,
    replay: str | Path | None = None,
) -> dict[str, Model]: ...


@overload
def cassette(models: Mapping[str, object], *, replay: str | Path) -> dict[str, Model]: ...


def cassette(
    models: Model | Mapping[str, object],
    *,
    record: str | Path | CassetteWriter | None = None,
    replay: str | Path | None = None,
) -> Model | dict[str, Model]:
    """One model, or models by name, recorded in the cassette ``record`` (a file,
    started anew, or a :class:`CassetteWriter`: one that continues a file) or answered
    from the cassette ``replay``; as they are with neither. A single model is named
    ``default`` in the file, as an Executor names it.

    With ``replay``, only the names are read: nothing of the models is called, held
    or asked for a key, and a hive's models need not be built at all
    (``cassette(hive.spec.models, replay=path)``).

    Raises:
        ValueError: when both ``record`` and ``replay`` are given.
        TypeError: when a model to record is no model.
        CassetteError: when the file cannot be written (``record``), or read
            (``replay``).
    """
    if record is not None and replay is not None:
        raise ValueError("record= or replay=, not both: a cassette is recorded, then replayed")
    one = not isinstance(models, Mapping)
    named: dict[str, object] = dict(models) if isinstance(models, Mapping) else {"default": models}
    wrapped: dict[str, Model] = {}
    if replay is not None:
        played = Cassette(replay)
        wrapped = {name: ReplayModel(played, name=name) for name in named}
        return wrapped["default"] if one else wrapped
    for name, model in named.items():
        if not isinstance(model, Model):
            raise TypeError(f"cassette(): {name!r} is {model!r}, not a model to record")
        wrapped[name] = model
    if record is not None:
        writer = record if isinstance(record, CassetteWriter) else CassetteWriter(record)
        wrapped = {name: RecordingModel(m, writer, name=name) for name, m in wrapped.items()}
    return wrapped["default"] if one else wrapped
