"""Guards: a judge on the working roles' instructions, output guards that refuse a
first answer, and the run's argument guard."""

from __future__ import annotations

from honeycomb import GuardCheck, GuardrailTripped, Role
from honeycomb.events import GuardChecked
from tests.interactions.brain import FORBIDDEN, Call
from tests.interactions.drive import Outcome
from tests.interactions.features.base import SECRET, Env, Feature, finished, top_observations
from tests.interactions.hive import Hive
from tests.interactions.invariants import Report

__all__ = ["ArgumentGuard", "InputGuard", "OutputGuard", "Tripwire"]


def passes(check: GuardCheck) -> None:
    """A run's input guard that lets every task through."""
    return


def no_secret(check: GuardCheck) -> str | None:
    """An output guard: refuses an answer holding the secret."""
    return "it gives the secret away" if SECRET in check.text else None


def nothing_forbidden(check: GuardCheck) -> str | None:
    """An argument guard: refuses a call whose arguments say "forbidden"."""
    return "its arguments ask for something forbidden" if FORBIDDEN in check.text else None


class InputGuard(Feature):
    name = "input_guard"
    title = "input guards"
    about = (
        "a judge role guards every working role's instruction and refuses a third "
        "subtask (`forbidden part 9`); a function guards the run's task"
    )
    promises = "the refused subtask fails with `GuardrailTripped` before any model call of its own"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.roles.append(Role(name="moderator", description="Judges instructions."))
        hive.guard("input", "moderator")
        hive.guard("input", passes, on="run")
        hive.plan.append(
            {"id": "s9", "role": "bee", "instruction": "Work on the forbidden part 9."}
        )

    def check(self, outcome: Outcome, report: Report) -> None:
        result = outcome.result
        refused = result.subtasks.get("s9") if result is not None else None
        if refused is not None and refused.status not in ("over_budget", "cancelled"):
            report.expect(
                refused.status == "failed"
                and refused.error is not None
                and refused.error.type == "GuardrailTripped",
                "input guard",
                f"the forbidden subtask ended {refused.status}: {refused.error}",
            )
        worked = [c for c in outcome.hive.ledger.model_calls() if c["conversation"].endswith("/s9")]
        report.expect(
            not worked,
            "input guard",
            f"the forbidden subtask's model was called {len(worked)} times",
        )
        checked = [e for e in outcome.events if isinstance(e, GuardChecked) and e.worker is None]
        report.expect(
            outcome.hive.crash  # its first life, in another process, told no events
            or outcome.lives[0].error is not None
            or any(e.guard_kind == "input" for e in checked),
            "input guard",
            "the run's own input guard never checked its task",
        )


class OutputGuard(Feature):
    name = "output_guard"
    title = "output guards"
    about = (
        "every working role's and the aggregator's first answer holds a secret that their "
        "output guard refuses; the second answer is accepted"
    )
    promises = "no accepted answer, and no final answer, holds the refused secret"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.secret = SECRET
        hive.refused.append(SECRET)
        hive.guard("output", no_secret)
        hive.guard("output", no_secret, on="aggregator")

    def check(self, outcome: Outcome, report: Report) -> None:
        for sid, subtask in finished(outcome).items():
            report.expect(SECRET not in subtask.text, "output guard", f"{sid} answered the secret")
        result = outcome.result
        report.expect(
            result is None or SECRET not in result.answer_text,
            "output guard",
            "the final answer holds the secret",
        )


def refuses_merged(check: GuardCheck) -> str | None:
    """A run's output guard: no merged answer may leave the run."""
    return "a merged answer may not leave the run" if "merged" in check.text else None


class Tripwire(Feature):
    name = "tripwire"
    title = "output tripwires"
    about = "the run's own output guard refuses its final answer (a tripwire)"
    promises = (
        "the run stops with `GuardrailTripped` (kind `output`), its partial result without "
        "the refused answer"
    )
    allowed = (GuardrailTripped,)

    def apply(self, hive: Hive, env: Env) -> None:
        hive.guard("output", refuses_merged, on="run")
        hive.refused.append("merged:")

    def check(self, outcome: Outcome, report: Report) -> None:
        error, result = outcome.last.error, outcome.result
        if error is None or isinstance(error, GuardrailTripped):
            report.expect(
                isinstance(error, GuardrailTripped)
                and error.kind == "output"
                and result is not None
                and not result.answer_text,
                "tripwire",
                f"a run whose final answer its guard refuses ended {outcome.last.status}, "
                f"answering {result.answer_text if result else None!r}",
            )


class ArgumentGuard(Feature):
    name = "argument_guard"
    title = "argument guards"
    about = "the run guards every call's arguments; each working role echoes `forbidden` once"
    promises = "a refused call never runs, and is observed as an error naming the guard"

    def apply(self, hive: Hive, env: Env) -> None:
        hive.guard("arguments", nothing_forbidden, on="run")
        hive.add_calls(0, Call("echo", {"text": f"{FORBIDDEN} {{n}}"}))

    def check(self, outcome: Outcome, report: Report) -> None:
        ran = [c for c in outcome.hive.ledger.tool_calls("echo") if FORBIDDEN in c["args"]["text"]]
        report.expect(not ran, "argument guard", f"refused calls ran: {[c['worker'] for c in ran]}")
        for sid, message in top_observations(outcome, "echo"):
            if message.content.startswith("echo"):
                continue
            report.expect(
                message.status == "error" and "forbidden" in message.content,
                "argument guard",
                f"{sid}'s refused call was observed as {message.status}: {message.content}",
            )
