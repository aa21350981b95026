"""Running a hive from the command line: ``demo``, ``run`` and ``resume``, with a live
view of the run, Ctrl-C and SIGTERM stopping it cleanly, and the answer at the end."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import shlex
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console

from honeycomb.cli.approve import TerminalApprover, print_waiting
from honeycomb.cli.backend import chosen_backend, pool_running
from honeycomb.cli.cassettes import cassette_memory_of, cassette_models
from honeycomb.cli.exits import STOPPED_BY, ExitStatus, stopped_by_signals
from honeycomb.cli.init import NotInstalled, example_file
from honeycomb.cli.local import LOCAL, TOOL_PROTOCOL, local_model, short_answers
from honeycomb.cli.loop import loop_factory, loop_name, run_on_loop
from honeycomb.cli.memory import demo_with_memory
from honeycomb.cli.resuming import (
    SaidAsItStarts,
    models_thinking,
    not_recorded,
    other_models_warning,
    resume_hint,
    resume_note,
    say_note,
)
from honeycomb.cli.stores import DEFAULT_STORE, STORE_HELP, no_run, opened_store, store_argument
from honeycomb.cli.view import JsonView, LiveView, PlainView, View, found, live, summary
from honeycomb.executor import Executor
from honeycomb.hive import Hive, load_hive
from honeycomb.hive.backend import BackendSpec
from honeycomb.offline import OfflineModel
from honeycomb.run.events import RunFinished
from honeycomb.run.restore import stored_result
from honeycomb.run.result import RunResult
from honeycomb.run.stream import RunStream
from honeycomb.store import RunStore
from honeycomb.store.files import unwritable
from honeycomb.store.schema import refuse_foreign
from honeycomb.trace.format import printable
from runtime import (
    Approver,
    AssistantMessage,
    BudgetExceeded,
    ConfigError,
    ConfigErrors,
    GuardrailTripped,
    HoneycombError,
    JsonToolModel,
    Memory,
    Model,
    PlanError,
    RunBusy,
    RunFailed,
    StoreError,
    TextToolModel,
)
from runtime.errors import did_you_mean
from runtime.model import missing_key
from runtime.text import valid_text
from workers import Approvals

if TYPE_CHECKING:
    from honeycomb.backends import RayBackend

__all__ = [
    "DEFAULT_STORE",
    "DEMOS",
    "DEMO_TASK",
    "check_hive_store",
    "demo_command",
    "demo_hive_path",
    "missing_keys",
    "model_of",
    "resume_command",
    "run_command",
]


DEMO_TASK = (
    "Plan a weekend in Lisbon, Porto and Madrid: compare the weather in each city, find "
    "what the guide says about them, work out the cost of 3 nights at 95 euros plus 2 "
    "train tickets at 38 euros, and send the summary to the outbox."
)


DEMOS: dict[str, tuple[str, str]] = {
    "trip": ("trip", "hive.yaml"),  # honeycomb demo
    "compact": ("logbook", "hive.yaml"),  # a long read that compaction keeps in its budget
    "rounds": ("research", "rounds.yaml"),  # a lead planning in rounds
    "memory": ("trip", "memory.yaml"),  # the trip with long-term memory
}
"""The example hive each form of ``honeycomb demo`` runs (by its option): each ships
in the package (tests/test_wheel.py checks them)."""


def add_store_options(
    parser: argparse.ArgumentParser, *, no_store: str, store: str | None = None
) -> None:
    """``--store`` (where a command that runs a hive keeps its runs, :func:`store_of`;
    its help ``store`` when it says otherwise) or ``--no-store``, whose help is
    ``no_store``."""
    keep = parser.add_mutually_exclusive_group()
    keep.add_argument(
        "--store",
        type=store_argument,
        default=None,
        help=store or f"{STORE_HELP} (default: the hive's store:, else {DEFAULT_STORE})",
    )
    keep.add_argument("--no-store", action="store_true", help=no_store)


def store_of(hive: Hive, args: argparse.Namespace) -> Path | str | None:
    """Where a command that runs ``hive`` keeps its runs: ``--store``, else the hive's
    ``store:``, else :data:`DEFAULT_STORE`; None with ``--no-store``."""
    return None if args.no_store else (args.store or hive.store or DEFAULT_STORE)


def hive_store(hive: Hive, where: Path | str) -> RunStore:
    """The run store at ``where``, with the hive's store options when it is the
    hive's own (its pool size, its password's variable).

    Raises:
        ConfigError: at the hive's ``store:``, when its ``password_env`` is not set.
    """
    if where != hive.store:
        return RunStore(where)
    missing = hive.missing_password()
    if missing is not None:
        raise missing
    return RunStore(where, **hive.store_options)


def check_hive_store(hive: Hive) -> None:
    """Raise if the hive's own store (``store:``, a file) is one a run refuses to open:
    a folder, a file that is not a run store, or one a newer Honeycomb wrote, one this
    user cannot write, or one whose folder cannot be made. The file is read as it is
    and nothing is left made: ``honeycomb validate`` checks this, and ``run`` before it
    starts a run in the hive's store.

    Raises:
        ConfigErrors: at the hive's ``store:``, in the words the store refuses it with.
    """
    where = hive.store
    if not isinstance(where, Path):
        return  # a PostgreSQL URL: its server is reached as the run starts
    try:
        refuse_foreign(where)
        _folder_made(where)
    except StoreError as exc:
        raise ConfigErrors([hive.error_at(("store",), str(exc))]) from exc


def _folder_made(path: Path) -> None:
    """Raise if the store's file ``path`` could not be made: this user may not write
    there, or its folder, not there, cannot be made (``/proc/x``, where even root makes
    none): the first folder missing is made, to see, and removed again.

    Raises:
        StoreError: saying why, as the store would refuse it.
    """
    why = unwritable(path)
    if why is not None:
        raise StoreError(f"cannot open the run store: {why}", path=str(path))
    missing = None
    for folder in path.parents:
        if folder.exists():
            break
        missing = folder
    if missing is None:
        return
    try:
        missing.mkdir()
    except OSError as exc:
        said = f"cannot make its folder {path.parent}: {exc.strerror or exc}"
        raise StoreError(f"cannot open the run store: {said}", path=str(path)) from exc
    missing.rmdir()


def demo_hive_path(example: str = "trip", name: str = "hive.yaml") -> Path:
    """A bundled example hive (:data:`DEMOS` names those the demo runs).

    Raises:
        NotInstalled: when the package lacks it.
    """
    return example_file(example, name)


def demo_command(args: argparse.Namespace) -> ExitStatus:
    if _blank_task("demo", args.task, "the demo's own task"):
        return ExitStatus.UNUSABLE
    if (args.latency is not None or args.tool_protocol is not None) and args.model is None:
        args.model = "offline"
    chosen = next((option for option in DEMOS if getattr(args, option, False)), "trip")
    try:
        hive = demo_hive_path(*DEMOS[chosen])
    except NotInstalled as exc:
        print(f"honeycomb demo: {exc}", file=sys.stderr)
        return ExitStatus.UNUSABLE
    if chosen == "memory":  # a second run recalls what the first kept
        return demo_with_memory(hive, args.task or DEMO_TASK, args, _execute)
    # The trip has a task of its own; the others run their hive's example task.
    return _execute(hive, args.task or (DEMO_TASK if chosen == "trip" else None), args)


def _blank_task(command: str, task: str | None, instead: str) -> bool:
    """Whether ``command`` was given a TASK that is empty or only whitespace, which it
    refuses (said on standard error): a run on nothing plans nothing sensible, and a
    task left out, not a blank one, is what runs ``instead``."""
    if task is None or task.strip():
        return False
    print(
        f"honeycomb {command}: TASK is empty ({task!r}): say what the run is to do, in "
        f"words, or leave TASK out to run {instead}",
        file=sys.stderr,
    )
    return True


OUTBOX_TOOL = "send_to_outbox"
"""The demo hive's side effect, which ``honeycomb demo --approve`` asks about."""


def _asking(hive: Hive, tool: str) -> bool:
    """The roles of ``hive`` that use ``tool`` ask for approval of it (too); False when
    none uses it."""
    for name in _users(hive, tool):
        role = hive.roles[name]
        own = role.approvals or Approvals()
        if tool not in own.tools:
            asking = own.model_copy(update={"tools": (*own.tools, tool)})
            hive.roles[name] = role.model_copy(update={"approvals": asking})
    return bool(_users(hive, tool))


def _users(hive: Hive, tool: str) -> list[str]:
    """The roles of ``hive`` that use ``tool``."""
    return [
        name
        for name, role in hive.roles.items()
        if any(ref == tool or ref.endswith(f":{tool}") for ref in role.tools)
    ]


def _unasked(hive: Hive, result: RunResult) -> str | None:
    """What ``demo --approve`` says of a run whose workers never called the tool it
    asks about, so that nothing was asked (a small model's plan may give no subtask to
    the role that has it); None when one called it."""
    for outcome in result.subtasks.values():
        messages = outcome.worker.transcript.messages if outcome.worker is not None else ()
        calls = [c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
        if any(call.name == OUTBOX_TOOL for call in calls):
            return None
    users = _users(hive, OUTBOX_TOOL)
    if any(subtask.role in users for subtask in result.plan.subtasks):
        why = f"{' and '.join(users)} did not call it"
    else:
        why = f"the plan gave {' or '.join(users)} no subtask"
    return f"honeycomb demo: --approve asked nothing: no worker called {OUTBOX_TOOL} ({why})"


def run_command(args: argparse.Namespace) -> ExitStatus:
    if _blank_task("run", args.task, "the hive's example_task"):
        return ExitStatus.UNUSABLE
    return _execute(args.hive, args.task, args)


def resume_command(args: argparse.Namespace) -> ExitStatus:
    path = args.store or DEFAULT_STORE
    try:
        store = opened_store(path)
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    try:  # looked up, then let go: the run opens the store as its own
        stored = store.find(args.run_id)
        missing = no_run(store, args.run_id) if stored is None else None
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    finally:
        store.close()
    if stored is None:
        print(missing, file=sys.stderr)
        return ExitStatus.UNUSABLE
    if stored.source is None:  # made from Python: only its result can be shown here
        return _show_ended(path, args)
    if stored.status in ("ok", "partial") and not Path(stored.source).is_file():
        return _show_ended(path, args)  # ended: its result needs no hive, moved or gone
    if not Path(stored.source).exists():  # moved or gone: `run --run-id` takes it where it is
        words = ["honeycomb", "run", "HIVE.yaml", "--run-id", args.run_id]
        if Path(path) != DEFAULT_STORE:
            words += ["--store", store.where]
        print(
            f"run {args.run_id} was started from {stored.source}, which is not there: if the "
            f"hive moved, continue the run with it where it is now ({shlex.join(words)})",
            file=sys.stderr,
        )
        return ExitStatus.UNUSABLE
    args.store, args.run_id, args.no_store = path, args.run_id, False
    args.continues = True  # --record goes on in the cassette of its earlier lives
    return _execute(Path(stored.source), stored.task, args)


def _show_ended(path: Path | str, args: argparse.Namespace) -> ExitStatus:
    """Show the stored result of run ``args.run_id``, which was not started from a
    hive file: a run that ended needs none to show its result, one that did not can
    only be continued by the code that made it."""
    try:
        stored = run_on_loop(RunStore(path).load(args.run_id))
        result = stored_result(stored) if stored is not None else None
    except StoreError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    if result is None:
        print(
            f"run {args.run_id!r} was not started from a hive file: continue it from Python, "
            f"with Executor.resume({args.run_id!r}) of an Executor like the one that made it",
            file=sys.stderr,
        )
        return ExitStatus.UNUSABLE
    out = sys.stdout
    view: View = JsonView(out) if args.json else PlainView(out)
    with view:
        view.handle(_stored_finish(result))
    if not args.json:
        _print_answer(out, result)
    return ExitStatus.OK


def _execute(path: Path, task: str | None, args: argparse.Namespace) -> ExitStatus:
    try:
        hive = load_hive(path)
        hive.check_runnable()
        if store_of(hive, args) == hive.store:
            check_hive_store(hive)
    except ConfigErrors as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    if getattr(args, "approve", False) and not _asking(hive, OUTBOX_TOOL):
        print(
            f"honeycomb demo: --approve asks before the trip's {OUTBOX_TOOL} sends, and this "
            "example has no such tool: give it to the trip (honeycomb demo --approve, or "
            "with --memory)",
            file=sys.stderr,
        )
        return ExitStatus.UNUSABLE
    if task is None:  # no TASK given: the hive's own
        task = hive.spec.example_task
        if task is None or not task.strip():
            has = "no example_task" if task is None else "an empty example_task"
            given = shlex.join(["honeycomb", "run", str(path), "TASK"])
            print(
                f"honeycomb run: no TASK given, and {path} has {has}: give one ({given}), "
                "or write the hive's example_task:",
                file=sys.stderr,
            )
            return ExitStatus.UNUSABLE
    # A byte of argv that is not UTF-8 comes in as a lone surrogate: the replacement
    # character, as the store and the model would have it.
    task = valid_text(task)
    where = store_of(hive, args)
    try:  # the store made once: a password_env not set is refused here
        backend = chosen_backend(hive.backend, args)
        model = model_of(args, hive)
        store = hive_store(hive, where) if where is not None else None
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    try:
        return _execute_in(hive, task, args, backend, model, store)
    finally:
        if store is not None:  # (closed already, once the run went)
            store.close()


def _execute_in(
    hive: Hive,
    task: str,
    args: argparse.Namespace,
    backend: BackendSpec,
    model: Model | None,
    store: RunStore | None,
) -> ExitStatus:
    """Run ``hive`` on ``task``, kept in ``store``, once its options are read."""
    try:
        args.continues = getattr(args, "continues", False) or _kept_already(store, args)
        models = cassette_models(hive, model, args)
    except (StoreError, ConfigError) as exc:
        print(str(exc), file=sys.stderr)
        return ExitStatus.UNUSABLE
    missing = missing_keys(hive, model, args)
    if missing:  # before the run starts (and is kept), not as its failure
        print(str(ConfigErrors(missing)), file=sys.stderr)
        return ExitStatus.UNUSABLE
    offline = (args.model == "offline") or (  # of the models it calls (the demo's gpt: none)
        model is None
        and getattr(args, "replay", None) is None  # (a cassette's replay calls none)
        and all(hive.spec.models[m].provider == "offline" for m in hive.models_used())
    )
    console = Console(stderr=False)
    out: TextIO = sys.stdout
    if offline and not args.json:
        print("Offline simulation: a rule-based model stands in for the LLM (no network, no key).")
    new_view = functools.partial(_view, args, console, out, hive)
    run = _run_and_report(hive, task, models, new_view, args, out, store, backend)
    if not args.json:
        return run_on_loop(run)
    # Standard output holds the JSON lines alone: whatever else writes there meanwhile
    # (Ray's driver, which prints what its cluster reports) goes to standard error.
    with contextlib.redirect_stdout(sys.stderr):
        return run_on_loop(run)


def _kept_already(store: RunStore | None, args: argparse.Namespace) -> bool:
    """Whether ``--run-id`` names a run ``store`` keeps, which this command continues
    (or shows, ended), so that ``--record`` goes on in the cassette of its earlier
    lives rather than start it anew.

    Raises:
        StoreError: when ``store`` cannot be read: a run taken for a new one would
            record its cassette anew, losing the calls of its earlier lives.
    """
    if args.run_id is None or store is None or getattr(args, "record", None) is None:
        return False
    return store.find(args.run_id) is not None


def model_of(args: argparse.Namespace, hive: Hive) -> Model | None:
    """The one model ``--model`` (and its options) names for every role of ``hive``;
    None: the hive's own, or a cassette's answers (``--replay``). ``--model local``
    lowers ``hive``'s run-wide output limit (:func:`short_answers`), replayed too (its
    calls were recorded so), before its line says the limits, and calls tools by
    :data:`~honeycomb.cli.local.TOOL_PROTOCOL` unless ``--tool-protocol`` says another.

    Raises:
        ConfigError: for a ``--model`` that cannot be made, or ``--tool-protocol``, a
            given ``--base-url`` or ``--context`` without one (they would go unused).
    """
    unused = _for_no_model(args)
    if unused is not None:
        flag, field = unused
        raise ConfigError(
            f"{flag} is for --model: name the model too (--model NAME {flag} ...; a hive's "
            f"own models say theirs with {field}:)"
        )
    if args.model == LOCAL:
        short_answers(hive)
    if getattr(args, "replay", None) is not None:
        return None
    model = _named_model(args, hive)
    protocol = args.tool_protocol or (TOOL_PROTOCOL if args.model == LOCAL else "native")
    if model is not None and protocol == "text":
        return TextToolModel(model)
    if model is not None and protocol == "json":
        return JsonToolModel(model)
    return model


def _for_no_model(args: argparse.Namespace) -> tuple[str, str] | None:
    """The option given that only ``--model`` uses, when none is named, and the hive
    field that says it for a hive's own models; None: none such."""
    if args.model is not None:
        return None
    if args.tool_protocol is not None:
        return "--tool-protocol", "tool_protocol"
    if args.base_url_given:  # not HONEYCOMB_BASE_URL's, which a shell may keep set
        return "--base-url", "base_url"
    if getattr(args, "context", None) is not None:
        return "--context", "context"
    return None


def _named_model(args: argparse.Namespace, hive: Hive) -> Model | None:
    if args.model is None:
        return None
    context = getattr(args, "context", None)
    if args.model == LOCAL or getattr(args, "gguf", None) is not None:
        return local_model(args, hive)
    if args.model == "offline":
        if context is not None:
            raise ConfigError("--context is for --model local or an endpoint's model, not offline")
        latency = getattr(args, "latency", None)
        return OfflineModel(latency=latency) if latency is not None else OfflineModel()
    from runtime.models.openai.chat import OpenAIModel  # openai loads only when it is used

    return OpenAIModel(args.model, base_url=args.base_url, context_tokens=context)


def missing_keys(hive: Hive, model: Model | None, args: argparse.Namespace) -> list[ConfigError]:
    """The API keys the run would need and lacks: of the hive's models, or of the one
    model given instead of them; and of its memory's embeddings (none: a cassette
    answers every call)."""
    if getattr(args, "replay", None) is not None:
        return []
    found = hive.missing_keys(models=model is None)
    if model is None or missing_key(model) is None:
        return found
    # Said of the option: a hive's model has an api_key: to give, --model's has not.
    # A misspelt offline or local model is taken for an endpoint's: the one meant.
    meant = did_you_mean(args.model, ["offline", LOCAL])
    given = ConfigError(
        f"--model {args.model} needs an API key{meant}: set OPENAI_API_KEY (or give "
        "--base-url of a local endpoint: Ollama, vLLM, llama.cpp's server)"
    )
    return [given, *found]


def _view(args: argparse.Namespace, console: Console, out: TextIO, hive: Hive) -> View:
    if args.json:
        return JsonView(out)
    if args.plain or not live(console):
        return PlainView(out)
    return LiveView(console, f"honeycomb · {hive.name}")


async def _run_and_report(
    hive: Hive,
    task: str,
    models: Model | Mapping[str, Model] | None,
    new_view: Callable[[], View],
    args: argparse.Namespace,
    out: TextIO,
    kept: RunStore | None,
    backend: BackendSpec,
) -> ExitStatus:
    run_id = args.run_id or os.urandom(6).hex()
    if kept is not None:
        try:
            await kept.open()  # a store that cannot be used stops the command here
        except StoreError as exc:
            print(str(exc), file=sys.stderr)
            return ExitStatus.UNUSABLE
        other = None
        if args.run_id is not None:  # a new id is no run's yet
            other = await asyncio.to_thread(_of_another_run, kept, run_id, hive, task)
        if other is not None:  # said before anything runs: the run stays as it was
            print(other, file=sys.stderr)
            return ExitStatus.UNUSABLE
    try:
        with cassette_memory_of(hive, args, models) as memory:  # --record, --replay: its own
            run = functools.partial(_run, hive, task, models, args=args, out=out, memory=memory)
            pool = backend.build(hive.folder)
            if pool is None:
                return await run(new_view(), kept, run_id, None)
            if not args.json:
                print(f"backend: {backend.described()}", file=sys.stderr)
            async with pool_running(pool) as problem:
                if problem is not None:
                    print(f"backend: {backend.described()}: {problem}", file=sys.stderr)
                    return ExitStatus.UNUSABLE
                # The view's clock starts with the run, once Ray has started.
                return await run(new_view(), kept, run_id, pool)
    finally:
        if kept is not None:  # its writer done and its files closed: the store whole in
            await kept.aclose()  # its one file (SQLite's), as another process reads it


async def _run(
    hive: Hive,
    task: str,
    models: Model | Mapping[str, Model] | None,
    view: View,
    store: RunStore | None,
    run_id: str,
    pool: RayBackend | None,
    *,
    args: argparse.Namespace,
    out: TextIO,
    memory: Memory | None,
) -> ExitStatus:
    # On a terminal, a call that needs approval is asked about there; else the run
    # ends waiting and says how to decide it.
    asks = sys.stdin.isatty() and not args.json
    pause = view.paused if isinstance(view, LiveView) else None
    approver: Approver | None = TerminalApprover(sys.stdin, sys.stderr, pause) if asks else None
    if approver is not None and isinstance(view, LiveView):
        approver = view.asked(approver)
    try:
        own: dict[str, Any] = {"memory": memory} if memory is not None else {}
        executor = Executor.from_hive(
            hive, models=models, store=store, approver=approver, backend=pool, **own
        )
        # Streamed, for every view: the live one shows the text, and a run stopped by
        # its wall-time budget says how far each call it cut off had got.
        stream = executor.stream(
            task, run_id=run_id, steal=getattr(args, "force", False), text_deltas=True
        )
    except ConfigError as exc:  # validate refuses these first; never a traceback
        print(refused_as_made(exc, args), file=sys.stderr)
        return ExitStatus.UNUSABLE
    # Said as the run starts, not before: one refused as it starts (another process
    # carries it on) is neither kept by this command nor continued on its models.
    given = store_of(hive, args)  # its URL with its password, which the hints leave out
    said = _kept_lines(run_id, store, given, args) if store is not None and not args.json else []
    if not args.json and loop_factory() is not None:
        said.append(f"event loop: {loop_name()} (the fast extra)")
    if store is not None and args.run_id is not None and getattr(args, "replay", None) is None:
        said += await other_models_warning(store, run_id, models_thinking(executor))
    view = SaidAsItStarts(view, said, sys.stderr) if said else view
    error: HoneycombError | None = None
    ended: RunFinished | None = None  # the run's last event, once it has ended
    stopped_by: list[signal.Signals] = []
    result: RunResult | None = None
    unrecorded: list[str] = []  # what the run's stop could not record (its store away)
    try:
        # Ctrl-C and SIGTERM cancel the run: the store records it as interrupted and
        # keeps every finished turn, so ``honeycomb resume`` continues it.
        with stopped_by_signals(stopped_by), view:
            try:
                async with stream as events:
                    try:
                        async for event in events:
                            view.handle(event)
                            ended = event if isinstance(event, RunFinished) else None
                    except HoneycombError as exc:  # the run's own error, after its last event
                        error = exc
            except asyncio.CancelledError:
                if stopped_by:
                    await _shown_as_it_stopped(events, view)
                raise
            result = events.result
            if result is not None and ended is None:  # it had ended: its stored result
                view.handle(_stored_finish(result))
    except asyncio.CancelledError as exc:
        if not stopped_by:
            raise
        unrecorded = getattr(exc, "__notes__", [])
    except (KeyboardInterrupt, SystemExit) as exc:  # a tool's or a model's: it ends the command
        where = "".join(f"; {note}" for note in getattr(exc, "__notes__", ()))  # which raised it
        stopped = f"{type(exc).__name__}: {exc}{where}"
        await _say_stopped(stopped, run_id, store, given, args, [])
        raise
    if result is None and error is None and ended is not None and ended.status != "interrupted":
        # A signal came after the run had ended, as it stopped its MCP servers: that
        # only cut the stopping short, and the run ends as its last event says.
        result = ended.result if ended.error is None else None
    elif stopped_by and result is None:  # cut off before it ended: resume continues it
        await _say_stopped(stopped_by[0].name, run_id, store, given, args, unrecorded)
        return STOPPED_BY[stopped_by[0]]
    unasked = _unasked(hive, result) if getattr(args, "approve", False) and result else None
    if unasked is not None and not args.json:
        print(unasked, file=sys.stderr)
    return _reported(result, error, ended, args, out, store, given)


def _kept_lines(
    run_id: str, store: RunStore, given: Path | str | None, args: argparse.Namespace
) -> list[str]:
    """Where run ``run_id`` is kept (``store``, as ``given``), and the command that
    continues it (and what to do before it runs as pasted, if anything)."""
    hint = resume_hint(run_id, store.where, args)  # its URL without a password
    note = resume_note(args, given)
    return [f"run {run_id} · kept in {store.where} ({hint})", *([note] if note else [])]


async def _shown_as_it_stopped(events: RunStream, view: View) -> None:
    """Show the events the run sent as a signal stopped it, which its reader, cancelled
    by the signal, did not read: its calls and workers cut off, and its ``run.finished``
    (``interrupted``). The stream's block has ended, and the run with it: they are all
    there, and none is waited for."""
    # A pipe closed meanwhile (``| jq``, which the same Ctrl-C ended) takes no more:
    # the command still says how the run stopped, and exits by its signal.
    with contextlib.suppress(HoneycombError, BrokenPipeError):
        async for event in events:
            view.handle(event)


def refused_as_made(error: ConfigError, args: argparse.Namespace) -> str:
    """What a command says of the Executor its hive could not make: ``error``, and what
    ``honeycomb validate`` cannot see, that ``--model`` stands in for the hive's models
    (a budget in dollars with an unpriced one, say)."""
    instead = f" (--model {args.model} stands in for the hive's models)" if args.model else ""
    return f"{error}{instead}"


async def _say_stopped(
    by: str,
    run_id: str,
    store: RunStore | None,
    given: Path | str | None,
    args: argparse.Namespace,
    unrecorded: list[str],
) -> None:
    """Say that ``by`` (a signal's name, or what a tool raised to end the process)
    stopped run ``run_id``, and the command that continues it from ``store``: when the
    store keeps it. One stopped before its first write (as it began) is kept nowhere,
    and is said so: ``resume`` would find no such run. One whose store could not record
    that it was interrupted (``unrecorded``: why, as the run noted it) is said so, and
    when ``resume`` can continue it."""
    try:
        kept = store is not None and await store.summary(run_id) is not None
    except StoreError:  # it cannot be read now: say what would continue it
        kept = True
    if store is not None and store.path is not None and not store.path.exists():
        print(  # what it wrote went with the file (SQLite writes on into it, unseen)
            f"\n{by}: run {run_id} stopped, and its store {store.where} is not there any "
            "more (removed as the run went): nothing of it is left to continue",
            file=sys.stderr,
        )
        return
    if store is not None and not kept:
        print(
            f"\n{by}: run {run_id} stopped before anything of it was kept: nothing to "
            "continue; run the command again to start it",
            file=sys.stderr,
        )
        return
    print(f"\n{by}: run {run_id} stopped.", file=sys.stderr)
    if store is not None and unrecorded:
        print(not_recorded(unrecorded), file=sys.stderr)
    if store is not None:
        print(f"Continue it with: {resume_hint(run_id, store.where, args)}", file=sys.stderr)
        say_note(sys.stderr, args, given)


def _of_another_run(store: RunStore, run_id: str, hive: Hive, task: str) -> str | None:
    """Why ``--run-id`` cannot name the stored run ``run_id`` for ``hive`` and ``task``:
    it was started from another hive file, which is still there (a hive file moved
    since is taken for the same), or with another task; None when it can (or there is
    no such run). Continued with this hive's roles, the other's plan failed its first
    step, and the run with it; ended, the other's answer was shown as this hive's; and
    a run of another task is refused as it starts, which said the stored run failed. It
    reads the store and the files: call it in a thread."""
    stored = store.find(run_id)
    if stored is None:
        return None
    source, continues = stored.source, resume_hint(run_id, store.where)
    if source is not None and Path(source).is_file() and not Path(source).samefile(hive.file):
        return (
            f"run {run_id!r} in {store.where} was started from another hive file, {source}, "
            f"not {hive.file}: show or continue it with {continues}, or give this run a new "
            "--run-id"
        )
    other = store.another_task(stored.task, task)
    if other is not None:
        return (
            f"run {run_id!r} in {store.where} was started with another task "
            f"({other[:60]!r}): show or continue it with {continues}, or give "
            "this run a new --run-id"
        )
    return None


def _reported(
    result: RunResult | None,
    error: HoneycombError | None,
    ended: RunFinished | None,
    args: argparse.Namespace,
    out: TextIO,
    store: RunStore | None,
    given: Path | str | None,
) -> ExitStatus:
    """Print how a run that was not cut off ended (its answer, the calls it waits on,
    or what it failed of, and what its workers found), and return the command's exit
    status for it."""
    if isinstance(error, RunBusy):  # another process has it: nothing ran here
        print(str(error), file=sys.stderr)
        return ExitStatus.UNUSABLE
    if result is not None and result.status == "waiting":
        if not args.json:  # its run.finished line holds the calls that wait
            out.write("\n".join(summary(result)) + "\n")
            where = None if store is None else store.where
            resume = resume_hint(result.run_id, where, args) if where is not None else None
            print_waiting(out, result, where, DEFAULT_STORE, resume)
            if resume is not None:
                say_note(out, args, given, "  ")
        return ExitStatus.WAITING
    if args.json:
        return ExitStatus.OK if result is not None else ExitStatus.FAILED
    if result is None:
        _print_failure(out, error, ended)
        return ExitStatus.FAILED
    _print_answer(out, result)
    return ExitStatus.OK


def _print_failure(out: TextIO, error: HoneycombError | None, ended: RunFinished | None) -> None:
    """What a run without an answer failed of, with its partial result (what its
    finished subtasks found, but for answers its output guards did not pass, which the
    run withholds: :func:`~honeycomb.run.result.answers_withheld`): from its error, or
    from its last event when a signal came after it had ended, as it stopped its MCP
    servers, before it raised the error."""
    partial: RunResult | None = None
    if error is not None:
        over, why = isinstance(error, BudgetExceeded), str(error)
        if isinstance(error, BudgetExceeded | RunFailed | GuardrailTripped | PlanError):
            partial = error.partial  # what the run did, when it did something
    elif ended is not None:
        over, why, partial = ended.status == "over_budget", ended.error or "", ended.result
        why = why.removeprefix(f"{BudgetExceeded.__name__}: ")  # the event's "Type: message"
    else:  # neither: a run cut off is reported as stopped, before this
        over, why = False, "no result"
    if not (over and why.startswith("budget exceeded")):  # the budget's error says it
        why = f"{'budget exceeded' if over else 'run failed'}: {why}"
    out.write(f"\n{why}\n")
    if partial is not None:  # what its finished subtasks found is not lost with it
        out.write("\n".join([*found(partial), *summary(partial)]) + "\n")


def _print_answer(out: TextIO, result: RunResult) -> None:
    out.write(f"\nAnswer:\n{printable(result.answer_text)}\n\n")  # the model's: made inert
    out.write("\n".join(summary(result)) + "\n")


def _stored_finish(result: RunResult) -> RunFinished:
    """The end of a run that had ended before (it sends no events): what the views
    show of a finished run, from its stored result."""
    return RunFinished(
        run_id=result.run_id, status=result.status, wall_s=result.timings.wall_s, result=result
    )
