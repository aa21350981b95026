"""Shape figures: how the library's code is laid out, counted, not timed.

    python -m benchmarks.shape            # the figures
    python -m benchmarks.shape --legs     # and every leg of the traced run, module by module
    python -m benchmarks.shape --json     # the figures as one JSON object

**Returns on a task's path.** The demo hive (``examples/trip``: a planner, four workers
with tools, one of them side-effecting, an aggregator) runs offline, as the command
line runs it: a run store in a temporary folder (so the journal, the run's record and
its spans), and every side-effecting call asking for approval, which an approver
grants. Tools wait no time and the offline model answers at once. While the run goes,
``sys.setprofile`` (and ``threading.setprofile``) records, at each call the run makes
of one of the two calls everything goes through (the model's ``complete`` or
``stream``, a tool's function), the chain of library frames from ``Executor.run``
down to it. A chain crosses tasks and threads: a task's frames continue the chain of
the code that created the task, a worker thread's the chain of the code that handed
it the call. Each distinct chain of functions is a **leg** (the planner's model call,
a worker's, a parallel tool call, a serial one ...). Along a leg, a function's module
counts once for consecutive frames; a **return** is a frame whose module the leg had
already left for another one on the way down (``dispatch -> _concurrency ->
dispatch`` is one). The figure is the sum of the returns over the run's legs: a
layered design, where each layer calls only the one below, has none.

**Modules flat at runtime/'s root**: the ``.py`` files directly in ``runtime/``,
``__init__.py`` aside.

**Modules naming a concept**: the library's modules (every ``.py`` of ``honeycomb``,
``runtime`` and ``workers``) whose code holds an identifier containing the concept's
stem, case aside (``approv``, ``guard``, ``journal``). Identifiers are those the code
uses or defines: names, attributes, function, class and parameter names, keyword
arguments, imported names; not the module paths of ``from ... import``, nor strings,
docstrings or comments.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextvars
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ("honeycomb", "runtime", "workers")
CONCEPTS = {"approvals": "approv", "guards": "guard", "journal": "journal"}
DEMO = ROOT / "examples" / "trip"
MODEL_CALLS = frozenset({"complete", "stream"})

Route = tuple[tuple[str, str], ...]
"""A chain of library frames, outermost first: (module, function) each."""


def runtime_root(root: Path = ROOT) -> list[str]:
    """The modules directly in ``runtime/`` (``__init__.py`` aside)."""
    return sorted(p.stem for p in (root / "runtime").glob("*.py") if p.name != "__init__.py")


def library_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the library, by dotted name."""
    found: dict[str, Path] = {}
    for package in LIBRARY:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def identifiers(source: str) -> set[str]:
    """The identifiers a module's code uses or defines (see the module docstring)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg | ast.keyword) and node.arg is not None:
            names.add(node.arg)  # a parameter, or a keyword argument
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
    return names


def naming(root: Path = ROOT) -> dict[str, list[str]]:
    """For each concept, the library modules whose code names it."""
    found: dict[str, list[str]] = {concept: [] for concept in CONCEPTS}
    for module, path in library_modules(root).items():
        lowered = [name.lower() for name in identifiers(path.read_text())]
        for concept, stem in CONCEPTS.items():
            if any(stem in name for name in lowered):
                found[concept].append(module)
    return found


def returns(route: Sequence[str]) -> int:
    """How often a path of modules, outermost first, re-enters one it had left."""
    seen: set[str] = set()
    count, previous = 0, None
    for module in route:
        if module == previous:
            continue
        count += module in seen
        seen.add(module)
        previous = module
    return count


@dataclass(frozen=True)
class Leg:
    """One distinct chain from ``Executor.run`` to a model call or a tool call."""

    kind: str  # "model" or "tool"
    route: Route

    @property
    def modules(self) -> list[str]:
        collapsed: list[str] = []
        for module, _ in self.route:
            if not collapsed or collapsed[-1] != module:
                collapsed.append(module)
        return collapsed

    @property
    def returns(self) -> int:
        return returns(self.modules)


_BASE: contextvars.ContextVar[Route] = contextvars.ContextVar("shape_base", default=())
"""The chain of the code that created the running task."""

_HANDED: contextvars.ContextVar[Route] = contextvars.ContextVar("shape_handed", default=())
"""The chain of the code that handed a call to a worker thread (read in that thread)."""


def _library(frame: FrameType) -> str | None:
    module = str(frame.f_globals.get("__name__", ""))
    return module if module.partition(".")[0] in LIBRARY else None


def _in_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass
class Tracer:
    """Records the legs of a run (see the module docstring).

    Args:
        start: The function legs start at, as (module, name).
        tools: The modules of the hive's tools.
        handoffs: Code objects of the functions that hand a call to a worker thread
            (with the caller's context, so the thread knows the chain that led to it).
    """

    start: tuple[str, str]
    tools: frozenset[str]
    handoffs: frozenset[object]
    legs: set[Leg] = field(default_factory=set)

    def route(self, frame: FrameType | None) -> Route:
        """The library frames from ``frame`` up, outermost first, after the chain of
        the code that started the task or thread they run in."""
        own: list[tuple[str, str]] = []
        while frame is not None:
            module = _library(frame)
            if module is not None:
                own.append((module, frame.f_code.co_name))
            frame = frame.f_back
        base = _BASE.get() if _in_loop() else _HANDED.get()
        return base + tuple(reversed(own))

    def task_factory(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **options: Any
    ) -> asyncio.Task[Any]:
        """Makes tasks as asyncio does, each knowing the chain that created it."""
        context = options.pop("context", None) or contextvars.copy_context()
        context.run(_BASE.set, self.route(sys._getframe(1)))
        return asyncio.Task(coro, loop=loop, context=context, **options)

    def profile(self, frame: FrameType, event: str, _: object) -> None:
        """The profile hook: notes hand-offs to threads, and a leg at each call of the
        model or of a tool (its outermost frame, not the calls it makes itself)."""
        if event != "call":
            return
        caller = frame.f_back
        if frame.f_code in self.handoffs:
            if caller is not None and _library(caller):
                _HANDED.set(self.route(caller))
        elif self._model_call(frame) and not (caller and self._model_call(caller)):
            self._leg("model", caller)
        elif self._tool(frame) and not (caller and self._tool(caller)):
            self._leg("tool", caller)

    def _model_call(self, frame: FrameType) -> bool:
        if frame.f_code.co_name not in MODEL_CALLS:
            return False
        return type(frame.f_locals.get("self")).__name__ == "OfflineModel"

    def _tool(self, frame: FrameType) -> bool:
        return frame.f_globals.get("__name__") in self.tools

    def _leg(self, kind: str, frame: FrameType | None) -> None:
        route = self.route(frame)
        if self.start in route:
            self.legs.add(Leg(kind, route[route.index(self.start) :]))


def _handoffs() -> frozenset[object]:
    """The functions that hand a call to a worker thread in the caller's context."""
    import anyio.to_thread

    return frozenset({anyio.to_thread.run_sync.__code__, asyncio.to_thread.__code__})


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def trace_demo(demo: Path = DEMO) -> list[Leg]:
    """The legs of one run of the demo hive (see the module docstring)."""
    from honeycomb import Executor
    from runtime.tools.approvals import ApprovalRequest, Decision

    async def approve(request: ApprovalRequest) -> Decision:
        return Decision.approved()

    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / demo.name
        shutil.copytree(demo, copy)
        hive = copy / "hive.yaml"
        spec = yaml.safe_load(hive.read_text())
        spec["models"]["offline"]["latency"] = 0
        spec["approvals"] = {"default": "ask"}  # every side-effecting call asks
        hive.write_text(yaml.safe_dump(spec, sort_keys=False))
        tools = frozenset(p.stem for p in copy.glob("*.py"))
        start = (Executor.run.__module__, Executor.run.__name__)
        tracer = Tracer(start, tools, _handoffs())
        executor = Executor.from_yaml(hive, store=Path(folder) / "runs.db", approver=approve)

        async def run() -> None:
            asyncio.get_running_loop().set_task_factory(tracer.task_factory)
            threading.setprofile(tracer.profile)
            sys.setprofile(tracer.profile)
            try:
                await executor.run(spec["example_task"])
            finally:
                sys.setprofile(None)
                threading.setprofile(None)

        outbox = str(Path(folder) / "outbox")
        with _environment(HONEYCOMB_DEMO_TOOL_LATENCY="0", HONEYCOMB_OUTBOX=outbox):
            asyncio.run(run())
    return sorted(tracer.legs, key=lambda leg: (leg.kind, leg.route))


@dataclass(frozen=True)
class Figures:
    """The shape figures of one tree."""

    returns: int
    legs: list[Leg]
    runtime_root: list[str]
    naming: dict[str, list[str]]
    modules: int

    def as_json(self) -> dict[str, Any]:
        return {
            "returns": self.returns,
            "legs": [
                {"kind": leg.kind, "modules": leg.modules, "returns": leg.returns}
                for leg in self.legs
            ],
            "runtime_root": len(self.runtime_root),
            "naming": {concept: len(modules) for concept, modules in self.naming.items()},
            "modules": self.modules,
        }


def measure(root: Path = ROOT) -> Figures:
    """Every shape figure of the tree at ``root`` (the demo runs from this process's
    import of the library, which must be that tree's)."""
    legs = trace_demo(root / "examples" / "trip")
    return Figures(
        returns=sum(leg.returns for leg in legs),
        legs=legs,
        runtime_root=runtime_root(root),
        naming=naming(root),
        modules=len(library_modules(root)),
    )


def report(figures: Figures, *, legs: bool = False) -> str:
    """The figures as lines of text."""
    lines = [
        f"returns on a task's path: {figures.returns} over {len(figures.legs)} legs",
        f"modules flat at runtime/'s root: {len(figures.runtime_root)}",
        *(
            f"modules naming {concept}: {len(modules)} of {figures.modules}"
            for concept, modules in figures.naming.items()
        ),
    ]
    if legs:
        for leg in figures.legs:
            lines.append(f"\n{leg.kind} leg, {leg.returns} returns:")
            lines.append("  " + " > ".join(leg.modules))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.shape", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--legs", action="store_true", help="print every leg's modules")
    args = parser.parse_args(argv)
    figures = measure()
    print(json.dumps(figures.as_json()) if args.json else report(figures, legs=args.legs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
