"""The exit statuses of every ``honeycomb`` command, in one table: the commands return
these, and docs/cli.md's table is this one (a test holds them together)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Iterator

from runtime.tools.threads import still_running, waited_for

__all__ = [
    "MEANINGS",
    "STOPPED_BY",
    "ExitStatus",
    "exit_status_table",
    "stopped_by_signals",
    "waiting_for_abandoned_calls",
]


class ExitStatus(enum.IntEnum):
    """What a command's exit status says (:data:`MEANINGS` says when each is given)."""

    OK = 0
    FAILED = 1
    UNUSABLE = 2
    WAITING = 3
    CASES_FAILED = 4
    INTERRUPTED = 128 + signal.SIGINT
    BROKEN_PIPE = 128 + signal.SIGPIPE
    TERMINATED = 128 + signal.SIGTERM


MEANINGS: dict[ExitStatus, str] = {
    ExitStatus.OK: "the run gave an answer; the other commands did what they were asked "
    "(`validate`: every file is valid)",
    ExitStatus.FAILED: "the run failed (a subtask, its plan, a guard) or went over a budget "
    "(what it did is summed up: the answers of the subtasks that finished, under `Found "
    "before it stopped:`, but for those its output guards did not pass when the answer is "
    "made of them; its figures; its failed subtasks); with `--json`, the run gave no "
    "answer; `validate`: a file has errors; `init`: a file it would write is there "
    "already",
    ExitStatus.UNUSABLE: "the command could not start: the hive has errors, or no planner, "
    "or a model it uses needs an API key that is not set; there is no task; a run store "
    "or a memory file cannot be opened, or is not one (`runs`, `sessions`, `trace`, `resume`, "
    "`approve`: or there is none); `trace`, `resume` or `approve` finds no such run, "
    "`sessions show` or `forget` no such session, `memory forget` no such memory, none "
    "in the namespace or no memory file (either forget then forgets none); "
    "`--run-id` names a run another hive file started, or one of another task; "
    "`trace` cannot write the file of `--html` or `--jsonl`; `approve` of a call that is "
    "not waiting, decided already or out of time, or with "
    "arguments that fail the tool's schema; `resume` of a run made from Python that did "
    "not end; another process carries the run on; the Ray cluster cannot be joined; "
    "`init` of an unknown template, or into a folder it cannot make or write (a file in its "
    "place); an example hive the package lacks; `serve` cannot "
    "listen, or lacks the `web` extra; `eval`: the cases file has errors, or a report file "
    "(`--junit`, `--html`) cannot be written (refused before any case runs; after them, "
    "the report is printed first); `eval compare` "
    "or `--baseline` finds no such eval, or one it cannot read (kept by a version that "
    "wrote what this one does not read); an option out of its range, or without the one it "
    "needs (and argparse's usage errors)",
    ExitStatus.WAITING: "the run is `waiting`: calls wait for approval (`honeycomb approve`, "
    "then `honeycomb resume`)",
    ExitStatus.CASES_FAILED: "`eval`: a case failed, or the eval's budget left cases unrun "
    "(with `--gate regressions`: a case that passed in the baseline fails now); `eval "
    "compare`: a case that passed in the first eval fails in the second",
    ExitStatus.INTERRUPTED: "stopped by Ctrl-C (SIGINT)",
    ExitStatus.BROKEN_PIPE: "the output went into a pipe that closed early (`honeycomb run "
    "... --json \\| head`, `honeycomb \\| head`): whatever the command was printing, it "
    "ends quietly",
    ExitStatus.TERMINATED: "stopped by SIGTERM",
}
"""When each status is given, as docs/cli.md says it."""


def exit_status_table() -> str:
    """The table of docs/cli.md's "Exit status", in Markdown."""
    rows = [f"| {int(status)} | {MEANINGS[status]} |" for status in ExitStatus]
    return "\n".join(["| status | when |", "|---|---|", *rows]) + "\n"


STOPPED_BY = {signal.SIGINT: ExitStatus.INTERRUPTED, signal.SIGTERM: ExitStatus.TERMINATED}
"""The signals that stop a command cleanly, and the status it then exits with."""

AT_ONCE = (
    "stopping at once, as if the process had died: the run goes on from what its store "
    "kept when it is continued (honeycomb resume; in a chat, the session's next message), "
    "as after a crash"
)
"""What a second signal says as it ends the command at once."""


@contextlib.contextmanager
def stopped_by_signals(stopped_by: list[signal.Signals]) -> Iterator[None]:
    """While the block runs, Ctrl-C or SIGTERM cancels it (the first one, noted in
    ``stopped_by``; the task's cancellation is then taken back by the block's caller).
    A second one, while what the first one stopped records how it ended (a store that
    does not answer holds that for as long as it tries again), ends the process at once,
    as if it had died: a run is continued from what its store kept, as after a crash."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(received: signal.Signals) -> None:
        if stopped_by:
            print(f"\n{received.name} again: {AT_ONCE}", file=sys.stderr, flush=True)
            os._exit(STOPPED_BY[stopped_by[0]])
        stopped_by.append(received)
        task.cancel()
        waited = waited_for()
        if waited:  # else it seems to hang, silent for as long as those calls take
            said = _waiting_for(waited, received)
            print(f"\n{received.name}: {said}", file=sys.stderr, flush=True)

    for number in STOPPED_BY:
        loop.add_signal_handler(number, stop, number)
    try:
        yield
    finally:
        for number in STOPPED_BY:
            loop.remove_signal_handler(number)
        if stopped_by:
            task.uncancel()


def _waiting_for(calls: list[str], received: signal.Signals) -> str:
    """What a first signal says while sync side-effecting ``calls`` run, which stopping
    the run waits for: they cannot be interrupted."""
    names = ", ".join(sorted(set(calls)))
    return (
        f"the run stops once {names} has ended: a sync side-effecting call cannot be "
        f"interrupted, and what it did is kept. {received.name} again stops at once, and a "
        "resumed run is told its outcome is unknown"
    )


def waiting_for_abandoned_calls(command: Callable[[], int]) -> int:
    """Run ``command`` and return its exit status once the calls it abandoned that
    still run in threads (sync tools past their time limit) have ended, saying so on
    standard error: Python waits for them anyway before the process exits, and without
    a word the command seemed to hang after its last line. Ctrl-C leaves them: the
    process ends at once, by the command's status (its run had ended)."""
    before = {ended for _, ended in still_running()}
    code = command()
    left = [(name, ended) for name, ended in still_running() if ended not in before]
    if not left:
        return code
    try:  # from here on, Ctrl-C leaves them, however soon it comes
        _say_waiting([name for name, _ in left])
        for _, ended in left:
            ended.wait()
    except KeyboardInterrupt:
        os._exit(code)  # not waiting for them, as Python would
    return code


def _say_waiting(names: list[str]) -> None:
    """Say on standard error that the command waits for the abandoned calls of
    ``names`` (one name a call), after what it printed."""
    counts = Counter(names)
    said = ", ".join(name if n == 1 else f"{name} x{n}" for name, n in counts.items())
    calls, them = ("1 call", "it") if len(names) == 1 else (f"{len(names)} calls", "them")
    with contextlib.suppress(OSError, ValueError):  # a pipe, a stream closed
        sys.stdout.flush()
    print(
        f"waiting for {calls} that timed out ({said}) to end: the run went on without "
        f"{them}, but Python cannot stop a thread, and waits for it before the process "
        "exits; a sync tool should time out by itself, or call check_cancelled(). Ctrl-C "
        f"leaves {them}.",
        file=sys.stderr,
        flush=True,
    )
