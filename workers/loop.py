"""The agent loop as a step function: ``step(state)`` returns ``Continue``, ``Final`` or
``Failed``; :meth:`AgentLoop.run` is the short driver that loops over it. A step
either thinks (one model call) or acts (the tool calls the model's last answer asked
for, which a state whose last message is such an answer has pending).

A loop ends on a final answer, on a terminal tool's result, or with a wrap-up: one
call that may use no tool (``tool_choice: none``, the tools listed as in every turn,
so that its request starts with the turns before it) and asks the model for its best
answer from what it has, made at ``max_turns``, or once ``max_repeats`` turns in a row
were nothing but repeats of the turn before (a runaway loop, told as such). An answer
of tool calls alone to it is :class:`~runtime.MaxTurnsExceeded`, or
:class:`~runtime.RunawayLoop` after a runaway (an empty one too). Whether a state is at
a runaway's wrap-up is in its ``repeats``, so a resumed loop wraps up as the one that
stopped would have.

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
again); text alone is the answer, as far as it goes; a call whose arguments the limit
cut short is told so in its observation (shorter arguments, or smaller calls).

A model call that fails ends the loop with ``Failed``, never with an exception: a
:class:`~runtime.HoneycombError` as itself, any other exception the model raises as a
:class:`~runtime.ModelCallError` naming the model and the exception's type, with the
original chained. Cancellation always propagates.

When the tracer's handlers want the text as it is written (``Tracer(text=True)``), a
model that can stream is asked to (``stream``), and each piece of its answer's text is
a :class:`~runtime.events.TextDelta`; otherwise every call is one-shot (``complete``).
A loop with an output schema or output guards holds a turn's deltas
(:class:`~runtime.events.HeldText`) until the turn's answer is accepted, or is tool
calls (which nothing checks), and drops those of an answer the schema or the guards
refuse, or that fails: such an answer's text comes whole, once it is accepted.

A :class:`Checkpoint` receives the state as the loop goes, so a run store can resume it
where it stopped: after every step. An answer asking for tool calls is kept (the
checkpoint flushed) before any of them runs, so a resumed loop runs those very calls
(their ids are what a journal of side effects knows, and name the nested workers they
start), not a new answer's, and what the answer cost is never lost with a process.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable

import pydantic
from msgspec.structs import replace

from runtime import (
    AnswerWithheld,
    AssistantMessage,
    BudgetExceeded,
    ContextBudgetTooSmall,
    Dispatcher,
    EmptyResponse,
    HoneycombError,
    MaxTurnsExceeded,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    NotStarted,
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
    Caller,
    HeldText,
    TextDelta,
    ToolCallsAnswered,
)
from runtime.messages import with_distinct_ids
from runtime.model import TextSink, context_of, request_writer
from runtime.models.layers import ModelCall, failed_usage
from runtime.models.layers.budget import spent_by
from runtime.tools.approvals import ApprovalNeeded
from runtime.value import pydantic_errors
from workers.calls import model_calls
from workers.compaction import Compactor
from workers.context import ContextWindow, assemble, summary_message
from workers.guards import GuardRunner, refusal_text, tripped
from workers.services import Services
from workers.state import (
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
RUNAWAY_WRAP_UP = (
    "You called {tool!r} with the same arguments {turns} turns in a row; its result is "
    "above. Do not call any more tools: give your best final answer now, from what you "
    "have found."
)
FIX_OUTPUT = (
    "Your answer does not match the required {schema} schema: {error}\n"
    "Answer again with JSON that matches the schema exactly."
)
CUT_OFF = (
    "it was cut off at the output limit of {limit} tokens before it was complete (give "
    "its role a higher max_output_tokens, or ask for less)"
)
CUT_OFF_CAPPED = (
    "it was cut off at the output limit of {limit} tokens before it was complete: the "
    "limit budgets.cost_per_call left the call, at its model's price (raise the cap)"
)
CUT_OFF_BELOW = (
    "it was cut off after {written} tokens, before it was complete: below the request's "
    "output limit of {limit} tokens, so a limit of the model's own applied (a max_tokens "
    "in its settings, or its server's)"
)
CUT_OFF_FULL = (
    "it was cut off after {written} tokens, before it was complete: its prompt of {prompt} "
    "tokens and the answer filled its model's context, the {held} tokens one call holds "
    "(give the model a larger context: a llama model's context:, --context of honeycomb's "
    "--model local, an endpoint's on its server; or ask for less)"
)
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
        settings: Turns, output schema, context window, model timeout, compaction.
        worker: Name used in events and as the conversation key.
        services: What it shares with its run: the budget checked before each model
            call, the tracer, the run's id, the store its state is kept in after each
            model answer, each turn and each compaction, the models summaries name.
        guards: Its output guards check each answer before it is accepted.
    """

    # benchmark E: one per worker (A at N=10000 has 10,000 at once), no instance dict
    __slots__ = (
        "_compactor",
        "_conversation",
        "_head",
        "_holds",
        "_output",
        "budget",
        "caller",
        "checkpoint",
        "dispatcher",
        "guards",
        "instructions",
        "layers",
        "model",
        "run_id",
        "settings",
        "store",
        "tells",
        "tracer",
        "worker",
    )

    kind = "turn"
    """What its model calls are, as the calls in flight are reported."""

    @property
    def who(self) -> str | None:
        """Whose model calls they are, as the calls in flight are reported: its worker's."""
        return self.worker

    def __init__(
        self,
        model: Model,
        dispatcher: Dispatcher,
        *,
        instructions: str = "",
        settings: LoopSettings | None = None,
        worker: str | None = None,
        services: Services | None = None,
        guards: GuardRunner | None = None,
    ) -> None:
        kept = services if services is not None else Services()
        self.model = model
        self.dispatcher = dispatcher
        self.instructions = instructions
        self.settings = settings or LoopSettings()
        self.budget = kept.budget
        self.tracer = kept.tracer
        self.worker = worker
        self.run_id = run_id = kept.run_id
        self.store = self.checkpoint = kept.store
        self.guards = guards if guards is not None and guards.guards.output else None
        caller = Caller(worker=worker, run_id=run_id, tracer=self.tracer)
        # The loop is its turns' call site (runtime.models.layers.CallSite): it keeps
        # their layers, composed in one place, and no object holding them (benchmark E).
        calls = model_calls(model, self.budget, worker, caller=caller)
        self.layers, self.caller, self.tells = calls.layers, calls.caller, calls.tells
        self._conversation = caller.conversation
        out = self.settings.output_type
        self._output = OutputSchema.for_model(out) if out is not None else None
        # Its answers' text is held while a schema or guards may refuse it (a plan's
        # streams: its progress shows). Told once here, not each turn (benchmark B).
        checked = self._output is not None and not self.settings.streams_unvalidated
        self._holds = self.guards is not None or checked
        self._head: tuple[str, tuple[Message, ...]] | None = None
        compaction = self.settings.compaction
        self._compactor: Compactor | None = None
        if compaction is not None:
            self._compactor = Compactor(
                compaction,
                kept.summarizer(compaction) or model,
                caller,
                budget=self.budget,
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

    def step(self, state: LoopState) -> Awaitable[Step]:
        """Think or act: one model turn, or, when the model's last answer asked for tool
        calls, those calls (or ``Waiting``, when some wait for a person's approval)."""
        # The step itself, not a frame around it: a waiting worker holds only the
        # frame of what it waits in (benchmark E).
        return self._act(state) if state.pending else self._think(state)

    async def _act(self, state: LoopState) -> Step:
        """The tool calls the model's last answer asked for, and their observations."""
        pending = state.pending
        budget = self.budget
        if budget is not None:
            # Before any of them runs; a terminal tool's result may be the answer.
            read = not (self.dispatcher.tools.ends and any(map(self._ends, pending)))
            try:
                await budget.reserve_tool_calls(len(pending), read=read)
            except BudgetExceeded as exc:
                return Failed(state=state, error=exc)
        bound = logs.bind(turn=state.turn)  # tools' own logs name the turn
        observations: tuple[ToolMessage, ...] | None = None
        try:
            observations = await self.dispatcher.dispatch(
                pending,
                turn=state.turn,
                previous=state.previous_calls,
                cut_at=state.cut_at or None,
            )
        except ApprovalNeeded as paused:  # a control signal: none of the calls ran
            return Waiting(state=state, pending=paused.pending)
        except (BudgetExceeded, NotStarted) as exc:  # a call's nested workers stopped it
            return Failed(state=state, error=exc)
        finally:
            logs.unbind(bound)
            if observations is None and budget is not None:
                # Paused or cancelled: the turn runs again (a resumed worker's), and
                # its calls are counted then.
                budget.release_tool_calls(len(pending))
        return await self._observed(state, pending, observations)

    async def _think(self, state: LoopState) -> Step:
        """One model turn: the request made from ``state``, and its answer read."""
        runaway = self._runaway(state)
        wrap_up = runaway is not None or state.turn >= self.settings.max_turns
        messages = state.messages
        if wrap_up:
            messages = (*messages, self._wrap_up_prompt(runaway))
        turn = state.turn + 1
        # The wrap-up lists the tools as every turn does and may call none of them
        # (tool_choice "none"): its request starts with the turns before it, which a
        # provider's prompt cache keeps (docs/caching.md).
        tools = self.dispatcher.tools.schemas
        window = self.settings.window
        if self._compactor is not None:
            request = self._request((), tools, turn, wrap_up)
            fitted = await self._fitted(self._compactor, state, messages, request, wrap_up)
            if isinstance(fitted, Failed):
                return fitted
            state, window = fitted
        held: HeldText | None = None
        sink: TextSink | None = None
        call: ModelCall | None = None  # once made: a failed one's spending is the worker's too
        try:
            context, omitted = self._context(state, messages, window)
            request = self._request(context, tools, turn, wrap_up)
            if self.tracer.text:  # someone reads the answers' text
                # The text of an answer an output schema or output guards will check
                # is held until they pass it (text they refuse never reaches a listener).
                held = HeldText(self.tracer) if self._holds else None
                if held is None and not self.tracer.holds_text:
                    sink = self._text_sink(turn, self.tracer)  # streamed as it is written
            # The call is made here, in this frame, as ModelCalls.complete makes it: a
            # worker waiting on its model holds no frame for its layers (benchmarks A
            # and E, where 10,000 workers wait at once).
            call = ModelCall(self, request, sink).open()
            try:
                answer = await call.made()
            except BaseException as failure:
                raise call.failed(failure)  # noqa: B904 (its cause is the layer's to set)
            response = call.answered(answer)
            sent = call.request.max_output_tokens  # a cost cap may have lowered it
        except HoneycombError as exc:  # the budget's, the model's, or its answer's
            unanswered = replace(state, messages=messages, wrapped_up=wrap_up)
            return Failed(state=unanswered, error=exc, spent=failed_usage(call))
        if self.tracer.text and sink is None and response.message.content:
            # Held text is not streamed: nobody could read it as it is written, and a
            # streamed call is not retried once it passed text on (a 503 mid-answer
            # would fail it). Its answer's text goes to the hold in one piece.
            self._text_sink(turn, held or self.tracer)(response.message.content)
        # Ids unique in the conversation before anything uses them (the checkpoint,
        # the journal, the observations, the wire).
        message = with_distinct_ids(response.message, messages, turn)
        if wrap_up and message.tool_calls:
            # No tool could be called, so calls cannot be run; keep only the text.
            asked = tuple(c.name for c in message.tool_calls)
            message = AssistantMessage(content=message.content, reasoning=message.reasoning)
            if message.is_empty:  # nothing but calls: it did not answer, it kept going
                state = state.answered(
                    (*messages, message), response.usage, nudged=False, wrapped_up=True
                )
                return Failed(
                    state=state, error=runaway or MaxTurnsExceeded(self.settings.max_turns, asked)
                )
        calls = message.tool_calls
        cut = response.finish_reason == "length"
        written = response.usage.output_tokens if cut else 0
        limit = sent or self.settings.max_output_tokens  # the one it was sent with
        state = state.answered(
            (*messages, message),
            response.usage,
            nudged=state.nudged and not calls,  # a call is a reply: the nudge worked
            wrapped_up=wrap_up,
            # A budget's window may cut texts too: the report then measures less; the
            # usage of a call its timeout cut an attempt of holds that prompt too.
            whole=not omitted and window.max_tokens is None and not call.timeouts,
            # Its last call's arguments may be cut short: at that limit, or where a
            # lower one of the model's own stopped it (its settings' max_tokens).
            cut_at=(written if 0 < written < limit else limit) if cut else 0,
        )
        if calls:  # the next step runs them (never after the wrap-up: they were dropped)
            if held is not None:  # text beside calls is no answer: no guard checks it
                held.release()
            return Continue(state=state)
        if message.is_empty:
            return self._empty(state, response, limit, wrap_up, runaway)
        if response.finish_reason == "content_filter":  # it ends where the filter stopped it
            withheld = AnswerWithheld(state.turn, len(message.content or ""))
            return Failed(state=state, error=withheld)
        if state.nudged:
            state = replace(state, nudged=False)
        step = await self._finish(state, message.content or "", cut=cut, written=written, sent=sent)
        if held is not None and isinstance(step, Final):  # accepted: its text is shown
            held.release()
        return step

    async def _fitted(
        self,
        compactor: Compactor,
        state: LoopState,
        messages: tuple[Message, ...],
        request: ModelRequest,
        wrap_up: bool,
    ) -> tuple[LoopState, ContextWindow] | Failed:
        """``state`` with its context kept within the budget for the turn of ``request``
        (its oldest turns summarized when they no longer fit) and the window the turn's
        context is cut to; or why the turn cannot be made."""
        before = state.compactions
        try:
            state, fitted = await compactor.fit(
                state, self.head(state.task), messages, request, request.turn
            )
        except (BudgetExceeded, ContextBudgetTooSmall) as exc:  # the turn cannot be made
            # (a budget stops the summary call as any call)
            unanswered = replace(state, messages=messages, wrapped_up=wrap_up)
            return Failed(state=unanswered, error=exc, spent=spent_by(exc) or Usage())
        if state.compactions != before and self.checkpoint is not None:
            # Saved before the turn's call: a crash during it resumes with the
            # summary (and what it cost), not with another summary call.
            self.checkpoint.save(state)
        window = self.settings.window
        return state, window if fitted is None else window.narrowest(fitted)

    def _empty(
        self,
        state: LoopState,
        response: ModelResponse,
        limit: int,
        wrap_up: bool,
        runaway: RunawayLoop | None,
    ) -> Step:
        """The step after an answer with neither text nor calls (sent with the output
        limit ``limit``): cut off, empty again after the nudge or at the wrap-up, or
        else nudged once."""
        if response.finish_reason == "length":
            # The whole limit went on nothing it shows (a reasoning model's thinking).
            written = response.usage.output_tokens
            own = 0 < written < limit  # a lower limit of the model's own stopped it
            capped = not own and limit < self.settings.max_output_tokens  # a cost cap
            at = written if own else limit
            full = context_of(self.model) if self._filled(state, written) else None
            cut_off = OutputCutOff(state.turn, at, capped=capped, own=own, context=full)
            return Failed(state=state, error=cut_off)
        if state.nudged or wrap_up:
            empty = EmptyResponse(
                state.turn, wrap_up=not state.nudged, finish_reason=response.finish_reason
            )
            return Failed(state=state, error=runaway or empty)
        nudge = UserMessage(content=NUDGE)
        return Continue(state=replace(state, messages=(*state.messages, nudge), nudged=True))

    def _request(
        self,
        context: tuple[Message, ...],
        tools: tuple[ToolSchema, ...],
        turn: int,
        wrap_up: bool,
    ) -> ModelRequest:
        """The request for this turn's model call (the call is awaited in :meth:`step`
        itself: a waiting worker's stack is one coroutine shorter)."""
        return ModelRequest(
            messages=context,
            tools=tools,
            tool_choice="none" if wrap_up else "auto",
            output=self._output,
            timeout=self.settings.model_timeout,
            conversation=self._conversation,
            max_output_tokens=self.settings.max_output_tokens,
            turn=turn,
        )

    def _runaway(self, state: LoopState) -> RunawayLoop | None:
        """The runaway loop ``state`` ends in: its last ``max_repeats`` turns (or more)
        were nothing but repeats of the turn before, so its next call is the wrap-up."""
        if state.repeats < self.settings.max_repeats or not state.previous_calls:
            return None
        return RunawayLoop(state.previous_calls[0].name, state.repeats + 1)

    def _wrap_up_prompt(self, runaway: RunawayLoop | None) -> UserMessage:
        """What the wrap-up call asks: why it is made, and for the answer."""
        if runaway is not None:
            text = RUNAWAY_WRAP_UP.format(tool=runaway.tool_name, turns=runaway.turns)
        else:
            text = WRAP_UP.format(turns=self.settings.max_turns)
        return UserMessage(content=text)

    def _text_sink(self, turn: int, tracer: Tracer) -> TextSink:
        """Where a streamed answer's pieces go: one :class:`TextDelta` each, to
        ``tracer`` (the loop's, or a hold in front of it)."""
        emit, worker, run_id = tracer.emit, self.worker, self.run_id

        def sink(text: str) -> None:
            if text:
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

    async def _observed(
        self, state: LoopState, calls: tuple[ToolCall, ...], observations: tuple[ToolMessage, ...]
    ) -> Step:
        """The state once ``calls`` (the model's last answer's) have their observations:
        the turn is done, and its calls are counted here, and only here (the worker's
        usage, and the trace, told by :class:`ToolCallsAnswered`); the run's budget
        counted them as :meth:`step` reserved them, and gets back those that did not
        run (skipped repeats)."""
        executed = 0
        for obs in observations:
            if obs.status != "skipped":
                executed += 1
        if self.budget is not None:
            self.budget.settle_tool_calls(len(calls), executed)  # reserved in step
        if self.tracer.enabled:
            answered = ToolCallsAnswered(
                worker=self.worker, run_id=self.run_id, turn=state.turn, calls=executed
            )
            self.tracer.emit(answered)
        # A turn of nothing but repeats ran no call: no outcome to check, no terminal
        # result; after max_repeats of them the next think step is the wrap-up.
        state = state.observed(observations, calls, executed)
        store = self.store  # only its journal tells of a call's outcome as unknown
        for obs in observations:
            if obs.status == "unknown" and store is not None and store.on_unknown == "fail":
                return Failed(state=state, error=OutcomeUnknown(obs.name, obs.tool_call_id))
        terminal = self._terminal(observations)
        if terminal is not None:
            return await self._finish(state, terminal.content)
        return Continue(state=state)

    def _terminal(self, observations: tuple[ToolMessage, ...]) -> ToolMessage | None:
        if not self.dispatcher.tools.ends:  # none of its tools ends its worker
            return None
        for obs in observations:
            if self._ends(obs) and obs.status == "ok":
                return obs
        return None

    def _ends(self, call: ToolCall | ToolMessage) -> bool:
        """Whether ``call`` is of a terminal tool: its result ends the worker."""
        found = self.dispatcher.tools.get(call.name)
        return found is not None and found.terminal

    async def _finish(
        self,
        state: LoopState,
        text: str,
        *,
        cut: bool = False,
        written: int = 0,
        sent: int | None = None,
    ) -> Step:
        """The answer ``text``, once it matches the output schema and its output guards
        accept it; else sent back with what is wrong, or, out of retries, a failure.
        ``cut``: the answer ended at an output limit (what is wrong, if it does not
        validate), after ``written`` tokens (0: not told); ``sent``: the limit the call
        was made with (below the settings' when a cost cap lowered it)."""
        out = self.settings.output_type
        if out is None:
            return await self._guarded(Final(state=state, text=text, output=text, cut_off=cut))
        try:
            output = out.model_validate_json(_json_document(text))
            final = Final(state=state, text=text, output=output, cut_off=cut)
        except pydantic.ValidationError as exc:
            attempts = state.output_attempts + 1
            limit = sent or self.settings.max_output_tokens
            detail = _validation_summary(exc)
            if cut:
                detail, limit = self._cut_off(state, written, limit)
            if attempts > self.settings.output_retries or state.wrapped_up:
                return Failed(
                    state=state, error=OutputValidationError(out.__name__, attempts, detail)
                )
            fix = FIX_CUT_OFF if cut else FIX_OUTPUT
            retry = UserMessage(content=fix.format(schema=out.__name__, error=detail, limit=limit))
            # A cut-off answer goes back with the retry (the model shortens what it
            # wrote), unless it stopped where its model's context was full: then it
            # would take the retry's request past that context.
            kept = state.messages[:-1] if cut and self._filled(state, written) else state.messages
            return Continue(state=replace(state, messages=(*kept, retry), output_attempts=attempts))
        return await self._guarded(final)

    def _cut_off(self, state: LoopState, written: int, limit: int) -> tuple[str, int]:
        """Why an answer that ended at an output limit after ``written`` tokens was cut
        off, and the limit that applied: its model's context, full of its prompt and
        the answer; a lower limit of the model's own; the cost cap; or the request's
        ``limit``."""
        held = context_of(self.model)
        if held is not None and self._filled(state, written):
            prompt = state.context_tokens
            return CUT_OFF_FULL.format(written=written, prompt=prompt, held=held), written
        below = 0 < written < limit
        capped = limit < self.settings.max_output_tokens
        said = CUT_OFF_BELOW if below else CUT_OFF_CAPPED if capped else CUT_OFF
        return said.format(limit=limit, written=written), written if below else limit

    def _filled(self, state: LoopState, written: int) -> bool:
        """Whether an answer cut off after ``written`` tokens stopped where its model's
        context was full (a local model's holds its prompt and its answer together)."""
        held, sent = context_of(self.model), state.context_tokens  # 0: not measured
        return held is not None and sent > 0 and sent + written >= held

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
        # A guard that raised would raise again: it trips at once, whatever the others said.
        broken = any(r.broken for r in refusals)
        if broken or attempts > self.settings.output_retries or state.wrapped_up:
            return Failed(state=state, error=tripped("output", refusals, attempts))
        retry = UserMessage(content=refusal_text(refusals))
        return Continue(
            state=replace(state, messages=(*state.messages, retry), output_attempts=attempts)
        )


def _json_document(text: str) -> str:
    """The JSON document of an answer held to an output schema, as models write one:
    alone, in a Markdown code fence, after their thinking (``<think>...</think>``), or
    amid prose ("Here is the plan: {...}"): the fence's body, or else the text from its
    first ``{`` to its last ``}``. What is not JSON still fails to validate, and is sent
    back with the error."""
    body = text.strip()
    if body.startswith("<think>") and "</think>" in body:
        body = body.split("</think>", 1)[1].strip()
    if body.startswith("{"):
        return body
    fenced = _FENCED.search(body)
    if fenced is not None:
        return fenced.group(1).strip()
    first, last = body.find("{"), body.rfind("}")
    return body[first : last + 1] if 0 <= first < last else body


_FENCED = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
"""A Markdown code fence (its language, if any, on its first line) and its body."""


def _validation_summary(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in pydantic_errors(exc):
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")  # a validator's own words
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)
