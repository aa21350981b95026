"""What the command line's options take, checked in one place: the parser, whose usage
errors are one line (exit status 2), and the argument types that bound a number (a
count, seconds, days, dollars, a port) or the id of a new run or eval. A value out of
range is refused while the arguments are read, before the command does anything, in a
line that names the option and what it takes:

``honeycomb sessions prune: error: argument --keep: takes a whole number of at least
1, not '-1'``
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NoReturn

from honeycomb.cli.exits import ExitStatus
from honeycomb.trace.format import counted
from runtime.errors import did_you_mean

__all__ = [
    "MAX_LIMIT",
    "MAX_RUN_ID",
    "Parser",
    "add_limit",
    "integer",
    "new_id",
    "newest_first",
    "number",
    "options_of",
    "unrecognized",
    "user_path",
]

MAX_LIMIT = 100_000
"""The most ``--limit`` lists at once (a store reads a bounded number of rows)."""

MAX_RUN_ID = 128
"""The longest id ``--run-id`` and ``--eval-id`` take (the ids the CLI makes have 12
and 11 characters)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, ``--help`` showing the
    usage (its subcommands' parsers are of this class too), and a misspelt choice (a
    command, a ``--backend``) told with the one meant."""

    commands: Mapping[str, argparse.ArgumentParser] = {}
    """The parsers of its subcommands, by name (the ``honeycomb`` parser's, and those of
    the commands that have actions: ``sessions``, ``memory``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(ExitStatus.UNUSABLE, f"{self.prog}: error: {_with_the_choice_meant(message)}\n")

    def command_of(self, argv: list[str]) -> argparse.ArgumentParser:
        """The parser of the command ``argv`` begins with (``sessions prune``: the
        action's), whose errors name it (``honeycomb run: error: ...``); this one when
        it begins with none."""
        found: argparse.ArgumentParser = self
        for word in argv:
            inner = getattr(found, "commands", {}).get(word)
            if inner is None:
                break
            found = inner
        return found

    def others_taking(self, option: str, command: argparse.ArgumentParser) -> list[str]:
        """The commands other than ``command`` that take ``option`` (``--latency``:
        ``honeycomb demo``), as their usage names them."""
        return [
            other.prog
            for other in self.commands.values()
            if other is not command and option in options_of(other)
        ]


def options_of(parser: argparse.ArgumentParser) -> list[str]:
    """The long options ``parser`` takes, as its usage names them."""
    return re.findall(r"(?<![\w-])--[a-z][a-z-]*", parser.format_usage())


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")


_OTHER_WORDS = {"check": "validate", "lint": "validate", "new": "init", "list": "runs"}
"""Commands by the words other tools name them with (``honeycomb check hive.yaml``),
which no spelling brings close."""


def _with_the_choice_meant(message: str) -> str:
    """argparse's ``invalid choice: 'rnu' (choose from 'demo', ...)`` with ``(did you
    mean 'run'?)`` after the choice given, when one is close or means it."""
    found = _INVALID_CHOICE.search(message)
    if found is None:
        return message
    listed = found["choices"]  # quoted, or (Python 3.12.8 and later) not
    choices = re.findall(r"'([^']*)'", listed) or [c.strip() for c in listed.split(",")]
    close = did_you_mean(found["given"], choices)
    meant = _OTHER_WORDS.get(found["given"])
    if not close and meant in choices:
        close = f" (did you mean {meant!r}?)"
    if not close and "run" in choices and found["given"].endswith((".yaml", ".yml")):
        # A hive file given as the command: 'honeycomb myhive/hive.yaml'.
        close = f" (a hive file runs with: honeycomb run {shlex.quote(found['given'])})"
    given = f"invalid choice: '{found['given']}'"
    return message.replace(given, given + close, 1) if close else message


def unrecognized(
    extra: list[str],
    task: str | None,
    command: argparse.ArgumentParser,
    parser: Parser,
) -> str:
    """argparse's error for the words ``extra`` that ``command`` (of ``parser``'s
    commands) did not take: the first that is an option named as another command's
    (``run --latency``: ``honeycomb demo``'s), else with the one of the command's own
    options meant by it (``--modle``); else, when a TASK was given and they are words,
    that they may be the rest of the task, which the shell split where it was not quoted
    (``honeycomb run hive.yaml Look up Kyoto``)."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    options = options_of(command)
    given = next((word.partition("=")[0] for word in extra if word.startswith("--")), None)
    if given in options:  # an option, after a '--' that made every word after it the task's
        return f"{message} ({given} after '--' is read as a word of the task: put it before '--')"
    others = parser.others_taking(given, command) if given is not None else []
    if given is not None and others:
        return f"{message} ({given} is an option of {' and '.join(others)}, not of {command.prog})"
    if given is not None:
        return message + did_you_mean(given, options)
    if task is None or any(word.startswith("-") for word in extra):
        return message
    text = " ".join([task, *extra])
    # Double quotes read best, and keep an apostrophe as it is; shlex's single quotes
    # where the shell would expand what is inside them.
    whole = shlex.quote(text) if set(text) & set('"$`\\!') else f'"{text}"'
    return f"{message} (if they are words of the task, put the task in quotes: {whole})"


def integer(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argument type: a whole number from ``low`` (to ``high``, when given)."""
    takes = (
        f"a whole number of at least {low}"
        if high is None
        else f"a whole number from {low} to {high}"
    )

    def parse(given: str) -> int:
        try:
            value = int(given)
        except ValueError:
            value = low - 1
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"takes {takes}, not {given!r}")
        return value

    return parse


def number(low: float, *, above: bool = False) -> Callable[[str], float]:
    """An argument type: a finite number of at least ``low`` (above ``low`` if
    ``above``); never NaN or an infinity (``1e400`` is one)."""
    takes = f"a finite number {'above' if above else 'of at least'} {low:g}"

    def parse(given: str) -> float:
        try:
            value = float(given)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < low or (above and value == low):
            raise argparse.ArgumentTypeError(f"takes {takes}, not {given!r}")
        return value

    return parse


def new_id(given: str) -> str:
    """An argument type: the id of a run or an eval to make (``--run-id``,
    ``--eval-id``), 1 to :data:`MAX_RUN_ID` printable characters: it is shown on
    terminals, in tables and commands to copy, where a line break or an escape would do
    harm."""
    if not 1 <= len(given) <= MAX_RUN_ID or not given.isprintable():
        raise argparse.ArgumentTypeError(
            f"takes 1 to {MAX_RUN_ID} printable characters (no line breaks, tabs or escape "
            f"codes), not {given[:40]!r}{' ...' if len(given) > 40 else ''}"
        )
    return given


def user_path(given: str) -> Path:
    """An argument type: a file or folder, ``~`` its home folder as a shell reads it,
    also where no shell expands it (``--record=~/calls.yaml``, a quoted ``'~/calls.yaml'``),
    which would else make a folder named ``~``; not empty (``honeycomb init "$UNSET"``),
    which names the current folder."""
    if not given.strip():
        raise argparse.ArgumentTypeError(f"takes a file or a folder, not {given!r}")
    return Path(os.path.expanduser(given))


def add_limit(parser: argparse.ArgumentParser) -> None:
    """A listing's ``--limit``: how many of its rows, newest first (20 unless given)."""
    parser.add_argument(
        "--limit",
        type=integer(1, MAX_LIMIT),
        default=20,
        metavar="N",
        help=f"how many, newest first (default 20, at most {MAX_LIMIT})",
    )


def newest_first(
    shown: int, noun: str, where: object, *, total: int | None, plural: str | None = None
) -> str:
    """The first line of a listing cut by :func:`add_limit`'s ``--limit``: how many
    rows it shows of how many ``where`` holds, never the one for the other.

    ``3 runs in runs.db, newest first`` when it shows them all; ``1 of 3 runs in runs.db,
    newest first`` when the limit left some out (``total``: how many ``where`` holds);
    ``the newest 1 run in runs.db (it holds more)`` when it left some out and how many
    is not known (``total`` None).
    """
    if total is None:
        return f"the newest {counted(shown, noun, plural)} in {where} (it holds more)"
    if total > shown:
        return f"{shown} of {counted(total, noun, plural)} in {where}, newest first"
    return f"{counted(shown, noun, plural)} in {where}, newest first"
