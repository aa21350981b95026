"""``honeycomb sessions``: the conversations a run store keeps (``list``, the default),
one of them turn by turn (``show ID``), and forgetting them (``forget ID``, ``prune``)."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TextIO

from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.options import add_limit, integer, newest_first, number
from honeycomb.cli.stores import DEFAULT_STORE, KEPT_IN, opened_store, store_argument
from honeycomb.run.conversation import Turn
from honeycomb.run.session_rows import StoreRows
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions
from honeycomb.trace.format import counted, format_cost, printable
from runtime import SessionBusy, StoreError, did_you_mean

__all__ = ["add_sessions_command", "new_session_note", "print_turn", "short"]


def add_sessions_command(commands: Any, default_store: Path) -> None:
    """Add ``sessions`` and its actions to the command line's subcommands."""
    sessions = commands.add_parser(
        "sessions", help="list the conversations in the store, show or forget one"
    )
    sessions.add_argument("--store", type=store_argument, default=default_store, help=KEPT_IN)
    add_limit(sessions)
    sessions.set_defaults(handler=_list)
    actions = sessions.add_subparsers(metavar="ACTION")
    sessions.commands = actions.choices  # its actions' parsers, for their errors
    # An action's --store, when it is not given, leaves the one given before the action
    # (`sessions --store S show ID`): a default of its own would put the default back.
    given = argparse.SUPPRESS

    show = actions.add_parser("show", help="a conversation, turn by turn, with each turn's run")
    show.add_argument("session_id", metavar="ID", help="the session (sessions lists them)")
    show.add_argument("--store", type=store_argument, default=given, help=KEPT_IN)
    show.set_defaults(handler=_show)

    forget = actions.add_parser("forget", help="delete conversations and their runs")
    forget.add_argument("session_ids", nargs="+", metavar="ID", help="the sessions")
    forget.add_argument("--store", type=store_argument, default=given, help=KEPT_IN)
    forget.set_defaults(handler=_forget)

    prune = actions.add_parser(
        "prune", help="forget the conversations past an age or beyond a count"
    )
    prune.add_argument("--store", type=store_argument, default=given, help=KEPT_IN)
    # Bounded as the policy's max_age_days (> 0) and max_sessions (>= 1) are: a typo
    # (-1, 0) must not forget every session.
    prune.add_argument(
        "--older-than",
        type=number(0, above=True),
        default=None,
        metavar="DAYS",
        help="forget those whose last message is older than DAYS days (more than 0)",
    )
    prune.add_argument(
        "--keep",
        type=integer(1),
        default=None,
        metavar="N",
        help="forget all but the newest N (at least 1)",
    )
    prune.set_defaults(handler=_prune)


def _stored(path: Path | str) -> StoredSessions | None:
    try:
        return StoredSessions(opened_store(path))
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return None


def _list(args: argparse.Namespace) -> ExitStatus:
    stored = _stored(args.store)
    if stored is None:
        return ExitStatus.UNUSABLE
    found = stored.sessions(args.limit + 1)  # one more: are there more?
    # The store as it is shown (a URL without its password, not with a mask in its place).
    where = stored.store.where
    if not found:
        print(f"no sessions in {where}")
        return ExitStatus.OK
    total = len(found) if len(found) <= args.limit else None
    found = found[: args.limit]
    print(newest_first(len(found), "session", where, total=total))
    print(f"{'session':<20}  {'turns':>5}  {'last message at':<19}  last message")
    for session_id, turns, _, last_at, last_message in found:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last_at))
        shown = printable(session_id, lines=False)
        print(f"{shown:<20}  {turns:>5}  {when:<19}  {short(last_message, 50)}")
    return ExitStatus.OK


def _show(args: argparse.Namespace) -> ExitStatus:
    stored = _stored(args.store)
    if stored is None:
        return ExitStatus.UNUSABLE
    # As a session reads them: a turn whose run was resumed on its own is given its answer.
    turns = asyncio.run(StoreRows(stored).turns(args.session_id))
    if not turns:
        return _no_turns(stored, args)
    shown = printable(args.session_id, lines=False)
    cost = sum(t.cost for t in turns)
    print(f"session {shown} · {counted(len(turns), 'turn')} · {format_cost(cost)}")
    for turn in turns:
        print_turn(sys.stdout, turn)
    return ExitStatus.OK


def _no_turns(stored: StoredSessions, args: argparse.Namespace) -> ExitStatus:
    """What ``show`` says of a session with no turn: one started over still holds the
    runs of the turns it took back, until it is forgotten; else it is not kept."""
    where = stored.store.where
    words = _store_words(args.store, where)
    if stored.known([args.session_id]):
        forget = shlex.join(["honeycomb", "sessions", "forget", args.session_id, *words])
        print(
            f"session {printable(args.session_id, lines=False)} · 0 turns: it was started "
            f"over, and the runs of the turns it took back stay in {where} until it is "
            f"forgotten ({printable(forget, lines=False)})"
        )
        return ExitStatus.OK
    known = shlex.join(["honeycomb", "sessions", *words])
    close = _close_to(stored, args.session_id)
    print(f"{where}: no session {args.session_id!r}{close} ({known})", file=sys.stderr)
    return ExitStatus.UNUSABLE


def _store_words(given: Path | str, where: str) -> list[str]:
    """``--store`` and the store as it is shown (a URL without its password), for a
    command to paste; none for the default store, where the commands look."""
    return [] if Path(given) == DEFAULT_STORE else ["--store", where]


def new_session_note(store: RunStore, session_id: str) -> str:
    """What ``chat --session ID`` says of an ``ID`` that ``store`` keeps no conversation
    of: that it starts one, and the id of a kept one that is close (a typo started an
    empty conversation without a word)."""
    close = _close_to(StoredSessions(store), session_id)
    shown = printable(session_id, lines=False)
    return (
        f"no conversation {shown!r} in {store.where}{close}: this starts it (honeycomb "
        "sessions lists those kept)\n"
    )


def _close_to(stored: StoredSessions, session_id: str) -> str:
    """`` (did you mean 'ID'?)`` naming a kept session whose id is close to
    ``session_id`` (a typo), else ''."""
    kept = [str(row[0]) for row in stored.sessions(_CLOSE_AMONG)]
    return did_you_mean(session_id, kept)


_CLOSE_AMONG = 500
"""The latest conversations looked among for an id close to one not kept."""


def print_turn(out: TextIO, turn: Turn) -> None:
    """A turn as ``sessions show`` and ``chat``'s ``/history`` print it."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(turn.started_at))
    out.write(
        f"\n#{turn.turn}  run {turn.run_id} · {turn.status} · {format_cost(turn.cost)} · {when}\n"
    )
    out.write(f"  you:    {printable(turn.message, lines=False)}\n")
    answer = printable(turn.answer or "(no answer)").strip().replace("\n", "\n          ")
    out.write(f"  answer: {answer}\n")


def _forget(args: argparse.Namespace) -> ExitStatus:
    stored = _stored(args.store)
    if stored is None:
        return ExitStatus.UNUSABLE
    session_ids = list(dict.fromkeys(args.session_ids))  # one named twice is forgotten once
    known = set(stored.known(session_ids))
    missing = [sid for sid in session_ids if sid not in known]
    if missing:
        named = ", ".join(f"{sid!r}{_close_to(stored, sid)}" for sid in missing)
        print(f"{stored.store.where}: no session {named}; none forgotten", file=sys.stderr)
        return ExitStatus.UNUSABLE

    async def forget() -> list[str]:
        # As Session.forget: none of them while one is answering, checked as they are
        # deleted (SessionBusy), so that none begins answering in between.
        await stored.forget(session_ids)
        return session_ids

    return _forgetting(stored, forget())


def _prune(args: argparse.Namespace) -> ExitStatus:
    if args.older_than is None and args.keep is None:
        print("say what to forget: --older-than DAYS, --keep N, or both", file=sys.stderr)
        return ExitStatus.UNUSABLE
    stored = _stored(args.store)
    if stored is None:
        return ExitStatus.UNUSABLE
    before = None if args.older_than is None else time.time() - args.older_than * 86400
    return _forgetting(stored, stored.prune(before=before, keep=args.keep))


def _forgetting(stored: StoredSessions, work: Coroutine[Any, Any, list[str]]) -> ExitStatus:
    """Run ``work`` (which forgets sessions and says which), close the store, and say
    what was forgotten."""

    async def done() -> list[str]:
        try:
            return await work
        finally:
            stored.store.close()

    try:
        forgotten = asyncio.run(done())
    except (StoreError, SessionBusy) as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    if not forgotten:
        print("no session to forget")
    for session_id in forgotten:  # an id a service was given may hold a terminal's escapes
        print(f"forgot session {printable(session_id, lines=False)} (its turns and their runs)")
    return ExitStatus.OK


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters, its control characters (a
    terminal's escapes) made spaces."""
    one = " ".join(printable(text).split())
    return one if len(one) <= width else one[: width - 1] + "…"
