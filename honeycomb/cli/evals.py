"""``honeycomb eval HIVE CASES``: every case of a cases file a run of the hive, at most
``--concurrency`` at once, each kept in the run store and scored; a live progress
view, then a table and the totals (or ``--json``, ``--junit FILE``, ``--html FILE``);
``--baseline EVAL_ID`` compares with an eval kept before, and ``honeycomb eval compare
A B`` compares two kept evals (docs/evals.md).

Exit status: 0 when every case passed, 4 when one failed (with ``--gate
regressions``: when a case that passed in the baseline fails), 2 on bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

import msgspec

from honeycomb.cli.backend import pool_running
from honeycomb.cli.cassettes import add_cassette_options, cassette_models
from honeycomb.cli.eval_view import EvalProgress, print_comparison, print_report
from honeycomb.cli.exits import STOPPED_BY, ExitStatus, stopped_by_signals
from honeycomb.cli.local import add_model_options
from honeycomb.cli.loop import run_on_loop
from honeycomb.cli.options import MAX_RUN_ID, Parser, integer, new_id, number, user_path
from honeycomb.cli.running import (
    DEFAULT_STORE,
    add_store_options,
    hive_store,
    missing_keys,
    model_of,
    store_of,
)
from honeycomb.cli.stores import KEPT_IN, opened_store, store_argument
from honeycomb.evals import (
    Cases,
    EvalBudget,
    EvalReport,
    evaluate,
    junit,
    load_cases,
    new_eval_id,
)
from honeycomb.evals.compare import Comparison, compare
from honeycomb.evals.html import report_page
from honeycomb.evals.memory import eval_memory
from honeycomb.evals.runner import judges_of
from honeycomb.executor import Executor
from honeycomb.hive import Hive, load_hive
from honeycomb.store import RunStore
from runtime import ConfigError, ConfigErrors, Model, StoreError, did_you_mean
from runtime.text import encode_json

__all__ = [
    "add_eval_command",
    "compare_main",
    "eval_models",
    "judges_models",
    "written",
]


def add_eval_command(commands: argparse._SubParsersAction[Parser]) -> None:
    parser = commands.add_parser(
        "eval",
        help="run a hive on a set of cases and score every run (honeycomb eval compare A B "
        "compares two evals)",
    )
    parser.add_argument("hive", type=user_path, help="the hive YAML file")
    parser.add_argument("cases", type=user_path, help="the cases file (evals.yaml)")
    parser.add_argument(
        "--concurrency",
        type=integer(1),
        default=8,
        metavar="N",
        help="runs at once (default 8, at least 1)",
    )
    parser.add_argument(
        "--repeat",
        type=integer(1),
        default=1,
        metavar="N",
        help="runs of each case (default 1, at least 1)",
    )
    # Bounded as a hive's budgets: are (cost > 0, counts >= 1).
    parser.add_argument(
        "--max-cost",
        type=number(0, above=True),
        default=None,
        metavar="USD",
        help="the whole eval's budget in dollars (more than 0), runs and judges together",
    )
    parser.add_argument(
        "--max-tokens",
        type=integer(1),
        default=None,
        metavar="N",
        help="the whole eval's budget in tokens (at least 1)",
    )
    parser.add_argument(
        "--max-model-calls",
        type=integer(1),
        default=None,
        metavar="N",
        help="the whole eval's budget in model calls (at least 1)",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="EVAL_ID",
        help="compare with this eval, kept in the same store",
    )
    parser.add_argument(
        "--gate",
        choices=("failures", "regressions"),
        default="failures",
        help="what fails the command: any failing case (default), or, with "
        "--baseline, only cases that passed there and fail now",
    )
    parser.add_argument(
        "--case",
        action="append",
        default=None,
        metavar="ID",
        help="run only the cases of this id, or matching this pattern ('trip-*'); repeatable",
    )
    parser.add_argument(
        "--eval-id",
        type=new_id,
        default=None,
        metavar="ID",
        help=f"the eval's id, 1 to {MAX_RUN_ID} printable characters (default: a new one)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--junit",
        type=user_path,
        default=None,
        metavar="FILE",
        help="also write the report as JUnit XML",
    )
    parser.add_argument(
        "--html",
        type=user_path,
        default=None,
        metavar="FILE",
        help="also write the report as a web page",
    )
    parser.add_argument("--plain", action="store_true", help="no live view, even on a terminal")
    add_model_options(parser)
    add_cassette_options(parser)
    parser.add_argument(
        "--latency",
        type=number(0),
        default=None,
        metavar="SECONDS",
        help="offline model seconds per call, 0 or more (implies --model offline)",
    )
    add_store_options(parser, no_store="keep neither the runs nor the report (no --baseline then)")
    parser.set_defaults(handler=eval_command)


def eval_models(
    hive: Hive, args: argparse.Namespace
) -> tuple[Model | None, Model | Mapping[str, Model] | None]:
    """The model ``--model`` names (None: the hive's own), and the models the eval's
    runs use: that one for every role, else the hive's (None); with ``--record``,
    recorded in a cassette, with ``--replay``, answered from one (each case's calls as
    that case's).

    Raises:
        ConfigError: for a ``--model`` that cannot be made, or a cassette that cannot
            be read or written.
    """
    model = model_of(args, hive)
    return model, cassette_models(hive, model, args)


def judges_models(
    judges: Hive, model: Model | None, models: Model | Mapping[str, Model] | None
) -> Model | dict[str, Model] | None:
    """The models of the judges' hive of a cases file, beside the runs' ``models``
    (:func:`eval_models`): ``--model``'s (None: its own); with ``--record``, recorded
    in the runs' cassette, with ``--replay``, answered from it (nothing of them built),
    each named ``judges/NAME`` there apart from the hive's models."""
    if not isinstance(models, Mapping):
        return model
    from runtime.models.layers.cassette import RecordingModel, ReplayModel  # when used

    taped = next(iter(models.values()), None)
    if isinstance(taped, ReplayModel):
        played = taped.cassette
        return {name: ReplayModel(played, name=f"judges/{name}") for name in judges.spec.models}
    if isinstance(taped, RecordingModel):
        own = dict.fromkeys(judges.spec.models, model) if model is not None else judges.models()
        return {
            name: RecordingModel(m, taped.writer, name=f"judges/{name}") for name, m in own.items()
        }
    return model


def eval_command(args: argparse.Namespace) -> ExitStatus:
    if args.latency is not None and args.model is None:
        args.model = "offline"
    if args.baseline is not None and args.no_store:
        print("--baseline reads the store: drop --no-store", file=sys.stderr)
        return ExitStatus.UNUSABLE
    if args.gate == "regressions" and args.baseline is None:  # else it gated on failures
        print(
            "--gate regressions fails on the cases that passed in a baseline: give "
            "--baseline EVAL_ID",
            file=sys.stderr,
        )
        return ExitStatus.UNUSABLE
    try:
        hive = load_hive(args.hive)
        hive.check_runnable()
        every = load_cases(args.cases, hive)
        cases = _chosen(every, args.case)
        model, models = eval_models(hive, args)
        judging = judges_models(cases.judges, model, models) if cases.judges else None
        _check_writable(args)
    except ConfigError as exc:  # ConfigErrors too: every error, each at its line
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    missing = missing_keys(hive, model, args)
    if cases.judges is not None and model is None:  # on its own models: their keys too
        missing += missing_keys(cases.judges, None, args)
    if missing:
        print(str(ConfigErrors(missing)), file=sys.stderr)
        return ExitStatus.UNUSABLE
    path = store_of(hive, args)
    try:  # a password_env not set, a bad ?schema=: told as `honeycomb run` tells them
        store = hive_store(hive, path) if path is not None else None
    except (StoreError, ConfigError) as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    baseline = None
    if args.baseline is not None and store is not None:
        baseline = _kept(store, args.baseline)
        if baseline is None:
            return ExitStatus.UNUSABLE
        # The cases --case left out are not run, not removed: compared, they are neither.
        left_out = {c.id for c in every.cases} - {c.id for c in cases.cases}
        baseline = _without(baseline, left_out)
    budget = EvalBudget(
        cost=args.max_cost, tokens=args.max_tokens, model_calls=args.max_model_calls
    )
    args.eval_id = args.eval_id or new_eval_id()
    stopped_by: list[signal.Signals] = []  # a signal that came once it ended is no matter
    try:  # masked by evaluate: the files below are written past the streams' filter
        found = run_on_loop(_run(hive, cases, (models, judging), store, budget, args, stopped_by))
        if found is None:  # stopped by a signal: the report of the runs made, kept
            kept = store.eval_report(args.eval_id) if store is not None else None
            cut = EvalReport.from_json(kept) if kept is not None else None
            shares = cases.memory == "shared" and hive.spec.memory is not None
            return _stopped(cut, stopped_by[0], store, args, shares=shares)
    except (StoreError, ConfigError) as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    finally:
        if store is not None:
            store.close()
    return _reported(found, baseline, store, args)


def _reported(
    report: EvalReport,
    baseline: EvalReport | None,
    store: RunStore | None,
    args: argparse.Namespace,
) -> ExitStatus:
    """Print the report (and the comparison with ``baseline``), write its files, and
    return the command's status for it."""
    comparison = compare(baseline, report) if baseline is not None else None
    if args.json:
        sys.stdout.write(_json(report, comparison) + "\n")
    else:
        print_report(sys.stdout, report, store.where if store is not None else None)
        if comparison is not None:
            print_comparison(sys.stdout, comparison)
    try:  # once the report is out: what was found is not lost to a file's trouble
        _write_files(report, comparison, args)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    return _status(report, comparison, args.gate)


def _json(report: EvalReport, comparison: Comparison | None) -> str:
    """The report as ``--json`` prints it: with ``--baseline``, what changed from it
    (its ``comparison``, as ``eval compare --json`` gives it), which the status gates on."""
    data = report.to_json()
    if comparison is None:
        return data.decode()
    shown = msgspec.json.decode(data)
    shown["comparison"] = msgspec.to_builtins(comparison)
    return encode_json(shown).decode()


def _stopped(
    report: EvalReport | None,
    received: signal.Signals,
    store: RunStore | None,
    args: argparse.Namespace,
    *,
    shares: bool = False,
) -> ExitStatus:
    """Print what an eval a signal stopped had found (its report, kept interrupted,
    or whole when the signal came as it was kept; none with ``--no-store`` or when the
    store failed), write its files, and say how to go on with it (not at all when it
    had ended, nor when its cases ``shares`` a memory: what its runs kept there is
    gone)."""
    if report is None:
        said = " (with --no-store, nothing of it is kept)."
        if store is not None:  # the store failed as it was stopped
            said = f": its report could not be kept in {store.where}."
    elif not report.interrupted:  # stopped as its report was kept: it had ended
        _reported(report, None, store, args)
        said = " as its report was kept: every run was made, and the eval ended."
    elif args.record is not None:  # its cassette would lack the runs made so far
        _reported(report, None, store, args)
        said = (
            ".\nUnder --record it is not gone on with: the same command makes every run "
            "again, to record every case's calls."
        )
    elif shares:
        _reported(report, None, store, args)
        said = (
            ".\nIts cases share a memory (memory: shared), and what its runs kept there is "
            "gone: the same command makes every run again."
        )
    else:
        _reported(report, None, store, args)
        said = (
            f".\nThe same command with --eval-id {args.eval_id} goes on with it: it makes "
            "only the runs left."
        )
    print(f"\n{received.name}: eval {args.eval_id} stopped{said}", file=sys.stderr)
    return STOPPED_BY[received]


def _chosen(cases: Cases, patterns: list[str] | None) -> Cases:
    """The cases ``--case`` names (every case without it).

    Raises:
        ConfigError: when a pattern matches no case.
    """
    if not patterns:
        return cases
    ids = [c.id for c in cases.cases]
    for pattern in patterns:
        if not any(_picks(pattern, name) for name in ids):
            raise ConfigError(
                f"--case {pattern}: no such case{did_you_mean(pattern, ids)}; the cases: "
                + ", ".join(ids)
            )
    kept = tuple(c for c in cases.cases if any(_picks(p, c.id) for p in patterns))
    return msgspec.structs.replace(cases, cases=kept)


def _picks(pattern: str, case: str) -> bool:
    """Whether ``--case pattern`` picks ``case``: its id (which may hold ``[``, ``*``
    or ``?``, a pattern's signs: ``q[1]``), or one the pattern matches."""
    return case == pattern or fnmatch.fnmatchcase(case, pattern)


def _without(report: EvalReport, ids: set[str]) -> EvalReport:
    """``report`` without the cases of ``ids``."""
    if not ids:
        return report
    return msgspec.structs.replace(
        report,
        cases=tuple(c for c in report.cases if c.id not in ids),
        not_run=tuple(name for name in report.not_run if name not in ids),
    )


Models = tuple[Model | Mapping[str, Model] | None, Model | Mapping[str, Model] | None]
"""The models of the runs and of the judges' hive (None: each hive's own)."""


async def _run(
    hive: Hive,
    cases: Cases,
    models: Models,
    store: RunStore | None,
    budget: EvalBudget,
    args: argparse.Namespace,
    stopped_by: list[signal.Signals],
) -> EvalReport | None:
    """The eval, on the hive's backend: a Ray pool is started before the first case and
    its actors stopped after the last, as ``honeycomb run`` does. None when Ctrl-C or
    SIGTERM stopped it (noted in ``stopped_by``): its report so far is in the store.

    Raises:
        StoreError: when the store cannot be used.
        ConfigError: when the hive's Ray cluster cannot be reached.
    """
    if store is not None:
        await store.open()  # a store that cannot be used stops the command here
    pool = hive.backend.build(hive.folder)
    # Each run's long-term memory is its own (or the cases share one): never the hive's.
    memory = eval_memory(hive)  # the hives it calls as tools' too
    executor = Executor.from_hive(hive, models=models[0], store=store, backend=pool, memory=memory)
    if pool is None:
        return await _evaluate(executor, models, cases, budget, args, stopped_by)
    async with pool_running(pool) as problem:
        if problem is not None:
            raise ConfigError(f"backend: {hive.backend.described()}: {problem}")
        return await _evaluate(executor, models, cases, budget, args, stopped_by)


async def _evaluate(
    executor: Executor,
    models: Models,
    cases: Cases,
    budget: EvalBudget,
    args: argparse.Namespace,
    stopped_by: list[signal.Signals],
) -> EvalReport | None:
    # The judges' hive's roles: on --model's model (or its cassette), else its own.
    judges = judges_of(executor, cases.judges, models[1])
    total = len(cases.cases) * args.repeat
    live = not (args.json or args.plain) and sys.stderr.isatty()
    try:
        async with executor:
            lines = None if args.json else sys.stderr
            # Ctrl-C and SIGTERM cancel the runs under way: evaluate keeps the report of
            # those made, and the runs cut off are interrupted in the store.
            with stopped_by_signals(stopped_by), EvalProgress(total, live=live, lines=lines) as p:
                return await evaluate(
                    executor,
                    cases,
                    concurrency=args.concurrency,
                    repeat=args.repeat,
                    budget=budget,
                    judges=judges,
                    eval_id=args.eval_id,
                    # The file, however the command names it: an eval stopped is gone
                    # on with by its id on the same hive (./hive.yaml, from elsewhere).
                    hive=str(args.hive.resolve()),
                    on_run=p.update,
                    # Recording, every run is made: the cassette is started anew.
                    go_on=args.record is None,
                )
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        return None


def _kept(store: RunStore, eval_id: str) -> EvalReport | None:
    """Eval ``eval_id`` of ``store``, or None having said why not."""
    try:
        text = store.eval_report(eval_id)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return None
    if text is None:
        print(f"{store.where}: no eval {eval_id!r} (honeycomb serve lists them)", file=sys.stderr)
        return None
    try:
        return EvalReport.from_json(text)
    except ValueError as exc:  # kept by a version that wrote what this one cannot read
        print(f"{store.where}: eval {eval_id!r} cannot be read: {exc}", file=sys.stderr)
        return None


def _check_writable(args: argparse.Namespace) -> None:
    """Refuse, before any case runs, a ``--junit`` or ``--html`` file that could not
    be written (a file where a folder of its path should be, a folder not writable).

    Raises:
        ConfigError: naming the option and the file.
    """
    for option, path in (("--junit", args.junit), ("--html", args.html)):
        if path is None:
            continue
        place = path
        while not place.exists() and place != place.parent:
            place = place.parent  # the first of its folders that is there makes the rest
        why: str | None
        if place == path and not path.is_file():
            why = "it is not a file"
        elif place == path:  # there already: written over
            why = None if os.access(path, os.W_OK) else "it is not writable"
        elif not place.is_dir():
            why = f"{place} is not a folder"
        else:
            why = None if os.access(place, os.W_OK | os.X_OK) else f"{place} is not writable"
        if why is not None:
            raise ConfigError(f"{option} {path}: cannot write it: {why}")


def _write_files(
    report: EvalReport, comparison: Comparison | None, args: argparse.Namespace
) -> None:
    """Write ``--junit`` and ``--html``.

    Raises:
        ConfigError: naming the option and the file that could not be written.
    """
    if args.junit is not None:
        written(args.junit, junit(report), "--junit")
    if args.html is not None:
        written(args.html, report_page(report, comparison), "--html")


def written(path: Path, text: str, option: str) -> None:
    """Write ``text`` into ``path``, making its folder.

    Raises:
        ConfigError: naming ``option`` and the file, when it cannot be written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot write it: {exc.strerror or exc}") from exc


def _status(report: EvalReport, comparison: Comparison | None, gate: str) -> ExitStatus:
    if gate == "regressions" and comparison is not None:
        return ExitStatus.CASES_FAILED if comparison.regressions else ExitStatus.OK
    return ExitStatus.OK if report.passed else ExitStatus.CASES_FAILED


def compare_main(argv: list[str]) -> int:
    """``honeycomb eval compare A B``: what changed from eval A to eval B."""
    parser = Parser(prog="honeycomb eval compare", description="what changed from eval A to eval B")
    parser.add_argument("baseline", help="the earlier eval's id")
    parser.add_argument("current", help="the later eval's id")
    parser.add_argument("--store", type=store_argument, default=DEFAULT_STORE, help=KEPT_IN)
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--html",
        type=user_path,
        default=None,
        metavar="FILE",
        help="also write the later report and the comparison as a web page",
    )
    args = parser.parse_args(argv)
    try:
        store = opened_store(args.store)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    before, after = _kept(store, args.baseline), _kept(store, args.current)
    if before is None or after is None:
        return ExitStatus.UNUSABLE
    comparison = compare(before, after)
    if args.json:
        sys.stdout.write(msgspec.json.encode(comparison).decode() + "\n")
    else:
        print_comparison(sys.stdout, comparison)
    if args.html is not None:
        try:
            written(args.html, report_page(after, comparison), "--html")
        except ConfigError as exc:
            print(str(exc), file=sys.stderr)
            return ExitStatus.UNUSABLE
    return ExitStatus.CASES_FAILED if comparison.regressions else ExitStatus.OK
