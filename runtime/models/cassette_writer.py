"""The writer of a cassette (:mod:`runtime.models.cassettes` says what the file
holds): each model, call, decision and cut appended, masked, as it comes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from runtime.errors import CassetteError
from runtime.models.cassette_keys import RUN, here, renamed, run_of, told_run
from runtime.models.cassette_lines import (
    Cut,
    Decided,
    Embedded,
    EmbeddingsLine,
    Header,
    Line,
    ModelLine,
    Recorded,
    Searched,
    read_lines,
)
from runtime.models.pricing import Price
from runtime.secrets import HeldText, masked

__all__ = ["CassetteWriter"]


class CassetteWriter:
    """Writes a cassette: the file is started anew (its folder made) when the writer
    is made, or, with ``append``, continued when it is a cassette already (a resumed
    run's later lives after its first's); each model and call is appended, masked, as
    it comes (a line at a time, whatever thread appends it).

    Raises:
        CassetteError: when the file cannot be written, or, continued, is not a
            cassette (naming its line at fault).
    """

    def __init__(self, path: str | Path, *, append: bool = False) -> None:
        self.path = Path(path)
        self._models: set[str | tuple[str, str]] = set()
        self._decided: set[tuple[str | None, str, int, str]] = set()
        self._asked: dict[tuple[str | None, str, int, str], Decided] = {}
        self._ended: dict[str | None, dict[str, None]] = {}  # by case, as they ended
        self.stopping: Callable[[], bool] | None = None
        """Whether the run whose task asks is stopping its workers (another failed
        under ``fail_fast``, a budget ran out): a call cancelled then is recorded
        ``cancelled``. Told by the run (:mod:`honeycomb.run.cassette_decisions`); None:
        no call cancelled is recorded."""
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if append and self.path.is_file() and self.path.stat().st_size:
                self._models.update(_names(read_lines(self.path)))
            else:
                self.path.write_bytes(msgspec.json.encode(Header()) + b"\n")
        except OSError as exc:
            raise CassetteError(f"cannot write: {exc}", file=str(self.path)) from exc

    def model(self, name: str, price: Price | None) -> None:
        """Record model ``name`` and its price (once a name)."""
        if name not in self._models:
            self._models.add(name)
            self._append(ModelLine(name=name, price=price))

    def embeddings(self, name: str, price: Price | None) -> None:
        """Record a memory's embeddings ``name`` and their price (once a name)."""
        if ("embeddings", name) not in self._models:
            self._models.add(("embeddings", name))
            self._append(EmbeddingsLine(name=name, price=price))

    def embedded(self, embedded: Embedded) -> None:
        """Record one embeddings call."""
        self._append(masked(embedded))

    def searched(self, searched: Searched, run: str | None) -> None:
        """Record one search of a memory, made by run ``run`` (its id written
        :data:`RUN`: a memory that run kept names it)."""
        line, told = masked(searched), told_run(run)
        if told is None:
            self._append(line)
        else:
            self._append(renamed(msgspec.to_builtins(line), told, RUN))

    def call(self, recorded: Recorded) -> None:
        """Record one call (the id of its run written :data:`RUN`; a secret its text
        streamed split across pieces masked as it is whole)."""
        run = run_of(recorded.request)
        request = msgspec.structs.replace(recorded.request, conversation=None, timeout=None)
        pieces = None if recorded.pieces is None else _masked_pieces(recorded.pieces)
        line = masked(msgspec.structs.replace(recorded, request=request, pieces=pieces))
        self._append(line if run is None else renamed(msgspec.to_builtins(line), run, RUN))

    def decided(self, decided: Decided, call: tuple[str | None, str, int, str]) -> None:
        """Record one decision, on ``call`` (its run, worker, turn and id): once a
        call, which a later life of its run, or a listener of a sub-run, tells again."""
        with self._lock:
            self._asked.pop(call, None)
            if call in self._decided:
                return
            self._decided.add(call)
        self._append(masked(decided))

    def asked(self, asked: Decided, call: tuple[str | None, str, int, str]) -> None:
        """Keep ``call`` as asked about until it is :meth:`decided`: a run's wall time
        that cuts it off meanwhile records it ``cut`` (``asked``, so marked)."""
        with self._lock:
            if call not in self._decided:
                self._asked[call] = asked

    def finished(self, run: str | None, *, waiting: bool = False) -> None:
        """Run ``run`` ended: its calls still asked about are no more (a later life
        that takes up their decisions records those); one that ended ``waiting``
        records them as left waiting (a replay leaves them so)."""
        with self._lock:
            left = {call: asked for call, asked in self._asked.items() if call[0] == run}
            for call in left:
                del self._asked[call]
        for asked in left.values() if waiting else ():
            self._append(masked(replace(asked, cut=False, waited=True)))

    def stopped(self, run: str | None, worker: str) -> None:
        """``worker`` of run ``run`` was cancelled (the run stopped it: another worker
        failed, say): its calls still asked about are recorded ``cancelled`` (a replay
        holds them until it stops the worker too; a later life that decides them
        records that)."""
        with self._lock:
            left = {k: a for k, a in self._asked.items() if k[0] == run and k[1] == worker}
            for call in left:
                del self._asked[call]
        for asked in left.values():
            self._append(masked(replace(asked, cut=False, cancelled=True)))

    def ran(self, worker: str, case: str | None, *, ended: bool) -> None:
        """``worker`` (of ``case``) started, or ``ended``: a cut of its run's wall time
        records the workers that had ended."""
        with self._lock:
            running = self._ended.setdefault(case, {})
            running.pop(worker, None)
            if ended:
                running[worker] = None

    def cut(self, used: float, case: str | None, worker: str | None = None) -> None:
        """Record where a run's wall time cut it off (or its ``worker``'s time limit
        cut that worker off), having used ``used`` seconds, and its calls still asked
        about (the model calls it cut are recorded after, as they end)."""
        with self._lock:
            waiting = {
                k: a
                for k, a in self._asked.items()
                if a.case == case and worker in (None, a.worker)
            }
            for call in waiting:
                del self._asked[call]
                self._decided.add(call)
            ended = tuple(self._ended.get(case, ())) if worker is None else ()
        self._append(Cut(used=used, case=case, worker=worker, ended=ended))
        for asked in waiting.values():
            self._append(masked(asked))

    def _append(self, line: Line | dict[str, Any]) -> None:
        encoded = here(msgspec.json.encode(line)) + b"\n"
        try:
            with self._lock, self.path.open("ab") as out:
                out.write(encoded)
        except OSError as exc:
            raise CassetteError(f"cannot write: {exc}", file=str(self.path)) from exc


def _masked_pieces(pieces: tuple[str, ...]) -> tuple[str, ...]:
    """The pieces a text streamed in, every secret masked as in the whole text, one
    split across pieces too (a piece that could end in the start of one goes on with
    the next, as a streamed call's text is shown: :class:`HeldText`)."""
    kept: list[str] = []
    held = HeldText(kept.append)
    for piece in pieces:
        held(piece)
    held.flush()
    return tuple(kept)


def _names(lines: Iterable[Line]) -> Iterator[str | tuple[str, str]]:
    """The models (``name``) and embeddings (``("embeddings", name)``) ``lines``
    record."""
    for line in lines:
        if isinstance(line, ModelLine):
            yield line.name
        elif isinstance(line, EmbeddingsLine):
            yield "embeddings", line.name
