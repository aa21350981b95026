"""The tools of a cell, made for one life of its run: each writes what it did to the
cell's ledger (its call, worker, turn, life, and when it was in flight), so a test
can tell whether side effects ran once and one at a time, exclusive calls never
overlapped, and limits held, wherever the calls ran (Ray actors are other
processes: the tools are sent there by value, with the ledger's path).

No ``from __future__ import annotations`` here: a tool sent by value is made again in
the actor from its signature, and annotations evaluated here travel with it."""

import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from runtime import Tool, ToolContext
from tests.interactions.ledger import append, now, read

__all__ = ["FLAKED", "PAGE_CHARS", "STALL_S", "main_module_tool", "toolkit"]

PAGE_CHARS = 900
"""How long a page is: a few pages outgrow a small compaction budget."""

FLAKED = "the service was down"
"""What ``flake`` raises the first time a worker calls it."""

STALL_S = 0.1
"""The time limit of ``stall``, which never ends of itself."""


def toolkit(ledger: str, life: int, halted: str) -> dict[str, Tool[..., Any]]:
    """Every tool a cell's roles may name, by name."""

    def log(tool: str, context: ToolContext, phase: str, **args: Any) -> None:
        append(
            ledger,
            {
                "tool": tool,
                "phase": phase,
                "life": life,
                "run": context.run_id,
                "worker": context.worker,
                "call": context.call_id,
                "turn": context.turn,
                "key": context.idempotency_key,
                "args": args,
                "at": now(),
            },
        )

    async def run(tool: str, context: ToolContext, pause: float, **args: Any) -> None:
        """Say the call started, take ``pause`` seconds, say it ended."""
        log(tool, context, "start", **args)
        if pause:
            await anyio.sleep(pause)
        else:
            await anyio.lowlevel.checkpoint()
        log(tool, context, "end", **args)

    async def echo(text: str, context: ToolContext) -> str:
        """Say the text back."""
        await run("echo", context, 0, text=text)
        return f"echo {text}"

    async def probe(text: str, context: ToolContext) -> str:
        """Take a short while (calls in flight together can be counted)."""
        await run("probe", context, 0.01, text=text)
        return f"probe {text}"

    async def page(number: int, context: ToolContext) -> str:
        """Read a page of the logbook."""
        await run("page", context, 0, number=number)
        line = f"page {number}: the reading at station {number} was {number * 7} metres. "
        return (line * (PAGE_CHARS // len(line) + 1))[:PAGE_CHARS]

    async def flake(text: str, context: ToolContext) -> str:
        """Say the text back (it fails the first time a worker of the run asks, in
        whatever life or process)."""
        asked_before = any(
            line["tool"] == "flake"
            and line["run"] == context.run_id
            and line["worker"] == context.worker
            for line in read(ledger)
        )
        await run("flake", context, 0, text=text)
        if not asked_before:
            raise ConnectionError(FLAKED)
        return f"flake {text}"

    async def wait(context: ToolContext) -> str:
        """Wait for a reply that takes longer than the run has."""
        await run("wait", context, 3600)
        return "waited"

    async def stall(text: str, context: ToolContext) -> str:
        """Wait for a reply that never comes (its time limit ends it)."""
        await run("stall", context, 3600, text=text)
        return f"stall {text}"

    async def effect(n: int, tag: str, context: ToolContext) -> str:
        """A side effect: the n-th of its turn."""
        await run("effect", context, 0.002, n=n, tag=tag)
        return f"effect {n} {tag}"

    async def ledger_entry(entry: str, context: ToolContext) -> str:
        """Write an entry to the shared ledger (one writer at a time)."""
        await run("ledger", context, 0.005, entry=entry)
        return f"ledger {entry}"

    async def pay(amount: int, context: ToolContext) -> str:
        """Pay an amount (a person approves it first)."""
        await run("pay", context, 0, amount=amount)
        return f"paid {amount}"

    def holding(name: str) -> Callable[[ToolContext], Awaitable[str]]:
        async def hold(context: ToolContext) -> str:
            """Hold the first life of the run here, where the test stops it."""
            log(name, context, "start")
            if life == 1:
                append(halted, {"worker": context.worker, "call": context.call_id})
                await anyio.sleep(3600)
            log(name, context, "end")
            return "went on"

        return hold

    return {
        "echo": Tool(echo),
        # Parallel-safe: the answer asking for it is saved with its observation only.
        "hold": Tool(holding("hold"), name="hold"),
        "probe": Tool(probe),
        "flake": Tool(flake),
        "stall": Tool(stall, timeout=STALL_S),
        "wait": Tool(wait),
        "page": Tool(page),
        "effect": Tool(effect, side_effects=True),
        "ledger": Tool(ledger_entry, name="ledger", exclusive="ledger"),
        "pay": Tool(pay, side_effects=True, approval=True),
        # Side-effecting, so the answer asking for it is saved before it runs (a resumed
        # worker makes that very call), and idempotent, so it is simply run again.
        "halt": Tool(holding("halt"), name="halt", side_effects=True, idempotent=True),
    }


@contextmanager
def main_module_tool() -> Iterator[Tool[..., Any]]:
    """A ``@tool`` as a script defines it: a function of ``__main__``, held there
    under its name (for the block)."""
    main = sys.modules["__main__"]
    source = (
        "async def scribble(text: str) -> str:\n"
        '    """Scribble the text (a tool of the main script)."""\n'
        "    return f'scribbled {text}'\n"
    )
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(source, namespace)
    made = Tool(namespace["scribble"])
    had = getattr(main, "scribble", None)
    main.scribble = made  # type: ignore[attr-defined]
    try:
        yield made
    finally:
        if had is None:
            delattr(main, "scribble")
        else:
            main.scribble = had  # type: ignore[attr-defined]
