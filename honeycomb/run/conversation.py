"""A session's conversation as one of its runs sees it: the turns before it (their
messages, their answers, what their subtasks found), within a context budget kept by
compaction's rolling summary (:class:`~workers.compaction.Compactor`), never by a cut.

Each earlier turn is one message of a transcript; before the run plans, the oldest
of them, all but the last ``keep_turns``, are folded into the rolling summary once the
whole would pass the budget (a summary call, spent in the run's budget like any
other). The summary, and how many turns it stands for, are kept with the turn, so the
next turn starts from them and a resumed turn does not fold again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import msgspec
from pydantic import ConfigDict, Field

from runtime import (
    AssistantMessage,
    Budget,
    BudgetExceeded,
    ConfigError,
    Message,
    Model,
    ModelRequest,
    Tracer,
)
from runtime.events import Caller
from runtime.model import context_of
from runtime.value import SettingsModel, Value
from workers.compaction import Compactor
from workers.context import Compaction, omission_note, summary_message, token_counter_problem
from workers.state import LoopState

if TYPE_CHECKING:
    from honeycomb.run.result import RunResult
    from workers.role import Role

__all__ = [
    "CONVERSATION_HEADER",
    "Conversation",
    "SessionMode",
    "SessionPolicy",
    "Turn",
    "TurnResult",
    "fit_conversation",
    "folding_spent",
    "sessions_within",
    "shown_the_conversation",
    "turn_text",
    "with_conversation",
]

CONVERSATION_HEADER = "The conversation so far (the task is its newest message):"
"""Written above the conversation, wherever a run shows it."""

SessionMode = Literal["full", "summary", "none"]
"""What a role's workers see of a session's conversation: all of it as the planner
does (``full``), its messages and answers without what the subtasks found
(``summary``), or nothing (``none``)."""

ENDED = frozenset({"ok", "partial", "failed", "over_budget", "forgotten"})
"""The statuses of a turn that ended (with an answer, or without one; ``forgotten``:
it has an answer, and the store no longer holds its run)."""


_DEFAULT_BUDGET = 2000
"""Tokens a session's conversation may take in a request, unless a local model holds
less (:func:`sessions_within`)."""


class SessionPolicy(SettingsModel):
    """How an Executor's sessions keep their conversations.

    Attributes:
        context: The budget of tokens the conversation may take in each request of a
            turn's run (the planner's, the aggregator's, a worker's that sees it); its
            oldest turns are folded into a rolling summary past it, all but the last
            ``keep_turns`` (see :class:`~workers.context.Compaction`). ``model`` names
            the model that writes the summary (default: the planner's).
        max_age_days: Sessions whose last message is older are forgotten (with their
            runs) when a session takes a message; None: kept.
        max_sessions: Only the newest this many sessions are kept, likewise.

    The default ``context`` is 2,000 tokens, or half the context of the Executor's
    smallest local model when that is less (:func:`sessions_within`).
    """

    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    # Made when a policy is: an instance made at import would build Compaction's
    # validator then (benchmark I: import honeycomb).
    context: Compaction = Field(
        default_factory=lambda: Compaction(budget_tokens=_DEFAULT_BUDGET, keep_turns=4)
    )
    max_age_days: float | None = Field(default=None, gt=0)
    max_sessions: int | None = Field(default=None, ge=1)


def shown_the_conversation(roles: Iterable[Role], leads: Collection[str]) -> list[Role]:
    """The ``roles`` whose workers a session's conversation is shown: those whose
    ``session:`` says so, and the planner's and the aggregator's (``leads``, shown it
    unless theirs says ``none``)."""
    return [r for r in roles if (r.session or ("full" if r.name in leads else "none")) != "none"]


def sessions_within(
    policy: SessionPolicy,
    models: Iterable[Model],
    readers: Iterable[Role] = (),
    *,
    contexts: Iterable[tuple[int, str]] = (),
) -> SessionPolicy:
    """``policy`` with a conversation that fits the smallest context among ``models``
    (a local model's; one that does not say its context is not counted), ``contexts``
    (those of models not made yet, a hive's: tokens, and what holds them) and the
    compaction budgets of ``readers``, the roles shown it
    (:func:`shown_the_conversation`): the default budget is lowered to half that
    context, so that a request keeps room for its prompt and its answer beside the
    conversation.

    Raises:
        ConfigError: when the budget given fills that context on its own, or its
            ``token_counter`` does not import a callable (imported now: a hive's
            resolves in its folder while it loads, as its roles' do).
    """
    problem = token_counter_problem(policy.context.token_counter)
    if problem is not None:
        raise ConfigError(problem, field="policy.sessions.context.token_counter")
    sizes = [
        (tokens, f"a call of {model!r}, which holds {tokens}")
        for model in models
        if (tokens := context_of(model)) is not None
    ]
    sizes += [(tokens, f"a call of {held}, which holds {tokens}") for tokens, held in contexts]
    sizes += [
        (
            role.compaction.budget_tokens,
            f"a request of role {role.name!r}, shown the conversation, whose compaction "
            f"budget (roles.{role.name}.compaction.budget_tokens) holds "
            f"{role.compaction.budget_tokens}",
        )
        for role in readers
        if role.compaction is not None
    ]
    if not sizes:
        return policy
    smallest, described = min(sizes, key=lambda size: size[0])
    budget = policy.context.budget_tokens
    if "context" in policy.model_fields_set:
        if budget >= smallest:
            raise ConfigError(
                f"{budget} tokens of conversation leave no room in {described}: give a "
                "budget below it (half of it leaves room for the prompt and the answer)",
                field="policy.sessions.context.budget_tokens",
            )
        return policy
    fitted = max(256, min(_DEFAULT_BUDGET, smallest // 2))
    if fitted == budget:
        return policy
    context = policy.context.model_copy(update={"budget_tokens": fitted})
    return policy.model_copy(update={"context": context})


class TurnResult(Value, frozen=True, kw_only=True):
    """What one subtask of a turn's run found: its answer, or why it failed."""

    id: str
    role: str
    ok: bool
    text: str


class Turn(Value, frozen=True, kw_only=True):
    """One message of a session and the run that answered it.

    Attributes:
        session_id: The session.
        turn: Its number in the session, from 1.
        run_id: The run that answers it (``executor.resume(run_id)`` continues it).
        message: The message.
        started_at: When it was taken (``time.time()``).
        summary: The rolling summary of the turns before it that its run was given.
        summarized: How many of those turns, from the first, the summary stands for.
        answer: The run's answer (None: it has none, yet or at all).
        results: What the run's subtasks found.
        status: The run's status: ``ok``, ``partial``, ``failed``, ``over_budget``,
            ``waiting`` (for approvals), ``running``, or ``interrupted``.
        cost: What the run spent, in dollars (from the models' prices).
    """

    session_id: str
    turn: int
    run_id: str
    message: str
    started_at: float
    summary: str = ""
    summarized: int = 0
    answer: str | None = None
    results: tuple[TurnResult, ...] = ()
    status: str = "running"
    cost: float = 0.0

    @property
    def ended(self) -> bool:
        """Whether its run ended (with an answer or without): a session goes on."""
        return self.status in ENDED

    def answered(self, result: RunResult) -> Turn:
        """The turn once ``result`` answered it (or, partial, stopped without an
        answer): what its subtasks found, or why they failed; nothing of one that waits,
        nor of an answer withheld (its run's output guards did not pass it)."""
        found = tuple(
            TurnResult(
                id=r.subtask.id, role=r.subtask.role, ok=r.ok, text=r.text if r.ok else str(r.error)
            )
            for r in result.subtasks.values()
            if (r.text if r.ok else r.error is not None)
        )
        return msgspec.structs.replace(
            self,
            answer=result.answer_text if result.status != "waiting" else None,
            results=found,
            status=result.status,
            cost=result.usage.cost,
        )


class Conversation(Value, frozen=True, kw_only=True):
    """What a turn's run is told of the turns before it.

    Attributes:
        full: The rolling summary of the oldest turns, then the others with what
            their subtasks found ('' when there is no earlier turn).
        brief: The same without what the subtasks found.
        summary: The rolling summary.
        summarized: How many of the earlier turns, from the first, it stands for.
        turns: How many earlier turns there are.
    """

    full: str = ""
    brief: str = ""
    summary: str = ""
    summarized: int = 0
    turns: int = 0

    def for_mode(self, mode: SessionMode) -> str:
        """What a role of ``mode`` sees ('' for ``none``)."""
        return self.full if mode == "full" else self.brief if mode == "summary" else ""


def turn_text(turn: Turn, *, results: bool) -> str:
    """A turn as a run reads it: the message, what its subtasks found, its answer."""
    lines = [f"## Message {turn.turn}", turn.message.strip()]
    if results and turn.results:
        lines.append("Found by its subtasks:")
        lines += [
            f"- {r.id} ({r.role}){'' if r.ok else ' FAILED'}: {' '.join(r.text.split())}"
            for r in turn.results
        ]
    answer = turn.answer.strip() if turn.answer else f"(no answer: the run {turn.status})"
    lines += ["Answer:", answer]
    return "\n".join(lines)


def with_conversation(text: str, conversation: str) -> str:
    """``text`` (a task, an instruction) followed by the conversation before it."""
    return f"{text}\n\n{conversation_shown(conversation)}" if conversation else text


def conversation_shown(conversation: str) -> str:
    """The conversation as a run's request shows it, under its header ('' for none)."""
    return f"{CONVERSATION_HEADER}\n{conversation}" if conversation else ""


async def fit_conversation(
    earlier: Sequence[Turn],
    *,
    summary: str,
    summarized: int,
    compaction: Compaction,
    summarizer: Model,
    budget: Budget,
    tracer: Tracer,
    run_id: str,
) -> Conversation:
    """The conversation of ``earlier`` within ``compaction``'s budget: ``summary`` (of
    the first ``summarized`` turns) folding more of them first, by ``summarizer``, if
    the rest would not fit (its calls spent in the run's ``budget``).

    Raises:
        BudgetExceeded: when the run's budget allows no summary call.
    """
    if not earlier:
        return Conversation()
    messages: tuple[Message, ...] = tuple(
        AssistantMessage(content=turn_text(t, results=True)) for t in earlier
    )
    summarized = min(summarized, len(messages))
    state = LoopState(task="", messages=messages, summary=summary, summarized=summarized)
    if not summarized:
        state = msgspec.structs.replace(state, summary="")
    # The fold is part of planning: its span is in the planner's lane.
    planner = Caller(worker="planner", run_id=run_id, tracer=tracer)
    compactor = Compactor(compaction, summarizer, planner, budget=budget, kind="session summary")
    state, window = await compactor.fit(state, (), messages, ModelRequest(messages=()), 0)
    shown = messages[state.summarized :]
    briefly: tuple[Message, ...] = tuple(
        AssistantMessage(content=turn_text(t, results=False)) for t in earlier[state.summarized :]
    )
    left = left_briefly = 0
    if window is not None:  # not folded (a summary call failed), or the newest are over
        shown, left = window.fit(shown)
        briefly, left_briefly = window.fit(briefly)
    head = [summary_message(state.summary, state.summarized).content] if state.summary else []
    return Conversation(
        full=_joined(head, shown, left),
        brief=_joined(head, briefly, left_briefly),
        summary=state.summary,
        summarized=state.summarized,
        turns=len(earlier),
    )


FOLDED_BY = (
    "the summary call made to fold the session's oldest messages before the turn was planned"
)
"""What a budget the conversation's summary calls spent says spent it."""


def folding_spent(budget: Budget, made: int, stopped: BudgetExceeded | None = None) -> None:
    """Raise if the summary calls that fitted the conversation, made once ``made``
    model calls of the run's ``budget`` were, left nothing of it: what stopped one of
    them (``stopped``: a retry refused), or what the turn's next call would be refused
    with, named as theirs. The planner's call is refused next, and the workers' of a
    planner that calls no model: either would be blamed for what the summary spent.

    Raises:
        BudgetExceeded: ``stopped`` itself, when no summary call was made (the budget
            was spent before them); else saying :data:`FOLDED_BY` reached it.
    """
    if budget.usage.model_calls == made:
        if stopped is not None:
            raise stopped
        return
    try:
        if stopped is not None:
            raise stopped
        budget.check()
    except BudgetExceeded as spent:
        again = BudgetExceeded(spent.limit, spent.allowed, spent.used, reached_by=FOLDED_BY)
        raise budget.refusal(again) from spent


def _joined(head: Sequence[str], turns: Sequence[Message], left: int) -> str:
    """The conversation's text: the summary (``head``), the note that says how many
    turns the window ``left`` out (a model that is not told reads the rest as the
    whole conversation), and the turns."""
    note = [omission_note(left).content or ""] if left else []
    return "\n\n".join([*head, *note, *(m.content or "" for m in turns)])
