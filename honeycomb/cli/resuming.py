"""How the command line continues a stored run on the models it started with: a stored
run keeps its task and hive file, not the options that chose its models, so the command
a stopped run prints names them again (:func:`resume_hint`), and ``resume`` warns when
it would go on on other models than answered it so far (:func:`other_models_warning`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

from honeycomb.cli.stores import DEFAULT_STORE
from honeycomb.cli.view import View
from honeycomb.executor import Executor
from honeycomb.store import RunStore, silence
from honeycomb.store.postgres import url_passwords
from runtime import Event, Model, WrapperModel
from runtime.config.endpoints import endpoint_secrets

__all__ = [
    "MAYBE_RECORDED",
    "NOT_RECORDED",
    "SaidAsItStarts",
    "chat_hint",
    "models_thinking",
    "not_recorded",
    "other_models",
    "other_models_warning",
    "resume_hint",
    "resume_note",
    "say_note",
    "started_with",
]

NOT_RECORDED = (
    "The store keeps the run as it was before the signal: running, with every turn it had "
    "written. Once the store can be written again, it is listed interrupted and the command "
    "below continues it from those turns (from another host, once its lease has run out)."
)
"""What a command stopped during a run whose store could not record its interruption
says (``run``, ``resume``, ``demo``, and ``chat`` of the turn it answered), when the
store holds nothing of the interruption."""

MAYBE_RECORDED = (
    "The store keeps the run as it was before the signal (running, with every turn it had "
    "written), unless its end reached the server after all, as the error above says it may "
    "have: then it is kept interrupted. Either way, once the store can be written again, it "
    "is listed interrupted and the command below continues it from those turns (from "
    "another host, once its lease has run out)."
)
"""What it says instead when its store's server went silent as the interruption was
being written: its commit sent (``it may be there or not``), or still held by the
store's writer, which writes it if the server answers in time (``it may still be``)."""

_UNSURE = (silence.MAY_BE_THERE, silence.MAY_STILL_BE)
"""The words of a store's error that say what it waited for may be written after all
(:func:`honeycomb.store.silence.unanswered`)."""


def not_recorded(notes: Sequence[str]) -> str:
    """What a command stopped during a run whose store could not record its
    interruption says: why (``notes``: the run's, on the cancellation that stopped
    it), and what the store keeps of it, as the notes tell it."""
    unsure = any(words in note for note in notes for words in _UNSURE)
    return f"{' '.join(notes)}\n{MAYBE_RECORDED if unsure else NOT_RECORDED}"


_MODEL_OPTIONS = ("model", "gguf", "context", "tool_protocol", "base_url", "replay")
"""The options of the commands that run a hive that choose the models its run is
answered by (``--model`` and what goes with it, or a cassette's answers): a stored run
does not keep them, so the command that continues a run names them again."""

_KEPT_OPTIONS = ("record",)
"""The options that chose where a run's calls are kept (a cassette, which ``resume``
goes on in): named again too, so that a run's later lives are recorded after its
first's."""

BASE_URL_ENV = "HONEYCOMB_BASE_URL"
"""Where ``--base-url`` is read from when it is not given: the command that continues a
run whose endpoint's URL holds a secret names it by this variable, not by its text."""

_WHERE_OPTIONS = ("backend", "ray_address")
"""The options that chose where its workers ran, over the hive's ``backend:``: named
again too, so that a run started on Ray is continued on Ray."""

_ASKING_FLAGS = ("approve",)
"""The flags that made calls ask for a person's approval over the hive's ``approvals:``
(``demo --approve``): named again too, so that a run continued sends nothing the
person said to ask about first."""


def resume_hint(run_id: str, store: Path | str, args: argparse.Namespace | None = None) -> str:
    """The command that continues run ``run_id`` of ``store`` from this folder, on the
    models ``args`` chose: it names the store unless it is the default one, where
    ``resume`` looks, and each option of :data:`_MODEL_OPTIONS` given (or read from
    the environment: the shell that resumes may not have it), of
    :data:`_WHERE_OPTIONS` and of :data:`_KEPT_OPTIONS`, and each flag of
    :data:`_ASKING_FLAGS` set. Without ``args`` (a server that continues runs of any
    command), none.

    An endpoint's URL that holds a secret (a password, a ``?key=``, a token written
    as its user) is not written:
    the command gives ``--base-url "$HONEYCOMB_BASE_URL"``, which the shell fills in,
    so that it runs as pasted where the variable holds the URL (:func:`resume_note`
    says so), and shows no secret, masked or not."""
    words = ["honeycomb", "resume", run_id]
    if Path(store) != DEFAULT_STORE:
        words += ["--store", str(store)]
    if args is None:
        return shlex.join(words)
    return _with_options(words, args)


def chat_hint(session_id: str, store: Path | str, args: argparse.Namespace) -> str:
    """The command that goes on with the conversation ``session_id`` of ``honeycomb
    chat`` (``args``) kept in ``store`` from this folder, as :func:`resume_hint`
    continues a run: on the same hive, ``--store`` when one was given (else the chat
    finds the hive's, or the default: its URL without a password, as ``store.where``
    has it), and the options that chose its models, where its workers ran, where its
    calls are recorded (a chat going on with it records on in that cassette) and what
    asks for approval."""
    words = ["honeycomb", "chat", str(args.hive), "--session", session_id]
    if args.store is not None:
        words += ["--store", str(store)]
    return _with_options(words, args)


def _with_options(words: list[str], args: argparse.Namespace) -> str:
    """The command ``words`` with each option that chose its models, where its workers
    ran and where its calls are kept that ``args`` holds, and each flag of
    :data:`_ASKING_FLAGS` set, as the shell reads it."""
    from_env = ""
    for option in (*_MODEL_OPTIONS, *_WHERE_OPTIONS, *_KEPT_OPTIONS):
        value = getattr(args, option, None)
        if option == "base_url" and args.model is None:
            continue  # an endpoint for no --model: the run did not use it
        if option == "base_url" and _secret_url(args):
            from_env = f' {_flag(option)} "${BASE_URL_ENV}"'  # quoted for the shell by hand
        elif value is not None:
            words = [*words, _flag(option), str(value)]
    words = [*words, *(_flag(flag) for flag in _ASKING_FLAGS if getattr(args, flag, False))]
    return shlex.join(words) + from_env


def resume_note(args: argparse.Namespace, store: Path | str | None = None) -> str | None:
    """What to do before the command :func:`resume_hint` (or :func:`chat_hint`) gives
    runs as pasted (None: nothing to do): set the variable it reads the endpoint's URL
    from, when that URL holds a secret; and give the store's password as libpq reads
    it, when ``store`` (the store as given: its URL with its password) held one, which
    that command leaves out. Several are said a line each."""
    notes = [note for note in (_endpoint_note(args), _store_note(store)) if note is not None]
    return "\n".join(notes) if notes else None


def say_note(
    out: TextIO, args: argparse.Namespace, given: Path | str | None, indent: str = ""
) -> None:
    """Write to ``out`` what to do before the command that continues a run (or goes on
    with a conversation), just written, runs as pasted, if anything
    (:func:`resume_note`; ``given``: the store as given, with its password): every
    command that prints one says it here."""
    note = resume_note(args, given)
    if note is not None:
        out.writelines(f"{indent}{line}\n" for line in note.splitlines())


def _endpoint_note(args: argparse.Namespace) -> str | None:
    if args.model is None or not _secret_url(args):
        return None
    if os.environ.get(BASE_URL_ENV) == args.base_url:
        return (
            f"(the endpoint's URL holds a secret: that command reads it from ${BASE_URL_ENV}, "
            "as this one did)"
        )
    return (
        f"(the endpoint's URL holds a secret: that command reads it from ${BASE_URL_ENV}; "
        "set it to the URL given to --base-url first, or give --base-url in its place)"
    )


def _store_note(store: Path | str | None) -> str | None:
    """What to do for a store whose URL held a password: the command shows the URL
    without it, and libpq, not given it, reads ``PGPASSWORD`` or ``~/.pgpass``."""
    password = url_passwords(str(store)).get("password") if isinstance(store, str) else None
    if password is None:
        return None
    if os.environ.get("PGPASSWORD") == password:
        return (
            "(the store's URL held a password: that command leaves it out, and reads it "
            "from $PGPASSWORD, as set here)"
        )
    return (
        "(the store's URL held a password: that command leaves it out; set PGPASSWORD "
        "or ~/.pgpass first)"
    )


def _secret_url(args: argparse.Namespace) -> bool:
    """Whether ``--base-url`` holds a secret (a password, a key in its query, a token
    written as its user: :func:`~runtime.config.endpoints.endpoint_secrets`)."""
    value = getattr(args, "base_url", None)
    return value is not None and bool(endpoint_secrets(str(value)))


def _flag(option: str) -> str:
    """The command-line form of the option ``args`` holds as ``option``."""
    return f"--{option.replace('_', '-')}"


async def other_models_warning(store: RunStore, run_id: str, models: Iterable[Model]) -> list[str]:
    """The warning that the stored run ``run_id`` goes on on other models than answered
    it so far (:func:`other_models`: a run started with ``--model local``, resumed
    without it, say), if it does."""
    other = await other_models(store, run_id, models)
    if other is None:
        return []
    before, now = other
    return [
        f"warning: run {run_id} was answered by {before} so far, and this command "
        f"continues it on {now}. {started_with()}"
    ]


async def other_models(
    store: RunStore, run_id: str, models: Iterable[Model]
) -> tuple[str, str] | None:
    """Whether the stored run ``run_id``, which did not end with an answer, would go on
    on other models than answered it so far: the names of those, and of ``models``,
    when none of ``models`` is among them. A stored run does not keep the options that
    chose its models; None when it made no model call yet, or a model's name cannot be
    told before it answers."""
    stored = await store.summary(run_id)
    if stored is None or stored.status in ("ok", "partial", "running"):
        return None  # new; shown as it ended; or another process's, which this one leaves be
    spans = await asyncio.to_thread(store.spans, run_id)
    # A call that failed or was cut off names no model: only an answer says who gave it.
    before = sorted({s.name for s in spans if s.kind == "model_call" and s.status == "ok"})
    now = sorted({_answers_as(model) or "" for model in models})
    if not before or not now or "" in now:
        return None
    # A server may name the model it answers as in a longer form of the name it was
    # asked for (gpt-4o-mini-2024-07-18 for gpt-4o-mini, the path of a GGUF file for
    # its name): one name in the other is the same model, as far as can be told.
    if any(asked in name or name in asked for name in before for asked in now):
        return None
    return ", ".join(before), ", ".join(now)


def started_with() -> str:
    """How a run goes on on the models it started with."""
    options = ", ".join(_flag(option) for option in _MODEL_OPTIONS)
    return (
        f"To continue it on the models it started with, give the options that chose them "
        f"({options}), as the command it printed to continue it does."
    )


def models_thinking(executor: Executor) -> list[Model]:
    """The models the roles of ``executor`` think with (it may hold others, unused)."""
    default = executor.shared.crew.default_model
    used = {role.model or default for role in executor.roles.values()}
    return [executor.models[name] for name in sorted(used)]


def _answers_as(model: Model) -> str | None:
    """The model name the answers of ``model`` carry (as a run's spans keep it): that of
    the model a wrapper holds; the name a model holds (offline, llama.cpp and test
    models), else the one it asks an OpenAI-compatible server for; None: not known."""
    while isinstance(model, WrapperModel):
        model = model.inner
    for attribute in ("name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


class SaidAsItStarts:
    """A view that, as the run's first event comes, writes the lines ``said`` (where
    the run is kept, the command that continues it) to ``out``, then opens ``view``
    and shows the events as it does: a run refused as it starts (another process
    carries it on) is not claimed kept, nor continued, by this command before the
    refusal; and the lines come before a live view takes the terminal."""

    def __init__(self, view: View, said: Sequence[str], out: TextIO) -> None:
        self.view = view
        self._said = "\n".join(said)
        self._out = out
        self._opened = False

    def __enter__(self) -> SaidAsItStarts:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._opened:
            self.view.__exit__(*exc)

    def handle(self, event: Event) -> None:
        if not self._opened:
            print(self._said, file=self._out)
            self.view.__enter__()
            self._opened = True
        self.view.handle(event)
