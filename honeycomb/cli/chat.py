"""``honeycomb chat hive.yaml [--session ID]``: a conversation with a hive in the
terminal. Each message is a run of a session (see ``docs/sessions.md``) that sees the
messages before it; its answer is written as it comes (on a terminal, under the live
table of its workers), and the table of its workers follows it (with ``--json``: every
event of it, a JSON line each). Between messages: ``/trace`` draws the last turn's
timeline, ``/cost`` what each turn spent, ``/history`` the conversation, ``/undo``
takes the last turn back, ``/new`` starts over, ``/exit`` (or end of input) leaves.
With a run store (the default), ``--session ID`` goes on with a conversation kept there.
A turn whose calls need approval ends waiting, printing them and the commands that
decide them (as ``honeycomb run`` does); the next message continues it first, as it
does a turn cut off (Ctrl-C, a crash), shown as any turn. The chat holds its Executor
(its models' servers, its MCP servers) from the first message to the last.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TextIO

from rich.console import Console

from honeycomb.cli.approve import print_pending
from honeycomb.cli.backend import chosen_backend, pool_running
from honeycomb.cli.cassettes import cassette_memory_of, cassette_models
from honeycomb.cli.exits import STOPPED_BY, ExitStatus, stopped_by_signals
from honeycomb.cli.loop import run_on_loop
from honeycomb.cli.options import user_path
from honeycomb.cli.resuming import chat_hint, not_recorded, resume_hint, say_note
from honeycomb.cli.running import (
    DEFAULT_STORE,
    hive_store,
    missing_keys,
    model_of,
    refused_as_made,
    store_of,
)
from honeycomb.cli.sessions import new_session_note, print_turn, short
from honeycomb.cli.typed import Typed
from honeycomb.cli.view import JsonView, LiveView, View, found, live, summary
from honeycomb.executor import Executor
from honeycomb.hive import Hive, load_hive
from honeycomb.hive.backend import BackendSpec
from honeycomb.run.conversation import Turn
from honeycomb.run.events import AggregationStarted, PlanReady, RoundPlanned
from honeycomb.run.result import RunResult
from honeycomb.run.session import Session
from honeycomb.store import RunStore
from honeycomb.store.sessions import StoredSessions
from honeycomb.trace.format import counted, format_cost, printable
from runtime import (
    ConfigError,
    ConfigErrors,
    Event,
    EventHandler,
    HoneycombError,
    Model,
    PendingApproval,
    StoreError,
    TextDelta,
)
from runtime.text import valid_text
from workers import MemoryRecalled

__all__ = ["add_chat_command", "chat_command"]

HELP = "/trace  /cost  /history  /undo  /new  /exit"


def add_chat_command(commands: Any, run_options: Callable[..., None]) -> None:
    """Add ``chat`` to the command line's subcommands (``run_options``: those of
    ``run``, but for the run's id)."""
    chat = commands.add_parser(
        "chat", help="talk with a hive: each message a run that sees the ones before"
    )
    chat.add_argument("hive", type=user_path, help="the hive YAML file")
    chat.add_argument(
        "--session",
        type=_session_id,
        default=None,
        help="go on with this conversation (default: a new one)",
    )
    run_options(chat, run_id=False)
    chat.set_defaults(handler=chat_command)


def _session_id(given: str) -> str:
    """``--session``: not blank (``--session "$UNSET"``), which started a new
    conversation, of an id of its own, in place of the one meant; printable, as
    ``--run-id`` is: the id is shown on the terminal and in commands to copy, where a
    tab, a line break or an escape code would do harm."""
    if not given.strip():
        raise argparse.ArgumentTypeError(f"takes a conversation's id, not {given!r}")
    if not given.isprintable():
        raise argparse.ArgumentTypeError(
            "takes a conversation's id of printable characters (no line breaks, tabs or "
            f"escape codes), not {given[:40]!r}{' ...' if len(given) > 40 else ''}"
        )
    return given


def chat_command(args: argparse.Namespace) -> ExitStatus:
    try:
        hive = load_hive(args.hive)
        hive.check_runnable()
        model = model_of(args, hive)
        backend = chosen_backend(hive.backend, args)
    except (ConfigErrors, ConfigError) as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    missing = missing_keys(hive, model, args)
    if missing:
        print(str(ConfigErrors(missing)), file=sys.stderr)
        return ExitStatus.UNUSABLE
    path = store_of(hive, args)
    try:  # a password_env not set, a bad ?schema=: told as `honeycomb run` tells them
        store = hive_store(hive, path) if path is not None else None
    except (StoreError, ConfigError) as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    try:  # --record goes on in the cassette of the conversation's earlier chats
        args.continues = _kept_already(store, args)
        models = cassette_models(hive, model, args)  # --record, --replay
    except (StoreError, ConfigError) as exc:
        print(str(exc), file=sys.stderr)
        if store is not None:
            store.close()
        return ExitStatus.UNUSABLE
    console = Console()
    session_id = args.session or os.urandom(4).hex()
    talk = _talk(hive, models, store, backend, args, console, session_id)
    try:
        return run_on_loop(_stoppable(talk, store, session_id, args))
    finally:
        if store is not None:
            store.close()


def _kept_already(store: RunStore | None, args: argparse.Namespace) -> bool:
    """Whether ``store`` keeps a turn of the conversation ``--session`` names, which
    this chat goes on with: ``--record`` then goes on in the cassette its earlier
    chats recorded in, as a resumed run's does, rather than start it anew.

    Raises:
        StoreError: when ``store`` cannot be read: a conversation taken for a new one
            would record its cassette anew, losing the calls of its earlier chats.
    """
    if store is None or args.session is None or getattr(args, "record", None) is None:
        return False
    return bool(StoredSessions(store).turns_now(args.session))


async def _stoppable(
    talk: Awaitable[ExitStatus], store: RunStore | None, session_id: str, args: argparse.Namespace
) -> ExitStatus:
    """The chat, ``talk``, which Ctrl-C or SIGTERM stops cleanly, at the prompt or
    during a turn (kept interrupted: the next message of the session continues it
    first), the chat's models and servers stopped and its store closed: said
    ``cancelled``, with what the turn's stop could not record (its store away), and
    the command that goes on with the conversation ``session_id``, when ``store``
    keeps it."""
    stopped_by: list[signal.Signals] = []
    try:
        with stopped_by_signals(stopped_by):
            return await talk
    except asyncio.CancelledError as exc:
        if not stopped_by:
            raise
        unrecorded = getattr(exc, "__notes__", [])
    print("cancelled", file=sys.stderr)
    if unrecorded:
        print(not_recorded(unrecorded), file=sys.stderr)
    if store is not None and await _kept(store, session_id):
        hint = chat_hint(session_id, store.where, args)  # its URL without a password
        print(f"Continue the conversation with: {hint}", file=sys.stderr)
        say_note(sys.stderr, args, args.store)  # the hive's store: the chat reads it again
    return STOPPED_BY[stopped_by[0]]


async def _kept(store: RunStore, session_id: str) -> bool:
    """Whether ``store`` keeps a turn of the conversation ``session_id``; one that
    cannot be read now is taken to (the command that would go on with it is said)."""
    try:
        return bool(await StoredSessions(store).turns(session_id))
    except StoreError:
        return True


async def _talk(
    hive: Hive,
    models: Model | Mapping[str, Model] | None,
    store: RunStore | None,
    backend: BackendSpec,
    args: argparse.Namespace,
    console: Console,
    session_id: str,
) -> ExitStatus:
    """The conversation ``session_id``, its workers where the hive (or ``--backend``)
    says."""
    shown = "json" if args.json else "plain" if args.plain or not live(console) else "live"
    out, events = sys.stdout, None
    if shown == "json":  # stdout holds the events alone, as `run --json`'s does
        out, events, console = sys.stderr, sys.stdout, Console(stderr=True)
    with cassette_memory_of(hive, args, models) as memory:  # --record, --replay: the chat's own
        own: dict[str, Any] = {"memory": memory} if memory is not None else {}
        pool = backend.build(hive.folder)
        try:  # a budget in dollars on an unpriced --model, a --session id too long ...
            executor = Executor.from_hive(hive, models=models, store=store, backend=pool, **own)
            chat = Chat(hive, executor, session_id, shown, args=args)
        except ConfigError as exc:  # as `honeycomb run` tells them
            print(refused_as_made(exc, args), file=sys.stderr)
            return ExitStatus.UNUSABLE
        if pool is None:
            return await chat.talk(sys.stdin, out, console, events=events)
        async with pool_running(pool) as problem:
            if problem is not None:
                print(f"backend: {backend.described()}: {problem}", file=sys.stderr)
                return ExitStatus.UNUSABLE
            return await chat.talk(sys.stdin, out, console, events=events)


class Chat:
    """One conversation on the terminal."""

    def __init__(
        self,
        hive: Hive,
        executor: Executor,
        session_id: str | None,
        shown: str,
        *,
        args: argparse.Namespace | None = None,
    ):
        self.hive = hive
        self.executor = executor
        # A turn cut off (Ctrl-C, a crash) is resumed before the next message.
        self.session: Session = executor.session(
            session_id or os.urandom(4).hex(), unfinished="resume"
        )
        # --session: one kept, or a new one so named (not the id `chat` gave a new one)
        self.named = session_id is not None if args is None else args.session is not None
        self.args = args  # the command's: the options that chose the models, named again
        self.shown = shown  # live (a terminal), plain, or json (every event a line)
        self.results: list[RunResult] = []
        self._events: TextIO | None = None  # where the json view writes (None: out)
        self._told: set[str] = set()  # why the memory failed, as said in this chat
        # The run of the turn this chat last showed unfinished (waiting, cut off): one
        # decided and continued elsewhere (honeycomb approve and resume, the page of
        # honeycomb serve) is shown once it ended, before the next message.
        self._unfinished: str | None = None

    async def talk(
        self, inp: TextIO, out: TextIO, console: Console, *, events: TextIO | None = None
    ) -> ExitStatus:
        """Read messages until ``/exit`` or the end of input; answer each, writing the
        chat's own words to ``out`` and, shown as ``json``, the events to ``events``
        (default: ``out``). The Executor is held the while: a model served from this
        process (llama.cpp) or an MCP server that a turn starts serves every later
        turn (a model keeps its prompt cache), and stops as the chat ends, however it
        ends."""
        self._events = events
        async with self.executor:
            return await self._conversation(Typed(inp), out, console)

    async def _conversation(self, typed: Typed, out: TextIO, console: Console) -> ExitStatus:
        commands: dict[str, Callable[[TextIO], Awaitable[None]]] = {
            "/trace": lambda o: self._trace(console),
            "/cost": self._cost,
            "/history": self._history,
            "/undo": self._undo,
            "/new": self._new,
        }
        try:
            if self.executor.store is not None:  # one that cannot be used stops the chat
                await self.executor.store.open()  # here, as it stops `honeycomb run`
            earlier = await self.session.turns()
        except StoreError as exc:
            print(str(exc), file=sys.stderr)
            return ExitStatus.UNUSABLE
        store = self.executor.store
        # Not "kept in memory": that reads as the hive's long-term memory file.
        kept = f"kept in {store.where}" if store is not None else "kept by this chat alone"
        out.write(
            f"honeycomb chat · {self.hive.name} · session {self.session.id} "
            f"({counted(len(earlier), 'turn')} so far, {kept})\n{HELP}\n"
        )
        if self.named and not earlier and store is not None:
            out.write(new_session_note(store, self.session.id))
        last = earlier[-1] if earlier else None
        if last is not None and not last.ended and last.status != "running":
            self._unfinished = last.run_id
            out.write(
                f"message {last.turn} did not finish ({last.status}): your next message "
                "continues it first (/undo drops it)\n"
            )
            await self._waits_on(last.run_id, out)
        while True:
            out.write("\nyou> ")
            out.flush()
            try:
                line = await typed.readline()
            except asyncio.CancelledError:  # Ctrl-C: the command's last word goes below
                out.write("\n")
                raise
            if not line or line.strip() in ("/exit", "/quit"):
                out.write("\n")
                return ExitStatus.OK
            text = valid_text(line.strip())
            if not text:
                continue
            command = commands.get(text.split()[0])
            try:
                if command is not None:
                    await command(out)
                elif _command_like(text.split()[0]):
                    out.write(f"unknown command {text.split()[0]}: {HELP}\n")
                else:
                    await self._answer(text, out, console)
            except HoneycombError as exc:  # another process answers, the store is gone ...
                out.write(f"{exc}\n")

    async def _waits_on(self, run_id: str, out: TextIO) -> None:
        """The calls run ``run_id`` (a turn's, kept) waits on, if any, and the commands
        that decide them: a chat opened again shows them before its first message."""
        store = self.executor.store
        pending = await self.executor.pending(run_id) if store is not None else []
        if pending:
            self._waiting(run_id, pending, out)

    def _waiting(self, run_id: str, pending: Sequence[PendingApproval], out: TextIO) -> None:
        """The calls ``pending`` run ``run_id`` (a turn's) waits on, and the commands
        that decide them and continue it, on the models this chat was given (with what
        to do before that one runs as pasted)."""
        store = self.executor.store
        where = store.where if store is not None else None
        resume = None
        if store is not None and self.args is not None:
            resume = resume_hint(run_id, store.where, self.args)  # its URL without a password
        print_pending(out, run_id, pending, where, DEFAULT_STORE, resume)
        if resume is not None and self.args is not None:
            say_note(out, self.args, store_of(self.hive, self.args), "  ")

    async def _answer(self, message: str, out: TextIO, console: Console) -> None:
        """Answer ``message``, once the turn before it has ended: one that did not (it
        waits for approvals, or was cut off) goes on first."""
        if await self._went_on(out, console):
            await self._turn(
                lambda on_event: self.session.run(message, on_event=on_event, text_deltas=True),
                out,
                console,
            )

    async def _went_on(self, out: TextIO, console: Console) -> bool:
        """Continue the last turn if it did not finish, shown as a turn is; whether it
        has ended now, so that the next message can be sent. One that another process
        answers is left to the session, which refuses the message."""
        turns = await self.session.turns()
        last = turns[-1] if turns else None
        if last is not None and last.ended and last.run_id == self._unfinished:
            out.write(f"\nmessage {last.turn} went on elsewhere, and ended ({last.status}):\n")
            print_turn(out, last)
        self._unfinished = None
        if last is None or last.ended or last.status == "running":
            return True
        out.write(f"\nmessage {last.turn} did not finish ({last.status}): it goes on first\n")
        await self._turn(
            lambda on_event: self.session.resume(on_event=on_event, text_deltas=True),
            out,
            console,
        )
        turns = await self.session.turns()
        if turns and not turns[-1].ended:
            out.write(
                f"\nYour message was not sent: message {turns[-1].turn} has to end first "
                "(/undo drops it).\n"
            )
            return False
        return True

    async def _turn(
        self,
        answer: Callable[[Sequence[EventHandler]], Awaitable[RunResult | None]],
        out: TextIO,
        console: Console,
    ) -> None:
        """One turn, ``answer(on_event)``, under the chat's view: its text as it is
        written, then its workers; for a turn that waits for approvals, the calls it
        waits on and how to decide them, as ``honeycomb run`` prints them."""
        view: View = _Written(out)
        if self.shown == "live":
            view = LiveView(console, f"honeycomb · {self.hive.name}")
        elif self.shown == "json":
            view = JsonView(self._events or out)
        unrecalled: list[MemoryRecalled] = []

        def recall_failed(event: Event) -> None:
            if isinstance(event, MemoryRecalled) and event.error:
                unrecalled.append(event)

        try:
            with view:
                result = await answer([view.handle, recall_failed])
        except HoneycombError as exc:
            out.write(f"\n{type(exc).__name__}: {exc}\n")
            await self._stopped(exc, out)
            self._not_recalled(unrecalled, out)
            return
        if result is None:
            return
        self.results.append(result)
        self._unfinished = result.run_id if result.status == "waiting" else None
        if self.shown == "json":
            return  # its run.finished line holds it all
        if result.status == "waiting":
            out.write("\n" + workers_table(result) + "\n")
            self._waiting(result.run_id, result.pending, out)
            out.write(
                "Or, once they are decided, send your next message: the turn goes on first.\n"
            )
            return
        said = printable(result.answer_text.strip())
        if not isinstance(view, _Written) or view.written.strip() != said:
            # Not written as it came, or not it alone (the aggregator's text beside the
            # calls it made before its answer): the answer whole.
            out.write(f"\n{said}\n")
        out.write("\n" + workers_table(result) + "\n")
        self._not_recalled(unrecalled, out)

    async def _stopped(self, exc: HoneycombError, out: TextIO) -> None:
        """What a turn that ended without an answer (over its budget, failed, its answer
        refused) had found and spent, from its error's partial result, as ``honeycomb
        run`` prints it: what it spent counts in ``/cost`` too. A message that is no
        turn of the conversation (the run's input guards refused it) is said to be none:
        ``/undo`` would take back the turn before it, not this message."""
        partial: RunResult | None = getattr(exc, "partial", None)
        if partial is None:
            return
        self.results.append(partial)
        if self.shown != "json":  # its run.finished line holds it all
            out.write("\n".join(found(partial)) + "\n" + workers_table(partial) + "\n")
        if partial.run_id not in {t.run_id for t in await self.session.turns()}:
            out.write(
                "This message is no turn of the conversation: no later message is told "
                "it, and /undo takes back the one before it.\n"
            )

    def _not_recalled(self, events: Sequence[MemoryRecalled], out: TextIO) -> None:
        """Say why the memory could not be searched (a file that is not a memory file,
        one another program holds), once a chat for each reason: the workers go on
        without it, and neither the answer nor the table shows it (``--json`` has the
        events)."""
        if self.shown == "json":
            return
        for event in events:
            said = f"memory {event.namespace}: could not recall: {event.error}"
            if said not in self._told:
                self._told.add(said)
                out.write(f"  {printable(said, lines=False)}\n")

    async def _trace(self, console: Console) -> None:
        from honeycomb.run.shown import stored_timeline
        from honeycomb.trace.terminal import render_timeline

        store, turns = self.executor.store, await self.session.turns()
        if store is None or not turns:
            console.print("nothing to trace: no store" if store is None else "no turn to trace yet")
            return
        run_id = turns[-1].run_id
        stored, spans = await store.load(run_id), store.spans(run_id)
        if stored is None or not spans:
            console.print(f"run {run_id} has no spans")
            return
        console.print(render_timeline(stored_timeline(stored, spans), console.width))

    async def _cost(self, out: TextIO) -> None:
        turns = await self.session.turns()
        for turn in turns:
            out.write(f"#{turn.turn:<3} {format_cost(turn.cost):>8}  {turn.status:<11} ")
            out.write(f"{short(turn.message, 50)}\n")
        total = sum(t.cost for t in turns)
        mine = sum((r.usage.total_tokens for r in self.results), 0)
        out.write(f"total {format_cost(total)} over {counted(len(turns), 'turn')}")
        out.write(f"; {counted(mine, 'token')} in this chat\n")

    async def _history(self, out: TextIO) -> None:
        turns = await self.session.turns()
        for turn in turns:
            print_turn(out, turn)
        out.write("" if turns else "no messages yet\n")  # not a blank, as if it failed

    async def _undo(self, out: TextIO) -> None:
        undone = await self.session.pop()
        if undone is None:
            out.write("nothing to undo\n")
            return
        said = printable(undone.message, lines=False)  # made inert
        out.write(f"took back message {undone.turn}: {said}{_denied(undone)}\n")

    async def _new(self, out: TextIO) -> None:
        turns = await self.session.turns()
        await self.session.clear()
        denied = _denied(turns[-1]) if turns else ""
        out.write(f"session {self.session.id}: started over{denied}\n")


def _denied(turn: Turn) -> str:
    """What taking ``turn`` back did to the calls it waited on, if it waited: a person
    who would approve one of them in another terminal is told it was decided."""
    if turn.status != "waiting":
        return ""
    return f" (the calls message {turn.turn} waited on are denied: it never makes them)"


def _command_like(word: str) -> bool:
    """Whether a line's first word reads as a command (``/histroy``), not as a message
    that starts with a path (``/etc/hosts lists which hosts?``)."""
    return word.startswith("/") and word[1:].isalpha()


class _Written:
    """The answer's text as it is written (the aggregator's deltas, not those of the
    agents it calls, whose names are under its own, nor the subtasks' text that the
    run's output guards held until they passed an answer made of it), for a terminal
    without the live view and for pipes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.wrote = False
        self.written = ""  # all of it, as written
        self._aggregating = False
        self._subtasks: set[str] = set()

    def __enter__(self) -> _Written:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.wrote:  # the answer's last line ended, as one written whole is
            self.out.write("\n")
        self.out.flush()

    def handle(self, event: Event) -> None:
        if isinstance(event, PlanReady | RoundPlanned):
            plan = event.plan if isinstance(event, PlanReady) else event.added
            self._subtasks.update(s.id for s in plan.subtasks)
        elif isinstance(event, AggregationStarted):
            self._aggregating = True
        elif isinstance(event, TextDelta) and self._aggregating and self._answers(event.worker):
            if not self.wrote:
                self.out.write("\n")
            text = printable(event.text)
            self.out.write(text)
            self.out.flush()
            self.written += text
            self.wrote = True

    def _answers(self, worker: str | None) -> bool:
        """Whether ``worker``'s text is the aggregator's answer: not a subtask's, nor a
        nested worker's (``s1/call_1``)."""
        name = worker or ""
        return "/" not in name and name not in self._subtasks


def workers_table(result: RunResult) -> str:
    """The turn's workers, one line each, then its figures."""
    lines = [f"  {'subtask':<16} {'role':<16} {'status':<10} {'turns':>5} {'tools':>5} {'time':>7}"]
    for outcome in result.subtasks.values():
        worker = outcome.worker
        turns = worker.turns if worker is not None else 0
        tools = worker.usage.tool_calls if worker is not None else 0
        lines.append(
            f"  {outcome.subtask.id:<16} {outcome.subtask.role:<16} {outcome.status:<10} "
            f"{turns:>5} {tools:>5} {outcome.duration_s:>6.2f}s"
        )
    closing = summary(result)
    # Its figures on: what spent, and which failed or were cut off (the timings before
    # them are the table's).
    figures = closing[next(i for i, line in enumerate(closing) if line.startswith("tokens")) :]
    return "\n".join([*lines, *("  " + line for line in figures)])
