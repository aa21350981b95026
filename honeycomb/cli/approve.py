"""People in the loop from the command line: ``honeycomb approve``, the prompt that
asks about a call on a terminal, and what a run that ends waiting prints."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO

from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.stores import opened_store
from honeycomb.executor import Executor
from honeycomb.hive import load_hive
from honeycomb.offline import OfflineModel
from honeycomb.run.decide import ToolFinder, decide, this_user
from honeycomb.run.result import RunResult
from honeycomb.store import RunStore
from honeycomb.trace.format import argument_lines, printable
from runtime import (
    ApprovalEntry,
    ApprovalError,
    ApprovalRequest,
    ConfigError,
    ConfigErrors,
    Decision,
    HoneycombError,
    PendingApproval,
)
from runtime.tools.approval_gate import settled_by
from runtime.tools.approvals import LeftWaiting, MaskedEdit, unmasked_edit

__all__ = [
    "HiveTools",
    "TerminalApprover",
    "approve_command",
    "asked",
    "json_line",
    "print_pending",
    "print_waiting",
    "shell_line",
]


class TerminalApprover:
    """Asks on a terminal about each call that needs approval, one call at a time:
    approve, deny with a reason, or edit the arguments as JSON. A question that another
    decider answers first (a person on the page of ``honeycomb serve``, ``honeycomb
    approve``) is withdrawn, with a line saying what was decided and by whom. Once the
    input has ended (Ctrl-D) it decides nothing: each call waits in the run store, as a
    run's call does off a terminal (``honeycomb approve``, then ``honeycomb resume``).

    Args:
        read: The terminal's input (a line at a time, read without blocking the loop).
        out: Where the questions go.
        pause: Holds a live view still while a question is asked.
        by: Who answers, kept with each decision (default: this process's user and
            host, at the terminal: ``ann@laptop (at the terminal)``).
    """

    def __init__(
        self,
        read: TextIO,
        out: TextIO,
        pause: Callable[[], AbstractContextManager[None]] | None = None,
        by: str | None = None,
    ) -> None:
        self._in = read
        self._out = out
        self._pause = pause or contextlib.nullcontext
        self.by = by or f"{this_user()} (at the terminal)"
        self._one_at_a_time = asyncio.Lock()
        self._typed = b""  # read, not yet asked for

    async def __call__(self, request: ApprovalRequest) -> Decision:
        async with self._one_at_a_time:
            with self._pause():
                try:
                    return await self._decision(request)
                except EOFError as exc:  # Ctrl-D: nobody here decides; it waits, as elsewhere
                    self._out.write("\n  not decided: the input ended\n")
                    self._out.flush()
                    raise LeftWaiting(str(exc)) from None
                except asyncio.CancelledError as exc:
                    said = _withdrawn_for(exc, request)
                    if said is not None:
                        self._out.write(f"\n{said}\n")
                        self._out.flush()
                    raise

    async def _decision(self, request: ApprovalRequest) -> Decision:
        self._out.write(asked(request))
        while True:
            answer = (await self._ask("[a]pprove, [d]eny, [e]dit arguments? ")).lower()
            if answer in ("a", "approve", "y", "yes"):
                return Decision.approved(by=self.by)
            if answer in ("d", "deny", "n", "no"):
                reason = await self._ask("reason: ")
                return Decision.denied(reason or "denied by a person", by=self.by)
            if answer in ("e", "edit"):
                edited = await self._edited(request)
                if edited is not None:
                    return Decision.approved(edited, by=self.by)

    async def _edited(self, request: ApprovalRequest) -> dict[str, Any] | None:
        self._out.write(f"  as JSON now: {json_line(request.arguments)}\n")
        text = await self._ask("arguments (JSON object): ")
        try:
            value = json.loads(text)
        except ValueError as exc:
            self._out.write(f"  not JSON: {exc}\n")
            return None
        if not isinstance(value, dict):
            self._out.write("  the arguments must be a JSON object\n")
            return None
        try:  # the call would run with a secret's mask: said now, not to the model
            unmasked_edit(value, request.arguments)
        except MaskedEdit as exc:
            self._out.write(f"  {printable(str(exc), lines=False)}\n")
            return None
        return value

    async def _ask(self, prompt: str) -> str:
        """A line from the terminal, awaited on the event loop (so Ctrl-C still stops
        the run while it asks). Read from the file descriptor, not through the
        stream's buffer: lines typed ahead wait here for the next question.

        Raises:
            EOFError: when the input ends before a line.
        """
        self._out.write(prompt)
        self._out.flush()
        while b"\n" not in self._typed:
            chunk = await self._chunk()
            if not chunk:
                raise EOFError("the input ended while a call waited for approval")
            self._typed += chunk
        line, _, self._typed = self._typed.partition(b"\n")
        return line.decode(errors="replace").strip()

    async def _chunk(self) -> bytes:
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        fd = self._in.fileno()

        def ready() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(fd, ready)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        return os.read(fd, 4096)


def _withdrawn_for(cancelled: asyncio.CancelledError, request: ApprovalRequest) -> str | None:
    """The line that withdraws the question about ``request`` that ``cancelled``
    ended: another decider answered first, or its time to decide ran out (a line
    typed at the prompt then answers no question of it); None when the run stops."""
    settled = settled_by(cancelled)
    if settled is not None:
        return _withdrawn(settled)
    if request.deadline is not None and time.time() >= request.deadline:
        return "  withdrawn: the time to decide ran out (approval_timeout_s): the call is denied"
    return None


def _withdrawn(settled: ApprovalEntry) -> str:
    """The line that withdraws a question another decider answered first: what was
    decided (a denial's reason too), and by whom."""
    decision = settled.decision
    assert decision is not None
    what = "approved" if decision.approve else "denied"
    if decision.approve and decision.arguments is not None:
        what += " with edited arguments"
    elif not decision.approve and decision.reason:
        what += f" ({decision.reason})"
    by = settled.decided_by or "someone else"
    return printable(f"  withdrawn: the call was {what} by {by}", lines=False)


def json_line(value: Any) -> str:
    """``value`` as JSON on one line that reads back as it and that a terminal shows as
    text: the characters JSON leaves as they are that would act on the terminal or
    reorder what it shows (C1 controls, direction overrides, zero-width ones, a lone
    surrogate) are written as JSON escapes (``\\u202e``)."""
    return "".join(map(_json_character, json.dumps(value, ensure_ascii=False)))


def _json_character(character: str) -> str:
    if printable(character, lines=False) == character:
        return character
    code = ord(character)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # past the first plane: a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def asked(call: ApprovalRequest | PendingApproval) -> str:
    """How a call waiting for approval reads on a terminal: who calls which tool,
    what it will do (in the tool's words, if it says), why it asks, and each argument
    as text, long ones cut."""
    who = f"{call.worker} ({call.role})" if call.worker else call.role
    lines = [f"Approval needed: {who} calls {call.tool}"]
    if call.summary:
        lines.append(f"  will: {call.summary}")
    lines.append(f"  why: {call.why}")
    if call.deadline is not None:  # else denied then, the prompt withdrawn
        lines.append(f"  decide by: {_clock(call.deadline)}")
    lines = [printable(line, lines=False) for line in lines]  # the model's text, made inert
    shown = argument_lines(call.arguments)
    lines += ["  arguments:", *(f"    {line}" for line in shown)] if shown else ["  no arguments"]
    return "\n" + "\n".join(lines) + "\n"


def _clock(at: float) -> str:
    """The time ``at`` on this machine's clock, with its date unless it is today's."""
    when = time.localtime(at)
    today = time.localtime()[:3] == when[:3]
    return time.strftime("%H:%M:%S" if today else "%Y-%m-%d %H:%M:%S", when)


_SHOWN = 200
"""Characters of an argument of a waiting call shown in the list (the prompt shows more)."""


def print_waiting(
    out: TextIO,
    result: RunResult,
    store: Path | str | None,
    default: Path,
    resume: str | None = None,
) -> None:
    """What a run that ends waiting prints: each call that waits, and the commands that
    decide that very call (its worker and turn named) and continue the run (``resume``,
    when the run's models were chosen by options the command must name again:
    :func:`honeycomb.cli.resuming.resume_hint`)."""
    print_pending(out, result.run_id, result.pending, store, default, resume)


def print_pending(
    out: TextIO,
    run_id: str,
    pending: Sequence[PendingApproval],
    store: Path | str | None,
    default: Path,
    resume: str | None = None,
) -> None:
    """:func:`print_waiting` of run ``run_id``, whose calls ``pending`` wait."""
    out.write(f"\nWaiting for approval ({len(pending)}):\n")
    where = [] if store is None or Path(store) == default else ["--store", str(store)]
    for p in pending:
        out.write(printable(f"  {p.call_id} · {p.worker} ({p.role}) · {p.tool}", lines=False))
        for line in [*([p.summary] if p.summary else []), p.why]:
            out.write(f"\n    {printable(line, lines=False)}")
        out.write("\n")
        for line in argument_lines(p.arguments, limit=_SHOWN, max_lines=4):
            out.write(f"    {line}\n")
    out.write("Decide each, then continue the run:\n")
    for p in pending:
        # The call pinned: a later call of a worker may share an earlier one's id.
        words = ["honeycomb", "approve", run_id, p.call_id, *where]
        words += ["--worker", p.worker, "--turn", str(p.turn)]
        out.write(f"  {shell_line(words)}   (or add --deny --reason '...')\n")
    out.write(f"  {resume or shell_line(['honeycomb', 'resume', run_id, *where])}\n")


def shell_line(words: list[str]) -> str:
    """``words`` as a command line that a shell reads back as them and a terminal
    shows as text: a word holding a control or format character (a model's call id
    may hold a terminal's escape) is written in bash's ``$'...'`` quoting, each such
    character an escape (``$'c1\\x1b[2J'``); others as :func:`shlex.quote` writes them."""
    return " ".join(map(_shell_word, words))


def _shell_word(word: str) -> str:
    if printable(word, lines=False) == word:
        return shlex.quote(word)
    return "$'" + "".join(map(_shell_character, word)) + "'"


def _shell_character(character: str) -> str:
    if character in "\\'":
        return "\\" + character
    if printable(character, lines=False) == character:
        return character
    code = ord(character)
    if code < 0x80:  # a byte; past it, a character (in the terminal's UTF-8)
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def approve_command(args: argparse.Namespace) -> ExitStatus:
    arguments = None
    if args.arguments is not None:
        try:
            arguments = json.loads(args.arguments)
        except ValueError as exc:
            print(f"--arguments is not JSON: {exc}", file=sys.stderr)
            return ExitStatus.UNUSABLE
    try:
        store = opened_store(args.store)
        try:
            # The run's hive knows its tools: edited arguments are checked against them.
            tools = HiveTools(store)(args.run_id) if arguments is not None else None
            worker, turn = asyncio.run(
                _pinned(store, args.run_id, args.call_id, args.worker, args.turn)
            )
            decided = asyncio.run(
                decide(
                    store,
                    args.run_id,
                    args.call_id,
                    approve=not args.deny,
                    reason=args.reason,
                    arguments=arguments,
                    worker=worker,
                    turn=turn,
                    tool_for=tools,
                )
            )
        finally:
            store.close()
    except (HoneycombError, ConfigErrors) as exc:
        print(printable(str(exc), lines=False), file=sys.stderr)  # names typed or the model's
        return ExitStatus.UNUSABLE
    verb = "denied" if args.deny else "approved"
    said = f"{verb}: {decided.tool} ({decided.call_id}) of {decided.worker} in run {args.run_id}"
    print(printable(said, lines=False))  # the model's call id, made inert
    return ExitStatus.OK


async def _pinned(
    store: RunStore, run_id: str, call_id: str, worker: str | None, turn: int | None
) -> tuple[str | None, int | None]:
    """The worker and turn of the one call of id ``call_id`` that the command names (as
    given, when the run has no call of this id: deciding says so).

    Raises:
        ApprovalError: when calls of several workers or turns have this id and one
            waits (a worker's later call may share its id with an earlier one: the
            decision would go to a call the person may not have seen), naming each
            with the ``--worker`` and ``--turn`` that pick it; or when ``worker`` or
            ``turn`` picks none, or no call of the run has this id, naming the calls
            that wait.
    """
    entries = await store.approvals_of(run_id)
    named = [
        e
        for e in entries
        if e.pending.call_id == call_id
        and worker in (None, e.pending.worker)
        and turn in (None, e.pending.turn)
    ]
    if len(named) > 1 and any(e.decision is None for e in named):
        raise ApprovalError(
            run_id,
            call_id,
            f"{len(named)} calls asked for approval under this id: "
            + "; ".join(map(_pick, named))
            + ". Name the one meant with --worker and --turn",
        )
    if len(named) == 1:
        return named[0].pending.worker, named[0].pending.turn
    if named:
        return worker, turn
    if not entries and await store.summary(run_id) is None:
        return worker, turn  # deciding says there is no such run
    raise ApprovalError(run_id, call_id, _none_picked(entries, call_id, worker, turn))


def _pick(entry: ApprovalEntry) -> str:
    """A call asked about, as the options that pick it and what became of it."""
    p, d = entry.pending, entry.decision
    if d is None:
        state = "waits"
    else:
        state = f"{'approved' if d.approve else 'denied'} by {entry.decided_by or 'someone'}"
    return f"--worker {shell_line([p.worker])} --turn {p.turn} ({p.tool}, {state})"


def _none_picked(
    entries: list[ApprovalEntry], call_id: str, worker: str | None, turn: int | None
) -> str:
    """Why no call of id ``call_id`` is picked (by ``worker`` and ``turn``, if given),
    and which calls wait: a run whose process stopped as it asked (killed at the
    terminal's prompt) printed no call ids to decide by."""
    if worker is None:
        head = "the run has no call of this id that asked for approval"
        head += f" in turn {turn}" if turn is not None else ""
    else:
        head = f"worker {worker!r} asked for approval of no call of this id"
        head += f" in turn {turn}" if turn is not None else ""
    same = [e for e in entries if e.pending.call_id == call_id]
    if turn is not None and same:  # of this id, in other turns (or of other workers)
        return f"{head}; its calls: " + "; ".join(map(_pick, same))
    waiting: dict[str, list[str]] = {}
    for entry in entries:
        if entry.decision is None:
            waiting.setdefault(entry.pending.worker, []).append(entry.pending.call_id)
    listed = "; ".join(f"{name} ({', '.join(ids)})" for name, ids in waiting.items())
    return f"{head}; " + (
        f"the workers whose calls wait, and their calls: {listed}"
        if waiting
        else "no call of the run waits for a decision"
    )


class HiveTools:
    """The tools of the runs of ``store`` started from a hive file, from that file
    (loaded once, again when it changes): what ``honeycomb approve`` and ``honeycomb
    serve`` check edited arguments against, and whose ``describe`` says what a call
    will do. A run with no hive file has none here.
    """

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self._loaded: dict[tuple[str, float], Executor | ConfigError] = {}
        self._sources: dict[str, str | None] = {}  # a run's hive file stays its own

    def __call__(self, run_id: str) -> ToolFinder | None:
        """The tools of run ``run_id`` (None: it was not started from a hive file).

        Raises:
            ConfigError: when its hive file is gone or no longer loads, saying where.
        """
        if run_id not in self._sources:
            found = self.store.find(run_id)
            if found is None:
                return None
            self._sources[run_id] = found.source
        source = self._sources[run_id]
        if source is None:
            return None
        try:
            key = (source, Path(source).stat().st_mtime)
        except OSError as exc:
            raise ConfigError(f"the run's hive file cannot be read: {exc}", file=source) from exc
        if key not in self._loaded:
            self._loaded[key] = self._executor(source)
        executor = self._loaded[key]
        if isinstance(executor, ConfigError):
            raise executor.with_traceback(None)  # kept, raised afresh each time
        return executor.tool_for

    def _executor(self, source: str) -> Executor | ConfigError:
        """The Executor of hive file ``source``, its MCP tools listed, or why the file
        no longer loads."""
        try:
            # Its tools are what is wanted: no model is called (so none needs its key
            # or endpoint here), no worker runs (so no backend starts).
            executor = Executor.from_hive(
                load_hive(source), model=OfflineModel(), store=self.store, backend=None
            )
        except ConfigError as exc:  # ConfigErrors among them: each located
            return exc
        except (HoneycombError, OSError) as exc:
            return ConfigError(f"the run's hive file no longer loads: {exc}", file=source)
        # Its MCP tools too, as their servers list them (this is no event loop); a
        # server that cannot start leaves its tools unknown, and an edit refused.
        with contextlib.suppress(HoneycombError):
            asyncio.run(executor.list_tools())
        return executor
