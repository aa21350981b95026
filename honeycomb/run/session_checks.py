"""What a session's message and a run's task and ids are checked for before anything
is kept (see ``docs/sessions.md``): a task that is not empty, the choices of what a
message does while its session is busy or its last turn unfinished, and ids a run
store keeps as they are."""

from __future__ import annotations

from typing import Literal, get_args

from runtime import ConfigError, did_you_mean
from runtime.text import valid_text

__all__ = [
    "MAX_ID_BYTES",
    "Busy",
    "Unfinished",
    "check_choices",
    "check_id",
    "check_task",
    "short",
]

Busy = Literal["wait", "refuse"]
"""What a message to a session that is answering another does: wait its turn (in the
order messages arrive), or be refused with :class:`~runtime.errors.SessionBusy`."""

Unfinished = Literal["raise", "resume", "drop"]
"""What a message to a session whose last turn did not finish does: raise
:class:`~runtime.errors.SessionError`, resume that turn first, or drop it."""


def check_task(task: str) -> None:
    """Refuse a task (a run's, a session message's) that is not text, or is empty or
    only whitespace: a run on it would plan nothing sensible, and be kept as if it
    were a task.

    Raises:
        ConfigError: naming what to pass instead; one whose ``field`` is ``task`` when
            it is not text.
    """
    if not isinstance(task, str):  # a number, None, bytes: refused by its name
        raise _not_text(
            task,
            "task",
            "pass what the run is to do, in words "
            "(Executor.run('Compare the weather in Lisbon and Porto'))",
        )
    if not task.strip():
        raise ConfigError(
            f"task is empty ({task!r}): pass what the run is to do, in words "
            "(Executor.run('Compare the weather in Lisbon and Porto'))"
        )


def check_choices(busy: str | None, unfinished: str | None) -> None:
    """Refuse a ``busy`` or an ``unfinished`` that is none of its choices: a typo
    (``"dropp"``) would be read as the choice left, and resume the turn meant dropped.

    Raises:
        ConfigError: naming the argument, its choices, and the one it is close to.
    """
    for name, given, choices in (("busy", busy, Busy), ("unfinished", unfinished, Unfinished)):
        if given is not None and given not in get_args(choices):
            listed = ", ".join(map(repr, get_args(choices)))
            close = did_you_mean(given, get_args(choices))
            raise ConfigError(f"{name}={given!r} is not one of {listed}{close}")


MAX_ID_BYTES = 512
"""The longest id (``run_id``, ``session_id``) in UTF-8 bytes: a PostgreSQL store's
index takes no key of more than about 2,700, and a worker's name holds its run's."""


def check_id(given: str, what: str) -> None:
    """Refuse an id (``run_id``, ``session_id``) that no run store keeps as it is: one
    that is not valid text (a lone surrogate, what Python makes of bytes that are not
    UTF-8, cannot be kept, nor sent as JSON, and text that leaves the process has it
    replaced, so the run could not be found again by its id), empty, or longer than
    :data:`MAX_ID_BYTES`.

    Raises:
        ConfigError: whose ``field`` is ``what``, saying what is wrong with it.
    """
    if not isinstance(given, str):  # a number, a UUID object: refused by its name
        raise _not_text(given, what, "pass an id as text (str(...) of it, say)")
    if not given:
        raise ConfigError("it is empty: pass an id of at least one character", field=what)
    size = len(given.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES:
        raise ConfigError(
            f"{given[:40]!r}... is {size} bytes long (UTF-8): an id is at most "
            f"{MAX_ID_BYTES}; pass a shorter one",
            field=what,
        )
    if valid_text(given) is not given:
        at = next(i for i, c in enumerate(given) if "\ud800" <= c <= "\udfff")
        raise ConfigError(
            f"{given!r} is not valid text: it holds a lone surrogate "
            f"({given[at]!r}, at {at}), which no run store keeps: pass an id of valid "
            "(UTF-8) text",
            field=what,
        )


def _not_text(given: object, field: str, instead: str) -> ConfigError:
    """The error for a value of ``field`` that is not text (a number, None, bytes)."""
    return ConfigError(
        f"{short(given)} (type {type(given).__name__}) is not text: {instead}", field=field
    )


def short(value: object) -> str:
    """``value``'s repr, cut to 60 characters, as an error shows what was given."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
