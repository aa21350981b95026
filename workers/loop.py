"""The agent loop as a step function: ``step(state)`` returns ``Continue``, ``Final`` or
``Failed``; :meth:`AgentLoop.run` is the short driver that loops over it. A step
either thinks (one model call) or acts (the tool calls the model's last answer asked
for, which a state whose last message is such an answer has pending).

A loop ends on a final answer, on a terminal tool's result, or at ``max_turns``, after
which one tool-less call asks the model for its best answer from what it has (an
answer of tool calls alone then is :class:`~runtime.MaxTurnsExceeded`).

With a :class:`~workers.context.Compaction` in its settings, a think step first keeps
the context within the budget (:class:`~workers.compaction.Compactor`): the model is
sent the summary of the oldest turns and the rest, while the state keeps them all.

An answer is final once it matches the output schema (if any) and the output guards
(:mod:`workers.guards`) accept it; one that does not goes back to the model with what
is wrong, up to ``output_retries`` times.

Every call carries the settings' output limit (``max_output_tokens``). An answer that
ends there (``finish_reason: length``) is cut off: a structured one that does not
validate goes back saying so (answer shorter), as any invalid answer; one with no
text and no call at all is :class:`~runtime.OutputCutOff` (the same limit would cut it
again); text alone is the answer, as far as it goes.

A model call that fails ends the loop with ``Failed``, never with an exception: a
:class:`~runtime.HoneycombError` as itself, any other exception the model raises as a
:class:`~runtime.ModelCallError` naming the model and the exception's type, with the
original chained. Cancellation always propagates.

When the tracer's handlers want the text as it is written (``Tracer(text=True)``), a
model that can stream is asked to (``stream``), and each piece of its answer's text is
a :class:`~runtime.events.TextDelta`; otherwise every call is one-shot (``complete``).
A loop with output guards holds a turn's deltas (:class:`~runtime.events.HeldText`)
until the turn's answer is accepted, or is tool calls (which no guard checks), and
drops those of an answer the guards refuse, or that fails.

A :class:`Checkpoint` receives the state as the loop goes, so a run store can resume it
where it stopped: after every step. An answer asking for tool calls is kept (the
checkpoint flushed) before any of them runs, so a resumed loop runs those very calls
(their ids are what a journal of side effects knows, and name the nested workers they
start), not a new answer's, and what the answer cost is never lost with a process.
"""

from __future__ import annotations

import time

import pydantic
from msgspec.structs import replace

from runtime import (
    AssistantMessage,
    Budget,
    BudgetExceeded,
    Dispatcher,
    EmptyResponse,
    GuardrailTripped,
    HoneycombError,
    MaxTurnsExceeded,
    Message,
    Model,
    ModelCallError,
    ModelRequest,
    ModelResponse,
    OutcomeUnknown,
    OutputCutOff,
    OutputSchema,
    OutputValidationError,
    RunawayLoop,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    Tracer,
    Usage,
    UserMessage,
    logs,
)
from runtime.concurrency import require_asyncio
from runtime.events import (
    CallReport,
    HeldText,
    ModelCallFinished,
    ModelCallStarted,
    TextDelta,
    ToolCallsAnswered,
    current_call,
)
from runtime.limits import CallInFlight
from runtime.messages import with_distinct_ids
from runtime.model import TextSink, call_model, request_writer
from runtime.models.checks import check_response
from runtime.tools.approvals import ApprovalNeeded
from workers.compaction import Compactor
from workers.context import ContextWindow, assemble, summary_message
from workers.guards import GuardRunner, refusal_text
from workers.state import (
    Checkpoint,
    Continue,
    Failed,
    Final,
    LoopSettings,
    LoopState,
    Step,
    Waiting,
)

__all__ = ["AgentLoop"]

NUDGE = "Your last reply was empty. Call a tool or give your final answer."
WRAP_UP = (
    "You have used all {turns} turns. Do not call any more tools: give your best final "
    "answer now, from what you have found so far."
)
FIX_OUTPUT = (
    "Your answer does not match the required {schema} schema: {error}\n"
    "Answer again with JSON that matches the schema exactly."
)
CUT_OFF = "it was cut off at the output limit of {limit} tokens before it was complete"
FIX_CUT_OFF = (
    "Your answer was cut off at the output limit of {limit} tokens before it was complete, "
    "so it does not match the required {schema} schema. Answer again, shorter, with JSON "
    "that matches the schema exactly."
)


class AgentLoop:
    """Think, call tools, observe, repeat: one worker's conversation with its model.

    Args:
        model: Answers each turn.
        dispatcher: Runs the tool calls (and holds the tools).
        instructions: The system prompt.
        settings: Turns, output schema, context window, model timeout.
        budget: Shared with the run's other workers; checked before each model call.
        tracer: Receives an event per model call.
        worker: Name used in events and as the conversation key.
        run_id: Run id used in events and in the conversation key.
        checkpoint: Receives the state after each model answer, each turn and each
            compaction.
        summarizer: Writes the summaries of compaction (default: ``model``).
        guards: Its output guards check each answer before it is accepted.
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = (
        "_compactor",
        "_conversation",
        "_head",
        "_output",
        "budget",
        "checkpoint",
        "dispatcher",
        "guards",
        "instructions",
        "model",
        "run_id",
        "settings",
        "tracer",
        "worker",
    )

    def __init__(
        self,
        model: Model,
        dispatcher: Dispatcher,
        *,
        instructions: str = "",
        settings: LoopSettings | None = None,
        budget: Budget | None = None,
        tracer: Tracer | None = None,
        worker: str | None = None,
        run_id: str | None = None,
        checkpoint: Checkpoint | None = None,
        summarizer: Model | None = None,
        guards: GuardRunner | None = None,
    ) -> None:
        self.model = model
        self.dispatcher = dispatcher
        self.instructions = instructions
        self.settings = settings or LoopSettings()
        self.budget = budget
        self.tracer = tracer or Tracer()
        self.worker = worker
        self.run_id = run_id
        self.checkpoint = checkpoint
        self.guards = guards if guards is not None and guards.guards.output else None
        self._conversation = f"{run_id}/{worker}" if run_id else worker
        out = self.settings.output_type
        self._output = OutputSchema.for_model(out) if out is not None else None
        self._head: tuple[str, tuple[Message, ...]] | None = None
        compaction = self.settings.compaction
        self._compactor: Compactor | None = None
        if compaction is not None:
            self._compactor = Compactor(
                compaction,
                summarizer or model,
                budget=budget,
                tracer=self.tracer,
                worker=worker,
                run_id=run_id,
                conversation=self._conversation,
                timeout=self.settings.model_timeout,
                writer=request_writer(model),
            )

    async def run(self, task: str, state: LoopState | None = None) -> Final | Failed | Waiting:
        """Drive :meth:`step` until the loop ends, from the start or from ``state``."""
        require_asyncio("AgentLoop.run")
        current = state if state is not None else LoopState(task=task)
        checkpoint = self.checkpoint
        while True:
            result = await self.step(current)
            if not isinstance(result, Continue):
                return result  # the worker's result is what is kept of a finished loop
            current = result.state
            if checkpoint is not None:
                checkpoint.save(current)
                if current.pending:
                    # An answer is kept before any call it asks for runs: a resumed
                    # loop runs those very calls (under the ids the journal knows, a
                    # nested worker under its name) rather than ask its model again,
                    # and what the answer cost is counted, whenever the process dies.
                    await checkpoint.flush()

    async def step(self, state: LoopState) -> Step:
        """Think or act: one model turn, or, when the model's last answer asked for tool
        calls, those calls (or ``Waiting``, when some wait for a person's approval)."""
        pending = state.pending
        if pending:
            bound = logs.bind(turn=state.turn)  # tools' own logs name the turn
            try:
                observations = await self.dispatcher.dispatch(
                    pending, turn=state.turn, previous=state.previous_calls
                )
            except ApprovalNeeded as paused:  # a control signal: none of the calls ran
                return Waiting(state=state, pending=paused.pending)
            finally:
                logs.unbind(bound)
            return await self._observed(state, pending, observations)
        wrap_up = state.turn >= self.settings.max_turns
        messages = state.messages
        if wrap_up:
            prompt = UserMessage(content=WRAP_UP.format(turns=self.settings.max_turns))
            messages = (*messages, prompt)
        turn = state.turn + 1
        tools = () if wrap_up else self.dispatcher.tools.schemas
        window = self.settings.window
        if self._compactor is not None:
            before = state.compactions
            try:
                state, fitted = await self._compactor.fit(
                    state, self.head(state.task), messages, tools, turn
                )
            except BudgetExceeded as exc:  # a budget stops the summary call as any call
                return Failed(
                    state=replace(state, messages=messages, wrapped_up=wrap_up), error=exc
                )
            if state.compactions != before and self.checkpoint is not None:
                # Saved before the turn's call: a crash during it resumes with the
                # summary (and what it cost), not with another summary call.
                self.checkpoint.save(state)
            if fitted is not None:
                window = window.narrowest(fitted)
        tracing = self.tracer.enabled
        request = None  # until the budget allows the call
        held: HeldText | None = None
        try:
            context, omitted = self._context(state, messages, window)
            request = self._request(context, tools, turn, wrap_up, tracing)
            budget = self.budget
            flight = budget.call_started(self.worker, turn) if budget is not None else None
            started = time.perf_counter() if tracing else 0.0
            try:
                if self.tracer.text:  # someone reads the text as it is written
                    # The text of an answer output guards will check is held until
                    # they pass it (text that a guard refuses never reaches a listener).
                    held = HeldText(self.tracer) if self.guards is not None else None
                    sink = self._text_sink(turn, held or self.tracer, flight)
                    answer = await call_model(self.model, request, sink)
                else:
                    answer = await self.model.complete(request)
            except HoneycombError:
                raise
            except Exception as exc:  # the model's own (cancellation is not an Exception)
                raise ModelCallError(self.model, exc) from exc
            finally:
                if budget is not None and flight is not None:
                    budget.call_ended(flight)
            # What a model returns is user code's: checked here, once, as it arrives.
            response = check_response(answer, self.model)
        except HoneycombError as exc:
            if tracing and request is not None:  # the call was made (and reported started)
                self._emit_finished(turn, started, None, exc)
            return Failed(state=replace(state, messages=messages, wrapped_up=wrap_up), error=exc)
        if self.budget is not None:
            self.budget.charge(response.usage)
        if tracing:
            self._emit_finished(turn, started, response, None)
        # Ids unique in the conversation before anything uses them (the checkpoint,
        # the journal, the observations, the wire).
        message = with_distinct_ids(response.message, messages, turn)
        if wrap_up and message.tool_calls:
            # No tools were offered, so calls cannot be run; keep only the text.
            asked = tuple(c.name for c in message.tool_calls)
            message = AssistantMessage(content=message.content, reasoning=message.reasoning)
            if message.is_empty:  # nothing but calls: it did not answer, it kept going
                state = state.answered(
                    (*messages, message), response.usage, nudged=False, wrapped_up=True
                )
                return Failed(state=state, error=MaxTurnsExceeded(self.settings.max_turns, asked))
        calls = message.tool_calls
        state = state.answered(
            (*messages, message),
            response.usage,
            nudged=state.nudged and not calls,  # a call is a reply: the nudge worked
            wrapped_up=wrap_up,
            # A budget's window may cut texts too: the report then measures less.
            whole=not omitted and window.max_tokens is None,
        )
        if calls:  # the next step runs them (never after the wrap-up: they were dropped)
            if held is not None:  # text beside calls is no answer: no guard checks it
                held.release()
            return Continue(state=state)
        cut = response.finish_reason == "length"
        if message.is_empty:
            if cut:  # the whole limit went on nothing it shows (a reasoning model's thinking)
                limit = self.settings.max_output_tokens
                return Failed(state=state, error=OutputCutOff(state.turn, limit))
            if state.nudged or wrap_up:
                return Failed(
                    state=state, error=EmptyResponse(state.turn, wrap_up=not state.nudged)
                )
            nudge = UserMessage(content=NUDGE)
            return Continue(state=replace(state, messages=(*state.messages, nudge), nudged=True))
        if state.nudged:
            state = replace(state, nudged=False)
        step = await self._finish(state, message.content or "", cut=cut)
        if held is not None and isinstance(step, Final):  # accepted: its text is shown
            held.release()
        return step

    def _request(
        self,
        context: tuple[Message, ...],
        tools: tuple[ToolSchema, ...],
        turn: int,
        wrap_up: bool,
        tracing: bool,
    ) -> ModelRequest:
        """The request for this turn's model call, once the budget allows the call
        (the call is awaited in :meth:`step` itself: a waiting worker's stack is one
        coroutine shorter)."""
        if self.budget is not None:
            self.budget.reserve_model_call()
        request = ModelRequest(
            messages=context,
            tools=tools,
            tool_choice="none" if wrap_up else "auto",
            output=self._output,
            timeout=self.settings.model_timeout,
            conversation=self._conversation,
            max_output_tokens=self.settings.max_output_tokens,
        )
        if tracing:
            self.tracer.emit(ModelCallStarted(worker=self.worker, run_id=self.run_id, turn=turn))
            # The model's retry policy reports each retry to it (until _emit_finished).
            current_call.set(
                CallReport(self.tracer, worker=self.worker, run_id=self.run_id, turn=turn)
            )
        return request

    def _text_sink(self, turn: int, tracer: Tracer, flight: CallInFlight | None) -> TextSink:
        """Where a streamed answer's pieces go: one :class:`TextDelta` each, to
        ``tracer`` (the loop's, or a hold in front of it), counted in ``flight``."""
        emit, worker, run_id = tracer.emit, self.worker, self.run_id
        count = flight.streamed if flight is not None else None

        def sink(text: str) -> None:
            if text:
                if count is not None:
                    count(text)
                emit(TextDelta(worker=worker, run_id=run_id, turn=turn, text=text))

        return sink

    def head(self, task: str) -> tuple[Message, ...]:
        """The system prompt and the task: the first two messages of every turn."""
        cached = self._head
        if cached is None or cached[0] != task:
            first = (
                SystemMessage(content=self.instructions),
                UserMessage(content=task),
            )
            cached = self._head = (task, first)
        return cached[1]

    def _context(
        self, state: LoopState, messages: tuple[Message, ...], window: ContextWindow
    ) -> tuple[tuple[Message, ...], int]:
        """What the model is sent: the head, the summary (if any), then the messages the
        summary does not fold, windowed; and how many the window left out."""
        folded = state.summarized
        summary = summary_message(state.summary, folded) if state.summary else None
        return assemble(self.head(state.task), messages[folded:], window, summary)

    def _emit_finished(
        self, turn: int, started: float, response: ModelResponse | None, exc: HoneycombError | None
    ) -> None:
        usage = response.usage if response is not None else Usage()
        report = current_call.get()
        current_call.set(None)
        finished = ModelCallFinished(
            worker=self.worker,
            run_id=self.run_id,
            turn=turn,
            duration_s=time.perf_counter() - started,
            status="ok" if exc is None else "error",
            model=response.model if response is not None else "",
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=usage.cost,
            tool_calls=len(response.message.tool_calls) if response is not None else 0,
            error=None if exc is None else f"{type(exc).__name__}: {exc}",
            attempts=report.attempts if report is not None else 1,
            retry_wait_s=report.retry_wait_s if report is not None else 0.0,
            reasoning_tokens=usage.reasoning_tokens,
            cached_input_tokens=usage.cached_input_tokens,
        )
        self.tracer.emit(finished)

    async def _observed(
        self, state: LoopState, calls: tuple[ToolCall, ...], observations: tuple[ToolMessage, ...]
    ) -> Step:
        """The state once ``calls`` (the model's last answer's) have their observations:
        the turn is done, and its calls are counted here, and only here (the budget,
        the worker's usage, and the trace, told by :class:`ToolCallsAnswered`)."""
        executed = 0
        for obs in observations:
            if obs.status != "skipped":
                executed += 1
        if self.budget is not None:
            self.budget.charge_tool_calls(executed)
        if self.tracer.enabled:
            answered = ToolCallsAnswered(
                worker=self.worker, run_id=self.run_id, turn=state.turn, calls=executed
            )
            self.tracer.emit(answered)
        state = state.observed(observations, calls, executed)
        if state.repeats >= self.settings.max_repeats:
            return Failed(state=state, error=RunawayLoop(calls[0].name, state.repeats + 1))
        journal = self.dispatcher.journal
        if journal is not None and journal.on_unknown == "fail":
            for obs in observations:
                if obs.status == "unknown":
                    return Failed(state=state, error=OutcomeUnknown(obs.name, obs.tool_call_id))
        terminal = self._terminal(observations)
        if terminal is not None:
            return await self._finish(state, terminal.content)
        return Continue(state=state)

    def _terminal(self, observations: tuple[ToolMessage, ...]) -> ToolMessage | None:
        for obs in observations:
            found = self.dispatcher.tools.get(obs.name)
            if found is not None and found.terminal and obs.status == "ok":
                return obs
        return None

    async def _finish(self, state: LoopState, text: str, *, cut: bool = False) -> Step:
        """The answer ``text``, once it matches the output schema and its output guards
        accept it; else sent back with what is wrong, or, out of retries, a failure.
        ``cut``: the answer ended at the output limit (what is wrong, if it does not
        validate)."""
        out = self.settings.output_type
        if out is None:
            return await self._guarded(Final(state=state, text=text, output=text))
        try:
            final = Final(
                state=state, text=text, output=out.model_validate_json(_strip_fences(text))
            )
        except pydantic.ValidationError as exc:
            attempts = state.output_attempts + 1
            limit = self.settings.max_output_tokens
            detail = CUT_OFF.format(limit=limit) if cut else _validation_summary(exc)
            if attempts > self.settings.output_retries or state.wrapped_up:
                return Failed(
                    state=state, error=OutputValidationError(out.__name__, attempts, detail)
                )
            fix = FIX_CUT_OFF if cut else FIX_OUTPUT
            retry = UserMessage(content=fix.format(schema=out.__name__, error=detail, limit=limit))
            return Continue(
                state=replace(state, messages=(*state.messages, retry), output_attempts=attempts)
            )
        return await self._guarded(final)

    async def _guarded(self, final: Final) -> Step:
        """``final``, if the output guards accept it; else the answer goes back as a
        correction, sharing the output schema's retries (a broken guard fails at once)."""
        if self.guards is None:
            return final
        state = final.state
        try:
            refusals = await self.guards.output(final.text, final.output, state.turn)
        except BudgetExceeded as exc:
            return Failed(state=state, error=exc)
        if not refusals:
            return final
        attempts = state.output_attempts + 1
        first = refusals[0]
        if first.broken or attempts > self.settings.output_retries or state.wrapped_up:
            error = GuardrailTripped(first.guard, "output", first.reason, attempts=attempts)
            return Failed(state=state, error=error)
        retry = UserMessage(content=refusal_text(refusals))
        return Continue(
            state=replace(state, messages=(*state.messages, retry), output_attempts=attempts)
        )


def _strip_fences(text: str) -> str:
    """Models often wrap JSON in a Markdown code fence; accept that."""
    body = text.strip()
    if body.startswith("```") and body.endswith("```"):
        body = body[3:-3]
        first_newline = body.find("\n")
        if first_newline != -1 and not body[:first_newline].strip().startswith("{"):
            body = body[first_newline + 1 :]
    return body.strip()


def _validation_summary(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc}: {err['msg']}" if loc else err["msg"])
    return "; ".join(parts)
