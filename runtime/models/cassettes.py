"""A cassette: the model calls of runs kept in a file, to be answered again from it.

The file is JSON lines, appended as calls end (a run cut off keeps the calls it
made): a header first, ``{"kind": "cassette", "version": 1}``; a ``model`` line for
each model recorded (its name, and its price, so a replay costs what the run did);
then a ``call`` line for each call: the model's name, the worker and the eval case
that asked, the request, the response (or the model error it failed with, once its
retries were done, or the run's budget's refusal of a retry:
:mod:`runtime.models.cassette_errors`), the pieces its text was
streamed in, and its attempts that timed out (billed: a replay counts them). A
memory's embeddings, recorded with the models, have an ``embeddings`` line (their
name, as a memory file records it, and their price) and an ``embed`` line a call: the
case that asked, the texts, the vectors (or the error it failed with), and what each
attempt spent, so that a replayed run's usage is the recorded one's; and a ``search``
line a search of the memory: the case and worker that asked, the namespace, query
and ``k``, and what it found (or the error it failed with), so that a replayed run
recalls what the recording recalled, whatever its memory holds now. Each decision on a
tool call that needed approval, as its worker went on with it, has a ``decision`` line
(:class:`~runtime.models.cassette_lines.Decided`), which a replay decides the call by
(:mod:`honeycomb.run.cassette_decisions`). A run its wall time cut off (a worker its
own time limit cut off) has a ``cut`` line where the cut fell, and the calls it cut
under way (and the asks of its approver it cut off) recorded ``cut`` after it, which
a replay holds until it is cut there too (:mod:`runtime.models.cassette_cuts`). A
call under way when its run stopped its worker otherwise (another worker failed under
``fail_fast``) is recorded ``cancelled``, and so is a decision its approver was still
asked for then (none was made), which a replay holds until it stops that worker too
(:mod:`runtime.models.cassette_held`). One cancelled otherwise (the run interrupted
from outside, which a later life goes on from) is not kept.
Secrets are masked (:func:`runtime.secrets.masked`) before a line is written, and
the folder the run worked in is written ``<cwd>`` (a tool that answers with a path
under it, replayed in another clone, answers alike; a replayed answer that names
``<cwd>`` names the folder of the replay).

**How a request is matched.** A request's key (:func:`request_key`) is what the
model is sent and answers from: its messages (roles, texts, tool calls and results,
reasoning), its tools (names, descriptions, argument schemas), its tool choice,
whether calls may be parallel, its output schema and its output limit. What is not
sent, or differs from run to run, is left out: the conversation's run id, the
timeout and the turn; tool call ids are renumbered in the order they appear
(``call_1``, ``call_2`` ...), so ids a server or a text protocol made up do not
count; dates with a time of day (``2026-12-02T10:37:37Z``, ``20261202-103737``) in
any text count as one and the same, as a tool that stamps what it writes answers
differently each run; the folder of the run is ``<cwd>``, and secrets are masked,
on both sides.

Several calls may share a key (parallel workers asking the same thing, a case run
again). Each is answered once, in file order, by the first one not yet given that
was recorded by the same case and worker, else by the same case, else by the same
worker, else by any; once all were given, they are given again in that order of
preference. Workers asking the same thing at once are thus answered by what their own
namesakes were, whatever the order their calls arrive in.

A request with no recorded call of its key is a :class:`~runtime.errors.CassetteMismatch`
naming the case, the worker and the first difference from the nearest recorded call
(:mod:`runtime.models.request_diff`). An embeddings call is matched by the embeddings'
name and its texts (dates, the folder and secrets as in a request), each recorded call
given once, the case's first, as a model call is; texts not recorded are a mismatch
naming the first text that differs. A memory search is matched by its namespace,
``k`` and query (dates, the folder and secrets as in a request), each given once, the
case's and worker's first; one not recorded (a cassette recorded before searches were
kept, a search its caller's timeout cut off) is searched in the memory. A decision is
matched by the worker, the tool and its arguments (dates, the folder and secrets as in
a request), given once each, the case's first; a call with none is a mismatch naming
the call and its tool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import msgspec

from runtime.errors import CassetteMismatch
from runtime.model import ModelRequest
from runtime.models.cassette_cuts import Cuts, cutting
from runtime.models.cassette_held import Held, later_life
from runtime.models.cassette_keys import (
    CWD,
    RUN,
    canonical,
    canonical_arguments,
    canonical_texts,
    decision_key,
    renamed,
    request_key,
    run_of,
    texts_key,
    there,
    told_run,
    worker_of,
)
from runtime.models.cassette_lines import (
    VERSION,
    AttemptSpent,
    Decided,
    Embedded,
    EmbeddingsLine,
    ModelLine,
    Recorded,
    Searched,
    read_lines,
)
from runtime.models.cassette_writer import CassetteWriter
from runtime.models.pricing import Price
from runtime.models.request_diff import (
    OPTIONS,
    common_messages,
    common_start,
    first_difference,
    texts_difference,
)

__all__ = [
    "CWD",
    "RUN",
    "VERSION",
    "AttemptSpent",
    "Cassette",
    "CassetteWriter",
    "Decided",
    "Embedded",
    "Recorded",
    "Searched",
    "canonical",
    "request_key",
    "worker_of",
]


class Cassette:
    """A cassette file read back, answering requests from the calls it holds.

    Attributes:
        path: The file.
        calls: Its recorded calls, in file order.
        prices: The price of each model recorded (None: none).
        embeddings: The price of each memory's embeddings recorded (None: none).
        embedded: Its recorded embeddings calls, in file order.
        searches: Its recorded searches of a memory, in file order.
        decisions: Its recorded decisions on calls that needed approval, in file
            order.

    Raises:
        CassetteError: when the file is missing, or is not a cassette, naming the
            file and the line at fault.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.prices: dict[str, Price | None] = {}
        self.calls: list[Recorded] = []
        self._by_key: dict[tuple[str, str], list[Recorded]] = {}
        self._by_texts: dict[tuple[str, str], list[Embedded]] = {}
        self.embeddings: dict[str, Price | None] = {}
        self.embedded: list[Embedded] = []
        self.searches: list[Searched] = []
        self._by_search: dict[str, list[Searched]] = {}
        self.decisions: list[Decided] = []
        self._by_call: dict[tuple[str, str], list[Decided]] = {}
        self._given: set[int] = set()
        # By case and run: the worker that went otherwise first, and how.
        self._first: dict[tuple[str | None, str | None], tuple[str | None, str]] = {}
        lines = list(read_lines(self.path))
        self._cuts = Cuts(lines)
        self._held = Held(str(self.path))
        for line in lines:
            if isinstance(line, ModelLine):
                self.prices.setdefault(line.name, line.price)
            elif isinstance(line, Recorded):
                self.calls.append(line)
                key = (line.model, request_key(line.request))
                self._by_key.setdefault(key, []).append(line)
            elif isinstance(line, EmbeddingsLine):
                self.embeddings.setdefault(line.name, line.price)
            elif isinstance(line, Embedded):
                self.embedded.append(line)
                self._by_texts.setdefault((line.embeddings, texts_key(line.texts)), []).append(line)
            elif isinstance(line, Searched):
                self.searches.append(line)
                by = _search_key(line.namespace, line.query, line.k)
                self._by_search.setdefault(by, []).append(line)
            elif isinstance(line, Decided):
                self.decisions.append(line)
                key = (line.worker, decision_key(line.tool, line.arguments))
                self._by_call.setdefault(key, []).append(line)

    def answer(
        self, model: str, request: ModelRequest, *, worker: str | None, case: str | None
    ) -> Recorded:
        """The recorded call that answers ``request`` to model ``model``.

        Raises:
            CassetteMismatch: when no recorded call of that model has its key.
        """
        found = self._by_key.get((model, request_key(request)))
        if not found:
            raise CassetteMismatch(
                str(self.path),
                model,
                self._difference(model, request, worker, case),
                worker=worker,
                case=case,
            )
        fresh = [call for call in found if id(call) not in self._given] or found
        # max keeps the first of the best: file order among equals.
        chosen = max(fresh, key=lambda call: (call.case == case, call.worker == worker))
        self._given.add(id(chosen))
        if self._cuts and not chosen.cut:  # the last call before a cut: it falls then
            self._cuts.taken(chosen, case, worker, cutting())
        return self._as_asked(chosen, request)

    def _as_asked(self, chosen: Recorded, request: ModelRequest) -> Recorded:
        """``chosen``, naming the run and the folder of ``request``'s."""
        encoded = msgspec.json.encode(chosen)
        run = run_of(request)
        if run is not None and RUN.encode() in encoded:  # the answer names its run
            value = renamed(msgspec.json.decode(there(encoded)), RUN, run)
            return msgspec.convert(value, type=Recorded)
        return chosen if CWD not in encoded else msgspec.json.decode(there(encoded), type=Recorded)

    def embedding(
        self,
        embeddings: str,
        texts: Sequence[str],
        *,
        case: str | None,
        worker: str | None = None,
    ) -> Embedded:
        """The recorded call of ``embeddings`` that answers ``texts`` (for ``worker``'s
        memory): each given once, the case's first, in file order (once all were given,
        again in that order).

        Raises:
            CassetteMismatch: when no recorded call of those embeddings has those texts.
        """
        found = self._by_texts.get((embeddings, texts_key(texts)))
        if not found:
            self._cuts.strayed(worker, case)  # which fails the worker
            difference = self._texts_difference(embeddings, texts, case)
            raise CassetteMismatch(
                str(self.path), embeddings, difference, case=case, kind="embeddings"
            )
        fresh = [call for call in found if id(call) not in self._given] or found
        chosen = max(fresh, key=lambda call: call.case == case)
        self._given.add(id(chosen))
        return chosen

    def search(
        self,
        namespace: str,
        query: str,
        k: int,
        *,
        worker: str | None,
        case: str | None,
        run: str | None,
    ) -> Searched | None:
        """The recorded search of ``namespace`` for ``query`` (``k`` memories): each
        given once, the case's and worker's first, in file order (once all were given,
        again in that order); what names the recorded run names ``run``. None when
        none was recorded (the memory is searched then).
        """
        found = self._by_search.get(_search_key(namespace, query, k))
        if not found:
            return None
        fresh = [search for search in found if id(search) not in self._given] or found
        chosen = max(fresh, key=lambda search: (search.case == case, search.worker == worker))
        self._given.add(id(chosen))
        encoded = there(msgspec.json.encode(chosen))
        if run is not None and RUN.encode() in encoded:
            return msgspec.convert(renamed(msgspec.json.decode(encoded), RUN, run), Searched)
        return msgspec.json.decode(encoded, type=Searched)

    def decision(
        self, worker: str, tool: str, arguments: dict[str, Any], *, asked: str, case: str | None
    ) -> Decided:
        """The recorded decision on ``worker``'s call of ``tool`` with ``arguments``:
        each given once, the case's first, in file order (once all were given, again
        in that order), as calls are.

        Raises:
            CassetteMismatch: when the cassette holds no decision on such a call,
                naming the call (``asked``: which it is, its id and turn) and the
                nearest decision recorded.
        """
        found = self._by_call.get((worker, decision_key(tool, arguments)))
        if not found:
            difference = f"{asked} asked {_call(tool, arguments)}; {self._nearest(worker, tool)}"
            raise CassetteMismatch(
                str(self.path), tool, difference, worker=worker, case=case, kind="decision"
            )
        fresh = [decided for decided in found if id(decided) not in self._given] or found
        # A call its run left waiting and a later life of it decided: the decision.
        made = [decided for decided in fresh if not decided.waited] or fresh
        chosen = max(made, key=lambda decided: decided.case == case)
        self._given.add(id(chosen))
        if self._cuts and not chosen.cut:
            self._cuts.taken(chosen, case, worker, cutting())
        return chosen

    async def decided(
        self, worker: str, tool: str, arguments: dict[str, Any], *, asked: str, case: str | None
    ) -> Decided:
        """:meth:`decision`, as a replay's approver asks for it: an ask the recorded
        run's wall time cut off (its approver still asked), or one not recorded that
        asks past that cut, is held until the replay's cut (:meth:`cut_off`)."""
        try:
            found = self.decision(worker, tool, arguments, asked=asked, case=case)
        except CassetteMismatch:
            if not (self._cuts and self._cuts.past(worker, case)):
                self._cuts.strayed(worker, case)
                raise
            await self.cut_off(tool, None, worker=worker, case=case, kind="decision")
        if found.cut:
            await self.cut_off(tool, found, worker=worker, case=case, kind="decision")
        if found.cancelled:
            what = f"its ask of the approver on {asked}"
            key = (worker, decision_key(tool, arguments))
            later = later_life(self._by_call.get(key, []), self._given, case, worker)
            found = await self._held.hold(
                tool, what, worker=worker, case=case, instead=later, kind="decision"
            )
        return found

    def _nearest(self, worker: str, tool: str) -> str:
        """What the cassette holds nearest a decision on ``worker``'s call of ``tool``."""
        of_worker = [d for d in self.decisions if d.worker == worker]
        if not of_worker:
            workers = ", ".join(sorted({repr(d.worker) for d in self.decisions})) or "none"
            return f"it holds no decision on a call of worker {worker!r} (its workers: {workers})"
        nearest = next((d for d in of_worker if d.tool == tool), of_worker[0])
        return f"recorded {_call(nearest.tool, nearest.arguments)} (turn {nearest.turn})"

    async def answered(
        self, model: str, request: ModelRequest, *, worker: str | None, case: str | None
    ) -> Recorded:
        """:meth:`answer`, as a replay asks for it (a stand-in elsewhere, an actor's,
        asks the process that holds the cassette); a call not recorded that asks past
        where the recorded run's wall time cut it off is held until the replay's cut
        (:meth:`cut_off`)."""
        try:
            return self.answer(model, request, worker=worker, case=case)
        except CassetteMismatch as exc:
            if not (self._cuts and self._cuts.past(worker, case)):
                self._cuts.strayed(worker, case)
                raise self._after_first(exc, run_of(request)) from None
        return await self.cut_off(model, None, worker=worker, case=case)

    def _after_first(self, mismatch: CassetteMismatch, run: str | None) -> CassetteMismatch:
        """``mismatch``, naming the first call of its run (its case) that the cassette
        did not record, when another worker asked it: a call that differs only for
        what came of that one (an aggregator told a worker failed) names its cause."""
        said = f"asked first what it did not record: {mismatch.difference}"
        worker, first = self._first.setdefault((mismatch.case, run), (mismatch.worker, said))
        if worker == mismatch.worker:
            return mismatch
        difference = f"worker {worker!r} {first}; and this call then: {mismatch.difference}"
        return CassetteMismatch(
            mismatch.file, mismatch.model, difference, worker=mismatch.worker, case=mismatch.case
        )

    def went_otherwise(self, worker: str, case: str | None, run: str | None, how: str) -> None:
        """``worker`` of run ``run`` (of ``case``) failed as its recording did not
        (``how``): a call that then differs only for what came of it names it first
        (:meth:`answered`), as a call not recorded is."""
        self._first.setdefault((case, told_run(run)), (worker, how))

    def ran(
        self,
        worker: str,
        case: str | None,
        *,
        ended: bool,
        stopping: Callable[[], bool],
    ) -> None:
        """A replayed run's ``worker`` (of ``case``) started, or ``ended``: a cut of
        the recorded run after that worker ended falls once it ended replayed too; a
        call held as cancelled (:meth:`cancelled_off`) is bounded by the run's workers,
        ``stopping`` telling whether the run is stopping them."""
        if self._cuts:
            self._cuts.ran(worker, case, ended=ended, cuts=cutting())
        self._held.ran(worker, case, ended=ended, stopping=stopping)

    async def cancelled_off(
        self, model: str, request: ModelRequest, *, worker: str | None, case: str | None
    ) -> Recorded:
        """Hold ``request``, whose call its worker was cancelled in when recorded, until
        the replayed run cancels its worker too (:mod:`runtime.models.cassette_held`);
        once nothing is left to, the call as a later life of its run answered it.

        Raises:
            CassetteMismatch: once the replayed run's other workers ended and nothing
                cancelled it, and no later life answered it, naming the worker and the
                call.
        """
        later = later_life(
            self._by_key.get((model, request_key(request)), []), self._given, case, worker
        )
        what = f"its call of turn {request.turn}"
        found = await self._held.hold(model, what, worker=worker, case=case, instead=later)
        return self._as_asked(found, request)

    async def embedding_cancelled(
        self, call: Embedded, *, worker: str | None, case: str | None
    ) -> Embedded:
        """:meth:`cancelled_off`, for a memory's embeddings ``call``."""
        later = later_life(
            self._by_texts.get((call.embeddings, texts_key(call.texts)), []),
            self._given,
            case,
            worker,
        )
        text = call.texts[0] if call.texts else ""
        what = f"its call for {len(call.texts)} texts ({text[:40]!r} first)"
        return await self._held.hold(
            call.embeddings, what, worker=worker, case=case, instead=later, kind="embeddings"
        )

    async def cut_off(
        self,
        model: str,
        call: Recorded | Decided | None,
        *,
        worker: str | None,
        case: str | None,
        kind: str = "model",
    ) -> NoReturn:
        """Hold ``call``, which the recorded run's wall time (or its worker's time
        limit) cut off under way (None: a call asked past that cut), until the replayed
        run (worker) is cut where the recording was
        (:mod:`runtime.models.cassette_cuts`): it is cancelled then, as it was.
        ``kind``: what it is (``model``, or ``decision``: an ask of the approver).

        Raises:
            CassetteMismatch: when the replayed run (worker) has no such limit to cut.
        """
        cuts, pending = cutting(), self._cuts.holding(call, worker, case)
        whose = pending is not None and pending.line.worker is not None
        if pending is None or cuts[whose] is None:
            why = (
                "its worker has no time limit (policy: worker_timeout_s)"
                if whose
                else "the replayed run has no wall-time budget (budgets: wall_time_s)"
            )
            limit = "its worker's time limit" if whose else "the recorded run's wall time"
            difference = f"{limit} cut it off under way, and {why}"
            raise CassetteMismatch(
                str(self.path), model, difference, worker=worker, case=case, kind=kind
            )
        self._cuts.check(case, worker, cuts)
        await asyncio.get_running_loop().create_future()  # never set: the cut cancels it
        raise AssertionError("unreachable: only the run's cut ends the wait")

    def _texts_difference(self, embeddings: str, texts: Sequence[str], case: str | None) -> str:
        """How ``texts`` differ from those of the nearest call recorded of
        ``embeddings`` (of the same case, else any): the one sharing most texts from
        the first, then the longest shared start of its first text that differs."""
        recorded = [call for call in self.embedded if call.embeddings == embeddings]
        if not recorded:
            names = ", ".join(sorted(self.embeddings)) or "none"
            return f"it holds no call of embeddings {embeddings!r} (its embeddings: {names})"
        pool = [call for call in recorded if call.case == case] or recorded
        asked = canonical_texts(texts)

        def nearness(call: Embedded) -> tuple[int, int]:
            theirs = canonical_texts(call.texts)
            shared = common_messages(asked, theirs)
            if shared == min(len(asked), len(theirs)):
                return shared, 0
            return shared, common_start(asked[shared], theirs[shared])

        return texts_difference(canonical_texts(max(pool, key=nearness).texts), asked)

    def _difference(
        self, model: str, request: ModelRequest, worker: str | None, case: str | None
    ) -> str:
        """How ``request`` differs from the nearest call recorded of ``model``: among
        those the same case and worker made (else the same case, else the same
        worker, else any), the one that shares most messages from the first, then
        most options."""
        recorded = [call for call in self.calls if call.model == model]
        if not recorded:
            models = ", ".join(sorted({call.model for call in self.calls})) or "none"
            return f"the cassette holds no call of model {model!r} (its models: {models})"
        pool = (
            [c for c in recorded if c.case == case and c.worker == worker]
            or [c for c in recorded if c.case == case]
            or [c for c in recorded if c.worker == worker]
            or recorded
        )
        asked = canonical(request)

        def nearness(call: Recorded) -> tuple[int, int]:
            theirs = canonical(call.request)
            same = sum(asked[name] == theirs[name] for name in OPTIONS)
            return common_messages(asked["messages"], theirs["messages"]), same

        nearest = max(pool, key=nearness)
        where = f" (recorded for worker {nearest.worker!r})" if nearest.worker else ""
        return first_difference(canonical(nearest.request), asked) + where


def _search_key(namespace: str, query: str, k: int) -> str:
    """The key a memory search is matched by."""
    return f"{namespace}\0{k}\0{texts_key([query])}"


def _call(tool: str, arguments: dict[str, Any]) -> str:
    """A call as a mismatch names it: its tool and arguments, shortened."""
    shown = canonical_arguments(arguments)
    return f"{tool} {shown if len(shown) <= 200 else shown[:199] + '…'}"
