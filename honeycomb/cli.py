"""The ``honeycomb`` command: ``demo``, ``run``, ``validate`` and ``bench``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import anyio
from rich.console import Console

from honeycomb.hive import Hive, load_hive
from honeycomb.offline import OfflineModel
from honeycomb.view import JsonView, LiveView, PlainView, View, summary
from runtime import BudgetExceeded, ConfigErrors, HoneycombError, Model, OpenAIModel, RunFailed

__all__ = ["demo_hive_path", "main"]

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
    return code


def demo_hive_path() -> Path:
    """The bundled example hive (``examples/trip/hive.yaml``)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "examples" / "trip", here.parent / "examples" / "trip"):
        if (candidate / "hive.yaml").is_file():
            return candidate / "hive.yaml"
    raise FileNotFoundError("the example hive examples/trip/hive.yaml is not installed")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="honeycomb", description="Run LLM agents in parallel: plan, fan out, aggregate."
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    demo = commands.add_parser("demo", help="run the bundled example hive offline")
    demo.add_argument("task", nargs="?", default=None, help="the task (default: a trip plan)")
    demo.add_argument("--latency", type=float, default=None, help="offline model seconds per call")
    _run_options(demo)
    demo.set_defaults(handler=_demo)

    run = commands.add_parser("run", help="run a hive file on a task")
    run.add_argument("hive", type=Path, help="the hive YAML file")
    run.add_argument("task", nargs="?", default=None, help="the task (default: the hive's)")
    _run_options(run)
    run.set_defaults(handler=_run)

    validate = commands.add_parser("validate", help="check hive files and report every error")
    validate.add_argument("hives", type=Path, nargs="+", help="hive YAML files")
    validate.set_defaults(handler=_validate)

    commands.add_parser(
        "bench",
        help="benchmark parallel fan-out against a hand-written asyncio floor "
        "(honeycomb bench --help)",
    )
    return parser


def _run_options(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--run-id", default=None, help="the run's id")


def _demo(args: argparse.Namespace) -> int:
    if args.latency is not None and args.model is None:
        args.model = "offline"
    return _execute(demo_hive_path(), args.task or DEMO_TASK, args)


def _run(args: argparse.Namespace) -> int:
    return _execute(args.hive, args.task, args)


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
        print(f"{path}: OK ({len(hive.roles)} roles, {len(hive.spec.models)} models)")
    return 1 if failed else 0


def _bench(argv: list[str]) -> int:
    # The benchmarks live beside the package in a clone (editable install).
    clone = Path(__file__).resolve().parent.parent
    if (clone / "benchmarks" / "fanout.py").is_file() and str(clone) not in sys.path:
        sys.path.insert(0, str(clone))
    try:
        fanout = importlib.import_module("benchmarks.fanout")
    except ImportError:
        print(
            "the benchmarks live in a clone of the repository: run it from there", file=sys.stderr
        )
        return 2
    code: int = fanout.main(argv)
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
    return anyio.run(_run_and_report, hive, task, model, view, args, out)


def _override(args: argparse.Namespace) -> Model | None:
    if args.model is None:
        return None
    if args.model == "offline":
        latency = getattr(args, "latency", None)
        return OfflineModel(latency=latency) if latency is not None else OfflineModel()
    return OpenAIModel(args.model, base_url=args.base_url)


def _view(args: argparse.Namespace, console: Console, out: TextIO, hive: Hive) -> View:
    if args.json:
        return JsonView(out)
    if args.plain or not console.is_terminal:
        return PlainView(out)
    return LiveView(console, f"honeycomb · {hive.name}")


async def _run_and_report(
    hive: Hive, task: str, model: Model | None, view: View, args: argparse.Namespace, out: TextIO
) -> int:
    executor = hive.executor(model=model)
    error: HoneycombError | None = None
    with view:
        async with executor.stream(task, run_id=args.run_id) as events:
            try:
                async for event in events:
                    view.handle(event)
            except HoneycombError as exc:  # the run's own error, after its last event
                error = exc
    result = events.result
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
