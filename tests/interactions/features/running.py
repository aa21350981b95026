"""How a run goes: its store and resume, side effects and exclusive keys, planning in
rounds, the text tool protocol, and the Ray backend."""

from __future__ import annotations

import itertools
from typing import Any

from honeycomb import BudgetExceeded, Executor, HoneycombError, Role, Tool, ToolContext
from honeycomb.events import WorkerFinished
from honeycomb.testing import FunctionModel
from runtime.events import ModelCallFinished
from tests.interactions.brain import BROKEN, MARK, Call
from tests.interactions.drive import Outcome
from tests.interactions.features.base import (
    Env,
    Feature,
    cut_off,
    finished,
    observations,
    top_observations,
)
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report
from tests.interactions.toolkit import FLAKED, STALL_S, main_module_tool
from workers.guards import GuardChecked

__all__ = [
    "FailingTool",
    "FlakyModel",
    "Ray",
    "Resume",
    "Rounds",
    "SideEffects",
    "Sigkill",
    "StallingTool",
    "TextProtocol",
]


class Resume(Feature):
    name = "resume"
    title = "run store and resume"
    about = (
        "a run store; every working role's second turn calls a tool that holds the first "
        "life, which the test cancels there (`interrupted`); a new Executor resumes the run"
    )
    promises = "a resumed run never asks again a worker that finished in an earlier life"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.store = True
        hive.interrupt = True
        hive.tools.add("halt")
        hive.add_calls(1, Call("halt"))

    def check(self, outcome: Outcome, report: Report) -> None:
        first = outcome.lives[0]
        # A budget may stop the first life as the tool holds it, before the test does.
        if outcome.hive.ledger.halted.exists() and not isinstance(first.error, BudgetExceeded):
            report.expect(
                first.interrupted and len(outcome.lives) > 1,
                "resume",
                f"the run was held, then its lives were {[life.status for life in outcome.lives]}",
            )
        done: dict[str, int] = {}
        for life in outcome.lives:
            for event in life.events:
                if isinstance(event, WorkerFinished) and event.status == "ok" and event.worker:
                    done.setdefault(f"{outcome.hive.run_id}/{event.worker}", life.number)
        calls = outcome.hive.ledger.model_calls()
        for call in calls:
            ended = done.get(call["conversation"])
            report.expect(
                ended is None or call["life"] <= ended,
                "resume",
                f"{call['conversation']} finished in life {ended}, and was asked again in life "
                f"{call['life']}",
            )
        _kept_what_ran(calls, report)
        _asked_once(outcome, calls, report)


def _asked_once(outcome: Outcome, calls: list[dict[str, Any]], report: Report) -> None:
    """An answer whose calls started is kept: a later life runs its calls again (or
    finds them in the journal), never asks the model for it again."""
    started = {(s["life"], s["worker"], s["turn"]) for s in outcome.hive.ledger.tool_starts()}
    prefix = f"{outcome.hive.run_id}/"
    first: dict[tuple[str, str], int] = {}
    for c in calls:
        found = MARK.match(c["text"])
        if c["scope"] != "run" or c["kind"] != "work" or found is None:
            continue
        key = (c["conversation"], found.group(0))
        if key in first:
            report.expect(
                first[key] == c["life"],
                "resume",
                f"{c['conversation']} was asked again in life {c['life']} for its "
                f"{found.group(0)}, whose calls had started in life {first[key]}",
            )
        worker = c["conversation"].removeprefix(prefix)
        if (c["life"], worker, int(found.group(1)) + 1) in started:
            first.setdefault(key, c["life"])


def _kept_what_ran(calls: list[dict[str, Any]], report: Report) -> None:
    """What the store keeps before work starts is there for the next life: the first
    plan (never asked for again), and the calls that run nested workers (a later life
    goes on with those workers, never with new ones under new names)."""
    planned = sorted({c["life"] for c in calls if c["kind"] == "plan" and c["round"] == 1})
    report.expect(
        len(planned) <= 1 or any(c["scope"] == "sub" for c in calls),
        "resume",
        f"the planner was asked again for the first plan, in lives {planned}",
    )
    lives: dict[str, set[int]] = {}
    for c in calls:
        if c["scope"] == "run" and c["kind"] == "work" and c["conversation"].count("/") >= 2:
            lives.setdefault(c["conversation"], set()).add(c["life"])
    for nested, seen in lives.items():
        caller = nested.rsplit("/", 1)[0]
        replaced = [
            other
            for other, when in lives.items()
            if other.rsplit("/", 1)[0] == caller and min(when) > max(seen)
        ]
        report.expect(
            not replaced or any(c["conversation"] == nested and c["final"] for c in calls),
            "resume",
            f"{nested} of life {max(seen)} did not finish; a later life started again under "
            f"new names: {replaced}",
        )


class Sigkill(Feature):
    name = "sigkill"
    title = "SIGKILL and resume"
    about = (
        "a run store; the first life runs in a child process, killed with SIGKILL where "
        "every working role's second turn calls a parallel-safe tool that holds it; this "
        "process resumes the run"
    )
    promises = (
        "the resumed run never asks again a worker that finished in the killed life, nor "
        "plans again, nor asks again for an answer whose calls had started; it ends as the "
        "features promise"
    )

    def apply(self, hive: Hive, env: Env) -> None:
        hive.store = True
        hive.crash = True
        hive.tools.add("hold")
        hive.add_calls(1, Call("hold"))

    def check(self, outcome: Outcome, report: Report) -> None:
        first = outcome.lives[0]
        report.expect(
            first.status != "interrupted" or len(outcome.lives) > 1,
            "resume",
            f"the killed run was not resumed: {[life.status for life in outcome.lives]}",
        )
        Resume().check(outcome, report)


class SideEffects(Feature):
    name = "side_effects"
    title = "side effects and exclusive keys"
    about = (
        "every working role's first turn makes two side effects (`side_effects=True`) and "
        "writes a ledger entry under an exclusive key, beside its parallel-safe calls"
    )
    promises = (
        "every side effect of a worker that finished ran; each call's `ToolContext` has an "
        "idempotency key of its own"
    )

    def apply(self, hive: Hive, env: Env) -> None:
        hive.tools.update({"effect", "ledger"})
        hive.add_calls(
            0,
            Call("effect", {"n": 1, "tag": "{w}-1"}),
            Call("effect", {"n": 2, "tag": "{w}-2"}),
            Call("ledger", {"entry": "{w}"}),
        )

    def check(self, outcome: Outcome, report: Report) -> None:
        ledger = outcome.hive.ledger
        ran = {(c["worker"], c["call"]) for c in ledger.tool_calls()}
        cut = {(c["worker"], c["call"]) for c in ledger.tool_starts()} - ran
        for sid, message in [
            *top_observations(outcome, "effect"),
            *top_observations(outcome, "ledger"),
        ]:
            call = (sid, message.tool_call_id)
            ok = (message.status == "ok" and call in ran) or cut_off(outcome, message)
            how = "ran" if call in ran else "started" if call in cut else "never started"
            report.expect(
                ok,
                "side effects",
                f"{sid}'s side effect {message.tool_call_id} ({how}): {message.status}: "
                f"{message.content[:200]}",
            )
        keys: dict[object, tuple[str, str]] = {}
        for call in outcome.hive.ledger.tool_calls():
            if call["tool"] not in ("effect", "ledger"):
                continue
            key = call["key"]
            report.expect(key, "idempotency key", f"{call['tool']} ran without an idempotency key")
            if key:
                first = keys.setdefault(key, (call["worker"], call["call"]))
                report.expect(
                    first == (call["worker"], call["call"]),
                    "idempotency key",
                    f"calls {first} and {(call['worker'], call['call'])} share the key {key!r}",
                )


class Rounds(Feature):
    name = "rounds"
    title = "planning in rounds"
    about = (
        "the planner leads in up to 3 rounds: round 2 adds `part 3`, which depends on "
        "`part 1`; in round 3 the lead never answers with a plan"
    )
    promises = (
        "the rounds are in the result; part 3 reads part 1's result; the failed round "
        "costs at most `plan_attempts` lead calls"
    )

    def apply(self, hive: Hive, env: Env) -> None:
        hive.rounds = {
            2: [
                {"id": "s3", "role": "bee", "instruction": "Work on part 3.", "depends_on": ["s1"]}
            ],
            3: None,
        }

    def check(self, outcome: Outcome, report: Report) -> None:
        result = outcome.result
        if result is None or isinstance(outcome.last.error, BudgetExceeded):
            return  # a budget stops the rounds where it lands
        shown = [(r.round, r.added, r.error is not None) for r in result.rounds]
        report.expect(
            shown[1:] == [(2, ("s3",), False), (3, (), True)]
            and result.rounds_ended == "lead_failed",
            "rounds",
            f"rounds {shown}, ended {result.rounds_ended}",
        )
        third = [
            c for c in outcome.hive.ledger.model_calls() if c["kind"] == "plan" and c["round"] == 3
        ]
        attempts = outcome.executor.policy.plan_attempts if outcome.executor else 3
        report.expect(
            len(third) <= attempts,
            "rounds",
            f"the lead's failed round 3 took {len(third)} model calls; plan_attempts is {attempts}",
        )
        later = finished(outcome).get("s3")
        if later is not None and later.worker is not None:
            task = later.worker.transcript.messages[1]
            report.expect(
                "done with part 1" in getattr(task, "content", ""),
                "rounds",
                "part 3 was not given part 1's result",
            )


class TextProtocol(Feature):
    name = "text_protocol"
    title = "text tool protocol"
    about = (
        "the model is wrapped in `TextToolModel`: the model function never sees a tool and "
        "writes its calls as JSON actions in its text"
    )
    promises = "the model is never sent a tool; its actions are read back and run"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.text = True

    def check(self, outcome: Outcome, report: Report) -> None:
        calls = outcome.hive.ledger.model_calls()
        sent = [c["conversation"] for c in calls if c["tools"]]
        report.expect(not sent, "text protocol", f"the model was sent tools in {sent}")
        report.expect(
            outcome.hive.ledger.tool_calls() or not calls or outcome.last.error is not None,
            "text protocol",
            "no action the model wrote was run",
        )


class FailingTool(Feature):
    name = "failing_tool"
    title = "a tool that fails, then works"
    about = (
        "every working role calls `flake` in its first two turns with the same arguments; "
        "its first call of each worker raises (`ConnectionError`), the second answers"
    )
    promises = (
        "the failure is the call's observation, an error naming the tool and what it "
        "raised, and the worker goes on; the repeat of a failed call runs (a repeat is "
        "skipped only after a call that ended ok) and answers"
    )

    def apply(self, hive: Hive, env: Env) -> None:
        hive.tools.add("flake")
        for turn in (0, 1):
            hive.add_calls(turn, Call("flake", {"text": "{w} again"}))

    def check(self, outcome: Outcome, report: Report) -> None:
        seen: dict[str, list[str]] = {}
        for sid, message in top_observations(outcome, "flake"):
            if not cut_off(outcome, message):
                seen.setdefault(sid, []).append(f"{message.status}: {message.content}")
        failed = f"error: Error: tool 'flake' raised ConnectionError: {FLAKED}"
        for sid, told in seen.items():
            # Its first call may have failed in a turn an earlier life ran and a later
            # one ran again (a turn that waited for a person, or that a life's end cut
            # off: a parallel-safe call is run again), which then answered it.
            report.expect(
                all(t == failed or t.startswith(("ok: flake ", "skipped: ")) for t in told),
                "failing tool",
                f"{sid}'s flake calls were told {told}",
            )
            after_failure = [b for a, b in itertools.pairwise(told) if a == failed]
            report.expect(
                all(b.startswith("ok: flake ") for b in after_failure),
                "failing tool",
                f"{sid}'s repeat of its failed flake call was told {after_failure}",
            )
            report.expect(len(told) == 2, "failing tool", f"{sid} had {len(told)} flake calls")


class StallingTool(Feature):
    name = "stalling_tool"
    title = "a tool past its time limit"
    about = (
        f"every working role's first turn calls `stall`, which never ends of itself, "
        f"beside its other calls; its own time limit is {STALL_S}s"
    )
    promises = (
        "the call is cancelled at its limit and told timed out; the worker goes on, and "
        "nothing the call held (a tool slot, the turn) is held after it"
    )

    def apply(self, hive: Hive, env: Env) -> None:
        hive.tools.add("stall")
        hive.add_calls(0, Call("stall", {"text": "{w}"}))

    def check(self, outcome: Outcome, report: Report) -> None:
        told = f"Error: tool 'stall' timed out after {STALL_S:g}s and was cancelled."
        for sid, message in top_observations(outcome, "stall"):
            report.expect(
                (message.status, message.content) == ("timeout", told),
                "stalling tool",
                f"{sid}'s stall call was told {message.status}: {message.content}",
            )
        ended = [c for c in outcome.hive.ledger.tool_calls() if c["tool"] == "stall"]
        report.expect(not ended, "stalling tool", f"stall calls ran to their end: {ended}")


class FlakyModel(Feature):
    name = "flaky_model"
    title = "a flaky model, retried"
    about = (
        "the first attempt of every model call fails (`ModelConnectionError`, before the "
        "model function is asked), and the model's `RetryingModel` sends it again"
    )
    promises = (
        "no worker, planner, aggregator or judge fails for it; each call it answers is "
        "told answered at its second attempt; a failed attempt counts nothing"
    )

    def apply(self, hive: Hive, env: Env) -> None:
        hive.flaky = True

    def check(self, outcome: Outcome, report: Report) -> None:
        errors = [str(life.error) for life in outcome.lives if life.error is not None]
        result = outcome.result
        if result is not None:
            errors += [str(s.error) for s in result.subtasks.values() if s.error is not None]
        broken = [e for e in errors if BROKEN in e]
        report.expect(not broken, "retries", f"failed with the broken attempt: {broken}")
        for event in outcome.events:
            made = isinstance(event, ModelCallFinished) and event.status == "ok"
            judged = isinstance(event, GuardChecked) and event.model_calls
            report.expect(
                not (made or judged) or getattr(event, "attempts", 0) == 2,
                "retries",
                f"{event.kind} of {event.worker} says {getattr(event, 'attempts', 0)} attempts",
            )


def _refused(made: Tool[..., Any], backend: Any) -> bool:
    """Whether an Executor on ``backend`` refuses ``made`` as it is made, naming it
    (the other way docs/ray.md allows for a tool of ``__main__``)."""
    if backend is None:
        return False
    try:
        Executor(
            [Role(name="scribe", tools=(made.name,))],
            FunctionModel(lambda request: "done"),
            tools=[made],
            backend=backend,
        )
    except HoneycombError as exc:
        return made.name in str(exc)
    return False


def stamp_tool() -> Tool[..., Any]:
    """A tool given by value, as a test or a notebook makes one: a closure whose
    signature names ``ToolContext`` in a postponed annotation (this module has
    ``from __future__ import annotations``, as most code does)."""

    async def stamp(text: str, context: ToolContext) -> str:
        """Stamp the text with the call's worker."""
        return f"stamped {text} for {context.worker}"

    return Tool(stamp)


class Ray(Feature):
    name = "ray"
    title = "Ray backend"
    about = (
        "the subtask workers run in a pool of two Ray actors, and the same cell on the local "
        "backend; two more subtasks call a `@tool` of `__main__` (`scribe`) and a tool given "
        "by value whose signature is a postponed annotation (`typist`)"
    )
    promises = (
        "the same outcome as on the local backend (statuses, answers, observations, model "
        "calls); both tools run"
    )
    needs = frozenset({"ray"})
    ASIDE = ("s7", "s8")
    """The subtasks of the two tools, left out of the comparison."""

    def apply(self, hive: Hive, env: Env) -> None:
        hive.backend = env.backend
        scribble = hive.exits.enter_context(main_module_tool())
        self._aside(hive, "typist", "s7", "Stamp part 7.", stamp_tool())
        if not _refused(scribble, env.backend):  # docs/ray.md allows either
            self._aside(hive, "scribe", "s8", "Scribble part 8.", scribble)

    @staticmethod
    def _aside(hive: Hive, role: str, sid: str, instruction: str, made: Tool[..., Any]) -> None:
        """A subtask of its own whose role calls ``made`` once, then answers."""
        hive.extra_tools.append(made)
        hive.roles.append(Role(name=role, tools=(made.name,), tool_timeout=3.0))
        hive.other_scripts[role] = ((Call(made.name, {"text": "{w}"}),),)
        hive.plan.append({"id": sid, "role": role, "instruction": instruction})

    def check(self, outcome: Outcome, report: Report) -> None:
        result = outcome.result
        if result is None:
            return
        for sid, invariant, tool in (
            ("s7", "tool by value", "stamp"),
            ("s8", "main tool", "scribble"),
        ):
            subtask = result.subtasks.get(sid)
            if subtask is None or subtask.status in ("over_budget", "cancelled", "skipped"):
                continue
            seen = observations(subtask, tool)
            report.expect(
                subtask.ok and seen and all(m.status == "ok" for m in seen),
                invariant,
                f"{sid} ({tool}) ended {subtask.status}: "
                f"{(str(subtask.error) if subtask.error else seen)!s:.400}",
            )
