"""Context assembly: what the model sees each turn.

The head (the role's instructions and the task), then the summary of the turns folded
so far (see :class:`Compaction`), then as much of the rest of the transcript as fits
the window, newest first. The transcript is cut only between groups (an assistant
message with its tool observations and the loop's prompts after it, or a lone user
message before any), so a tool call is never separated from its observation. When
something is left out, a note says so.

Context size is estimated by :func:`estimate_tokens`: four ASCII characters a token
and one a character of other scripts (:mod:`runtime.models.tokens`), or a role's own token
counter; plus four tokens a message. The loop adds that estimate of what was added
since the last model call to the input tokens the server reported for it (no
tokenizer is needed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Sequence

from msgspec.structs import replace
from pydantic import ConfigDict, Field, model_validator

from runtime import (
    AssistantMessage,
    ConfigError,
    Message,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from runtime.config.imports import import_object
from runtime.models.tokens import quarter_tokens
from runtime.value import SettingsModel, Value

__all__ = [
    "CheckedCounter",
    "Compaction",
    "ContextWindow",
    "Measure",
    "TokenCounter",
    "assemble",
    "checked_counter",
    "cut_text",
    "cut_to_fit",
    "estimate_tokens",
    "fold_point",
    "newest_bare",
    "omission_note",
    "prompt_room",
    "summary_message",
    "token_counter",
    "token_counter_problem",
]

TokenCounter = Callable[[str], int]
"""Counts the tokens of a text, as a model's tokenizer does (with ``tiktoken``:
``lambda text: len(encoding.encode(text))``)."""
Measure = Callable[[Sequence[Message]], int]
"""The input tokens of messages as a model is sent them (a tool protocol's model
writes calls and results as text, which takes more than they do)."""
TOKENS_PER_MESSAGE = 4
"""What a message's framing (its role, separators) adds, in tokens."""


class Compaction(SettingsModel):
    """A context budget kept by rolling summaries: before a model call whose context
    would exceed ``budget_tokens``, the oldest turns, all but the last ``keep_turns``,
    are folded with the previous summary into one summary message (a model call of
    its own), placed after the system prompt and the task. When even that does not
    fit, the window leaves out the oldest of the turns that remain. With
    ``trigger_tokens`` below the budget, the fold comes as soon as the context would
    exceed the trigger, which keeps every request small (and the tokens sent over a
    long run few); the budget stays the ceiling of every request, the summary calls'
    too.

    Attributes:
        budget_tokens: Input tokens one model call may be sent.
        trigger_tokens: The context size past which the oldest turns are folded
            (None: ``budget_tokens``); at most the budget.
        keep_turns: The most recent turns (an answer with its observations) that stay
            as they are, when they fit beside the summary.
        model: The model that writes the summary, by its name in the hive (an
            Executor's ``models``); None: the worker's own.
        instructions: Added to the summary prompt: what matters to keep.
        summary_tokens: The summary's length at most, the summary call's output limit
            (None: half of what the system prompt, the task and the tools leave of the
            budget); at most half the budget.
        token_counter: Counts a text's tokens (a callable, or its import path
            ``module:name``); None: the estimate of :func:`estimate_tokens`.
    """

    model_config = ConfigDict(
        defer_build=True, frozen=True, extra="forbid", protected_namespaces=()
    )

    budget_tokens: int = Field(ge=256)
    trigger_tokens: int | None = Field(default=None, ge=256)
    keep_turns: int = Field(default=4, ge=1, le=1000)
    model: str | None = None
    instructions: str = ""
    summary_tokens: int | None = Field(default=None, ge=32)
    token_counter: str | TokenCounter | None = None

    @model_validator(mode="after")
    def _within_budget(self) -> Compaction:
        if self.trigger_tokens is not None and self.trigger_tokens > self.budget_tokens:
            raise ValueError(
                f"trigger_tokens ({self.trigger_tokens}) must not exceed budget_tokens "
                f"({self.budget_tokens}): the budget is the ceiling of every request"
            )
        if self.summary_tokens is not None and self.summary_tokens > self.budget_tokens // 2:
            raise ValueError(
                f"summary_tokens ({self.summary_tokens}) must be at most half of "
                f"budget_tokens ({self.budget_tokens}): the summary and the recent turns "
                "share the budget"
            )
        return self

    @property
    def trigger(self) -> int:
        """The context size past which the oldest turns are folded."""
        return self.budget_tokens if self.trigger_tokens is None else self.trigger_tokens

    def resolved(self) -> Compaction:
        """This compaction, its token counter imported if named by path (as a hive's
        paths resolve: while it loads).

        Raises:
            ConfigError: for a path that does not import a callable.
        """
        if not isinstance(self.token_counter, str):
            return self
        return self.model_copy(update={"token_counter": token_counter(self)})


def prompt_room(
    compaction: Compaction | None, held: int | None, answer: int, *, tools: bool
) -> int | None:
    """The tokens a worker's prompt may take: the least of its ``compaction`` budget
    and the tokens one call of its model holds (``held``, a local model's context), each
    less room for its answer (its output limit ``answer``, at most half of it); a
    compaction budget counts the prompt alone, and a role without ``tools`` has no next
    request for its answer to be in (None: neither is known)."""
    limits: list[int] = []
    if compaction is not None:
        budget = compaction.budget_tokens
        limits.append(budget - (min(answer, budget // 2) if tools else 0))
    if held is not None:
        limits.append(held - min(answer, held // 2))
    return min(limits) if limits else None


def token_counter_problem(ref: object) -> str | None:
    """What is wrong with a ``token_counter``, if anything: an import path that does
    not import a callable."""
    if ref is None or callable(ref):
        return None
    if not isinstance(ref, str):
        return f"a token counter is a callable or an import path, not {type(ref).__name__}"
    try:
        found = import_object(ref)
    except ConfigError as exc:
        return exc.message
    return None if callable(found) else f"token counter {ref!r} is not callable"


def token_counter(compaction: Compaction) -> TokenCounter | None:
    """The compaction's token counter, imported (None: the estimate).

    Raises:
        ConfigError: for an import path that does not import a callable.
    """
    ref = compaction.token_counter
    problem = token_counter_problem(ref)
    if problem is not None:
        raise ConfigError(problem)
    if isinstance(ref, str):
        found: TokenCounter = import_object(ref)
        return found
    return ref


def checked_counter(compaction: Compaction) -> TokenCounter | None:
    """The compaction's token counter (:func:`token_counter`), checked as it counts
    (:class:`CheckedCounter`); None: the estimate.

    Raises:
        ConfigError: for an import path that does not import a callable.
    """
    count = token_counter(compaction)
    if count is None:
        return None
    ref = compaction.token_counter
    return CheckedCounter(
        count, ref if isinstance(ref, str) else getattr(count, "__qualname__", repr(count))
    )


class CheckedCounter:
    """A role's token counter, whose failure names it: one that raises, or answers
    anything but a number of tokens, is a :class:`~runtime.ConfigError` saying so (not
    a ``TypeError`` from deep in the context's arithmetic).

    Args:
        count: The counter.
        name: Its import path, or its name.
    """

    __slots__ = ("count", "name")

    def __init__(self, count: TokenCounter, name: str) -> None:
        self.count, self.name = count, name

    def __call__(self, text: str) -> int:
        try:
            tokens = self.count(text)
        except Exception as exc:
            raise ConfigError(
                f"the token counter {self.name!r} raised {type(exc).__name__}: {exc} "
                f"(counting a text of {len(text):,} characters)",
                field="compaction.token_counter",
            ) from exc
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
            return tokens
        if isinstance(tokens, float) and math.isfinite(tokens) and tokens >= 0:
            return math.ceil(tokens)  # (len(text) / 3.5, say)
        raise ConfigError(
            f"the token counter {self.name!r} answered {tokens!r}, not a number of tokens "
            "(0 or more)",
            field="compaction.token_counter",
        )

    def __repr__(self) -> str:
        return f"CheckedCounter({self.name!r})"


class ContextWindow(Value, frozen=True, kw_only=True):
    """How much of the transcript to show.

    Attributes:
        max_chars: Characters of transcript to keep; None: not limited by characters.
            The newest group is always kept, whatever its size.
        max_tokens: Tokens of transcript to keep (by ``measure``); None: not limited
            by tokens. The newest group is always kept; when it alone is over, its
            longest texts are cut to fit.
        count: The token counter of a text (None: the estimate).
        measure: The tokens of messages as they are sent (None: by
            :func:`estimate_tokens` and ``count``).
        note_tokens: What the note that stands where messages were left out takes
            of ``max_tokens``, when any are.
    """

    max_chars: int | None = None
    max_tokens: int | None = None
    count: TokenCounter | None = None
    measure: Measure | None = None
    note_tokens: int = 0

    def __post_init__(self) -> None:
        if self.max_chars is not None and self.max_chars < 1:
            raise ValueError(f"max_chars must be positive, got {self.max_chars}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")

    def narrowest(self, other: ContextWindow) -> ContextWindow:
        """The window that keeps within both this one's limits and ``other``'s."""
        tokens = other if self.max_tokens is None else self
        if other.max_tokens is not None and self.max_tokens is not None:
            tokens = self if self.max_tokens <= other.max_tokens else other
        return ContextWindow(
            max_chars=_least(self.max_chars, other.max_chars),
            max_tokens=tokens.max_tokens,
            count=tokens.count,
            measure=tokens.measure,
            note_tokens=tokens.note_tokens,
        )

    def tokens(self, messages: Sequence[Message]) -> int:
        """The tokens of ``messages`` as this window measures them."""
        if self.measure is not None:
            return self.measure(messages)
        return estimate_tokens(messages, count=self.count)

    def fit(self, messages: Sequence[Message]) -> tuple[tuple[Message, ...], int]:
        """The messages that fit, and how many were left out."""
        chars, tokens = self.max_chars, self.max_tokens
        if chars is None and tokens is None:
            return tuple(messages), 0
        groups = _groups(messages)
        kept: list[tuple[Message, ...]] = []
        weights: list[int] = []
        size = weight = 0
        for group in reversed(groups):
            group_size = sum(_size(m) for m in group) if chars is not None else 0
            group_weight = self.tokens(group) if tokens is not None else 0
            if kept and (
                (chars is not None and size + group_size > chars)
                or (tokens is not None and weight + group_weight > tokens)
            ):
                break
            kept.append(group)
            weights.append(group_weight)
            size += group_size
            weight += group_weight
        if tokens is not None:
            if len(kept) < len(groups):  # the note that stands for the rest takes its share
                tokens -= self.note_tokens
                while len(kept) > 1 and weight > tokens:  # the oldest kept give way to it
                    kept.pop()
                    weight -= weights.pop()
            if weight > tokens:  # the newest group alone is over
                kept[0] = _shortened(kept[0], max(tokens, 1), self)
        shown = tuple(m for group in reversed(kept) for m in group)
        return shown, len(messages) - len(shown)


def _least(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _shortened(
    group: tuple[Message, ...], tokens: int, window: ContextWindow
) -> tuple[Message, ...]:
    """``group`` within ``tokens`` (as ``window`` measures), its longest texts
    (results, answers) cut in the middle, the longest as far as it goes before the
    next; calls' arguments are never cut (the server must read them as JSON)."""
    messages = tuple(group)
    longest = sorted(range(len(messages)), key=lambda i: -len(messages[i].content or ""))
    for index in longest:
        messages = cut_to_fit(messages, index, tokens, window.count, window.measure)
        if window.tokens(messages) <= tokens:
            break
    return messages


def cut_to_fit(
    messages: Sequence[Message],
    index: int,
    tokens: int,
    count: TokenCounter | None = None,
    measure: Measure | None = None,
) -> tuple[Message, ...]:
    """``messages`` with the text of ``messages[index]`` cut in the middle
    (:func:`cut_text`) until they fit ``tokens`` by ``measure`` (None:
    :func:`estimate_tokens`), or until that text is gone."""
    size: Measure = measure or (lambda m: estimate_tokens(m, count=count))
    cut = list(messages)
    # Again while over: the estimate rounds once for all the texts, so a text cut by
    # what the messages are over can leave them a token over.
    while (over := size(cut) - tokens) > 0:
        text = cut[index].content or ""
        if not text:
            break
        kept = cut_text(text, max(_measure((text,), count) - over, 0), count)
        cut[index] = replace(cut[index], content=kept)
    return tuple(cut)


CUT = "\n[... {chars:,} of {total:,} characters cut to fit the context budget]\n"
"""What stands in the middle of a text cut to fit (:func:`cut_text`)."""


def cut_text(text: str, tokens: int, count: TokenCounter | None = None) -> str:
    """``text`` within ``tokens`` (by ``count``, else the estimate): its start and its
    end, the middle replaced by a note of how much was cut ('' when not even the
    note fits)."""
    if _measure((text,), count) <= tokens:
        return text

    def kept(chars: int) -> str:
        head = chars - chars // 2
        tail = text[len(text) - chars // 2 :] if chars // 2 else ""
        return text[:head] + CUT.format(chars=len(text) - chars, total=len(text)) + tail

    low, high = 0, len(text) - 1  # the most characters kept that fit: a binary search
    while low < high:
        middle = (low + high + 1) // 2
        if _measure((kept(middle),), count) <= tokens:
            low = middle
        else:
            high = middle - 1
    cut = kept(low)
    return cut if _measure((cut,), count) <= tokens else ""


def assemble(
    head: tuple[Message, ...],
    messages: tuple[Message, ...],
    window: ContextWindow,
    summary: Message | None = None,
) -> tuple[tuple[Message, ...], int]:
    """The head (system prompt and task), the summary of the folded turns if there is
    one, then the conversation (what the summary does not fold), windowed; and how many
    of ``messages`` the window left out."""
    first = head if summary is None else (*head, summary)
    if window.max_chars is None and window.max_tokens is None:
        return first + messages, 0
    shown, omitted = window.fit(messages)
    if not omitted:
        return first + shown, 0
    return (*first, omission_note(omitted), *shown), omitted


def omission_note(omitted: int) -> UserMessage:
    """The note that stands where the window left ``omitted`` messages out."""
    return UserMessage(
        content=f"[{omitted} earlier messages of this conversation were left out to fit the "
        "context window; the most recent ones follow.]"
    )


SUMMARY_HEADER = "[Summary of the first {folded} messages of this conversation, folded to fit "
"""How the summary message starts (a model reading it knows what it stands for)."""


def summary_message(summary: str, folded: int) -> UserMessage:
    """The message that stands for the first ``folded`` messages of the conversation:
    the same text until the next compaction, so the prefix a provider caches holds."""
    return UserMessage(
        content=SUMMARY_HEADER.format(folded=folded) + f"the context budget:]\n{summary}"
    )


def fold_point(messages: Sequence[Message], start: int, keep_turns: int) -> int:
    """Where a fold of ``messages[start:]`` ends so that the last ``keep_turns`` turns
    stay: the index of an assistant message (a turn starts with the model's answer and
    holds its observations), or ``start`` when there are not more turns than that."""
    starts = [i for i in range(start, len(messages)) if isinstance(messages[i], AssistantMessage)]
    if len(starts) <= keep_turns:
        return start
    return starts[len(starts) - keep_turns]


def estimate_tokens(
    messages: Sequence[Message],
    tools: Sequence[ToolSchema] = (),
    count: TokenCounter | None = None,
) -> int:
    """The input tokens ``messages`` (and ``tools``' schemas) take: their texts'
    tokens by ``count`` (None: four ASCII characters a token, one a character of other
    scripts), plus :data:`TOKENS_PER_MESSAGE` a message."""
    texts = [text for m in messages for text in _texts(m)]
    texts += [text for t in tools for text in (t.name, t.description, json.dumps(t.parameters))]
    return _measure(texts, count) + TOKENS_PER_MESSAGE * len(messages)


def _measure(texts: Sequence[str], count: TokenCounter | None) -> int:
    """The tokens of ``texts``, by ``count`` or the estimate (which rounds once)."""
    if count is None:
        return math.ceil(sum(quarter_tokens(t) for t in texts) / 4)
    return sum(count(t) for t in texts if t)


def _texts(message: Message) -> Iterator[str]:
    if isinstance(message, AssistantMessage):
        yield message.content or ""
        yield message.reasoning or ""
        for call in message.tool_calls:
            yield call.name
            yield call.arguments
    else:
        yield message.content


def newest_bare(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The newest group of ``messages`` (an answer and its observations) as a window
    leaves it at the least: every text cut, its calls' names and arguments whole."""
    groups = _groups(messages)
    return tuple(replace(m, content="") for m in groups[-1]) if groups else ()


def _groups(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """Split into groups that must stay together: an assistant turn, its observations
    and what the loop said of it (a user message after it: the wrap-up's prompt, a
    nudge, an output schema's or a guard's correction), which means nothing without
    it. So the newest group, always kept, is the newest turn, its results included."""
    groups: list[list[Message]] = []
    for message in messages:
        first = groups[-1][0] if groups else None
        if isinstance(first, AssistantMessage) and (
            isinstance(message, UserMessage)
            or (isinstance(message, ToolMessage) and bool(first.tool_calls))
        ):
            groups[-1].append(message)
        else:
            groups.append([message])
    return [tuple(g) for g in groups]


def _size(message: Message) -> int:
    if isinstance(message, AssistantMessage):
        return (
            len(message.content or "")
            + len(message.reasoning or "")
            + sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
        )
    return len(message.content)
