"""``--record FILE`` and ``--replay FILE``: a run's model calls kept in a cassette, or
answered from one with no model called (see docs/evals.md, "Record and replay")."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from honeycomb.cli.options import user_path
from runtime import Memory, Model

if TYPE_CHECKING:
    from honeycomb.hive import Hive

__all__ = ["add_cassette_options", "cassette_memory_of", "cassette_models"]


def add_cassette_options(parser: argparse.ArgumentParser) -> None:
    """``--record FILE`` and ``--replay FILE`` (one or the other) on a command that
    runs a hive; :func:`cassette_models` reads them."""
    calls = parser.add_mutually_exclusive_group()
    calls.add_argument(
        "--record",
        type=user_path,
        default=None,
        metavar="FILE",
        help="keep every model call of the run (request and answer) and every decision on "
        "its calls in the cassette FILE, started anew (continued, by resume), to replay it "
        "later with --replay",
    )
    calls.add_argument(
        "--replay",
        type=user_path,
        default=None,
        metavar="FILE",
        help="answer every model call from the cassette FILE (made by --record): no model "
        "is called, no network, no key; a call it did not record fails, naming the "
        "difference",
    )


def cassette_models(
    hive: Hive, model: Model | None, args: argparse.Namespace
) -> Model | dict[str, Model] | None:
    """The models a run of ``hive`` uses: ``model`` (every role's, or None: the
    hive's own), recorded in ``--record``'s cassette or, with ``--replay``, answered
    from its cassette by name (nothing of the hive's models is built); those of the
    hives it calls as tools too, each named ``TOOL/NAME`` there. It says on standard
    error which, unless the run prints JSON. On Ray too: the cassette stays in this
    process, and each call the actors record is appended to it there. A run that
    continues a stored one (``args.continues``: ``honeycomb resume``, a ``--run-id``
    the store keeps) goes on in ``--record``'s cassette, after what its earlier lives
    recorded there.

    Raises:
        CassetteError: when the file cannot be written or read, or, replaying, does not
            hold the calls of a memory's embeddings of the hive.
    """
    record, replay = getattr(args, "record", None), getattr(args, "replay", None)
    if record is None and replay is None:
        return model
    from runtime.models.layers.cassette import ReplayModel, cassette  # loaded when used

    said: str
    models: dict[str, Model]
    if replay is not None:
        models = cassette(dict.fromkeys(_names(hive)), replay=replay)
        _memories_recorded(hive, models)
        played = next((m.cassette for m in models.values() if isinstance(m, ReplayModel)), None)
        recorded = len(played.calls) if played is not None else 0
        said = f"replaying the model calls of {replay} ({recorded} recorded; no model is called)"
    else:
        from runtime.models.cassettes import CassetteWriter

        own = dict.fromkeys(_names(hive), model) if model is not None else _built(hive)
        # A resumed run's later lives go on in its cassette, after its first's.
        assert record is not None  # (--record, since not --replay)
        tape = Path(record)
        continued = getattr(args, "continues", False) and tape.is_file()
        models = cassette(own, record=CassetteWriter(tape, append=continued))
        said = f"{'continuing' if continued else 'recording'} the model calls in {record}"
    if not getattr(args, "json", False):
        print(said, file=sys.stderr)
    return models


@contextlib.contextmanager
def cassette_memory_of(
    hive: Hive, args: argparse.Namespace, models: Model | Mapping[str, Model] | None
) -> Iterator[Memory | None]:
    """With ``--record`` or ``--replay``, the memory of the runs of a command on
    ``hive`` (one that declares a memory, or calls a hive as a tool that does: that
    one's is beside it): its own, empty as it starts and deleted as
    it ends, with the embeddings and ``max_chars`` of the hive's and keeping no run ids
    (an :class:`~honeycomb.evals.memory.EvalMemory`'s scope), so that a replay recalls
    what the recording did, wherever and however often it is replayed, as an eval's
    runs do (its embeddings are recorded or replayed with ``models``). None
    otherwise: the hive's own memory. Says so on standard error, unless the command
    prints JSON.
    """
    if getattr(args, "record", None) is None and getattr(args, "replay", None) is None:
        yield None
        return
    from honeycomb.evals.memory import EvalMemory, eval_memory  # loaded when recording

    own = eval_memory(hive)
    if own is None:
        yield None
        return
    if not getattr(args, "json", False):
        print(
            "the memory is this command's own (the hive's memory files are neither read "
            "nor written): empty as it starts, so that a replay recalls what the "
            "recording recalled",
            file=sys.stderr,
        )
    # The Executor puts its embeddings on the models' cassette, as any memory's.
    memory = EvalMemory(own.like)
    with memory.scope():
        yield memory


def _memories_recorded(hive: Hive, models: Mapping[str, Model]) -> None:
    """Check that the cassette of ``models`` recorded the embeddings of the memories
    of ``hive`` and of the hives it calls (before anything runs).

    Raises:
        CassetteError: naming the embeddings it did not record, and what to do.
    """
    from runtime.models.layers.cassette_embeddings import cassette_memory

    if hive.spec.memory is not None and hive.spec.memory.embeddings is not None:
        cassette_memory(hive.memory(), models)
    for sub in _called(hive).values():
        _memories_recorded(sub, models)


def _called(hive: Hive) -> dict[str, Hive]:
    """The hives ``hive`` calls as tools, by the tools' names (one a file)."""
    from workers.nesting import nested_tool_name

    return {nested_tool_name(ref): sub for ref, sub in hive.hives.items()}


def _names(hive: Hive, prefix: str = "") -> list[str]:
    """The names of ``hive``'s models, and of those of the hives it calls as tools
    (``TOOL/NAME``, deeper ``TOOL/OTHER/NAME``), as ``Executor.from_hive`` takes them."""
    names = [f"{prefix}{name}" for name in hive.spec.models]
    for tool, sub in _called(hive).items():
        names += _names(sub, f"{prefix}{tool}/")
    return names


def _built(hive: Hive, prefix: str = "") -> dict[str, Model]:
    """``hive``'s models, and those of the hives it calls as tools, built as declared
    and named as :func:`_names` names them."""
    built = {f"{prefix}{name}": model for name, model in hive.models().items()}
    for tool, sub in _called(hive).items():
        built.update(_built(sub, f"{prefix}{tool}/"))
    return built
