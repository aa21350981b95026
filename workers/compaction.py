"""Rolling-summary compaction: the summary call that folds a worker's oldest turns.

Before a model turn whose context would exceed the role's trigger (its budget, unless
set lower; see :class:`~workers.context.Compaction`), :meth:`Compactor.fit` folds
every turn but the last ``keep_turns`` (fewer, when those would not fit beside the
summary) into the summary, with the summary before it, by a tool-less model call
through the summarizer model (the worker's own by default): one, or more when one
request within the budget cannot hold all the turns to fold. The summary call is
asked for at most the summary's allowance, and a longer summary is cut to it, so the
budget is the ceiling of every request. It is a model call like any other: reserved
in the run's budget
first (a budget that stops it stops the worker, as it would the turn's call),
retried by the model, reported as ``compaction.started`` / ``compaction.finished``
events, and counted in the worker's usage and cost. A summary call that fails never
fails the worker: the summary stays as it was, and the window keeps the context
within the budget. The state records the summary and how many messages it stands
for, so a checkpoint carries both and a resumed worker does not summarize again.
"""

from __future__ import annotations

import json
import time
from asyncio import CancelledError
from collections.abc import Callable, Sequence

from msgspec.structs import replace

from runtime import (
    AssistantMessage,
    Budget,
    BudgetExceeded,
    ContextBudgetTooSmall,
    HoneycombError,
    Message,
    Model,
    ModelRequest,
    ModelResponseError,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from runtime.events import (
    Caller,
    CallReport,
    CompactionFinished,
    CompactionStarted,
    current_call,
)
from runtime.model import context_of
from runtime.models.layers.base import ModelCall
from runtime.models.layers.budget import failed_usage, spending, spent_by, unanswered_usage
from runtime.value import Value
from workers.calls import model_calls
from workers.context import (
    Compaction,
    ContextWindow,
    checked_counter,
    cut_text,
    cut_to_fit,
    estimate_tokens,
    newest_bare,
    omission_note,
    summary_message,
)
from workers.state import LoopState

__all__ = [
    "END_HEADER",
    "FOLDED_HEADER",
    "PREVIOUS_HEADER",
    "SUMMARIZER",
    "Compactor",
    "compaction_models",
    "context_problem",
    "is_summary_request",
    "summary_request",
]

SUMMARIZER = (
    "You keep the running summary of an agent's work on its task. You are given the "
    "summary so far and the turns to fold into it. Write the new summary: every fact "
    "found (names, numbers, dates, identifiers, results of tools, errors met), what was "
    "tried, and what is still open. Keep each fact exact; drop chatter and repetition. "
    "Answer with the summary alone."
)
"""The summary call's system message: always the same, so it is recognised."""
PREVIOUS_HEADER = "The summary so far:"
FOLDED_HEADER = "The turns to fold into it, oldest first:"
END_HEADER = "### end of the turns"


def compaction_models(compaction: Compaction, thinks: str | None) -> dict[str | None, str]:
    """The models a role compacting under ``compaction`` calls, by name, each with what
    it calls it for: the one it thinks with (``thinks``), and the one that writes its
    summaries when that is another."""
    uses = {thinks: "thinks with"}
    if compaction.model is not None and compaction.model != thinks:
        uses[compaction.model] = "summarizes with"
    return uses


def context_problem(compaction: Compaction, model: Model | int) -> str | None:
    """What keeps ``compaction``'s budget from fitting a call of ``model`` (or of a
    model whose calls hold that many tokens), if anything: a budget that fills the
    context a local model says one call holds, its prompt and its answer together,
    leaves no room for the answer, and the context is past the model's before the
    budget ever folds it (every call then refused by its server)."""
    held = model if isinstance(model, int) else context_of(model)
    budget = compaction.budget_tokens
    if held is None or budget < held:
        return None
    return (
        f"a compaction budget of {budget} tokens leaves no room in a call of it, which "
        f"holds {held}, its prompt and its answer together: give budget_tokens below it "
        f"(half of it, {max(held // 2, 256)}, leaves room for the answers and the summary), "
        "or the model a larger context"
    )


def is_summary_request(request: ModelRequest) -> bool:
    """Whether ``request`` is a summary call (the offline model answers it by rules)."""
    first = request.messages[0] if request.messages else None
    return isinstance(first, SystemMessage) and first.content == SUMMARIZER


def summary_request(
    previous: str,
    folded: Sequence[Message],
    instructions: str = "",
    *,
    timeout: float | None = None,
    conversation: str | None = None,
    max_output_tokens: int | None = None,
) -> ModelRequest:
    """The tool-less request that folds ``folded`` into the summary ``previous``."""
    parts = []
    if previous:
        parts += [PREVIOUS_HEADER, previous, ""]
    parts += [FOLDED_HEADER, "", render_turns(folded), "", END_HEADER]
    if instructions:
        parts += ["", instructions]
    parts += ["", "Write the new summary now."]
    return ModelRequest(
        messages=(SystemMessage(content=SUMMARIZER), UserMessage(content="\n".join(parts))),
        tools=(),
        tool_choice="none",
        timeout=timeout,
        conversation=conversation,
        max_output_tokens=max_output_tokens,
    )


def render_turns(messages: Sequence[Message]) -> str:
    """Turns as text: one ``### `` section a message, each result under its call."""
    calls = {c.id: c for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    sections: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.content:
                sections.append(f"### assistant\n{message.content}")
        elif isinstance(message, ToolMessage):
            call = calls.get(message.tool_call_id)
            arguments = _brief(call.arguments) if call is not None else ""
            sections.append(
                f"### result {message.name}({arguments}) [{message.status}]\n{message.content}"
            )
        else:
            sections.append(f"### {message.role}\n{message.content}")
    return "\n\n".join(sections)


def _brief(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    if not isinstance(parsed, dict):
        return arguments
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in parsed.items())


class _Outcome(Value, frozen=True, kw_only=True):
    """What a summary call gave: its cost (what its endpoint never answered included,
    as the budget counts it), the summary, the model's name, or why it failed, or what
    stopped it (``stopped``: cancellation or the budget, raised once it is reported)."""

    usage: Usage = Usage()
    text: str = ""
    model: str = ""
    error: HoneycombError | None = None
    stopped: BaseException | None = None


class Compactor:
    """Keeps one worker's context within its budget (see the module's docstring).

    Args:
        compaction: The budget and what to keep.
        model: The summarizer.
        caller: The worker (its name, run and tracer: the compaction events say
            them, and its conversation key, made of them, with ``/compaction``, is
            the summary call's).
        budget: The run's budget, which the summary call is reserved in and charged to.
        timeout: Seconds the summary call may take, if limited.
        kind: What its calls are, as the calls in flight are told (a stopped run names
            them): ``summary``, a worker's; ``session summary``, the session's
            conversation folded before a turn is planned.
        writer: How the worker's model writes a request out before it is sent (a tool
            protocol's: the tools in the prompt, calls and results as text), so that
            the budget holds for what is sent (None: requests are sent as they are).

    Raises:
        ConfigError: for a ``token_counter`` path that does not import a callable.
    """

    def __init__(
        self,
        compaction: Compaction,
        model: Model,
        caller: Caller | None = None,
        *,
        budget: Budget | None = None,
        timeout: float | None = None,
        writer: Callable[[ModelRequest], ModelRequest] | None = None,
        kind: str = "summary",
    ) -> None:
        caller = caller or Caller()
        self.compaction = compaction
        self.model = model
        self.budget = budget
        self.tracer, self.worker, self.run_id = caller.tracer, caller.worker, caller.run_id
        self._calls = model_calls(model, budget, caller.worker, kind=kind)
        key = caller.conversation
        self.conversation = f"{key}/compaction" if key else "compaction"
        self.timeout = timeout
        self.count = checked_counter(compaction)
        self.writer = writer

    def estimate(self, messages: Sequence[Message], request: ModelRequest | None = None) -> int:
        """The tokens of ``messages`` as the worker's model is sent them in ``request``
        (its tools, and what a tool protocol writes of its tool choice and output
        schema; None: none), by the role's counter or the estimate."""
        tools = request.tools if request is not None else ()
        if self.writer is not None and (request is not None or any(map(_writable, messages))):
            shown = tuple(messages)
            whole = (
                ModelRequest(messages=shown)
                if request is None
                else replace(request, messages=shown)
            )
            sent = self.writer(whole)
            return estimate_tokens(sent.messages, sent.tools, self.count)
        return estimate_tokens(messages, tools, self.count)

    def size(
        self,
        state: LoopState,
        head: tuple[Message, ...],
        messages: tuple[Message, ...],
        request: ModelRequest,
    ) -> int:
        """The estimated input tokens of a request of ``messages`` (all the summary
        does not fold): what the server reported for the last turn's request plus an
        estimate of what was added since, or, when that is not known, an estimate of
        the whole request."""
        known, held = state.context_tokens, state.context_messages
        if known and state.summarized <= held <= len(messages):
            return known + self.estimate(messages[held:])
        summary = (summary_message(state.summary, state.summarized),) if state.summary else ()
        return self.estimate((*head, *summary, *messages[state.summarized :]), request)

    async def fit(
        self,
        state: LoopState,
        head: tuple[Message, ...],
        messages: tuple[Message, ...],
        request: ModelRequest,
        turn: int,
    ) -> tuple[LoopState, ContextWindow | None]:
        """The state once the context of ``messages`` fits the budget (its summary
        folding more of them), and the window the turn's request needs on top of it
        (None: none, it fits). ``request`` is the turn's request, its messages aside:
        its tools, tool choice and output schema count as a tool protocol writes them
        into what is sent.

        A summary call the run's budget refuses once others were made this turn ends
        the folding: the state keeps their summaries (and what they cost), and the
        turn's own call meets the budget.

        Raises:
            BudgetExceeded: when the run's budget allows no summary call at all (what
                a summary call it stopped at a retry spent: its ``spent_by``).
            ContextBudgetTooSmall: when no fold nor window could keep the request
                within the budget (the head, the tools and the newest turn's calls
                alone are over it), before any summary call.
        """
        before = self.size(state, head, messages, request)
        if before <= self.compaction.trigger:
            return state, None
        self._check_room(state, head, messages, request)
        fixed = self.estimate(head, request)
        cut = self._fold_point(messages, state.summarized, fixed)
        folds = state.compactions
        while cut > state.summarized:  # a summary call a time, each within the budget
            try:
                state, cut, before = await self._fold(
                    state, head, messages, request, cut, turn=turn, before=before, fixed=fixed
                )
            except BudgetExceeded as stopped:
                if state.compactions == folds:
                    raise  # nothing folded: the turn ends here, as it was
                spent = spent_by(stopped)
                if spent is not None:  # a summary call made, and stopped at a retry
                    state = replace(state.spent(spent), compactions=state.compactions + 1)
                break
        if before <= self.compaction.budget_tokens:
            return state, None
        return self._window(state, head, messages, request)

    def _allowance(self, fixed: int) -> int:
        """The summary's length at most: half of what the head and the tools leave of
        the budget (the turns kept have the other half), or the role's, if less."""
        half = (self.compaction.budget_tokens - fixed) // 2
        own = self.compaction.summary_tokens
        return max(half if own is None else min(own, half), 16)

    def _fold_point(self, messages: tuple[Message, ...], start: int, fixed: int) -> int:
        """Where the next fold of ``messages[start:]`` ends: before the last
        ``keep_turns`` turns, or fewer of them (never less than the newest) when they
        would not fit the budget beside the head, the tools and the summary."""
        starts = [
            i for i, m in enumerate(messages) if i >= start and isinstance(m, AssistantMessage)
        ]
        header = self.estimate((summary_message("", len(messages)),))
        room = self.compaction.budget_tokens - fixed - self._allowance(fixed) - header
        kept, size = 0, 0
        for index in range(len(starts) - 1, -1, -1):
            if kept == self.compaction.keep_turns:
                break
            end = starts[index + 1] if index + 1 < len(starts) else len(messages)
            turn = self.estimate(messages[starts[index] : end])
            if kept and size + turn > room:
                break
            kept, size = kept + 1, size + turn
        return start if kept == len(starts) else starts[len(starts) - kept]

    def _request(
        self, state: LoopState, messages: tuple[Message, ...], cut: int, allowance: int
    ) -> tuple[int, ModelRequest]:
        """The summary call that folds the most of ``messages[state.summarized:cut]``
        its request can hold within the budget (whole turns; the first one's text cut
        to fit when it alone cannot), and where its fold ends."""
        start, limit = state.summarized, self.compaction.budget_tokens
        ends = [i for i in range(start + 1, cut) if isinstance(messages[i], AssistantMessage)]
        ends.append(cut)

        def request(end: int) -> ModelRequest:
            return summary_request(
                state.summary,
                messages[start:end],
                self.compaction.instructions,
                timeout=self.timeout,
                conversation=self.conversation,
                max_output_tokens=allowance,
            )

        low, high = 0, len(ends) - 1  # the last end whose request fits: a binary search
        while low < high:
            middle = (low + high + 1) // 2
            if self.estimate(request(ends[middle]).messages) <= limit:
                low = middle
            else:
                high = middle - 1
        found = request(ends[low])
        if self.estimate(found.messages) > limit:  # one turn alone over the budget
            found = replace(found, messages=cut_to_fit(found.messages, 1, limit, self.count))
        return ends[low], found

    async def _fold(
        self,
        state: LoopState,
        head: tuple[Message, ...],
        messages: tuple[Message, ...],
        request: ModelRequest,
        cut: int,
        *,
        turn: int,
        before: int,
        fixed: int,
    ) -> tuple[LoopState, int, int]:
        """One summary call before ``turn``, folding the oldest turns up to ``cut`` (or
        as many as its request can hold) into the summary of a context of ``before``
        tokens, ``fixed`` of them the head's and the tools'. Returns the state, where
        the turn's next fold ends (the state's ``summarized``: none follows), and the
        context's size now."""
        if self.budget is not None:  # spent: no request is made up
            self.budget.check()
        allowance = self._allowance(fixed)
        end, summary_call = self._request(state, messages, cut, allowance)
        # Opened before it is told: a call the budget (or its cost cap) refuses is never
        # begun, nor a compaction, as its layer reserves it.
        call = self._calls.open(replace(summary_call, turn=turn))
        tracing = self.tracer.enabled
        folding = end - state.summarized
        if tracing:
            event = CompactionStarted(
                worker=self.worker,
                run_id=self.run_id,
                turn=turn,
                messages=folding,
                context_tokens=before,
                budget_tokens=self.compaction.budget_tokens,
            )
            self.tracer.emit(event)
            current_call.set(
                CallReport(self.tracer, worker=self.worker, run_id=self.run_id, turn=turn)
            )
        started = time.perf_counter()
        outcome = await self._summarize(call)
        if outcome.stopped is not None:  # cancelled, or the budget: it ends, then its worker
            if tracing:
                self._finished(turn, started, outcome, (0, before, False), state)
            raise spending(outcome.stopped, failed_usage(call))
        usage, error = outcome.usage, outcome.error
        if error is None:  # a summary longer than asked for is cut to its allowance
            state = state.compacted(cut_text(outcome.text, allowance, self.count), end, usage)
        else:  # spent, and counted as a model call, but the summary is as it was
            state = replace(state.spent(usage), compactions=state.compactions + 1)
        after = self.size(state, head, messages, request)
        following = state.summarized  # none, unless it worked and the context is still over
        if error is None and after > self.compaction.trigger:
            following = self._fold_point(messages, state.summarized, fixed)
        if tracing:
            window = after > self.compaction.budget_tokens and following <= state.summarized
            self._finished(turn, started, outcome, (folding, after, window), state)
        return state, following, after

    async def _summarize(self, call: ModelCall) -> _Outcome:
        """The summary call's outcome; cancellation, and a budget that allows no
        retry of it, are its ``stopped``."""
        try:
            answer = await call.made()
        except BaseException as failure:  # what its timeouts cut off was spent still
            return _failed(call.failed(failure), unanswered_usage(call))
        try:
            response = call.answered(answer)
        except HoneycombError as failure:  # an answer a layer refused
            return _failed(failure, unanswered_usage(call))
        text = (response.message.content or "").strip()
        error = None
        if not text:
            error = ModelResponseError(f"model {self.model!r} answered the summary call empty")
        return _Outcome(usage=response.usage, text=text, model=response.model, error=error)

    def _window(
        self,
        state: LoopState,
        head: tuple[Message, ...],
        messages: tuple[Message, ...],
        request: ModelRequest,
    ) -> tuple[LoopState, ContextWindow]:
        """The last resort: the window of what the budget leaves once the head, the
        summary and the tools are counted, and the window's note when it leaves turns
        out (the newest turn is always kept, its longest texts cut when it alone does
        not fit), and the state,
        its summary cut to what the newest turn's calls leave it, if they leave it less
        than it has (a cut summary stays cut: the next fold starts from it)."""
        budget = self.compaction.budget_tokens
        note = self._note(state)
        if state.summary:
            rest = messages[state.summarized :]
            newest = newest_bare(rest)
            left_out = (note,) if len(newest) < len(rest) else ()
            least = (*head, *left_out, summary_message("", state.summarized), *newest)
            left = budget - self.estimate(least, request)  # for the summary's text
            cut = cut_text(state.summary, max(left, 0), self.count)
            if cut != state.summary:
                state = replace(state, summary=cut)
        summary = (summary_message(state.summary, state.summarized),) if state.summary else ()
        fixed = self.estimate((*head, *summary), request)
        window = ContextWindow(
            max_tokens=max(budget - fixed, 1),
            count=self.count,
            measure=self.estimate,  # as the model is sent them
            note_tokens=self.estimate((*head, *summary, note), request) - fixed,  # when it is
        )
        return state, window

    @staticmethod
    def _note(state: LoopState) -> Message:
        """The window's note, at the widest it can be."""
        return omission_note(10 * (len(state.messages) + 1))

    def _check_room(
        self,
        state: LoopState,
        head: tuple[Message, ...],
        messages: tuple[Message, ...],
        request: ModelRequest,
    ) -> None:
        """Fail before any summary call when no fold and no window could keep the
        request within the budget: the head, the tools and the newest turn's calls,
        every text cut, with the summary's header (or the window's note, if longer)
        when there are older messages to fold or leave out, are over it alone.

        Raises:
            ContextBudgetTooSmall: then. A request over the budget, its newest results
                cut away, helps no model (it repeats the calls it no longer sees).
        """
        rest = messages[state.summarized :]
        newest = newest_bare(rest)
        older: tuple[Message, ...] = ()  # what stands for the messages before it
        if len(newest) < len(rest):  # folded (the summary's header), or left out (the note)
            header, note = (summary_message("", len(messages)),), (self._note(state),)
            older = max(header, note, key=self.estimate)
        elif state.summary:
            older = (summary_message("", state.summarized),)
        least = self.estimate((*head, *older, *newest), request)
        budget = self.compaction.budget_tokens
        if least <= budget:
            return
        tools = len(request.tools)
        schema = " and the output schema" if request.output is not None else ""
        tools_share = self.estimate(head, request) - self.estimate(head)
        shares = [
            ("the system prompt and the task", self.estimate(head)),
            (f"{tools} tool{'s' * (tools != 1)}{schema}", tools_share),
            ("the summary's header or the window's note", self.estimate(older) if older else 0),
        ]
        shares.append(("the newest turn's calls", least - sum(n for _, n in shares)))
        raise ContextBudgetTooSmall(self.worker or "", budget, least, shares)

    def _finished(
        self, turn: int, started: float, outcome: _Outcome, folded: tuple[int, int, bool],
        state: LoopState,
    ) -> None:  # fmt: skip
        """Emit the ``compaction.finished`` of a summary call that folded (or failed to
        fold) messages, leaving a context of a size and needing the window, or not; or
        that was stopped before it answered (``cancelled``, as a model call cut off
        with its worker ends, before its worker's end)."""
        folding, after, window = folded
        report = current_call.get()
        current_call.set(None)
        stopped = outcome.stopped
        usage, error = outcome.usage, outcome.error or stopped
        status = "ok" if error is None else "error"  # (what stops the process fails it)
        if isinstance(stopped, CancelledError):
            status, error = "cancelled", None
        event = CompactionFinished(
            worker=self.worker,
            run_id=self.run_id,
            turn=turn,
            duration_s=time.perf_counter() - started,
            status=status,
            model=outcome.model,
            messages=folding if status == "ok" else 0,
            summarized=state.summarized,
            context_tokens=after,
            window=window,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=usage.cost,
            cached_input_tokens=usage.cached_input_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            attempts=report.attempts if report is not None else 1,
            retry_wait_s=report.retry_wait_s if report is not None else 0.0,
            error=None if error is None else f"{type(error).__name__}: {error}",
        )
        self.tracer.emit(event)


def _failed(error: BaseException, spent: Usage | None) -> _Outcome:
    """The outcome of a summary call that failed with ``error`` having ``spent`` that:
    a Honeycomb error is its failure (the summary stays as it was), what else ends it
    (cancellation, a budget that allows no retry) stops its worker."""
    usage = spent or Usage()
    if isinstance(error, HoneycombError) and not isinstance(error, BudgetExceeded):
        return _Outcome(usage=usage, error=error)
    return _Outcome(usage=usage, stopped=error)


def _writable(message: Message) -> bool:
    """Whether a tool protocol writes ``message`` otherwise than it is (a call, or a
    result)."""
    return isinstance(message, ToolMessage) or (
        isinstance(message, AssistantMessage) and bool(message.tool_calls)
    )
