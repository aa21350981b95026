"""The ``honeycomb`` command: ``demo``, ``run``, ``resume``, ``runs``, ``trace``,
``validate``, ``memory`` (:mod:`honeycomb.cli.memory`), and in a clone of the
repository ``bench``.

Runs are kept in a run store (``.honeycomb/runs.db`` under the current folder unless
the hive or ``--store`` says otherwise), so that one stopped by Ctrl-C, SIGTERM or a
crash continues with ``honeycomb resume RUN_ID``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from rich.console import Console

from honeycomb.cli.memory import add_memory_command, demo_with_memory
from honeycomb.cli.view import JsonView, LiveView, PlainView, View, summary
from honeycomb.executor import Executor
from honeycomb.hive import Hive, load_hive
from honeycomb.offline import OfflineModel
from honeycomb.run.events import RunFinished
from honeycomb.run.plan import Plan
from honeycomb.run.result import RunResult
from honeycomb.store import RunStore, RunSummary
from honeycomb.trace.format import counted, format_cost
from honeycomb.trace.html import to_html
from honeycomb.trace.spans import to_jsonl
from honeycomb.trace.terminal import render_timeline
from honeycomb.trace.timeline import build_timeline
from runtime import (
    BudgetExceeded,
    ConfigErrors,
    HoneycombError,
    Model,
    RunBusy,
    RunFailed,
    StoreError,
)

__all__ = ["DEFAULT_STORE", "demo_hive_path", "main"]

DEFAULT_STORE = Path(".honeycomb") / "runs.db"
"""Where the CLI keeps runs: under the current folder (the project), unless the hive
sets ``store:`` or ``--store`` is given."""

_INTERRUPTED = {signal.SIGINT: 130, signal.SIGTERM: 143}

DEMO_TASK = (
    "Plan a weekend in Lisbon, Porto and Madrid: compare the weather in each city, find "
    "what the guide says about them, work out the cost of 3 nights at 95 euros plus 2 "
    "train tickets at 38 euros, and send the summary to the outbox."
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``honeycomb`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # its options belong to the benchmark's own parser
        return _bench(argv[1:])
    args = _parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:
        print("cancelled", file=sys.stderr)
        return 130
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        if not _broken_pipe(exc):
            raise
        # The reader went away (``honeycomb run ... --json | head``): stop quietly, as
        # a Unix tool killed by SIGPIPE does, and let nothing flush into the closed
        # pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _BROKEN_PIPE
    return code


_BROKEN_PIPE = 128 + signal.SIGPIPE
"""The exit status of a command whose output pipe closed: a shell's for SIGPIPE."""


def _broken_pipe(exc: BaseException) -> bool:
    """Whether ``exc`` is a closed output pipe, or a group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_broken_pipe(e) for e in exc.exceptions)
    return isinstance(exc, BrokenPipeError)


def demo_hive_path(name: str = "hive.yaml") -> Path:
    """A bundled example hive (``examples/trip/hive.yaml``, or another of that folder)."""
    package = Path(__file__).resolve().parents[1]  # honeycomb/
    for candidate in (package / "examples" / "trip", package.parent / "examples" / "trip"):
        if (candidate / name).is_file():
            return candidate / name
    raise FileNotFoundError(f"the example hive examples/trip/{name} is not installed")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="honeycomb", description="Run LLM agents in parallel: plan, fan out, aggregate."
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the bundled example hive offline")
    demo.add_argument("task", nargs="?", default=None, help="the task (default: a trip plan)")
    demo.add_argument("--latency", type=float, default=None, help="offline model seconds per call")
    demo.add_argument(
        "--memory",
        action="store_true",
        help="the example with long-term memory (examples/trip/memory.yaml): a second run "
        "recalls what the first kept",
    )
    _run_options(demo)
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("run", help="run a hive file on a task")
    run.add_argument("hive", type=Path, help="the hive YAML file")
    run.add_argument("task", nargs="?", default=None, help="the task (default: the hive's)")
    _run_options(run)
    run.set_defaults(handler=_run)

    resume = commands.add_parser("resume", help="continue a run that did not finish")
    resume.add_argument("run_id", help="the run's id (honeycomb runs lists them)")
    resume.add_argument(
        "--force",
        action="store_true",
        help="take the run over from a process whose lease expired (never from a live one)",
    )
    _run_options(resume, run_id=False)
    resume.set_defaults(handler=_resume)

    runs = commands.add_parser("runs", help="list the runs in the store")
    runs.add_argument("--store", type=Path, default=DEFAULT_STORE, help="the run store file")
    runs.add_argument("--limit", type=int, default=20, help="how many (newest first)")
    runs.set_defaults(handler=_runs)

    trace = commands.add_parser("trace", help="show a run's timeline and critical path")
    trace.add_argument("run_id", help="the run's id (honeycomb runs lists them)")
    trace.add_argument("--store", type=Path, default=DEFAULT_STORE, help="the run store file")
    trace.add_argument("--html", type=Path, default=None, help="also write the timeline page")
    trace.add_argument(
        "--jsonl", type=Path, default=None, help="also write the spans as JSON lines"
    )
    trace.set_defaults(handler=_trace)

    validate = commands.add_parser("validate", help="check hive files and report every error")
    validate.add_argument("hives", type=Path, nargs="+", help="hive YAML files")
    validate.set_defaults(handler=_validate)

    add_memory_command(commands)

    if _clone() is not None:
        commands.add_parser(
            "bench",
            help="benchmark parallel fan-out against a hand-written asyncio floor "
            "(honeycomb bench --help), or next to the peer frameworks (honeycomb bench --peers)",
        )
    return parser


def _run_options(parser: argparse.ArgumentParser, *, run_id: bool = True) -> None:
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print events as JSON lines")
    out.add_argument("--plain", action="store_true", help="plain lines even on a terminal")
    parser.add_argument(
        "--model",
        default=os.environ.get("HONEYCOMB_MODEL"),
        help="use this model for every role: 'offline' or an OpenAI-compatible model name "
        "(env HONEYCOMB_MODEL)",
    )
    parser.add_argument(
        "--base-url",
        default=os.environ.get("HONEYCOMB_BASE_URL"),
        help="OpenAI-compatible endpoint for --model (env HONEYCOMB_BASE_URL or OPENAI_BASE_URL)",
    )
    if run_id:
        parser.add_argument(
            "--run-id", default=None, help="the run's id (an unfinished one is resumed)"
        )
    keep = parser.add_mutually_exclusive_group()
    keep.add_argument(
        "--store",
        type=Path,
        default=None,
        help=f"the run store file (default: the hive's store:, else {DEFAULT_STORE})",
    )
    keep.add_argument("--no-store", action="store_true", help="do not keep the run")


def _demo(args: argparse.Namespace) -> int:
    if args.latency is not None and args.model is None:
        args.model = "offline"
    if args.memory:
        return demo_with_memory(
            demo_hive_path("memory.yaml"), args.task or DEMO_TASK, args, _execute
        )
    return _execute(demo_hive_path(), args.task or DEMO_TASK, args)


def _run(args: argparse.Namespace) -> int:
    return _execute(args.hive, args.task, args)


def _resume(args: argparse.Namespace) -> int:
    path = args.store or DEFAULT_STORE
    try:
        stored = RunStore(path).find(args.run_id)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if stored is None:
        print(f"{path}: no run {args.run_id!r} (honeycomb runs --store {path})", file=sys.stderr)
        return 2
    if stored.source is None:
        print(f"run {args.run_id!r} was not started from a hive file", file=sys.stderr)
        return 2
    args.store, args.run_id, args.no_store = path, args.run_id, False
    return _execute(Path(stored.source), stored.task, args)


def _runs(args: argparse.Namespace) -> int:
    try:
        found = RunStore(args.store).runs(args.limit)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if not found:
        print(f"no runs in {args.store}")
        return 0
    print(f"{len(found)} run{'s' if len(found) != 1 else ''} in {args.store}, newest first")
    for run in found:
        print(_run_line(run))
    return 0


def _run_line(run: RunSummary) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started_at))
    took = f"{run.duration_s:.1f}s" if run.duration_s is not None else "-"
    tokens = run.input_tokens + run.output_tokens
    task = run.task if len(run.task) <= 50 else run.task[:49] + "…"
    return (
        f"{run.run_id}  {when}  {run.status:<11} {took:>7}  {counted(run.workers, 'worker'):>11}  "
        f"{counted(run.model_calls, 'model call'):>16}  {counted(tokens, 'token'):>14}  "
        f"{format_cost(run.cost):>8}  {task}"
    )


def _trace(args: argparse.Namespace) -> int:
    if not args.store.exists():
        print(f"no run store at {args.store} (use --store FILE)", file=sys.stderr)
        return 2
    store = RunStore(args.store)
    try:
        stored = asyncio.run(store.load(args.run_id))
        spans = store.spans(args.run_id) if stored is not None else []
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if stored is None:
        known = f"honeycomb runs --store {args.store}"
        print(f"{args.store}: no run {args.run_id!r} ({known})", file=sys.stderr)
        return 2
    if not spans:
        print(f"run {args.run_id!r} has no spans: tracing was off when it ran", file=sys.stderr)
        return 2
    plan = Plan.model_validate_json(stored.plan).subtasks if stored.plan else ()
    timeline = build_timeline(
        spans, plan, run_id=args.run_id, task=stored.task, status=stored.status
    )
    console = Console()
    console.print(render_timeline(timeline, console.width))
    try:
        for path, text in ((args.jsonl, to_jsonl(spans)), (args.html, to_html(timeline))):
            if path is not None:
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path}", file=sys.stderr)
    except OSError as exc:
        print(f"cannot write: {exc}", file=sys.stderr)
        return 2
    return 0


def _validate(args: argparse.Namespace) -> int:
    failed = False
    for path in args.hives:
        try:
            hive = load_hive(path)
        except ConfigErrors as exc:
            failed = True
            print(f"{path}: {len(exc.errors)} error{'s' if len(exc.errors) != 1 else ''}")
            for error in exc.errors:
                print(f"  {error}")
            continue
        roles, models = counted(len(hive.roles), "role"), counted(len(hive.spec.models), "model")
        print(f"{path}: OK ({roles}, {models})")
        for name, spec in hive.spec.models.items():
            if spec.provider == "openai" and spec.settings:
                sdk, extra = spec.settings_sent()
                print(
                    f"  model {name}: {', '.join(sdk) or 'none'} as SDK parameters; "
                    f"{', '.join(extra) or 'none'} in extra_body"
                )
    return 1 if failed else 0


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
    found = (root / "pyproject.toml").is_file() and (root / "benchmarks" / "fanout.py").is_file()
    return root if found else None


def _bench(argv: list[str]) -> int:
    # The benchmarks are not part of the package: they measure it next to a floor and
    # the peer frameworks from a clone, where their reference results are kept.
    clone = _clone()
    if clone is None:
        print(_NO_BENCHMARKS, file=sys.stderr)
        return 2
    if sys.path[:1] != [str(clone)]:
        sys.path.insert(0, str(clone))  # the clone's benchmarks, whatever the folder
    # ``--peers``: the peer frameworks next to Honeycomb and the floor (benchmarks.peers).
    peers = any(a == "--peers" or a.startswith("--peers=") for a in argv)
    bench = importlib.import_module("benchmarks.peers.__main__" if peers else "benchmarks.fanout")
    code: int = bench.main(argv)
    return code


def _execute(path: Path, task: str | None, args: argparse.Namespace) -> int:
    try:
        hive = load_hive(path)
    except ConfigErrors as exc:
        print(str(exc), file=sys.stderr)
        return 2
    task = task or hive.spec.example_task
    if not task:
        print(f"no task given and {path} has no example_task", file=sys.stderr)
        return 2
    model = _override(args)
    offline = (args.model == "offline") or (
        model is None and all(s.provider == "offline" for s in hive.spec.models.values())
    )
    console = Console(stderr=False)
    out: TextIO = sys.stdout
    if offline and not args.json:
        print("Offline simulation: a rule-based model stands in for the LLM (no network, no key).")
    view = _view(args, console, out, hive)
    store = None if args.no_store else (args.store or hive.store or DEFAULT_STORE)
    return asyncio.run(_run_and_report(hive, task, model, view, args, out, store))


def _override(args: argparse.Namespace) -> Model | None:
    if args.model is None:
        return None
    if args.model == "offline":
        latency = getattr(args, "latency", None)
        return OfflineModel(latency=latency) if latency is not None else OfflineModel()
    from runtime.openai_model import OpenAIModel  # openai loads only when it is used

    return OpenAIModel(args.model, base_url=args.base_url)


def _view(args: argparse.Namespace, console: Console, out: TextIO, hive: Hive) -> View:
    if args.json:
        return JsonView(out)
    if args.plain or not console.is_terminal:
        return PlainView(out)
    return LiveView(console, f"honeycomb · {hive.name}")


async def _run_and_report(
    hive: Hive,
    task: str,
    model: Model | None,
    view: View,
    args: argparse.Namespace,
    out: TextIO,
    store: Path | None,
) -> int:
    executor = Executor.from_hive(hive, model=model, store=store)
    run_id = args.run_id or os.urandom(6).hex()
    if store is not None and not args.json:  # said first: a killed run is resumed by id
        print(f"run {run_id} · kept in {store} (honeycomb resume {run_id})", file=sys.stderr)
    error: HoneycombError | None = None
    stopped_by: list[signal.Signals] = []
    result: RunResult | None = None
    try:
        # Ctrl-C and SIGTERM cancel the run: the store records it as interrupted and
        # keeps every finished turn, so ``honeycomb resume`` continues it.
        with _stopped_by_signals(stopped_by), view:
            finished = False
            steal = getattr(args, "force", False)
            async with executor.stream(task, run_id=run_id, steal=steal) as events:
                try:
                    async for event in events:
                        view.handle(event)
                        finished = isinstance(event, RunFinished)
                except HoneycombError as exc:  # the run's own error, after its last event
                    error = exc
            result = events.result
            if result is not None and not finished:  # it had ended: its stored result
                view.handle(_stored_finish(result))
    except asyncio.CancelledError:
        if not stopped_by:
            raise
    if stopped_by:
        print(f"\n{stopped_by[0].name}: run {run_id} stopped.", file=sys.stderr)
        if store is not None:
            print(f"Continue it with: honeycomb resume {run_id} --store {store}", file=sys.stderr)
        return _INTERRUPTED[stopped_by[0]]
    if isinstance(error, RunBusy):  # another process has it: nothing ran here
        print(str(error), file=sys.stderr)
        return 2
    if args.json:
        return 0 if result is not None else 1
    if result is None:
        partial = getattr(error, "partial", None)
        kind = "budget exceeded" if isinstance(error, BudgetExceeded) else "run failed"
        out.write(f"\n{kind}: {error}\n")
        if isinstance(error, BudgetExceeded | RunFailed) and partial is not None:
            out.write("\n".join(summary(partial)) + "\n")
        return 1
    out.write(f"\nAnswer:\n{result.answer_text}\n\n")
    out.write("\n".join(summary(result)) + "\n")
    return 0


def _stored_finish(result: RunResult) -> RunFinished:
    """The end of a run that had ended before (it sends no events): what the views
    show of a finished run, from its stored result."""
    return RunFinished(
        run_id=result.run_id, status=result.status, wall_s=result.timings.wall_s, result=result
    )


@contextlib.contextmanager
def _stopped_by_signals(stopped_by: list[signal.Signals]) -> Iterator[None]:
    """While the block runs, Ctrl-C or SIGTERM cancels it (the first one, noted in
    ``stopped_by``; the task's cancellation is then taken back by the block's caller)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def stop(received: signal.Signals) -> None:
        if not stopped_by:
            stopped_by.append(received)
            task.cancel()

    for number in _INTERRUPTED:
        loop.add_signal_handler(number, stop, number)
    try:
        yield
    finally:
        for number in _INTERRUPTED:
            loop.remove_signal_handler(number)
        if stopped_by:
            task.uncancel()
