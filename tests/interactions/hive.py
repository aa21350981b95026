"""A cell's hive: what its features put in it, and the Executor of each life of its
run made from that.

Every hive starts the same: a planner that plans two subtasks of the role ``bee``
(``part 1`` and ``part 2``), a bee that echoes its part and answers, and an aggregator
role that merges the answers. A feature adds to it: calls to the bee's turns (and
to those of every *working* role: a role whose workers run the features' calls,
such as an agent tool's), tools, guards, a compaction budget, memory, a policy, a
store, an approver, MCP servers, a backend, a way of running (streaming, a first life
stopped mid-run). The Executor of each life is made afresh, as a new process would
make it, on the same files.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from honeycomb import (
    Approver,
    Compaction,
    Executor,
    Guards,
    Policy,
    Role,
    RoleMemory,
    SQLiteMemory,
    Tool,
)
from honeycomb.models import TextToolModel
from honeycomb.planning import RolePlanner
from honeycomb.store import RunStore
from runtime import McpServer, Model, RetryingModel, RetryPolicy
from tests.interactions.brain import Brain, Call, FirstAttemptFails, LoggedModel, Script
from tests.interactions.ledger import Ledger

__all__ = ["TASK", "Hive"]

TASK = "Work through the parts."
BASE_PLAN = (
    {"id": "s1", "role": "bee", "instruction": "Work on part 1."},
    {"id": "s2", "role": "bee", "instruction": "Work on part 2."},
)
RETRY_ONCE = RetryPolicy(attempts=2, initial_wait_s=0.0, max_wait_s=0.01, jitter_s=0.0)
"""A flaky model's retries: the second attempt of a call is answered."""


@dataclass
class Hive:
    """What a cell's features made of the base hive (see the module's docstring)."""

    ledger: Ledger
    run_id: str = "cell"
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    """Unique to the cell (in what it writes to files other cells share)."""
    notes: Path | None = None
    """The MCP test server's notes file."""
    plan: list[dict[str, Any]] = field(default_factory=lambda: [dict(s) for s in BASE_PLAN])
    rounds: dict[int, list[dict[str, Any]] | None] | None = None
    working: list[str] = field(default_factory=lambda: ["bee"])
    calls: dict[int, list[Call]] = field(default_factory=dict)
    """Calls of every working role, by turn."""
    bee_calls: dict[int, list[Call]] = field(default_factory=dict)
    """Calls of the bee alone (those that start nested work), by turn."""
    tools: set[str] = field(default_factory=lambda: {"echo"})
    """The tools every working role names."""
    bee_tools: set[str] = field(default_factory=set)
    roles: list[Role] = field(default_factory=list)
    """Roles besides the planner, the bee, the aggregator and the working roles."""
    other_scripts: dict[str, Script] = field(default_factory=dict)
    """The turns of roles that are not working roles (they make no feature's calls)."""
    working_roles: dict[str, str] = field(default_factory=dict)
    """Working roles besides the bee: name and description."""
    role_guards: dict[str, list[Any]] = field(default_factory=dict)
    aggregator_guards: dict[str, list[Any]] = field(default_factory=dict)
    run_guards: dict[str, list[Any]] = field(default_factory=dict)
    compaction: Compaction | None = None
    memory: RoleMemory | None = None
    policy: dict[str, Any] = field(default_factory=dict)
    store: bool = False
    approver: Approver | None = None
    mcp: list[McpServer] = field(default_factory=list)
    backend: Any = None
    extra_tools: list[Tool[..., Any]] = field(default_factory=list)
    sub_hive: bool = False
    secret: str | None = None
    refused: list[str] = field(default_factory=list)
    """Text that a guard refuses wherever it is written (no listener may see it)."""
    summary_chars: int = 200
    text: bool = False
    flaky: bool = False
    """Every model call's first attempt fails, and a retry policy sends it again."""
    pause: bool = False
    stream: bool = False
    interrupt: bool = False
    """Stop the first life where a tool holds it (the test cancels it there)."""
    crash: bool = False
    """Run the first life in a child process, killed with SIGKILL where a tool holds it."""
    cell: str = ""
    """The cell's id (a child process makes the same hive from it)."""
    env: Any = None
    """What the session gave the cell (a child process is given it too)."""
    decide: bool = False
    """Decide the calls a waiting run asks about, then resume it."""
    exits: ExitStack = field(default_factory=ExitStack)
    """What to undo once the cell is done (an ``__main__`` tool ...)."""

    # --- what features call ------------------------------------------------------------

    def add_calls(self, turn: int, *calls: Call, bee_only: bool = False) -> None:
        """Calls for turn ``turn`` (0: the first) of every working role (or the bee's)."""
        target = self.bee_calls if bee_only else self.calls
        target.setdefault(turn, []).extend(calls)

    def guard(self, kind: str, guard: Any, *, on: str = "role") -> None:
        """A guard on every working role (``role``), the aggregator role, or the run."""
        where = {"role": self.role_guards, "aggregator": self.aggregator_guards}.get(
            on, self.run_guards
        )
        where.setdefault(kind, []).append(guard)

    # --- what a life is made of --------------------------------------------------------

    def scripts(self) -> dict[str, Script]:
        """Each working role's turns (the base echo first); the fact role of a hive
        tool's sub-run echoes and answers."""

        def turns(role: str) -> Script:
            count = max([0, *(t + 1 for t in self.calls), *(t + 1 for t in self.bee_calls)])
            made: list[tuple[Call, ...]] = []
            for turn in range(max(count, 1)):
                here = list(self.calls.get(turn, []))
                if role == "bee":
                    here += self.bee_calls.get(turn, [])
                if turn == 0:
                    here.insert(0, Call("echo", {"text": "{role} part {n}"}))
                made.append(tuple(here))
            while made and not made[-1]:
                made.pop()
            return tuple(made)

        scripts = {role: turns(role) for role in self.working}
        scripts["fact"] = ((Call("echo", {"text": "fact"}),),)
        return {**scripts, **self.other_scripts}

    def brain(self) -> Brain:
        return Brain(
            scripts=self.scripts(),
            plan=tuple(self.plan),
            rounds=dict(self.rounds or {}),
            secret=self.secret,
            guarded=frozenset([*self.working, "aggregator"]),
            summary_chars=self.summary_chars,
            text=self.text,
            pause=self.pause,
        )

    def model(self, life: int, scope: str = "run") -> Model:
        """The cell's model; ``scope`` says whose calls it answers in the ledger (the
        run's, or a hive tool's sub-runs')."""
        model: Model = LoggedModel(self.brain(), str(self.ledger.models), life, scope)
        if self.flaky:  # as an endpoint's adapter retries inside a text protocol's model
            model = RetryingModel(FirstAttemptFails(model), RETRY_ONCE)
        return TextToolModel(model) if self.text else model

    def executor(
        self, life: int, toolkit: Callable[[str, int, str], Mapping[str, Tool[..., Any]]]
    ) -> Executor:
        """The Executor of life ``life`` (1: the first), on the cell's files."""
        made = toolkit(str(self.ledger.tools), life, str(self.ledger.halted))
        model = self.model(life)
        tools: list[Tool[..., Any]] = [*made.values(), *self.extra_tools]
        if self.sub_hive:
            sub = self._sub_executor(self.model(life, "sub"), made)
            tools.append(sub.as_tool("facts", "Finds facts."))
        options: dict[str, Any] = {}
        if self.store:
            options["store"] = RunStore(self.ledger.folder / "runs.db")
        if self.memory is not None:
            options["memory"] = SQLiteMemory(self.ledger.folder / "memory.db")
        if self.run_guards:
            options["guards"] = Guards(**{k: tuple(v) for k, v in self.run_guards.items()})
        rounds = max(self.rounds) if self.rounds else 1
        return Executor(
            self._all_roles(),
            model,
            tools=tools,
            planner=RolePlanner("planner", rounds=rounds),
            aggregator="aggregator",
            policy=Policy(**self.policy),
            approver=self.approver,
            mcp_servers=self.mcp,
            backend=self.backend,
            **options,
        )

    def _all_roles(self) -> list[Role]:
        guards = Guards(**{k: tuple(v) for k, v in self.role_guards.items()})
        shared: dict[str, Any] = {
            "tools": tuple(sorted(self.tools)),
            "tool_timeout": 3.0,
            "compaction": self.compaction,
            "memory": self.memory,
            "guards": guards if self.role_guards else None,
        }
        working = {"bee": "Works on one part.", **self.working_roles}
        made = [
            Role(name="planner", description="Plans the parts."),
            Role(
                name="aggregator",
                description="Merges the parts.",
                guards=Guards(**{k: tuple(v) for k, v in self.aggregator_guards.items()})
                if self.aggregator_guards
                else None,
            ),
        ]
        for name, description in working.items():
            options = dict(shared)
            if name == "bee":
                options["tools"] = tuple(sorted(self.tools | self.bee_tools))
            made.append(Role(name=name, description=description, **options))
        return [*made, *self.roles]

    def _sub_executor(self, model: Model, made: Mapping[str, Tool[..., Any]]) -> Executor:
        """The hive a bee calls as its tool ``facts``: a planner, one fact worker that
        echoes, and concatenation."""
        return Executor(
            [
                Role(name="planner", description="Plans the facts."),
                Role(name="fact", description="Finds one fact.", tools=("echo",)),
            ],
            model,
            tools=[made["echo"]],
            planner="planner",
            aggregator="concat",
        )

    def close(self) -> None:
        self.exits.close()
