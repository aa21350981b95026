"""Judges: a guard that names a role asks it, one tool-less model call of that role
under the run's budget, answered ``PASS`` or with the reason (see :class:`Judge`). A
judge that gives no verdict, or whose call fails, raises: its guard trips at once."""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from runtime import (
    Budget,
    ConfigError,
    HoneycombError,
    Model,
    ModelRequest,
    ModelResponseError,
    SystemMessage,
    Usage,
    UserMessage,
)
from runtime.models.layers import ModelCall
from runtime.models.layers.budget import spending, unanswered_usage
from runtime.secrets import masked
from workers.calls import model_calls
from workers.guard_specs import GuardCheck

__all__ = ["JUDGE_INSTRUCTIONS", "VERDICT_TOKENS", "Judge", "JudgeRole"]

JUDGE_INSTRUCTIONS = (
    "You are a guard. You are shown {what}. If it is acceptable, answer with the single "
    "word PASS. If it is not, answer with one short sentence saying why, and nothing else."
)
_WHAT = {
    "input": "the instruction a worker was given",
    "output": "a worker's answer",
    "arguments": "a tool call a worker wants to make, with its arguments",
}


class JudgeRole(Protocol):
    """What a judge reads of its role (a :class:`~workers.Role`)."""

    @property
    def system_prompt(self) -> str: ...
    @property
    def model_timeout(self) -> float | None: ...
    @property
    def max_output_tokens(self) -> int | None: ...


VERDICT_TOKENS = 256
"""The output limit of a judge's call (a role's own ``max_output_tokens`` wins): a
verdict is ``PASS`` or a reason in a sentence or two."""


class Judge:
    """Asks judge roles: one tool-less model call each, under the run's budget, its
    answer limited to what a verdict needs (:data:`VERDICT_TOKENS`).

    Args:
        roles: The roles a guard may name as its judge, by name.
        model_for: The model a role thinks with (given one of ``roles``).
        budget: Checked before each call and charged with what it cost.
        caller: The judge of the run this one's is a sub-run of (a hive called as a
            tool): it asks the judge roles of the caller's guards, which check the
            sub-run's calls too.
    """

    def __init__(
        self,
        roles: Mapping[str, JudgeRole],
        model_for: Callable[[Any], Model],
        budget: Budget | None = None,
        caller: Judge | None = None,
    ) -> None:
        self.roles = roles
        self.model_for = model_for
        self.budget = budget
        self.caller = caller

    async def ask(
        self, role_name: str, check: GuardCheck, up: int = 0
    ) -> tuple[str | None, Usage, str]:
        """The judge's verdict (None: pass, or its reason), its usage and model name;
        ``up``: how many runs up the role is (a calling run's guard's judge is its own
        role, even where the sub-run has one of that name: ``Guard.up``).

        Raises:
            BudgetExceeded: when the call would go past the run's budget.
            HoneycombError: when the judge is not a role here, or its model call failed
                or gave no verdict (an empty answer, or one its output limit cut off).
        """
        if up > 0 and self.caller is not None:
            return await self.caller.ask(role_name, check, up - 1)
        role = self.roles.get(role_name)
        if role is None:
            raise ConfigError(f"the judge role {role_name!r} is not defined")
        model = self.model_for(role)
        prompt = f"{role.system_prompt}\n\n{JUDGE_INSTRUCTIONS.format(what=_WHAT[check.kind])}"
        limit = role.max_output_tokens or VERDICT_TOKENS
        # Named with the worker it judges, as the calls in flight are reported: one
        # judge role may be checking several workers' answers at once.
        who = role_name if check.worker is None else f"{role_name} of {check.worker}"
        request = ModelRequest(
            messages=(SystemMessage(content=prompt), UserMessage(content=_shown(check))),
            tool_choice="none",
            timeout=role.model_timeout,
            max_output_tokens=limit,
            conversation=_conversation(check, who),
        )
        call = model_calls(model, self.budget, who, kind="judge").open(request)
        try:
            answer = await call.made()
        except BaseException as failure:  # (its cause is the layer's to set)
            # What it spent: the prompts of the attempts its timeout cut off.
            raise spending(call.failed(failure), _unanswered(call))  # noqa: B904
        try:
            response = call.answered(answer)
        except HoneycombError as failure:  # an answer a layer refused
            raise spending(failure, _unanswered(call))  # noqa: B904
        text = _after_thinking(response.message.content or "")
        # Its first word, as a model may write it: "PASS.", "**PASS**", "`PASS`".
        first = text.split(maxsplit=1)[0].strip(_AROUND_A_WORD).upper() if text else ""
        if first == "PASS":
            return None, response.usage, response.model
        cut = response.finish_reason == "length"
        if not text or cut:  # no verdict: no answer of the worker's could pass it
            why = "empty"
            if cut:  # a reason cut off mid-way is none: what it would have said is unknown
                why = _cut_off(role_name, limit, call.request.max_output_tokens or limit)
                why += f": {_QUOTE.repr(text)}" if text else ""
            error = ModelResponseError(
                f"the judge {role_name!r} gave no verdict: its answer was {why}"
            )
            raise spending(error, response.usage)
        return text, response.usage, response.model


def _unanswered(call: ModelCall) -> Usage:
    """What ``call`` spent that its endpoint never answered (nothing: none)."""
    return unanswered_usage(call) or Usage()


def _cut_off(role_name: str, asked: int, sent: int) -> str:
    """How a judge's answer was cut off at ``sent``, the output limit its call was sent
    with (a cost cap may have lowered the one it ``asked`` for), and what to raise."""
    if sent < asked:
        fix = ", the limit budgets.cost_per_call left the call at its model's price (raise the cap)"
    else:
        fix = f" (give the role {role_name!r} a higher max_output_tokens)"
    return f"cut off at its output limit of {sent} tokens{fix}"


def _after_thinking(text: str) -> str:
    """``text`` after the thinking a reasoning model may write before its verdict, in a
    ``<think>`` block its server left in the answer: the verdict is what follows it."""
    thought = _THINKING.match(text)
    return (text[thought.end() :] if thought is not None else text).strip()


_THINKING = re.compile(r"\s*<think>.*?</think>", re.S)

_QUOTE = reprlib.Repr()
_QUOTE.maxstring = 80  # what a judge cut off wrote, as its error quotes it

_AROUND_A_WORD = ".!:,;*_`\"'"
"""What a model writes around a word: punctuation, Markdown's emphasis and code, quotes."""


def _conversation(check: GuardCheck, who: str) -> str | None:
    """The conversation a judge's call is (``run_id/who``): its own, apart from the
    worker it judges, so that a cassette records and answers it as that judge's (None:
    a check of no run and no worker, an eval's grade)."""
    if check.worker is None and check.run_id is None:
        return None
    return who if check.run_id is None else f"{check.run_id}/{who}"


def _shown(check: GuardCheck) -> str:
    """What a judge reads of a check, every secret masked: a judge is another model,
    handed what it checks as a worker's answer is handed on (a tool's result or a
    server's message may have put a secret in it), and as a person asked to approve
    a call sees its arguments."""
    if check.kind == "arguments":
        return masked(f"Tool: {check.tool}\nArguments: {check.text}")
    return masked(check.text)
