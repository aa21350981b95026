"""``honeycomb init``: a new hive folder from a template, and the short guide that
``honeycomb`` with no arguments prints.

The templates are the example hives (``examples/`` in a clone; shipped in the package
as ``honeycomb/examples/``): each folder with a ``hive.yaml`` is one, named after its
folder. Every one runs offline as it is, so a new folder validates and runs at once.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.options import user_path
from runtime.errors import did_you_mean

__all__ = [
    "DEFAULT_TEMPLATE",
    "GUIDE",
    "NotInstalled",
    "add_init_parser",
    "example_file",
    "examples_folder",
    "scaffold",
    "templates",
    "version",
]

DEFAULT_TEMPLATE = "starter"
_SKIPPED = ("__pycache__", ".honeycomb", ".mypy_cache", ".pytest_cache")

GUIDE = """\
honeycomb {version}: run LLM agents in parallel (plan, fan out, aggregate).

  honeycomb demo                    watch the bundled trip hive run offline (no key)
  honeycomb init myhive             make a hive of your own from a template
                                    (honeycomb init --list names the templates)
  honeycomb run myhive/hive.yaml    run a hive on its example task, or on yours:
                                    honeycomb run myhive/hive.yaml "your task"
  honeycomb chat myhive/hive.yaml   talk with a hive: each message sees the ones before
  honeycomb runs                    list the stored runs
  honeycomb trace RUN_ID            a run's timeline and critical path

Every command has --help; honeycomb --help lists them all."""


def version() -> str:
    """The installed package's version."""
    try:
        return metadata.version("honeycomb-agents")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


class NotInstalled(Exception):
    """An example hive (or all of them) that the installed package lacks."""


_REINSTALL = "reinstall honeycomb-agents (pip install --force-reinstall honeycomb-agents)"


def examples_folder() -> Path:
    """The folder the templates are in: the package's copy, else the clone's
    ``examples/``.

    Raises:
        NotInstalled: when neither is there.
    """
    package = Path(__file__).resolve().parents[1]  # honeycomb/
    for candidate in (package / "examples", package.parent / "examples"):
        if (candidate / DEFAULT_TEMPLATE / "hive.yaml").is_file():
            return candidate
    raise NotInstalled(f"the example hives (examples/) are not installed: {_REINSTALL}")


def example_file(example: str, name: str = "hive.yaml") -> Path:
    """A file of a bundled example hive (``examples/trip/memory.yaml``).

    Raises:
        NotInstalled: when the package lacks it.
    """
    path = examples_folder() / example / name
    if not path.is_file():
        missing = f"examples/{example}/{name}"
        raise NotInstalled(f"the example hive {missing} is not installed: {_REINSTALL}")
    return path


def templates() -> dict[str, str]:
    """Each template's name and the description its hive gives, sorted by name."""
    found: dict[str, str] = {}
    for hive in sorted(examples_folder().glob("*/hive.yaml")):
        try:
            loaded: Any = yaml.safe_load(hive.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            loaded = None
        described = loaded.get("description") if isinstance(loaded, dict) else None
        found[hive.parent.name] = str(described or "")
    return found


class InitError(Exception):
    """Why a folder was not made: files already there."""


class UnknownTemplate(InitError):
    """A template name that is none of the templates."""


class UnusableFolder(InitError):
    """A folder that cannot be made or written: a file in its place, a place where no
    folder can be made (``/proc/x``), no permission."""


def scaffold(target: Path, template: str = DEFAULT_TEMPLATE) -> list[Path]:
    """Copy a template into ``target`` (made if missing) and return the files written.

    Raises:
        UnknownTemplate: for a name that is none of the templates.
        UnusableFolder: when ``target`` is a file, or cannot be made or written.
        InitError: when any file it would write exists already (then nothing is
            written).
        NotInstalled: when the templates are not installed.
    """
    known = templates()
    if template not in known:
        raise UnknownTemplate(
            f"no template {template!r}{did_you_mean(template, known)}; the templates are: "
            f"{', '.join(known)}"
        )
    source = examples_folder() / template
    files = [
        p
        for p in sorted(source.rglob("*"))
        if p.is_file()
        and not any(part in _SKIPPED for part in p.relative_to(source).parts)
        and p.suffix != ".pyc"
    ]
    there = _in_the_way(target, [p.relative_to(source) for p in files])
    if there:
        shown = ", ".join(str(p) for p in there[:5]) + (" ..." if len(there) > 5 else "")
        raise InitError(
            f"{len(there)} file{'s' if len(there) != 1 else ''} already there, not "
            f"overwritten: {shown}; choose another folder or move them away"
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise UnusableFolder(
            f"{target} is a file, not a folder: name a new folder, or one to add the template to"
        ) from exc
    except OSError as exc:
        raise UnusableFolder(f"cannot make the folder {target}: {exc.strerror or exc}") from exc
    written: list[Path] = []
    for path in files:
        destination = target / path.relative_to(source)
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            _copy(path, destination)
        except OSError as exc:
            raise UnusableFolder(f"cannot write {destination}: {exc.strerror or exc}") from exc
        written.append(destination)
    return written


def _copy(path: Path, destination: Path) -> None:
    """Copy a template's file; a page's links to Honeycomb's own docs, which lead out
    of the template (``../../docs/evals.md``) and so nowhere in the folder made from
    it, name the page instead."""
    if path.suffix != ".md":
        shutil.copyfile(path, destination)
        return
    text = _OUTSIDE_LINK.sub(_named_page, path.read_text(encoding="utf-8"))
    destination.write_text(text, encoding="utf-8")


_OUTSIDE_LINK = re.compile(r"(\()?\[([^\]]+)\]\((?:\.\./)+([^)\s]+)\)(\))?")
"""A markdown link out of its folder (``../``), maybe in parentheses: its text and the
page it climbs to."""


def _named_page(link: re.Match[str]) -> str:
    opened, text, page, closed = link.groups()
    if opened and closed:  # ([evals](../../docs/evals.md))
        return f"({text}, in Honeycomb's `{page}`)"
    return f"{opened or ''}{text} (Honeycomb's `{page}`){closed or ''}"


def _in_the_way(target: Path, files: list[Path]) -> list[Path]:
    """What of ``target`` would be written over: a file there already where one of
    ``files`` (relative to it) goes, or a file where a folder of theirs goes
    (``data`` for ``data/guide.md``), each once, in order."""
    found: dict[Path, None] = {}
    for file in files:
        for part in (*reversed(file.parents[:-1]), file):  # data, data/guide.md
            path = target / part
            if path.exists() and (part == file or not path.is_dir()):
                found[path] = None
                break
    return list(found)


def add_init_parser(commands: Any) -> None:
    """The ``init`` subcommand, on the ``honeycomb`` parser's subparsers."""
    init = commands.add_parser(
        "init", help="make a new hive folder from a template (it runs offline at once)"
    )
    init.add_argument(
        "dir", nargs="?", type=user_path, default=Path("."), help="the folder (default: here)"
    )
    init.add_argument(
        "--template",
        default=DEFAULT_TEMPLATE,
        metavar="NAME",
        help=f"which template (default: {DEFAULT_TEMPLATE}; --list names them)",
    )
    init.add_argument("--list", action="store_true", help="list the templates and stop")
    init.set_defaults(handler=init_command)


def init_command(args: argparse.Namespace) -> ExitStatus:
    target: Path = args.dir
    try:
        if args.list:
            _list_templates()
            return ExitStatus.OK
        written = scaffold(target, args.template)
    except (UnknownTemplate, UnusableFolder, NotInstalled) as exc:
        print(f"honeycomb init: {exc}", file=sys.stderr)
        return ExitStatus.UNUSABLE
    except InitError as exc:
        print(f"honeycomb init: {exc}", file=sys.stderr)
        return ExitStatus.FAILED
    print(f"made {target} from the {args.template} template:")
    for path in written:
        print(f"  {path}")
    hive = shlex.quote(str(target / "hive.yaml"))  # commands to paste, as written
    print(f"\nnext:\n  honeycomb validate {hive}\n  honeycomb run {hive}")
    print(f"then read {target / 'README.md'} to make it yours or switch to a real model.")
    return ExitStatus.OK


def _list_templates() -> None:
    known = templates()
    width = max(map(len, known), default=0)
    for name, description in known.items():
        default = " (default)" if name == DEFAULT_TEMPLATE else ""
        print(f"{name:<{width}}  {description}{default}")
