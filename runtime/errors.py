"""Every error Honeycomb raises derives from :class:`HoneycombError`.

The tree::

    HoneycombError
    ├── ConfigError                 bad YAML, bad role, unknown tool or model reference
    │   ├── ConfigErrors            several ConfigErrors reported at once
    │   ├── CassetteError           a cassette file of recorded model calls cannot be read
    │   └── RunMismatch             a run_id names a stored run of another task or plan
    ├── ToolError                   a tool could not be defined or called
    │   ├── ToolDefinitionError     @tool on a function whose signature cannot be a schema
    │   ├── DuplicateToolError      two tools with one name in a registry
    │   ├── UnknownToolError        a tool name that is not registered
    │   └── McpServerError          an MCP server could not be started, listed or reached
    │       └── ServerGone          its connection ended (a stdio server's process exited)
    │           └── CallNotSent     a call it never took (its session unknown, no connection)
    ├── ModelError                  a model call failed
    │   ├── ModelHTTPError          the endpoint answered with an HTTP error status
    │   │   ├── RetryAfterPastDeadline  it asked to wait past the retry deadline
    │   │   └── ContextExceeded     it refused a prompt past the context of a call
    │   ├── ModelConnectionError    the endpoint could not be reached
    │   ├── ModelTimeout            the endpoint did not answer in time
    │   ├── ModelResponseError      the answer could not be understood
    │   ├── StreamInterrupted       a streamed answer broke off after text was shown
    │   ├── ModelCallError          a model raised an exception of its own (chained)
    │   ├── ModelServerError        a model's server in this process could not start
    │   ├── CassetteMismatch        a replayed call that its cassette did not record
    │   └── ScriptExhausted         a ScriptedModel was asked for more than its script
    ├── AgentError                  a worker's loop could not produce an answer
    │   ├── EmptyResponse           the model kept answering with nothing
    │   ├── AnswerWithheld          the endpoint's content filter withheld part of the answer
    │   ├── MaxTurnsExceeded        told to answer after max_turns, it called tools again
    │   ├── OutputValidationError   the final answer kept failing its output schema
    │   ├── OutputCutOff            an answer ended at its output limit with nothing usable
    │   ├── ContextBudgetTooSmall   a compaction budget cannot hold the next request
    │   ├── RunawayLoop             the model kept repeating the same tool calls
    │   ├── OutcomeUnknown          a side effect's outcome was lost in a crash
    │   └── NotStarted              a nested worker to continue could not start (its MCP tools)
    ├── BudgetExceeded              a run went past a shared budget
    ├── PlanError                   a plan is invalid (unknown role, cycle, ...)
    ├── StoreError                  the run store could not be read or written
    │   └── RunBusy                 another process carries the run on (it holds the lease)
    ├── MemoryStoreError            a memory file could not be opened, read or written
    │   └── MemoryFeatureMissing    SQLite lacks FTS5, or sqlite-vec is not installed
    ├── RunFailed                   a run ended without an answer (failure policy, aggregator)
    ├── SessionError                a session cannot take a message (its last turn did not finish)
    │   └── SessionBusy             the session is answering another message
    ├── StreamBusy                  a second task asked a run's stream for its next event
    ├── GuardrailTripped            a guard refused a subtask's input, a worker's or a run's answer
    ├── ApprovalError               a decision on a call waiting for approval was refused
    │   └── AlreadyDecided          the call was decided already: the first decision stands
    ├── UnsupportedEventLoop        awaited under another async library than asyncio
    └── EventLoopConflict           used from a second event loop while the first runs

A model's exception always ends its call as a failure, never as a crash: a
:class:`HoneycombError` as itself, anything else as a :class:`ModelCallError` with the
original chained; cancellation always propagates.

A tool call that fails or runs past its timeout is not an error raised: it becomes
an observation the model reads (``Error: tool 'x' timed out after 5s ...``) and the
loop goes on.

Control signals are not failures and live apart from the tree: :class:`ModelRetry` is
raised by a tool to send a message back to the model ("try again with a smaller
date range") and never counts as a crash; ``ApprovalNeeded``
(:mod:`runtime.tools.approvals`) pauses a worker whose calls wait for a person.

Third-party errors (``openai.*``, ``pydantic.ValidationError``, ``yaml.YAMLError``)
are translated where they enter and chained with ``raise ... from exc``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "AgentError",
    "AlreadyDecided",
    "AnswerWithheld",
    "ApprovalError",
    "BudgetExceeded",
    "CallNotSent",
    "CassetteError",
    "CassetteMismatch",
    "ConfigError",
    "ConfigErrors",
    "ContextBudgetTooSmall",
    "ContextExceeded",
    "DuplicateToolError",
    "EmptyResponse",
    "EventLoopConflict",
    "GuardrailTripped",
    "HoneycombError",
    "MaxTurnsExceeded",
    "McpServerError",
    "MemoryFeatureMissing",
    "MemoryStoreError",
    "ModelCallError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelRetry",
    "ModelServerError",
    "ModelTimeout",
    "NotStarted",
    "OutcomeUnknown",
    "OutputCutOff",
    "OutputValidationError",
    "PlanError",
    "RetryAfterPastDeadline",
    "RunBusy",
    "RunFailed",
    "RunMismatch",
    "RunawayLoop",
    "ScriptExhausted",
    "ServerGone",
    "SessionBusy",
    "SessionError",
    "StoreError",
    "StreamBusy",
    "StreamInterrupted",
    "ToolDefinitionError",
    "ToolError",
    "UnknownToolError",
    "UnsupportedEventLoop",
    "did_you_mean",
    "kind_of",
]


class HoneycombError(Exception):
    """Root of every error Honeycomb raises.

    An error pickles as its class, message and fields, and is made again from them
    without calling its ``__init__`` (which takes its fields, not its message), so it
    crosses to another process (from a Ray actor) as itself.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return _unpickled, (type(self), self.args), self.__dict__


def _unpickled(cls: type[HoneycombError], args: tuple[Any, ...]) -> HoneycombError:
    error = cls.__new__(cls, *args)
    error.args = args
    return error


# --- configuration -----------------------------------------------------------------


class ConfigError(HoneycombError):
    """A configuration value is wrong.

    Attributes:
        message: What is wrong and how to fix it.
        file: The file it came from, if any.
        line: 1-based line in ``file``, if known.
        column: 1-based column in ``file``, if known.
        field: Dotted path of the offending field (``roles.researcher.tools[1]``).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        field = f"{self.field}: " if self.field else ""
        return f"{where}{field}{self.message}"


class ConfigErrors(ConfigError):
    """Several configuration errors, reported together so all can be fixed at once."""

    def __init__(self, errors: Sequence[ConfigError]) -> None:
        self.errors = tuple(errors)
        count = len(self.errors)
        header = f"{count} error{'s' if count != 1 else ''} in configuration"
        body = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{header}:\n{body}")

    def _render(self) -> str:
        return self.message


class CassetteError(ConfigError):
    """A cassette file (recorded model calls, to replay) cannot be read: it is
    missing, is not a cassette, or a line of it is not what a cassette holds. The
    message names the file and, when one is at fault, the line."""


# --- tools ---------------------------------------------------------------------------


class ToolError(HoneycombError):
    """A tool could not be defined, registered or called."""


class ToolDefinitionError(ToolError):
    """A function cannot become a tool (for example a parameter without a type)."""

    def __init__(self, tool_name: str, reason: str) -> None:
        self.tool_name = tool_name
        self.reason = reason
        super().__init__(f"cannot make tool {tool_name!r}: {reason}")


class DuplicateToolError(ToolError):
    """Two different tools were registered under one name."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        super().__init__(f"a tool named {tool_name!r} is already registered")


class UnknownToolError(ToolError):
    """A tool name that is not registered."""

    def __init__(self, tool_name: str, available: Sequence[str]) -> None:
        self.tool_name = tool_name
        self.available = tuple(available)
        listed = ", ".join(self.available) if self.available else "none"
        super().__init__(f"unknown tool {tool_name!r}; available tools: {listed}")


class McpServerError(ToolError):
    """An MCP server could not be started, could not list its tools, or went away.

    Attributes:
        server: The server's name.
        reason: What happened (the end of what the server wrote to stderr, when it
            said why).
    """

    def __init__(self, server: str, reason: str) -> None:
        self.server = server
        self.reason = reason
        super().__init__(f"MCP server {server!r} {reason}")


class ServerGone(McpServerError):
    """An MCP server's connection ended (a stdio server's process exited)."""


class CallNotSent(ServerGone):
    """A streamable-HTTP MCP server never took a call, so did not run it: it answered
    it with HTTP 404 in its session, which it no longer knows (it restarted, or ended
    it; MCP has the client start a new session), or it could not be connected to."""


# --- models --------------------------------------------------------------------------


class ModelError(HoneycombError):
    """A model call failed.

    Attributes:
        retryable: Whether trying the same request again may succeed.
        retry_after: Seconds the endpoint asked us to wait before retrying, if it said.
        spent: What the call spent (a :class:`~runtime.messages.Usage`), as its run's
            budget counted it, where the one who made it says so (a judge's call,
            whose error its guard's event reports): an answer it could not use, or the
            attempts its timeout cut off (None: not said).
    """

    retryable: bool = False
    retry_after: float | None = None
    spent: Any = None  # (a Usage: messages are above errors)


class ModelHTTPError(ModelError):
    """The endpoint answered with an HTTP error status.

    Attributes:
        hint: What to change, when the status says more than its body (a 404 for a
            path the server does not serve: the model's ``base_url``).
    """

    RETRYABLE_STATUSES = frozenset({408, 409, 429})

    def __init__(
        self,
        status: int,
        body: Any = None,
        *,
        retry_after: float | None = None,
        model: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.retry_after = retry_after
        self.model = model
        self.hint = hint
        self.retryable = status in self.RETRYABLE_STATUSES or status >= 500
        on = f" from model {model!r}" if model else ""
        page = _page_text(body)
        if page is not None and hint:  # what to change first, then the page in a few words
            said = f"{hint} (it answered a page: {_short(page, 160)})"
        elif page is not None:
            said = f"it answered a page: {_short(page, 160)}"
        else:
            said = _short(body) + (f" ({hint})" if hint else "")
        super().__init__(f"HTTP {status}{on}: {said}")


class RetryAfterPastDeadline(ModelHTTPError):
    """The endpoint asked to wait (``Retry-After``), or the rate limiter would hold the
    retry (its cool-down after a 429, its pace), longer than the retry deadline has
    left, so the call gave up at once instead of sitting out a wait that could not end
    in time. The HTTP error it answered is its cause.

    Attributes:
        deadline_left_s: Seconds the deadline had left when it gave up.
        attempts: Attempts made, the last one included.
        wait_s: The wait the retry would have made, in seconds.
        asked_by: Where that wait comes from, in words.
        deadline: Which deadline, in words: the retry policy's (``the retry
            deadline``), or the run's wall-time budget's when that ends sooner.
    """

    def __init__(
        self,
        last: ModelHTTPError,
        *,
        deadline_left_s: float,
        attempts: int,
        wait_s: float | None = None,
        asked_by: str = "the endpoint's Retry-After",
        deadline: str = "the retry deadline",
    ) -> None:
        self.deadline_left_s = deadline_left_s
        self.attempts = attempts
        self.wait_s = wait_s if wait_s is not None else last.retry_after or 0.0
        self.asked_by = asked_by
        self.deadline = deadline
        super().__init__(last.status, last.body, retry_after=last.retry_after, model=last.model)
        self.retryable = False  # it was retryable; the deadline says no more
        self.args = (
            f"gave up after {attempts} attempt{'s' if attempts != 1 else ''}: {asked_by} "
            f"asked to wait {self.wait_s:.3g}s, {deadline_left_s:.1f}s of {deadline} "
            f"left; {self.args[0]}",
        )


class ContextExceeded(ModelHTTPError):
    """The server refused a prompt past the context of a call (a 400): the error, and
    its :attr:`hint`, say which setting to raise, and to what
    (:mod:`runtime.models.context_refusal`). The server's body is kept as :attr:`body`.

    Attributes:
        prompt_tokens: The prompt's tokens, as the server counted them.
        context_tokens: The tokens a call may hold there, its prompt and answer together.
        answer_tokens: The answer the call asked room for (its output limit).
    """

    def __init__(
        self,
        body: Any,
        *,
        prompt_tokens: int,
        context_tokens: int,
        answer_tokens: int,
        hint: str,
        model: str | None = None,
    ) -> None:
        super().__init__(400, body, model=model, hint=hint)
        self.prompt_tokens = prompt_tokens
        self.context_tokens = context_tokens
        self.answer_tokens = answer_tokens
        on = f" from model {model!r}" if model else ""
        self.args = (f"HTTP 400{on}: {hint}",)  # what to set, whole, not the body cut short


class ModelConnectionError(ModelError):
    """The endpoint could not be reached, or its answer broke off.

    Attributes:
        reason: What happened, in words.
        base_url: The endpoint, if known.
        model: The model asked, if known.
    """

    retryable = True

    def __init__(
        self, message: str, *, base_url: str | None = None, model: str | None = None
    ) -> None:
        self.reason = message
        self.base_url = base_url
        self.model = model
        at = f" ({base_url})" if base_url else ""
        of = f" of model {model!r}" if model else ""
        super().__init__(f"cannot reach the model endpoint{at}{of}: {message}")


class ModelTimeout(ModelError):
    """The endpoint did not answer within the request's timeout.

    Attributes:
        timeout_s: The time limit, in seconds (None: not known).
        model: The model that did not answer in time, if known.
        limit: Which limit it was, where it is set (``"the role's model_timeout"``).
    """

    retryable = True

    def __init__(
        self, timeout_s: float | None, *, model: str | None = None, limit: str | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.model = model
        self.limit = limit
        after = f" after {timeout_s:g}s" if timeout_s is not None else ""
        named = [f"model {model!r}"] if model else []
        named += [f"raise {limit} if it needs longer"] if limit else []
        said = f" ({'; '.join(named)})" if named else ""
        super().__init__(f"the model call timed out{after}{said}")


class ModelResponseError(ModelError):
    """The model's answer could not be understood (no choices, bad structure).

    A body that is not JSON at all (empty, an HTML error page, cut off) is a proxy's
    or a connection's fault, not the model's: that one is ``retryable``.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        self.retryable = retryable
        super().__init__(message)


class StreamInterrupted(ModelError):
    """A streamed answer broke off after some of its text was shown. It is not
    retried: whoever listened has seen text that a second attempt would show again,
    differently. The error that cut the stream is its cause.

    Attributes:
        model: The model, as its repr or name shows it.
        shown_chars: Characters of text shown before the stream broke off.
        reason: What cut it, ``"Type: message"``.
    """

    def __init__(self, model: str, *, shown_chars: int, reason: str) -> None:
        self.model = model
        self.shown_chars = shown_chars
        self.reason = reason
        super().__init__(
            f"the answer of model {model} broke off after {shown_chars} characters of text "
            f"were shown, so it is not retried: {reason}"
        )


class ModelCallError(ModelError):
    """A model raised an exception that is not a Honeycomb error (a bug in the model
    or in code it calls); the original is chained as ``__cause__``.

    Attributes:
        model: The model, as its repr shows it.
        error_type: The original exception's type name (``ValueError``).
    """

    def __init__(self, model: object, error: BaseException) -> None:
        self.model = repr(model)
        self.error_type = type(error).__name__
        super().__init__(f"model {self.model} raised {self.error_type}: {_short(error)}")


class ModelServerError(ModelError):
    """A model served in this process (llama.cpp, ``provider: llama``) could not be
    loaded or started, or was used while stopped.

    Attributes:
        path: The model's file.
        reason: What happened.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"model {path} {reason}")


class CassetteMismatch(ModelError):
    """A replayed model call (or a memory's embeddings call, or a tool call's
    decision) asked what its cassette did not record.

    Attributes:
        file: The cassette.
        model: The model's name (as the run knows it), the embeddings', or the tool
            whose call asked for a decision.
        worker: The worker that asked (None: not known).
        case: The case of an eval that asked (None: not in one).
        difference: How the request differs from the nearest recorded one.
        kind: ``model``, ``embeddings`` for a memory's embeddings call, or
            ``decision`` for a decision on a call that needs approval.
    """

    def __init__(
        self,
        file: str,
        model: str,
        difference: str,
        *,
        worker: str | None = None,
        case: str | None = None,
        kind: str = "model",
    ) -> None:
        self.file = file
        self.model = model
        self.worker = worker
        self.case = case
        self.difference = difference
        self.kind = kind
        who = ", ".join(
            f"{what} {name!r}" for what, name in (("case", case), ("worker", worker)) if name
        )
        what = f"a decision on a call of tool {model!r}" if kind == "decision" else None
        super().__init__(
            f"{file}: {what or f'a call of {kind} {model!r}'}{f' ({who})' if who else ''} "
            f"that the cassette did not record: {difference}; record it again if the change "
            "is meant"
        )


class ScriptExhausted(ModelError):
    """A :class:`~runtime.testing.ScriptedModel` was called more times than scripted."""

    def __init__(self, key: str | None, calls: int) -> None:
        self.key = key
        self.calls = calls
        which = f" for conversation {key!r}" if key is not None else ""
        super().__init__(f"the script{which} has no response left for call {calls}")


# --- agents, budgets, plans ----------------------------------------------------------


class AgentError(HoneycombError):
    """A worker's loop ended without a usable answer."""


class EmptyResponse(AgentError):
    """The model answered with neither text nor tool calls, even after a nudge (or to
    the wrap-up call after ``max_turns``, which gets no nudge; to a runaway loop's
    wrap-up call, it is :class:`RunawayLoop`).

    Attributes:
        turn: The turn of the empty answer.
        wrap_up: Whether it answered the wrap-up call.
        finish_reason: Why the endpoint said the answer ended (``content_filter``: its
            filter withheld it), if it gave a reason other than ``stop``.
    """

    def __init__(
        self, turn: int, *, wrap_up: bool = False, finish_reason: str | None = None
    ) -> None:
        self.turn = turn
        self.wrap_up = wrap_up
        self.finish_reason = finish_reason if finish_reason not in (None, "", "stop") else None
        when = "to the wrap-up call" if wrap_up else "twice, the second time"
        why = ""
        if self.finish_reason == "content_filter":
            why = " (finish_reason 'content_filter': the endpoint's content filter withheld it)"
        elif self.finish_reason is not None:
            why = f" (finish_reason {self.finish_reason!r})"
        super().__init__(f"the model returned an empty response {when} at turn {turn}{why}")


class AnswerWithheld(AgentError):
    """The endpoint's content filter withheld the answer after some of its text
    (``finish_reason: content_filter``): what came is not taken for the answer (it ends
    where the filter stopped it), and the worker fails.

    Attributes:
        turn: The turn of the answer.
        shown_chars: How many characters of it came before the filter stopped it.
    """

    def __init__(self, turn: int, shown_chars: int) -> None:
        self.turn = turn
        self.shown_chars = shown_chars
        super().__init__(
            f"the endpoint's content filter withheld the answer at turn {turn} after "
            f"{shown_chars} characters of it (finish_reason 'content_filter'): what came "
            "is not taken for the whole answer"
        )


class MaxTurnsExceeded(AgentError):
    """The model used all its turns, was told to give its final answer from what it
    had, and asked for tools again instead (with no text to keep as the answer).

    Attributes:
        max_turns: The role's ``max_turns``.
        tool_names: The tools it asked for in its wrap-up answer.
    """

    def __init__(self, max_turns: int, tool_names: Sequence[str]) -> None:
        self.max_turns = max_turns
        self.tool_names = tuple(tool_names)
        super().__init__(
            f"the model used all {max_turns} turns (max_turns) and, told to give its final "
            f"answer, asked for tools again ({', '.join(self.tool_names)}); raise the role's "
            "max_turns or ask it to answer sooner"
        )


class OutputValidationError(AgentError):
    """The final answer did not match the output schema after all retries."""

    def __init__(self, schema_name: str, attempts: int, detail: str) -> None:
        self.schema_name = schema_name
        self.attempts = attempts
        self.detail = detail
        super().__init__(
            f"the final answer failed the {schema_name} schema ({attempts} answers not "
            f"accepted); last error: {detail}"
        )


class OutputCutOff(AgentError):
    """The model's answer ended at its output limit (``finish_reason: length``) with
    nothing to use: no text and no tool call, as a reasoning model that spends the
    whole limit thinking gives. Asking again under the same limit would end the same.

    Attributes:
        turn: The turn of the answer.
        limit: The output limit it was sent (None: the endpoint's own), or where a lower
            one of the model's own stopped it (``own``).
        capped: The limit was what the run's ``budgets.cost_per_call`` left the call.
        own: A limit of the model's own stopped it, below the one it was sent.
        context: Where the prompt and the answer filled the model's context, the tokens
            one call of it holds (a local model's); None: they did not.
    """

    def __init__(
        self,
        turn: int,
        limit: int | None,
        *,
        capped: bool = False,
        own: bool = False,
        context: int | None = None,
    ) -> None:
        self.turn = turn
        self.limit = limit
        self.capped = capped
        self.own = own
        self.context = context
        at = f"its output limit of {limit} tokens" if limit is not None else "its output limit"
        if context is not None:
            at = f"the end of its model's context ({context} tokens, its prompt and the answer)"
            fix = (
                "give the model a larger context (a llama model's context:, --context of "
                "honeycomb's --model local, an endpoint's on its server), or ask for less"
            )
        elif own:
            fix = (
                "a limit of the model's own applied, below the request's: raise the max_tokens "
                "in its settings (or its server's)"
            )
        elif capped:
            fix = (
                "the limit budgets.cost_per_call left the call at its model's price: raise the cap"
            )
        else:
            fix = "give the role a higher max_output_tokens (or the policy's for every role)"
        super().__init__(
            f"the model's answer at turn {turn} was cut off at {at} before any text or tool "
            f"call: {fix}"
        )


class ContextBudgetTooSmall(AgentError):
    """A compacting worker's context budget cannot hold what its next request must
    send: the system prompt and the task, the tools, the summary (if any) and its
    newest turn's tool calls, with every text of that turn cut. No request over the
    budget is sent (it would reach the model with its newest results cut away, or be
    refused for its length).

    Attributes:
        worker: The worker ('': a loop of no worker's).
        budget: The role's ``compaction.budget_tokens``.
        needed: The tokens that request takes at the least (estimated, or by the
            role's token counter).
        parts: What those tokens are, each with its share (``tools`` ...).
    """

    def __init__(
        self, worker: str, budget: int, needed: int, parts: Sequence[tuple[str, int]]
    ) -> None:
        self.worker = worker
        self.budget = budget
        self.needed = needed
        self.parts = tuple(parts)
        shares = ", ".join(f"{what} {tokens:,}" for what, tokens in self.parts if tokens)
        whose = f"worker {worker}'s" if worker else "the"
        super().__init__(
            f"{whose} context budget of {budget:,} tokens (compaction.budget_tokens) "
            f"cannot hold its next request, which takes {needed:,} at the least ({shares}): "
            f"raise the role's budget_tokens well above {needed:,}, or give it fewer tools"
        )


class RunawayLoop(AgentError):
    """The model asked for the same tool calls, with the same arguments, turn after turn
    (``max_repeats`` turns of nothing but repeats), was told to give its final answer
    from what it had, and asked for tools again (or gave nothing).

    Attributes:
        tool_name: The tool it kept calling.
        turns: Consecutive turns made of nothing but that repeat.
    """

    def __init__(self, tool_name: str, turns: int) -> None:
        self.tool_name = tool_name
        self.turns = turns
        super().__init__(
            f"stopped a runaway loop: the model called {tool_name!r} with the same "
            f"arguments {turns} turns in a row, although it was told the result each time"
        )


class OutcomeUnknown(AgentError):
    """A side-effecting call was running when its run stopped (a crash), so whether it
    took effect is unknown; the run's policy says to fail rather than tell the model.

    Attributes:
        tool_name: The tool that was called.
        call_id: The call's id.
    """

    def __init__(self, tool_name: str, call_id: str) -> None:
        self.tool_name = tool_name
        self.call_id = call_id
        super().__init__(
            f"the outcome of {tool_name!r} (call {call_id}) is unknown: the run stopped "
            "while it was running; check its effect by hand (policy on_unknown_outcome=fail)"
        )


class NotStarted(AgentError):
    """A nested worker (an agent tool's) that an earlier life of its run left paused
    could not start again, for want of what it needs (its MCP tools: a server down, a
    tool it no longer lists). Its caller stops with it, unfinished: the run keeps no
    result for it, and a resume, once the tools can be had, continues both from where
    they were (its approved calls run then). A fresh nested worker that cannot start
    is an error its caller's model reads, as any tool's.

    Attributes:
        worker: The nested worker.
        reason: Why it could not start.
    """

    def __init__(self, worker: str, reason: str) -> None:
        self.worker = worker
        self.reason = reason
        super().__init__(f"the nested worker {worker} could not start again: {reason}")


class BudgetExceeded(HoneycombError):
    """A run went past one of its shared budgets.

    Attributes:
        limit: Which budget (``model_calls``, ``total_tokens``, ``wall_time_s`` ...).
        allowed: The configured limit.
        used: What had been used when the check failed (for ``cost_per_call``, what
            the refused call's prompt alone would cost).
        requested: What the refused step asked for on top of ``used`` (a turn's tool
            calls); None when it was refused for what was used alone.
        running: Of ``used``, the tool calls of turns still under way: counted as their
            turn began, and given back if the run's end cuts their turn off (its
            worker never reads their answers; a resumed run makes them again), so a
            partial result's usage may count fewer.
        partial: Whatever results the run had when it stopped (set by the Executor).
        in_flight: The model calls under way when the wall-time budget ran out (who,
            for how long, the tokens they had streamed), which it cut off.
        reached_by: What spent the last of the budget, when it is known and is not
            what was refused (a session's summary call, before the turn's planner's
            call it leaves none for); None: not known.
        setting: Where the limit is set, as its writer wrote it, which the message
            names (``policy.budgets.total_tokens at hive.yaml:7``,
            ``Budgets(total_tokens=100)``; set by the Executor, :meth:`set_by`); None:
            not known.
    """

    def __init__(
        self,
        limit: str,
        allowed: float,
        used: float,
        in_flight: Sequence[Any] = (),
        *,
        requested: float | None = None,
        running: float = 0,
        reached_by: str | None = None,
    ) -> None:
        self.limit = limit
        self.allowed = allowed
        self.used = used
        self.requested = requested
        self.running = running
        self.in_flight = tuple(in_flight)
        self.reached_by = reached_by
        self.setting: str | None = None
        self.partial: Any = None
        super().__init__(self._message())

    def set_by(self, setting: str) -> None:
        """Name where the limit is set (:attr:`setting`), in the message too: what to
        raise, where the person who set it wrote it."""
        self.setting = setting
        self.args = (self._message(),)

    def _message(self) -> str:
        # "used 6 of 7 allowed" alone reads as within the limit: say what was asked.
        requested, running = self.requested, self.running
        asked = f", and a turn asked for {_figure(requested)} more" if requested is not None else ""
        under_way = f" ({_figure(running)} in turns under way)" if running else ""
        # The call refused is not always what spent the budget: say what did.
        by = f", reached by {self.reached_by}" if self.reached_by is not None else ""
        in_flight = self.in_flight
        cut = f"; cut off in flight: {'; '.join(map(str, in_flight))}" if in_flight else ""
        allowed, used = _figure(self.allowed), _figure(self.used)
        # Where the limit is set, as its writer wrote it: what to raise, and where.
        where = self.setting
        if self.limit == "cost_per_call":  # nothing was used: a call was refused for its prompt
            set_by = f", set by {where}" if where is not None else ""
            message = (
                f"budget exceeded: cost_per_call allows {allowed} a call, and the prompt of "
                f"the next call alone would cost {used} (raise cost_per_call{set_by}, or keep "
                "the context smaller: compaction)"
            )
        else:
            set_by = f" by {where}" if where is not None else ""
            message = f"budget exceeded: {self.limit} used {used} of {allowed} allowed{set_by}"
        return f"{message}{under_way}{by}{asked}{cut}"


def _figure(number: float) -> str:
    """``number`` in full, as a person wrote a budget and reads it: a count as an
    integer (not ``2e+06``), dollars and seconds to the millionth they are counted in."""
    if float(number).is_integer():
        return str(int(number))
    shown = f"{number:.6f}".rstrip("0").rstrip(".")
    return shown if shown.lstrip("-") != "0" else f"{number:g}"  # less than a millionth


class PlanError(HoneycombError):
    """A plan is invalid and the planner could not repair it.

    Attributes:
        problems: Every problem found, each naming the subtask and what is wrong.
        partial: The run's partial result, when subtasks of the run had finished (a
            resumed run's plan that no longer fits its roles; set by the Executor):
            what they did. None when no subtask had run.
    """

    def __init__(self, problems: Sequence[str], *, attempts: int = 1) -> None:
        self.problems = tuple(problems)
        self.attempts = attempts
        self.partial: Any = None
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        super().__init__(f"invalid plan{tries}: " + "; ".join(self.problems))


class StoreError(HoneycombError):
    """The run store could not be opened, read or written, or holds no such run.

    Attributes:
        path: The store's file.
    """

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class RunMismatch(ConfigError):
    """A ``run_id`` names a stored run that is not the one asked for: it was started
    with another task, or ran another plan than the ``subtasks`` given. Nothing was run
    or kept: go on with it with its own task (``subtasks`` left out, or its own), or
    use a new ``run_id``.

    Attributes:
        run_id: The run.
        task: The stored run's task (its secrets masked) when the task given is
            another; None when the plan is what differs.
    """

    def __init__(self, run_id: str, message: str, *, task: str | None = None) -> None:
        self.run_id = run_id
        self.task = task
        super().__init__(message)


class RunBusy(StoreError):
    """Another process carries the run on: it holds the run's lease in the store, or
    took it over from this one.

    Attributes:
        run_id: The run.
        host: The host of the process that holds the lease (None: nobody now).
        pid: That process's id (None: nobody now).
        heartbeat_age_s: Seconds since that process last renewed the lease.
        expired: The lease expired (its heartbeat stopped): ``steal=True`` (``honeycomb
            resume --force``) takes it. A live lease is never taken over.
        taken_over: This process held the lease and lost it to another: it stops
            writing to the run (its side-effecting calls fail rather than run).
        here: The lease is held by this very process: another run of the same id is
            under way in it (two ``run`` or ``resume`` calls of one run at once).
    """

    def __init__(
        self,
        run_id: str,
        *,
        path: str,
        host: str | None,
        pid: int | None,
        heartbeat_age_s: float | None = None,
        expired: bool = False,
        taken_over: bool = False,
        here: bool = False,
    ) -> None:
        self.run_id = run_id
        self.host = host
        self.pid = pid
        self.heartbeat_age_s = heartbeat_age_s
        self.expired = expired
        self.taken_over = taken_over
        self.here = here
        owner = f"pid {pid} on host {host!r}"
        age = f"{heartbeat_age_s:.1f}s ago" if heartbeat_age_s is not None else "never"
        if taken_over:
            by = f"by {owner}" if pid is not None else "by another process, since ended"
            message = (
                f"run {run_id!r} was taken over {by}: this process no longer carries it "
                "on and writes nothing more to it"
            )
        elif expired:
            message = (
                f"run {run_id!r} is leased to {owner}, whose lease expired (last heartbeat "
                f"{age}): if that process is gone, take the run over with steal=True "
                "(honeycomb resume --force)"
            )
        elif here:
            message = (
                f"run {run_id!r} is being carried on by this process (pid {pid}): another "
                "call of it (run or resume) is under way here, and a live run is not taken "
                "over: await that call, or give this one another run_id"
            )
        else:
            message = (
                f"run {run_id!r} is being carried on by {owner} (last heartbeat {age}); a "
                "live run is not taken over: wait for it to end, or stop that process"
            )
        super().__init__(message, path=path)


class SessionError(HoneycombError):
    """A session cannot take a message now: its last turn did not finish (its run
    was interrupted, or waits for approvals). ``session.resume()`` continues that
    turn; ``session.pop()`` drops it.

    Attributes:
        session_id: The session.
        turn: The turn in the way (its number, from 1).
        run_id: That turn's run.
    """

    def __init__(self, message: str, *, session_id: str, turn: int, run_id: str) -> None:
        self.session_id = session_id
        self.turn = turn
        self.run_id = run_id
        super().__init__(message)


class SessionBusy(SessionError):
    """The session is answering another message (in this process or another), and the
    caller chose to be refused rather than wait (``busy="refuse"``); or another
    process took the turn this message was to be.
    """


class StreamBusy(HoneycombError, RuntimeError):
    """A task asked a run's stream (``Executor.stream``, ``Session.stream``) for its
    next event while another task waits for one: a stream has one reader, each event
    goes to it once. To give every event to several listeners, read the stream in one
    task and hand each event to each of them (an ``asyncio.Queue`` each), or give the
    run an ``on_event`` handler per listener.
    """

    def __init__(self) -> None:
        super().__init__(
            "another task is reading this stream: a stream has one reader at a time "
            "(read it in one task and pass each event on to the others, e.g. through an "
            "asyncio.Queue each)"
        )


class MemoryStoreError(HoneycombError):
    """A memory file could not be opened, read or written, or is not a memory file.

    Attributes:
        path: The memory's file.
    """

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")


class MemoryFeatureMissing(MemoryStoreError):
    """What a memory needs is not there: SQLite's FTS5 full-text search (every memory),
    or sqlite-vec and an SQLite that loads extensions (semantic search).

    Attributes:
        feature: ``FTS5`` or ``sqlite-vec``.
        install: What to install to have it.
    """

    def __init__(self, feature: str, why: str, install: str, *, path: str) -> None:
        self.feature = feature
        self.install = install
        super().__init__(f"{why}; {install}", path=path)


class RunFailed(HoneycombError):
    """A run ended without an answer: its failure policy gave up, or aggregation failed.

    Attributes:
        reason: What ended it.
        partial: The run's partial result (set by the Executor): what finished, and
            every failure with its error.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.partial: Any = None
        super().__init__(reason)


class GuardrailTripped(HoneycombError):
    """A guard refused what it checks: a subtask's instruction (the worker fails), a
    worker's answer after its retries (the worker fails), or a run's task or final
    answer (the run stops).

    Attributes:
        guard: The guard's name (its import path, function name or judge role).
        kind: ``input``, ``output`` or ``arguments``.
        reason: What the guard said.
        attempts: Answers not accepted, the last refused by the guard (output guards;
            1 for the others): those before may have failed an output schema.
        broken: The guard raised (a judge whose model could not be reached ...): it
            said nothing of what it checks, so another answer would not pass it.
        partial: The run's partial result, when the guard stopped a run (set by the
            Executor).
    """

    def __init__(
        self, guard: str, kind: str, reason: str, *, attempts: int = 1, broken: bool = False
    ) -> None:
        self.guard = guard
        self.kind = kind
        self.reason = reason
        self.attempts = attempts
        self.broken = broken
        self.partial: Any = None
        # The answers before the last may have failed an output schema (they share
        # output_retries): not all of them were this guard's to refuse.
        tries = f" ({attempts} answers not accepted)" if attempts > 1 else ""
        super().__init__(f"{kind} guard {guard!r} tripped{tries}: {reason}")


class UnsupportedEventLoop(HoneycombError):
    """Honeycomb runs on asyncio (uvloop included) and was awaited under another async
    library (trio, curio ...).

    Attributes:
        what: What was awaited (``Executor.run``, ``AgentLoop.run`` ...).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(
            f"{what} runs on asyncio (or uvloop), but no asyncio event loop is running: "
            "run it with asyncio.run(), or from an asyncio application (under anyio, use "
            "its asyncio backend)"
        )


class EventLoopConflict(HoneycombError, RuntimeError):
    """What serves one event loop at a time (an Executor, with its sessions' locks,
    its slots and the locks of ``exclusive`` tools; a model's rate limiter) was used
    from a second event loop, another thread's, while the first still runs. A loop
    that has ended gives way to the next (consecutive ``asyncio.run()`` calls work).

    Attributes:
        what: What was used (``this Executor``, ``an AdaptiveLimiter`` ...).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(
            f"{what} is in use by another event loop, which still runs (in another "
            "thread): it serves one event loop at a time. Make an Executor, and its "
            "models, for each thread that runs an event loop of its own, or hand the "
            "work to the loop that uses it (asyncio.run_coroutine_threadsafe)"
        )


# --- control signals -----------------------------------------------------------------


class ApprovalError(HoneycombError):
    """A decision on a call waiting for approval could not be recorded.

    Attributes:
        run_id: The run.
        call_id: The call.
        reason: Why.
    """

    def __init__(self, run_id: str, call_id: str, reason: str) -> None:
        self.run_id = run_id
        self.call_id = call_id
        self.reason = reason
        super().__init__(f"cannot decide on call {call_id!r} of run {run_id!r}: {reason}")


class AlreadyDecided(ApprovalError):
    """The call was decided already, by someone else or earlier: a decision is final,
    and the first one recorded stands.

    Attributes:
        approved: What the decision that stands says.
        decided_by: Who made it (None: not recorded, as in a store of schema 4).
        decided_at: When (``time.time()``).
    """

    def __init__(
        self,
        run_id: str,
        call_id: str,
        *,
        approved: bool,
        decided_by: str | None,
        decided_at: float | None,
    ) -> None:
        self.approved = approved
        self.decided_by = decided_by
        self.decided_at = decided_at
        what = "approved" if approved else "denied"
        if decided_by:
            what += f" by {decided_by}"
        if decided_at is not None:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(decided_at))
            what += f" at {when}"
        super().__init__(run_id, call_id, f"it was decided already ({what})")


class ModelRetry(Exception):
    """Raised by a tool to hand a message back to the model instead of a result.

    The call becomes an error observation carrying ``message``; the loop goes on.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


def _short(body: Any, limit: int = 300) -> str:
    text = str(body) if body is not None else "(no body)"
    return text if len(text) <= limit else text[:limit] + "..."


_HTML = re.compile(r"\s*(<!--.*?-->\s*)*<(!doctype\s+html|html)\b", re.IGNORECASE | re.DOTALL)
_UNSHOWN = re.compile(r"<(head|script|style)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL)


def _page_text(body: Any) -> str | None:
    """The words of ``body`` on one line, when it is an HTML page (a proxy's or a web
    server's error page, for a URL that is not an API's): its body's text, else its
    title; None when it is not a page. Its markup, many lines of it, said nothing."""
    if not isinstance(body, str) or not _HTML.match(body):
        return None
    import html  # loads with the first page answered, not with every program

    title = re.search(r"<title\b[^>]*>(.*?)</title", body, re.IGNORECASE | re.DOTALL)
    text = re.sub(r"<[^>]*>", " ", _UNSHOWN.sub(" ", body))
    words = " ".join(html.unescape(text).split())
    return words or (" ".join(html.unescape(title.group(1)).split()) if title else "(empty)")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` when a choice is close to ``name``, else ``""``."""
    import difflib  # loads with the first misspelt name, not with every program

    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def kind_of(value: Any) -> str:
    """What a value is, for an error, without showing it (it may be a secret): ``a
    list``, ``a number`` ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    return "a list" if isinstance(value, list | tuple) else f"a {type(value).__name__}"
