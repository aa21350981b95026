"""The ``honeycomb`` command: ``demo``, ``init``, ``run``, ``resume``, ``approve``,
``runs``, ``trace``, ``serve``, ``chat`` (:mod:`honeycomb.cli.chat`), ``sessions``
(:mod:`honeycomb.cli.sessions`), ``validate``, ``memory`` (:mod:`honeycomb.cli.memory`),
``eval`` (:mod:`honeycomb.cli.evals`),
and in a clone of the repository ``bench``; with no arguments, a short guide
(:mod:`honeycomb.cli.init`).

Runs are kept in a run store (``.honeycomb/runs.db`` under the current folder unless
the hive or ``--store`` says otherwise), so that one stopped by Ctrl-C, SIGTERM or a
crash continues with ``honeycomb resume RUN_ID``. Running a hive is
:mod:`honeycomb.cli.running`'s; looking at stored runs, :mod:`honeycomb.cli.runs`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO, cast

from honeycomb.cli.approve import approve_command
from honeycomb.cli.cassettes import add_cassette_options
from honeycomb.cli.chat import add_chat_command
from honeycomb.cli.evals import add_eval_command, compare_main
from honeycomb.cli.exits import ExitStatus, waiting_for_abandoned_calls
from honeycomb.cli.init import GUIDE, add_init_parser, version
from honeycomb.cli.local import add_model_options
from honeycomb.cli.memory import add_memory_command
from honeycomb.cli.options import (
    MAX_RUN_ID,
    Parser,
    add_limit,
    integer,
    new_id,
    number,
    unrecognized,
    user_path,
)
from honeycomb.cli.running import (
    DEFAULT_STORE,
    add_store_options,
    check_hive_store,
    demo_command,
    demo_hive_path,
    resume_command,
    run_command,
)
from honeycomb.cli.runs import runs_command, trace_command
from honeycomb.cli.serve import add_serve
from honeycomb.cli.sessions import add_sessions_command
from honeycomb.cli.stores import KEPT_IN, store_argument
from honeycomb.hive import Hive, load_hive
from honeycomb.hive.backend import BACKENDS
from honeycomb.trace.format import counted
from runtime import ConfigError, ConfigErrors
from runtime.secrets import MaskedStream, keeping

__all__ = ["DEFAULT_STORE", "demo_hive_path", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``honeycomb`` console script; returns the exit status.
    Whatever it prints is masked: a secret (a store URL's password, an API key) never
    shows, whichever line of the command prints it. Every secret the command learns
    stays known until it ends: its last lines (an eval's report, a run's summary) are
    written after the models that registered their keys are gone."""
    out, err = sys.stdout, sys.stderr
    with open(os.devnull, "w", encoding="utf-8") as nowhere:
        # A stream closed as the command started (``2>&-``, a daemon's) is None here:
        # what would be written there is dropped, as a closed pipe's.
        shown, told = out or nowhere, err or nowhere
        _tolerant(shown, told)
        sys.stdout, sys.stderr = cast(TextIO, MaskedStream(shown)), cast(TextIO, MaskedStream(told))
        try:
            with keeping():
                try:
                    given = list(sys.argv[1:] if argv is None else argv)
                    code = waiting_for_abandoned_calls(lambda: _command(given))
                    if argv is None:  # the process's own command: it exits next
                        _leaves_at_once(code)
                    return code
                finally:
                    for stream in (sys.stdout, sys.stderr):  # what each held back
                        with contextlib.suppress(OSError, ValueError):  # a pipe, a stream closed
                            stream.flush()
        finally:
            sys.stdout, sys.stderr = out, err


def _leaves_at_once(code: int) -> None:
    """From here on, Ctrl-C ends the process at once with ``code``: Python waits for the
    threads left running as it exits (one that connects to a server that does not
    answer, which a Ctrl-C cut the command short in, until the connection times out),
    and Ctrl-C then raised in that wait, printing its traceback."""
    signal.signal(signal.SIGINT, lambda *_: os._exit(code))


def _command(argv: list[str]) -> int:
    """The command ``argv`` asks for, whatever it prints (the short guide, a parser's
    error) ending quietly when the reader of its output went away."""
    try:
        return _dispatch(argv)
    except KeyboardInterrupt:
        print("cancelled", file=sys.stderr)
        return ExitStatus.INTERRUPTED
    except (BrokenPipeError, BaseExceptionGroup, SystemExit) as exc:
        if not _broken_pipe(exc):
            raise
        # The reader went away (``honeycomb run ... --json | head``): stop quietly, as
        # a Unix tool killed by SIGPIPE does, and let nothing flush into the closed
        # pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitStatus.BROKEN_PIPE


def _dispatch(argv: list[str]) -> int:
    if not argv:
        print(GUIDE.format(version=version()))
        return ExitStatus.OK
    if argv[:1] == ["bench"]:  # its options belong to the benchmark's own parser
        return _bench(argv[1:])
    if argv[:2] == ["eval", "compare"]:  # two eval ids, not a hive and a cases file
        return compare_main(argv[2:])
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's parser: `honeycomb run: error: ...`
        command = parser.command_of(argv)
        command.error(unrecognized(extra, getattr(args, "task", None), command, parser))
    code: int = args.handler(args)
    return code


def _tolerant(*streams: TextIO) -> None:
    """Text that cannot be encoded for the terminal (a lone surrogate from a file name
    that is not UTF-8, in a tool's output) is shown escaped, not a crash."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and stream.errors == "strict":
            reconfigure(errors="backslashreplace")


def _broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` is a closed output pipe, or a group of nothing else. A rich
    console that meets one exits instead (``SystemExit(1)``, raised while it handles
    the ``BrokenPipeError``): that is one too."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_broken_pipe(e) for e in exc.exceptions)
    if isinstance(exc, SystemExit):
        return isinstance(exc.__context__, BrokenPipeError)
    return isinstance(exc, BrokenPipeError)


def _parser() -> Parser:
    parser = Parser(
        prog="honeycomb", description="Run LLM agents in parallel: plan, fan out, aggregate."
    )
    parser.add_argument("--version", action="version", version=f"honeycomb {version()}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the bundled example hive offline")
    demo.add_argument("task", nargs="?", default=None, help="the task (default: a trip plan)")
    demo.add_argument(
        "--latency",
        type=number(0),
        default=None,
        metavar="S",
        help="offline model seconds per call (0 or more)",
    )
    example = demo.add_mutually_exclusive_group()  # each runs another example: one at most
    example.add_argument(
        "--compact",
        action="store_true",
        help="run the logbook example instead: a long read whose context is kept within "
        "its budget by rolling summaries (compaction)",
    )
    example.add_argument(
        "--memory",
        action="store_true",
        help="the example with long-term memory (examples/trip/memory.yaml): a second run "
        "recalls what the first kept",
    )
    example.add_argument(
        "--rounds",
        action="store_true",
        help="run the research example in rounds instead (examples/research/rounds.yaml): "
        "a lead reads what its researchers found and sends out more where a finding "
        "needs more",
    )
    demo.add_argument(
        "--approve",
        action="store_true",
        help="the outbox tool asks for approval before it sends (the trip's, with or "
        "without --memory)",
    )
    _run_options(demo)
    demo.set_defaults(handler=demo_command)

    add_init_parser(commands)

    run = commands.add_parser("run", help="run a hive file on a task")
    run.add_argument("hive", type=user_path, help="the hive YAML file")
    run.add_argument("task", nargs="?", default=None, help="the task (default: the hive's)")
    _run_options(run)
    run.set_defaults(handler=run_command)

    resume = commands.add_parser("resume", help="continue a run that did not finish")
    resume.add_argument("run_id", help="the run's id (honeycomb runs lists them)")
    resume.add_argument(
        "--force",
        action="store_true",
        help="take the run over from a process whose lease expired (never from a live one)",
    )
    resume.add_argument(
        "--approve",
        action="store_true",
        help="as for demo: the outbox tool asks for approval before it sends (the command "
        "that continues a run of demo --approve gives it)",
    )
    _run_options(
        resume,
        run_id=False,
        store=KEPT_IN,
        no_store="changes nothing: a resumed run is kept in its store",
    )
    resume.set_defaults(handler=resume_command)

    approve = commands.add_parser("approve", help="decide on a call waiting for approval")
    approve.add_argument("run_id", help="the run's id")
    approve.add_argument("call_id", help="the call's id (a waiting run prints it)")
    approve.add_argument("--deny", action="store_true", help="deny the call instead")
    approve.add_argument(
        "--reason", default=None, metavar="TEXT", help="why (the model is told, with --deny)"
    )
    approve.add_argument(
        "--arguments",
        default=None,
        metavar="JSON",
        help="approve with these arguments instead (a JSON object)",
    )
    approve.add_argument(
        "--worker", default=None, metavar="W", help="the worker that made the call"
    )
    approve.add_argument(
        "--turn",
        type=integer(1),
        default=None,
        metavar="N",
        help="the turn it was made in (a waiting run prints it)",
    )
    approve.add_argument("--store", type=store_argument, default=DEFAULT_STORE, help=KEPT_IN)
    approve.set_defaults(handler=approve_command)

    runs = commands.add_parser("runs", help="list the runs in the store")
    runs.add_argument("--store", type=store_argument, default=DEFAULT_STORE, help=KEPT_IN)
    add_limit(runs)
    runs.set_defaults(handler=runs_command)

    trace = commands.add_parser("trace", help="show a run's timeline and critical path")
    trace.add_argument("run_id", help="the run's id (honeycomb runs lists them)")
    trace.add_argument("--store", type=store_argument, default=DEFAULT_STORE, help=KEPT_IN)
    trace.add_argument(
        "--html", type=user_path, default=None, metavar="FILE", help="also write the timeline page"
    )
    trace.add_argument(
        "--jsonl",
        type=user_path,
        default=None,
        metavar="FILE",
        help="also write the spans as JSON lines",
    )
    trace.set_defaults(handler=trace_command)

    add_serve(commands, DEFAULT_STORE)
    add_chat_command(commands, _run_options)
    add_sessions_command(commands, DEFAULT_STORE)

    validate = commands.add_parser("validate", help="check hive files and report every error")
    validate.add_argument("hives", type=user_path, nargs="+", help="hive YAML files")
    validate.set_defaults(handler=_validate)

    add_memory_command(commands)

    add_eval_command(commands)

    if _clone() is not None:
        commands.add_parser(
            "bench",
            help="benchmark parallel fan-out against a hand-written asyncio floor "
            "(honeycomb bench --help), or next to the peer frameworks (honeycomb bench --peers)",
        )
    parser.commands = commands.choices  # for the options each takes (Parser.command_of)
    return parser


def _run_options(
    parser: argparse.ArgumentParser,
    *,
    run_id: bool = True,
    store: str | None = None,
    no_store: str = "do not keep the run",
) -> None:
    """The options of the commands that run a hive (``demo``, ``run``, ``resume``,
    ``chat``); ``store`` and ``no_store`` are the help of ``--store`` and
    ``--no-store`` when it is not a new run's."""
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print events as JSON lines")
    out.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    add_model_options(parser)
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="where the subtask workers run: 'local' (in this process) or 'ray' (a pool of "
        "Ray actors, the ray extra); default: the hive's backend:",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="join the Ray cluster at ADDR (host:port or ray://host:port) instead of "
        "starting a local Ray; implies --backend ray",
    )
    if run_id:
        parser.add_argument(
            "--run-id",
            type=new_id,
            default=None,
            metavar="ID",
            help=f"the run's id, 1 to {MAX_RUN_ID} printable characters (an unfinished one is "
            "resumed)",
        )
    add_store_options(parser, store=store, no_store=no_store)
    add_cassette_options(parser)


def _checked(hive: Hive) -> dict[str, int]:
    """Check what ``honeycomb run`` needs of a loaded hive beyond its file, every
    mistake at once: a planner, a ``store:`` run opens (read as it is, making
    nothing), and the tools of each MCP server (of the hive, and of the hives it calls
    as tools), each started, listed and stopped. The tools each server listed.

    Raises:
        ConfigErrors: naming every mistake the checks found.
    """
    errors: list[ConfigError] = []
    tools: dict[str, int] = {}
    for check in (hive.check_runnable, lambda: check_hive_store(hive)):
        try:
            check()
        except ConfigErrors as exc:
            errors += exc.errors
    try:
        tools = asyncio.run(hive.check_servers())
    except ConfigErrors as exc:
        errors += exc.errors
    if errors:
        raise ConfigErrors(errors)
    return tools


def _validate(args: argparse.Namespace) -> ExitStatus:
    failed = False
    for path in args.hives:
        try:
            hive = load_hive(path)
            tools = _checked(hive)
        except ConfigErrors as exc:
            failed = True
            print(f"{path}: {len(exc.errors)} error{'s' if len(exc.errors) != 1 else ''}")
            for error in exc.errors:
                print(f"  {error}")
            continue
        roles, models = counted(len(hive.roles), "role"), counted(len(hive.spec.models), "model")
        servers = "".join(
            f", MCP server {name}: {counted(count, 'tool')}" for name, count in tools.items()
        )
        ray = f"; backend: {hive.backend.described()}" if hive.backend.ray is not None else ""
        print(f"{path}: OK ({roles}, {models}{servers}{ray})")
        password = hive.missing_password()
        for missing in [*hive.missing_keys(), *([password] if password is not None else [])]:
            print(f"  warning: {missing}")  # the environment's, not the file's: a warning
        for small in hive.small_budgets():
            print(f"  warning: {small}")  # it may still run: the task and turns are unknown
        for judge in hive.judge_warnings():
            print(f"  warning: {judge}")  # from Python, a subtask may still name the role
        for name, spec in hive.spec.models.items():
            if spec.provider == "openai" and spec.settings:
                sdk, extra = spec.settings_sent()
                print(
                    f"  model {name}: {', '.join(sdk) or 'none'} as SDK parameters; "
                    f"{', '.join(extra) or 'none'} in extra_body"
                )
    return ExitStatus.FAILED if failed else ExitStatus.OK


_NO_BENCHMARKS = (
    "honeycomb bench: the benchmarks are not installed with the package; they run from a "
    "clone of the repository (benchmarks/): there, after pip install -e '.[dev]', run "
    "honeycomb bench or python -m benchmarks.fanout (python -m benchmarks.peers next to "
    "the peer frameworks)"
)


def _clone() -> Path | None:
    """The clone of the repository this package runs from (an editable install), with
    its ``benchmarks/``; None when the package is installed."""
    root = Path(__file__).resolve().parents[2]
    try:
        found = all((root / part).is_file() for part in ("pyproject.toml", "benchmarks/fanout.py"))
    except OSError:  # a folder this user may not look in (its files imported as another's)
        return None
    return root if found else None


def _bench(argv: list[str]) -> int:
    # The benchmarks are not part of the package: they measure it next to a floor and
    # the peer frameworks from a clone, where their reference results are kept.
    clone = _clone()
    if clone is None:
        print(_NO_BENCHMARKS, file=sys.stderr)
        return ExitStatus.UNUSABLE
    if sys.path[:1] != [str(clone)]:
        sys.path.insert(0, str(clone))  # the clone's benchmarks, whatever the folder
    # ``--peers``: the peer frameworks next to Honeycomb and the floor (benchmarks.peers).
    peers = any(a == "--peers" or a.startswith("--peers=") for a in argv)
    bench = importlib.import_module("benchmarks.peers.__main__" if peers else "benchmarks.fanout")
    code: int = bench.main(argv)
    return code
