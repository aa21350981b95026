"""The lines of a cassette file (:mod:`runtime.models.cassettes` says what it holds),
each tagged by its ``kind``, and the file read back as them, checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from runtime.errors import CassetteError
from runtime.messages import Usage
from runtime.model import ModelRequest, ModelResponse
from runtime.models.cassette_errors import RecordedFailure
from runtime.models.pricing import Price
from runtime.value import Value

__all__ = [
    "VERSION",
    "AttemptSpent",
    "Cut",
    "Decided",
    "Embedded",
    "EmbeddingsLine",
    "Header",
    "Line",
    "ModelLine",
    "Recorded",
    "Searched",
    "read_lines",
]

VERSION = 1
"""The version of the file's format this code reads and writes."""


class Line(Value, frozen=True, kw_only=True, tag_field="kind"):
    """One line of a cassette file, tagged by ``kind``."""


class Header(Line, frozen=True, kw_only=True, tag="cassette"):
    """The first line: the file's format."""

    version: int = VERSION


class ModelLine(Line, frozen=True, kw_only=True, tag="model"):
    """A model recorded: its name, and its price (None: none)."""

    name: str
    price: Price | None = None


class Recorded(Line, frozen=True, kw_only=True, tag="call"):
    """One model call recorded.

    Attributes:
        model: The model's name, as the run knows it.
        request: What it was asked (without its run id and timeout).
        response: What it answered.
        worker: The worker that asked (None: not known).
        case: The eval case that asked (None: not in one).
        pieces: The pieces of text it streamed, in order (None: it was not streamed).
        timeouts: Its attempts that its endpoint did not answer in time, as the call
            counted them (their prompts are billed: a replay counts them alike).
        error: What it failed with, once its retries were done, or the budget's
            refusal of a retry (None: it answered; its ``response`` is then empty).
        cut: It was under way when the run's wall time cut it off (its ``response``
            is then empty, its ``pieces`` those it had streamed).
        cancelled: It was under way when its worker was cancelled otherwise (the run
            stopped it: another worker failed under ``fail_fast``, say): no answer
            came (its ``response`` is then empty, its ``pieces`` those it had
            streamed).
    """

    model: str
    request: ModelRequest
    response: ModelResponse
    worker: str | None = None
    case: str | None = None
    pieces: tuple[str, ...] | None = None
    timeouts: int = 0
    error: RecordedFailure | None = None
    cut: bool = False
    cancelled: bool = False


class Cut(Line, frozen=True, kw_only=True, tag="cut"):
    """Where the wall time of a run recorded cut it off: after the calls (and
    decisions) of its case recorded before this line, the calls recorded ``cut`` after
    it under way, and the asks of an approver recorded ``cut`` after it waiting.

    Attributes:
        used: The seconds the run had used.
        case: The eval case the run was of (None: not in one).
        worker: The worker its own time limit (``worker_timeout_s``) cut off, after
            its calls recorded before this line (None: the run's wall time cut the
            run off).
        ended: The run's workers that had ended as its wall time cut it off.
    """

    used: float
    case: str | None = None
    worker: str | None = None
    ended: tuple[str, ...] = ()


class EmbeddingsLine(Line, frozen=True, kw_only=True, tag="embeddings"):
    """A memory's embeddings recorded: their name, and their price (None: none)."""

    name: str
    price: Price | None = None


class AttemptSpent(Value, frozen=True, kw_only=True):
    """What an attempt at an embeddings call spent, as its payer was told."""

    usage: Usage
    duration_s: float = 0.0
    error: str | None = None


class Embedded(Line, frozen=True, kw_only=True, tag="embed"):
    """One embeddings call recorded.

    Attributes:
        embeddings: The embeddings' name (as a memory file records it).
        texts: The texts embedded.
        vectors: One vector a text (none when the call failed).
        spent: What each of its attempts spent, in order.
        error: What it failed with (None: it answered; text: as a cassette recorded
            it before it kept the error's class and fields).
        case: The eval case that asked (None: not in one).
        cancelled: It was under way when the run stopped its worker (another worker
            failed under ``fail_fast``, say): no vectors came (``spent``: its
            attempts until then).
    """

    embeddings: str
    texts: tuple[str, ...]
    vectors: tuple[tuple[float, ...], ...] = ()
    spent: tuple[AttemptSpent, ...] = ()
    error: RecordedFailure | str | None = None
    case: str | None = None
    cancelled: bool = False


class Searched(Line, frozen=True, kw_only=True, tag="search"):
    """One search of a run's memory recorded (a worker's recall at its start, its
    ``recall`` tool): what it asked, and what it found or failed with.

    Attributes:
        namespace: The namespace searched.
        query: What was searched for.
        k: How many memories were asked for.
        hits: What it found, best first, each as the memory gave it (its record and
            score, as JSON values: :class:`runtime.memory.MemoryHit`).
        error: What it failed with (None: it answered).
        worker: The worker that searched (None: not known).
        case: The eval case that asked (None: not in one).
    """

    namespace: str
    query: str
    k: int
    hits: tuple[dict[str, Any], ...] = ()
    error: RecordedFailure | None = None
    worker: str | None = None
    case: str | None = None


class Decided(Line, frozen=True, kw_only=True, tag="decision"):
    """A decision on a tool call that needed approval, as the worker went on with it.

    Attributes:
        worker: The worker whose call it was.
        tool: The tool called.
        arguments: The call's arguments, as a person saw them (secrets masked).
        turn: The worker's turn the call was of.
        approve: Whether the call ran.
        reason: Why it was denied (None: no reason given, or approved).
        edited: The arguments it was approved with instead of its own (None: its own).
        by: Who decided (a person, the run's approver, the time limit ...).
        case: The eval case that asked (None: not in one).
        cut: It was still asked (its worker waiting) when the run's wall time cut it
            off: no decision was made (``approve`` is then False).
        waited: Its run ended with it still waiting for a decision, in the run's store
            (no approver was attached): no decision was made (``approve`` is then
            False), and a replay leaves it waiting so.
        cancelled: It was still asked when its worker was cancelled otherwise (the
            run stopped it: another worker failed under ``fail_fast``, say): no
            decision was made (``approve`` is then False), and a replay holds the ask
            until it stops the worker too.
    """

    worker: str
    tool: str
    arguments: dict[str, Any]
    turn: int = 0
    approve: bool
    reason: str | None = None
    edited: dict[str, Any] | None = None
    by: str = ""
    case: str | None = None
    cut: bool = False
    waited: bool = False
    cancelled: bool = False


_decoder = msgspec.json.Decoder(
    Header | ModelLine | Recorded | Cut | EmbeddingsLine | Embedded | Searched | Decided
)


def read_lines(path: Path) -> Iterator[Line]:
    """The lines of the cassette ``path``, checked."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CassetteError(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    first = True
    for number, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = _decoder.decode(raw)
        except msgspec.DecodeError as exc:
            raise CassetteError(
                f"not a line of a cassette: {exc}", file=str(path), line=number
            ) from exc
        if first and not isinstance(line, Header):
            raise CassetteError(
                'not a cassette: its first line is not {"kind": "cassette", ...}',
                file=str(path),
                line=number,
            )
        first = False
        if isinstance(line, Header) and line.version != VERSION:
            raise CassetteError(
                f"a cassette of version {line.version}; this Honeycomb reads version "
                f"{VERSION}: record it again",
                file=str(path),
                line=number,
            )
        yield line
    if not data.strip():
        raise CassetteError("empty: not a cassette (record one with --record)", file=str(path))
