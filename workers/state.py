"""The values a loop is made of: its settings, its state (a new value every turn),
the results of a step, and the checkpoint protocol a run store implements."""

from __future__ import annotations

from typing import Any, Protocol

from msgspec.structs import replace
from pydantic import BaseModel

from runtime import AssistantMessage, HoneycombError, Message, ToolCall, Transcript, Usage
from runtime.tools.approvals import PendingApproval
from runtime.value import Value, packed
from workers.context import Compaction, ContextWindow

__all__ = [
    "DEFAULT_OUTPUT_TOKENS",
    "Checkpoint",
    "Continue",
    "Failed",
    "Final",
    "LoopSettings",
    "LoopState",
    "Step",
    "Waiting",
]

DEFAULT_OUTPUT_TOKENS = 4096
"""The output limit of a model call that nothing else limits: enough for a long answer
or a turn's tool calls, and a bound on a model that loops (a reasoning model wants
more: its thinking counts)."""


class LoopSettings(Value, frozen=True, kw_only=True):
    """How one loop behaves.

    Attributes:
        max_turns: Model turns that may call tools; then one wrap-up call that may not.
        output_type: A pydantic model the final answer must validate against.
        output_retries: Times an invalid final answer is sent back with the error (one
            that fails the output schema or an output guard).
        window: How much transcript the model sees each turn.
        model_timeout: Seconds per model call, if limited.
        max_repeats: Turns in a row made only of repeats of the previous turn's calls
            (which are not run) before the loop is a runaway: one wrap-up
            call, which says so, for its answer.
        compaction: The context budget kept by rolling summaries, if any.
        max_output_tokens: The most tokens one answer may take (sent with every
            call; an answer that ends there is handled as cut off).
        streams_unvalidated: Whether the text of an answer its output schema checks
            streams as it is written (a planner's plan: its progress shows), rather
            than held until it validates.
    """

    max_turns: int = 10
    output_type: type[BaseModel] | None = None
    output_retries: int = 2
    window: ContextWindow = ContextWindow()
    model_timeout: float | None = None
    max_repeats: int = 3
    compaction: Compaction | None = None
    max_output_tokens: int = DEFAULT_OUTPUT_TOKENS
    streams_unvalidated: bool = False

    def __post_init__(self) -> None:
        if self.max_repeats < 1:
            raise ValueError(f"max_repeats must be at least 1, got {self.max_repeats}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.output_retries < 0:
            raise ValueError(f"output_retries must be 0 or more, got {self.output_retries}")
        if self.max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be 1 or more, got {self.max_output_tokens}")


# benchmark B: made every model turn or tool call, never walked by the GC
class LoopState(Value, frozen=True, gc=False, kw_only=True):
    """Everything a step needs; every step returns a new one.

    Attributes:
        task: The task, as the model is given it.
        messages: The conversation after the task: assistant turns, observations, nudges
            (all of it: compaction changes what the model is sent, not what is kept).
        turn: Model turns made so far (the summary calls of compaction not included).
        input_tokens: Input tokens spent so far.
        output_tokens: Output tokens spent so far.
        cost: Dollars spent so far (from the model's prices, if any).
        tool_calls: Tool calls run so far.
        previous_calls: The calls of the last turn (a repeat of one is not run).
        nudged: The last reply was empty and the model was nudged.
        output_attempts: Answers sent back for failing the output schema or an output
            guard (they share ``output_retries``).
        wrapped_up: The wrap-up call (at ``max_turns``, or of a runaway loop)
            was made.
        repeats: Turns in a row whose calls all repeated the turn before (at
            ``max_repeats``, the next call is a runaway's wrap-up; a resumed loop reads
            it here).
        reasoning_tokens: Of the output tokens, those spent reasoning.
        cached_input_tokens: Of the input tokens, those the provider read from its cache.
        summary: The rolling summary of ``messages[:summarized]`` ('' when none).
        summarized: How many of ``messages``, from the first, the summary stands for.
        compactions: Summary calls made (model calls, counted in the usage).
        context_tokens: Input tokens the server reported for the last model turn, when
            its request held all of ``messages[summarized:context_messages]`` (0: not
            known); what was added since is estimated.
        context_messages: How many of ``messages`` that request held.
        cut_at: The output limit the last answer was cut off at (``finish_reason:
            length``; 0: it was not): the arguments of a call it asks for may be cut
            short, and are told so.
    """

    task: str
    messages: tuple[Message, ...] = ()
    turn: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0
    previous_calls: tuple[ToolCall, ...] = ()
    nudged: bool = False
    output_attempts: int = 0
    wrapped_up: bool = False
    repeats: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    summary: str = ""
    summarized: int = 0
    compactions: int = 0
    context_tokens: int = 0
    context_messages: int = 0
    cut_at: int = 0

    def __reduce__(self) -> Any:
        return packed(self)

    def answered(
        self,
        messages: tuple[Message, ...],
        spent: Usage,
        *,
        nudged: bool,
        wrapped_up: bool,
        whole: bool = True,
        cut_at: int = 0,
    ) -> LoopState:
        """After a model answer: ``messages`` end with it, and what it cost is counted.
        ``whole``: the request held every message the summary does not fold (no window
        left any out), so what the server reported measures the context. ``cut_at``: the
        output limit the answer was cut off at (0: it was not)."""
        return replace(
            self.spent(spent),
            messages=messages,
            turn=self.turn + 1,
            nudged=nudged,
            wrapped_up=wrapped_up,
            context_tokens=spent.input_tokens if whole else 0,
            context_messages=len(messages) - 1 if whole else 0,
            cut_at=cut_at,
        )

    def compacted(self, summary: str, summarized: int, spent: Usage) -> LoopState:
        """After a summary call: the summary now stands for ``messages[:summarized]``."""
        return replace(
            self.spent(spent),
            summary=summary,
            summarized=summarized,
            compactions=self.compactions + 1,
            context_tokens=0,  # what the server reported held what is folded now
            context_messages=0,
        )

    def spent(self, usage: Usage) -> LoopState:
        """The state with what a model call cost counted."""
        return replace(
            self,
            input_tokens=self.input_tokens + usage.input_tokens,
            output_tokens=self.output_tokens + usage.output_tokens,
            reasoning_tokens=self.reasoning_tokens + usage.reasoning_tokens,
            cached_input_tokens=self.cached_input_tokens + usage.cached_input_tokens,
            cost=self.cost + usage.cost,
        )

    def observed(
        self, observations: tuple[Message, ...], calls: tuple[ToolCall, ...], executed: int
    ) -> LoopState:
        """After running ``calls``: their observations are added, ``executed`` of them
        ran (the rest were skipped as repeats, and a turn of nothing but repeats counts
        towards a runaway)."""
        return replace(
            self,
            messages=self.messages + observations,
            tool_calls=self.tool_calls + executed,
            previous_calls=calls,
            repeats=0 if executed else self.repeats + 1,
        )

    @property
    def pending(self) -> tuple[ToolCall, ...]:
        """Tool calls the model asked for whose observations are not in yet (only
        in a state saved mid-turn, which a resumed loop starts from)."""
        last = self.messages[-1] if self.messages else None
        return last.tool_calls if isinstance(last, AssistantMessage) else ()

    @property
    def transcript(self) -> Transcript:
        return Transcript(messages=self.messages)

    @property
    def usage(self) -> Usage:
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            model_calls=self.turn + self.compactions,
            tool_calls=self.tool_calls,
            cost=self.cost,
            reasoning_tokens=self.reasoning_tokens,
            cached_input_tokens=self.cached_input_tokens,
        )


# benchmark B: made every model turn or tool call, never walked by the GC
class Continue(Value, frozen=True, gc=False, kw_only=True):
    """The loop goes on from ``state``."""

    state: LoopState


class Final(Value, frozen=True, kw_only=True):
    """The loop ended with an answer: ``text``, and ``output`` (the text, or the
    validated output-schema object); ``cut_off``: it ended at the output limit."""

    state: LoopState
    text: str
    output: Any
    cut_off: bool = False


class Failed(Value, frozen=True, kw_only=True):
    """The loop ended without an answer; ``spent``: what the model call that failed
    spent, which ``state`` does not count (its turn was never answered)."""

    state: LoopState
    error: HoneycombError
    spent: Usage = Usage()

    @property
    def usage(self) -> Usage:
        """What the loop spent, its failed call included."""
        return self.state.usage + self.spent


class Waiting(Value, frozen=True, kw_only=True):
    """The loop paused: calls of the model's last answer wait for a person's decision
    (``state`` still has them pending, and a resumed loop runs them once decided)."""

    state: LoopState
    pending: tuple[PendingApproval, ...]


Step = Continue | Final | Failed | Waiting


class Checkpoint(Protocol):
    """Receives a loop's state as it changes, to keep it (a run store). ``save`` must
    not block: it is called on the event loop, every step; ``flush`` returns once
    every state saved so far is kept (the loop awaits it before the calls of an answer
    run)."""

    def save(self, state: LoopState) -> None: ...

    async def flush(self) -> None: ...
