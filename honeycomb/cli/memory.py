"""``honeycomb memory list|search|forget``: what a memory file holds.

The file is ``--file``, else the memory of ``--hive`` (its ``memory:``, embeddings
included, so that search is hybrid as the hive's workers' is), else
``.honeycomb/memory.db`` under the current folder, where a hive whose ``memory:`` names
no path keeps it. A missing file holds no memories and is not created.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
import time
from collections.abc import Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from honeycomb.cli.exits import ExitStatus
from honeycomb.cli.options import add_limit, integer, newest_first, user_path
from honeycomb.hive import DEFAULT_MEMORY, load_hive
from honeycomb.trace.format import counted, printable
from runtime import HoneycombError, MemoryRecord, SQLiteMemory, did_you_mean
from runtime.memory import DEFAULT_NAMESPACE

__all__ = ["add_memory_command", "demo_with_memory"]


def add_memory_command(commands: Any) -> None:
    """Add ``memory`` and its actions to the command line's subcommands."""
    memory = commands.add_parser("memory", help="list, search or forget long-term memories")
    actions = memory.add_subparsers(required=True, metavar="ACTION")
    memory.commands = actions.choices  # its actions' parsers, for their errors

    listing = actions.add_parser("list", help="the newest memories first")
    _where(listing)
    listing.add_argument("--namespace", default=None, help="only this namespace (default: all)")
    add_limit(listing)
    listing.add_argument("--json", action="store_true", help="one JSON object per memory")
    listing.set_defaults(handler=_list)

    search = actions.add_parser("search", help="the memories that match a query best")
    search.add_argument("query", help="what to look for, in plain words")
    _where(search)
    search.add_argument(
        "--namespace", default=DEFAULT_NAMESPACE, help=f"where (default: {DEFAULT_NAMESPACE})"
    )
    search.add_argument(
        "-k", type=integer(1, 100), default=5, help="how many at most (default: 5, at most 100)"
    )
    search.add_argument("--all", action="store_true", help="every word must match")
    search.add_argument("--json", action="store_true", help="one JSON object per hit")
    search.set_defaults(handler=_search)

    forget = actions.add_parser("forget", help="forget memories by id, or a whole namespace")
    forget.add_argument("ids", nargs="*", metavar="ID", help="memory ids (memory list shows them)")
    _where(forget)
    forget.add_argument("--namespace", default=None, help="forget every memory of it")
    forget.set_defaults(handler=_forget)


def demo_with_memory(
    hive: Path, task: str, args: argparse.Namespace, execute: Callable[..., ExitStatus]
) -> ExitStatus:
    """``honeycomb demo --memory``: ``execute(hive, task, args)``, the hive's workers
    recalling what earlier runs kept. After a run that found its memory empty, a line
    on stderr says that the next one will recall what this one kept."""
    if getattr(args, "record", None) or getattr(args, "replay", None):
        return execute(hive, task, args)  # on a memory of its own: it keeps nothing here
    try:
        memory = load_hive(hive).memory()
    except HoneycombError:  # the run says what is wrong with the hive or its memory
        return execute(hive, task, args)
    assert isinstance(memory, SQLiteMemory), f"{hive} declares a memory file"
    empty = True
    if _there(memory.path):
        try:
            empty = not asyncio.run(memory.list(limit=1))
        except HoneycombError:
            empty = False  # the run says what is wrong with the file
        finally:
            memory.close()
    code = execute(hive, task, args)
    if code == 0 and empty:
        print(
            f"the workers kept what they found in {memory.path}: run it again to see the "
            "workers recall it (honeycomb memory list shows it)",
            file=sys.stderr,
        )
    return code


def _where(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--file", type=user_path, default=None, help=f"the memory file (default: {DEFAULT_MEMORY})"
    )
    source.add_argument("--hive", type=user_path, default=None, help="the memory of this hive file")


class _NoMemory(Exception):
    """The options name no memory file (a hive without ``memory:``)."""


def _memory(args: argparse.Namespace) -> SQLiteMemory:
    """The memory the options name (its file may not exist yet).

    Raises:
        ConfigErrors: for a hive that does not load.
        _NoMemory: for a hive that declares no memory.
    """
    if args.hive is None:
        return SQLiteMemory(args.file or DEFAULT_MEMORY)
    memory = load_hive(args.hive).memory()
    if not isinstance(memory, SQLiteMemory):
        raise _NoMemory(
            f"{args.hive}: the hive declares no memory (it has no top-level memory:): add "
            "'memory: {path: memory.db}' to it, or give the memory's file with --file"
        )
    return memory


def _run(
    args: argparse.Namespace,
    work: Callable[[SQLiteMemory], Coroutine[Any, Any, ExitStatus]],
    *,
    named: str = "",
) -> ExitStatus:
    """``work(memory)``, its errors told on stderr (``UNUSABLE``). A memory file that
    does not exist holds no memories, and is not made: what a forget ``named`` is not
    in it (``UNUSABLE``, as for a file that does not hold it)."""
    try:
        memory = _memory(args)
        if not _there(memory.path):
            if named:
                print(f"{memory.path}: no memory file, so {named}; none forgotten", file=sys.stderr)
                return ExitStatus.UNUSABLE
            # With --json, standard output holds JSON lines only: none, here.
            out = sys.stderr if getattr(args, "json", False) else sys.stdout
            print(f"no memories: there is no memory file at {memory.path}", file=out)
            return ExitStatus.OK
        try:
            return asyncio.run(work(memory))
        finally:
            memory.close()
    except (HoneycombError, _NoMemory) as exc:  # ConfigErrors among them
        print(str(exc), file=sys.stderr)
    except ValueError as exc:  # an option the memory refuses (a namespace ...)
        print(f"honeycomb memory: {exc}", file=sys.stderr)
    return ExitStatus.UNUSABLE


def _there(path: Path) -> bool:
    """Whether there is a file at ``path``; one this user may not look at may be there
    (the memory says why it cannot be opened)."""
    try:
        return path.exists()
    except OSError:  # a folder above it this user may not enter
        return True


def _list(args: argparse.Namespace) -> ExitStatus:
    async def work(memory: SQLiteMemory) -> ExitStatus:
        found = await memory.list(args.namespace, limit=args.limit)
        if args.json:
            for record in found:
                print(msgspec.json.encode(record).decode())
            return ExitStatus.OK
        where = f" (namespace {args.namespace})" if args.namespace else ""
        if not found:
            print(f"no memories in {memory.path}{where}")
            return ExitStatus.OK
        held = await memory.namespaces()  # how many each holds: one quick count
        total = held.get(args.namespace, 0) if args.namespace else sum(held.values())
        total = max(total, len(found))  # counted after the list: one forgotten meanwhile
        print(
            newest_first(
                len(found), "memory", f"{memory.path}{where}", total=total, plural="memories"
            )
        )
        for record in found:
            print(_line(record))
        return ExitStatus.OK

    return _run(args, work)


def _search(args: argparse.Namespace) -> ExitStatus:
    async def work(memory: SQLiteMemory) -> ExitStatus:
        hits = await memory.search(
            args.query, namespace=args.namespace, k=args.k, match="all" if args.all else "any"
        )
        if args.json:
            for hit in hits:
                print(msgspec.json.encode(hit).decode())
            return ExitStatus.OK
        if not hits:
            print(_found_nothing(args, await memory.namespaces()))
            return ExitStatus.OK
        print(f"{counted(len(hits), 'memory', 'memories')} match {args.query!r}, best first")
        for hit in hits:
            print(f"{hit.score:8.4f}  {_line(hit.record)}")
        return ExitStatus.OK

    return _run(args, work)


def _forget(args: argparse.Namespace) -> ExitStatus:
    """Forget the memories of ids, or of a namespace, all of them or none: one not held
    (a namespace that holds none) is refused as ``sessions forget`` refuses a session
    not kept, naming it (``UNUSABLE``)."""
    if bool(args.ids) == (args.namespace is not None):
        print(
            "give memory ids, or --namespace NAME to forget all of it (not both)", file=sys.stderr
        )
        return ExitStatus.UNUSABLE
    if args.namespace is not None:
        named = f"no memory in namespace {printable(args.namespace, lines=False)}"
        return _run(args, partial(_forget_namespace, args.namespace), named=named)
    ids = list(dict.fromkeys(args.ids))
    return _run(args, partial(_forget_ids, ids), named=f"no memory {_listed(ids)}")


async def _forget_namespace(namespace: str, memory: SQLiteMemory) -> ExitStatus:
    if not await memory.list(namespace, limit=1):  # a namespace no memory may have: said
        close = did_you_mean(namespace, await memory.namespaces())
        shown = printable(namespace, lines=False)
        said = f"no memory in namespace {shown}{close}; none forgotten"
        print(f"{memory.path}: {said}", file=sys.stderr)
        return ExitStatus.UNUSABLE
    count = await memory.forget_namespace(namespace)
    print(f"forgot {counted(count, 'memory', 'memories')} of namespace {namespace}")
    return ExitStatus.OK


async def _forget_ids(ids: list[str], memory: SQLiteMemory) -> ExitStatus:
    missing = [i for i in ids if await memory.get(i) is None]
    if missing:
        print(f"{memory.path}: no memory {_listed(missing)}; none forgotten", file=sys.stderr)
        return ExitStatus.UNUSABLE
    forgotten = await memory.forget(ids)  # at once: one rewrite of the index
    print(f"forgot {counted(len(forgotten), 'memory', 'memories')}")
    return ExitStatus.OK


def _listed(ids: list[str]) -> str:
    """``ids`` as a line says them (what was typed may hold a terminal's escapes)."""
    return printable(", ".join(ids), lines=False)


def _found_nothing(args: argparse.Namespace, held: dict[str, int]) -> str:
    """What a search that found nothing says: how many memories the namespace holds,
    and which other namespaces hold some, with the command that searches the first."""
    here = held.get(args.namespace, 0)
    holds = f"it holds {counted(here, 'memory', 'memories')}" if here else "it holds no memories"
    said = f"nothing in namespace {args.namespace} matches {args.query!r} ({holds})"
    others = {name: count for name, count in sorted(held.items()) if name != args.namespace}
    if not others:
        return said
    listed = ", ".join(f"{name} ({counted(n, 'memory', 'memories')})" for name, n in others.items())
    where = (
        ["--file", str(args.file)] if args.file else ["--hive", str(args.hive)] if args.hive else []
    )
    again = shlex.join(
        ["honeycomb", "memory", "search", args.query, "--namespace", next(iter(others)), *where]
    )
    return f"{said}; other namespaces: {listed}\n(search one with: {printable(again, lines=False)})"


def _line(record: MemoryRecord) -> str:
    """``3f2a9c1e0b7d4a55  2026-05-01 10:12  trip  note  guide  Lisbon: sunny ...``, the
    text and role on one line, their control characters (a terminal's escapes, which a
    model's note may hold) made spaces."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at))
    text = " ".join(printable(record.text).split())
    text = text if len(text) <= 72 else text[:71] + "…"
    by = " ".join(printable(record.role or "-").split())
    return f"{record.id}  {when}  {record.namespace}  {record.kind:<6}  {by}  {text}"
