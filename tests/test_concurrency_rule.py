"""The library holds to its one rule for asyncio and anyio (docs/concurrency.md): asyncio
for tasks, task groups, events, sleeps, cancellation and shielding; one time limit,
``runtime.concurrency.within`` (and ``waited``, a wait that gives up without cancelling
what it waits for, the one timed ``asyncio.wait``); anyio only for worker threads, what a task holds
(capacity limiters, locks) and memory object streams. Each module's uses are read from
its syntax tree: ``anyio.X`` and ``asyncio.X`` however they are imported."""

from __future__ import annotations

import ast
from collections.abc import Iterator

import pytest

from tests.support import ROOT

PACKAGES = ("runtime", "workers", "honeycomb")
LIBRARY = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))

ANYIO = {
    # Worker threads: the thread pool, and a thread's look at its call's cancellation.
    "anyio.to_thread.run_sync",
    "anyio.from_thread.check_cancelled",
    # What a task holds, and is refused a second time (asyncio's semaphore and lock
    # would wait forever): a bound on calls in flight (also the limiter a thread pool
    # takes), and exclusive tools' locks.
    "anyio.CapacityLimiter",
    "anyio.Lock",
    # Queues that close: memory object streams, ours and the MCP SDK's.
    "anyio.create_memory_object_stream",
    "anyio.streams.memory.MemoryObjectReceiveStream",
    "anyio.streams.memory.MemoryObjectSendStream",
    "anyio.EndOfStream",
    "anyio.ClosedResourceError",
    "anyio.BrokenResourceError",
    "anyio.WouldBlock",
}
"""What the library may use of anyio, anywhere."""

ANYIO_IN = {
    # The scope a worker thread's check_cancelled() reads: asyncio's cancellation of
    # the task waiting for the thread is passed on through it.
    "anyio.CancelScope": {"runtime/tools/threads.py"},
}
"""What the library may use of anyio in named modules only."""

ASYNCIO_NOT = {
    "asyncio.timeout": "a time limit is runtime.concurrency.within",
    "asyncio.timeout_at": "a time limit is runtime.concurrency.within",
    "asyncio.Timeout": "a time limit is runtime.concurrency.within",
    "asyncio.wait_for": "a time limit is runtime.concurrency.within",
}
"""What the library must not use of asyncio, and why."""


def uses(nodes: list[ast.AST], library: str) -> Iterator[tuple[int, str]]:
    """Every name of ``library`` the module of these nodes (its tree, walked once) uses,
    by line: ``library.a.b`` for an attribute chain, or a name imported from it (``from
    anyio import Event``), and the submodules it imports (``import anyio.to_thread``)."""
    aliases = {library}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == library or alias.name.startswith(f"{library}."):
                    aliases.add(alias.asname or library)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            module = node.module
            if module == library or module.startswith(f"{library}."):
                yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)
    attributes = [node for node in nodes if isinstance(node, ast.Attribute)]
    outermost = {id(inner.value) for inner in attributes if isinstance(inner.value, ast.Attribute)}
    for node in attributes:
        if id(node) not in outermost:
            chain = dotted(node)
            if chain is not None and chain.split(".")[0] in aliases:
                yield node.lineno, library + chain[len(chain.split(".")[0]) :]


def dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def timed_waits(nodes: list[ast.AST]) -> Iterator[int]:
    """The lines of ``asyncio.wait(..., timeout=...)``: a time limit of its own."""
    for node in nodes:
        if (
            isinstance(node, ast.Call)
            and dotted(node.func) == "asyncio.wait"
            and any(k.arg == "timeout" for k in node.keywords)
        ):
            yield node.lineno


def breaches(relative: str, source: str) -> list[str]:
    """What the module at ``relative`` (its path in the repository), holding
    ``source``, uses outside the rule. Its tree is walked once, and its nodes read
    from that list by each check (walking the library's trees again for each took
    seconds)."""
    nodes = list(ast.walk(ast.parse(source)))
    found = []
    for line, name in uses(nodes, "anyio"):
        allowed = name in ANYIO or relative in ANYIO_IN.get(name, ())
        # An attribute chain that stops short of an allowed name: the module itself.
        short = any(a.startswith(f"{name}.") for a in (*ANYIO, *ANYIO_IN))
        if not (allowed or short):
            found.append(f"{relative}:{line} uses {name}")
    for line, name in uses(nodes, "asyncio"):
        if name in ASYNCIO_NOT:
            found.append(f"{relative}:{line} uses {name}: {ASYNCIO_NOT[name]}")
    for line in timed_waits(nodes) if relative != "runtime/concurrency.py" else ():
        found.append(f"{relative}:{line} uses asyncio.wait(timeout=): use within")
    return sorted(found, key=lambda problem: int(problem.split(":")[1].split(" ")[0]))


def test_the_library_uses_asyncio_and_anyio_as_the_rule_says() -> None:
    problems = [
        problem
        for path in LIBRARY
        for problem in breaches(path.relative_to(ROOT).as_posix(), path.read_text("utf-8"))
    ]
    assert problems == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import anyio\nanyio.Event()", ["uses anyio.Event"]),
        ("import anyio as a\nasync def f():\n    await a.sleep(1)", ["uses anyio.sleep"]),
        ("from anyio import move_on_after", ["uses anyio.move_on_after"]),
        ("from anyio.lowlevel import checkpoint", ["uses anyio.lowlevel.checkpoint"]),
        ("import anyio\nanyio.CancelScope()", ["uses anyio.CancelScope"]),
        ("import asyncio\nasyncio.timeout(1)", ["uses asyncio.timeout: a time limit is"]),
        ("from asyncio import wait_for", ["uses asyncio.wait_for"]),
        ("import asyncio\nasyncio.wait([], timeout=1)", ["uses asyncio.wait(timeout=)"]),
        ("import anyio.to_thread\nanyio.to_thread.run_sync(print)", []),
        ("import anyio\nx: anyio.CapacityLimiter", []),
        ("import asyncio\nasyncio.TaskGroup()\nasyncio.Event()\nasyncio.wait([])", []),
    ],
)
def test_a_use_outside_the_rule_is_named_with_its_line(source: str, expected: list[str]) -> None:
    found = breaches("runtime/probe.py", source)
    assert len(found) == len(expected), found
    for problem, wanted in zip(found, expected, strict=True):
        assert problem.startswith(f"runtime/probe.py:{source.count(chr(10)) + 1} {wanted}")
