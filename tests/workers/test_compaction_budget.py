"""The compaction budget is the ceiling of every request a compacting worker sends,
its summary calls' included: whatever the summary's length (the summary call is
given an output limit from the budget, and a summary that comes back longer is cut
to fit), for text where a character is about a token (CJK), and by a role's own
token counter."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

import pytest
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    CompactionStarted,
    ConfigError,
    ContextBudgetTooSmall,
    Dispatcher,
    Event,
    Message,
    ModelRequest,
    ModelResponse,
    TextToolModel,
    ToolCall,
    ToolMessage,
    ToolRegistry,
    ToolSchema,
    Tracer,
    Usage,
    UserMessage,
    tool,
)
from runtime.testing import FunctionModel
from tests.support.tokens import cjk, one_per_character
from workers import AgentLoop, Failed, Final, LoopSettings, LoopState
from workers.compaction import Compactor, is_summary_request
from workers.context import TOKENS_PER_MESSAGE, Compaction, ContextWindow, estimate_tokens
from workers.services import Services

PAGE = "x" * 1600  # about 400 tokens a page
CJK_PAGE = "航海日志第页记录风向与水深" * 32  # 416 characters: about 416 tokens


@tool
def read_page(page: int) -> str:
    """Read one page of the log."""
    return f"page {page}: fact-{page}\n{PAGE}"


@tool
def read_cjk_page(page: int) -> str:
    """Read one page of the log, in Chinese."""
    return f"page {page}: fact-{page}\n{CJK_PAGE}"


Counter = Callable[[Sequence[Message], Sequence[ToolSchema]], int]


def by_estimate(messages: Sequence[Message], tools: Sequence[ToolSchema]) -> int:
    return estimate_tokens(messages, tools)


def by(count: Callable[[str], int]) -> Counter:
    """A request's tokens as a server whose tokenizer is ``count`` reports them."""

    def tokens(messages: Sequence[Message], tools: Sequence[ToolSchema]) -> int:
        total = 0
        for m in messages:
            total += count(m.content or "") + 4
            if isinstance(m, AssistantMessage):
                total += sum(count(c.name + c.arguments) for c in m.tool_calls)
        return total + sum(count(t.name + t.description + str(t.parameters)) for t in tools)

    return tokens


def reader(pages: int, tool_name: str, counter: Counter) -> FunctionModel:
    """A worker model that reads ``pages`` pages, one a turn, then answers; it reports
    the input tokens as ``counter`` counts them (a server's own count)."""

    turns = {"done": 0}

    def turn(request: ModelRequest) -> ModelResponse:
        assert not is_summary_request(request)
        turns["done"] += 1
        page = turns["done"]
        if page > pages:
            message = AssistantMessage(content="read them all")
        else:
            arguments = f'{{"page": {page}}}'
            call = ToolCall(id=f"c{page}", name=tool_name, arguments=arguments)
            message = AssistantMessage(tool_calls=(call,))
        usage = Usage(input_tokens=counter(request.messages, request.tools), output_tokens=5)
        return ModelResponse(message=message, usage=usage)

    return FunctionModel(turn, name="reader")


def wordy(tokens: int, counter: Counter) -> FunctionModel:
    """A summarizer that writes about ``tokens`` tokens whatever it is asked."""

    def summarize(request: ModelRequest) -> ModelResponse:
        assert is_summary_request(request)
        facts = " ".join(sorted({w for w in request.messages[1].content.split() if "fact-" in w}))
        text = f"facts: {facts}\n" + "y" * (tokens * 4)
        usage = Usage(input_tokens=counter(request.messages, request.tools), output_tokens=tokens)
        return ModelResponse(message=AssistantMessage(content=text), usage=usage)

    return FunctionModel(summarize, name="wordy")


def make_loop(
    model: FunctionModel,
    summarizer: FunctionModel,
    compaction: Compaction,
    tools: Sequence[object],
    events: list[Event] | None = None,
) -> AgentLoop:
    if summarizer is not None:  # the summaries' model, by its name in the run
        compaction = compaction.model_copy(update={"model": "summarizer"})
    return AgentLoop(
        model,
        Dispatcher(ToolRegistry(list(tools))),  # type: ignore[arg-type]
        instructions="You read logs.",
        settings=LoopSettings(max_turns=60, compaction=compaction),
        worker="w1",
        services=Services(
            tracer=Tracer(events.append) if events is not None else Tracer(),
            run_id="r1",
            models={"summarizer": summarizer} if summarizer is not None else {},
        ),
    )


def over(requests: Sequence[ModelRequest], budget: int, counter: Counter) -> list[int]:
    return [n for r in requests if (n := counter(r.messages, r.tools)) > budget]


async def test_a_summary_far_over_the_budget_never_takes_a_request_over_it() -> None:
    # The figures: a 3,000-token budget, a summarizer writing ~5,000 tokens.
    model = reader(48, "read_page", by_estimate)
    summarizer = wordy(5000, by_estimate)
    compaction = Compaction(budget_tokens=3000, keep_turns=2)
    result = await make_loop(model, summarizer, compaction, [read_page]).run("read the log")

    assert isinstance(result, Final)
    assert summarizer.requests  # it was used
    first = next(i for i, r in enumerate(model.requests) if len(r.messages) > 2
                 and "[Summary" in (r.messages[2].content or ""))  # fmt: skip
    assert len(model.requests) - first >= 41  # the requests after the first compaction
    assert over(model.requests, 3000, by_estimate) == []
    assert over(summarizer.requests, 3000, by_estimate) == []
    for request in summarizer.requests:  # asked to write no more than the budget leaves
        assert request.max_output_tokens is not None
        assert 0 < request.max_output_tokens <= 3000 // 2
    # What the summary keeps of the facts it was given (its start) is still there.
    assert result.state.summary.startswith("facts: fact-1 ")


async def test_cjk_text_stays_within_the_budget_by_a_cjk_tokenizers_count() -> None:
    server = by(cjk)  # the server counts about one token a Chinese character
    model = reader(20, "read_cjk_page", server)
    summarizer = wordy(200, server)
    compaction = Compaction(budget_tokens=3000, keep_turns=2)
    result = await make_loop(model, summarizer, compaction, [read_cjk_page]).run("read the log")

    assert isinstance(result, Final)
    assert summarizer.requests
    assert over(model.requests, 3000, server) == []
    assert over(summarizer.requests, 3000, server) == []


async def test_a_roles_own_token_counter_measures_its_context() -> None:
    server = by(one_per_character)  # a tokenizer far from four characters a token
    model = reader(12, "read_page", server)
    summarizer = wordy(100, server)
    compaction = Compaction(budget_tokens=6000, keep_turns=2, token_counter=one_per_character)
    result = await make_loop(model, summarizer, compaction, [read_page]).run("read the log")

    assert isinstance(result, Final)
    assert summarizer.requests  # pages of 1,600 tokens each: folded from the fourth on
    assert over(model.requests, 6000, server) == []
    assert over(summarizer.requests, 6000, server) == []


def chokes(text: str) -> int:
    if "page 3" in text:
        raise UnicodeError("no such byte")
    return len(text)


@pytest.mark.parametrize(
    ("counter", "said"),
    [
        (chokes, "the token counter 'chokes' raised UnicodeError: no such byte"),
        (lambda text: None, "the token counter '<lambda>' answered None, not a number"),
    ],
)
async def test_a_token_counter_that_fails_is_named_in_the_workers_error(
    counter: Callable[[str], int], said: str
) -> None:
    server = by(one_per_character)
    compaction = Compaction(budget_tokens=6000, token_counter=counter)
    loop = make_loop(reader(12, "read_page", server), wordy(100, server), compaction, [read_page])
    with pytest.raises(ConfigError) as failed:
        await loop.run("read the log")
    assert failed.value.field == "compaction.token_counter"
    assert said in str(failed.value)


async def test_a_token_counter_may_count_in_fractions() -> None:
    server = by(one_per_character)
    compaction = Compaction(budget_tokens=6000, token_counter=lambda text: len(text) / 1.0)
    model = reader(12, "read_page", server)
    result = await make_loop(model, wordy(100, server), compaction, [read_page]).run("read")
    assert isinstance(result, Final)
    assert over(model.requests, 6000, server) == []


def test_the_estimate_counts_what_tokenizers_split_finely() -> None:
    def tokens(text: str) -> int:
        return estimate_tokens((UserMessage(content=text),)) - TOKENS_PER_MESSAGE

    assert tokens("航海日志" * 100) == 400  # a token a Chinese character
    assert tokens("The wind turned north-east at noon.") <= 12  # English: about as many
    numbers = ", ".join(str(n) for n in range(100_000, 100_100))  # 100 six-digit numbers
    assert tokens(numbers) >= 300  # two tokens a number, and the commas


@tool
def read_note(page: int) -> str:
    """Read one note of the log: short ones, then a long one."""
    return f"page {page}: fact-{page}\n" + "x" * (6000 if page == 11 else 300)


async def test_turns_one_summary_request_cannot_hold_are_folded_by_another() -> None:
    events: list[Event] = []
    model = reader(11, "read_note", by_estimate)
    summarizer = wordy(50, by_estimate)
    # Long instructions go in every summary request: a few notes fit in one.
    instructions = "Keep facts. " * 930
    compaction = Compaction(
        budget_tokens=4000, trigger_tokens=2000, keep_turns=1, instructions=instructions
    )
    result = await make_loop(model, summarizer, compaction, [read_note], events).run("read")

    assert isinstance(result, Final)
    turns = [e.turn for e in events if isinstance(e, CompactionStarted)]
    assert turns.count(turns[-1]) > 1  # the long note's turn took two summary calls
    assert over(summarizer.requests, 4000, by_estimate) == []
    assert over(model.requests, 4000, by_estimate) == []
    assert result.state.summary.startswith("facts: fact-")


async def test_a_summary_request_of_one_turn_over_the_budget_is_cut_to_fit_it() -> None:
    # The estimate rounds once for all the texts of a request: the turn's text, cut by
    # what the request was over, could leave it a token over. Marks are three quarters
    # of a token: lengths that leave the texts every fraction of a token.
    for length in range(1100, 1130):
        summarizer = wordy(20, by_estimate)
        compactor = Compactor(Compaction(budget_tokens=256, keep_turns=1), summarizer)
        calls = [ToolCall(id=f"c{n}", name="read_page", arguments="{}") for n in (1, 2)]
        messages = (
            AssistantMessage(tool_calls=(calls[0],)),
            ToolMessage(tool_call_id="c1", name="read_page", content=("w. " * 400)[:length]),
            AssistantMessage(tool_calls=(calls[1],)),
            ToolMessage(tool_call_id="c2", name="read_page", content="fact-2"),
        )
        state = LoopState(task="read the log", messages=messages)
        head = (UserMessage(content="read the log"),)
        state, _ = await compactor.fit(state, head, messages, ModelRequest(messages=()), turn=3)
        assert state.summarized == 2
        assert over(summarizer.requests, 256, by_estimate) == [], length


def test_a_turn_cut_to_fit_keeps_the_models_own_words() -> None:
    # Its longest text is cut first, as far as needed: the estimate rounds once for
    # all the texts, so one cut can leave a token over, which must not fall on the
    # model's short answer (a model reads its own last turn to go on from it).
    line = "page 2: the reading at station 2 was 14 metres. "
    group = (
        AssistantMessage(
            content="[turn 2]",
            tool_calls=(ToolCall(id="call_2", name="page", arguments='{"number": 2}'),),
        ),
        ToolMessage(tool_call_id="call_2", name="page", content=(line * 20)[:900]),
    )
    for room in range(60, 300):
        shown, _ = ContextWindow(max_tokens=room).fit(group)
        assert estimate_tokens(shown) <= room
        assert shown[0].content == "[turn 2]", room


async def test_a_tool_protocols_request_stays_within_the_budget_as_it_is_sent() -> None:
    # The text protocol writes the tools' catalogue and how to call them into the
    # prompt, and calls and results as text: the budget holds for what is sent.
    inner, loop = text_reader(12, "read them all", Compaction(budget_tokens=1500))
    result = await loop.run("read the log")
    assert isinstance(result, Final)
    assert result.state.compactions
    assert over(inner.requests, 1500, by_estimate) == []


def text_reader(
    pages: int, answer: str, compaction: Compaction, output_type: type[BaseModel] | None = None
) -> tuple[FunctionModel, AgentLoop]:
    """A worker loop on a model that speaks the text protocol (the inner model, which
    sees what is sent, returned too): it reads ``pages`` pages, one a turn (the page
    after the last one its request shows asked for: the newest turn is always sent),
    then gives ``answer``; its summaries' model writes far more than the budget leaves,
    and is cut to it."""

    def turn(request: ModelRequest) -> ModelResponse:
        assert not request.tools  # written out: the model sees text alone
        asked = re.findall(r'"page": (\d+)', "".join(m.content or "" for m in request.messages))
        page = max(map(int, asked), default=0) + 1
        text = answer
        if page <= pages:
            text = f'```json\n{{"tool": "read_page", "arguments": {{"page": {page}}}}}\n```'
        usage = Usage(input_tokens=by_estimate(request.messages, request.tools), output_tokens=5)
        return ModelResponse(message=AssistantMessage(content=text), usage=usage)

    inner = FunctionModel(turn, name="reader")
    loop = AgentLoop(
        TextToolModel(inner),
        Dispatcher(ToolRegistry([read_page])),
        instructions="You read logs.",
        settings=LoopSettings(
            max_turns=30,
            output_type=output_type,
            compaction=compaction.model_copy(update={"model": "summarizer"}),
        ),
        services=Services(models={"summarizer": wordy(5000, by_estimate)}),
    )
    return inner, loop


@tool
def write_note(text: str) -> str:
    """Keep a note."""
    return "kept"


async def test_a_budget_that_cannot_hold_the_newest_calls_fails_the_worker_before_sending() -> None:
    # A call's arguments are never cut, so a budget that the head, the tools and the
    # newest turn's call are over alone cannot be kept by any fold or window: the worker
    # fails at once, naming the budget and what takes it, where it sent a request over
    # the budget with the call's result cut away (and the model, no longer seeing it,
    # asked for it again, turn after turn).
    note = "n" * 1600  # about 400 tokens of arguments
    call = ToolCall(id="c1", name="write_note", arguments=f'{{"text": "{note}"}}')

    def turn(request: ModelRequest) -> ModelResponse:
        done = any(isinstance(m, ToolMessage) and m.content == "kept" for m in request.messages)
        message = (
            AssistantMessage(content="noted") if done else AssistantMessage(tool_calls=(call,))
        )
        return ModelResponse(message=message, usage=Usage(input_tokens=1, output_tokens=1))

    model = FunctionModel(turn, name="noter")
    summarizer = wordy(50, by_estimate)
    compaction = Compaction(budget_tokens=300, keep_turns=1)
    result = await make_loop(model, summarizer, compaction, [write_note]).run("keep a note")

    assert isinstance(result, Failed)
    error = result.error
    assert isinstance(error, ContextBudgetTooSmall)
    assert (error.worker, error.budget) == ("w1", 300)
    assert error.needed > 300
    assert dict(error.parts)["the newest turn's calls"] > 400
    assert "1 tool" in dict(error.parts)
    assert "worker w1's context budget of 300 tokens" in str(error)
    assert "raise the role's budget_tokens" in str(error)
    assert len(model.requests) == 1  # the first, within the budget; none after it
    assert over(model.requests, 300, by_estimate) == []
    assert not summarizer.requests  # no summary call could help, none was made


@tool
def lookup(key: str) -> str:
    """Look a key up in the register of the harbour's ships, their berths and cargo."""
    return f"{key}: " + "z" * 400


async def test_a_summary_is_cut_to_what_the_newest_calls_leave_it() -> None:
    # The head and the tools take most of the budget, and each turn's call has long
    # arguments (never cut): the summary, at its allowance, and the newest call were
    # over the budget together, and the window, with no room left, cut the newest
    # results to nothing and sent the request over the budget anyway. Now the summary
    # is cut to what the call leaves it, and every request is within the budget.
    def turn(request: ModelRequest) -> ModelResponse:
        n = len(model.requests)
        message = AssistantMessage(content="done")
        if n <= 8:
            key = f"ship-{n:03d}-" + "k" * 60
            call = ToolCall(id=f"c{n}", name="lookup", arguments=f'{{"key": "{key}"}}')
            message = AssistantMessage(content=f"[step {n}]", tool_calls=(call,))
        usage = Usage(input_tokens=by_estimate(request.messages, request.tools), output_tokens=5)
        return ModelResponse(message=message, usage=usage)

    model = FunctionModel(turn, name="looker")
    summarizer = wordy(5000, by_estimate)
    loop = AgentLoop(
        model,
        Dispatcher(ToolRegistry([lookup])),
        instructions="You look things up. " + "Be careful and exact. " * 15,
        settings=LoopSettings(
            max_turns=20, compaction=Compaction(budget_tokens=300, keep_turns=1, model="s")
        ),
        worker="w1",
        services=Services(models={"s": summarizer}),
    )
    result = await loop.run("look up the ships")

    assert isinstance(result, Final)
    assert summarizer.requests  # it folded
    assert over(model.requests, 300, by_estimate) == []
    # The requests after the folds hold the summary, and the newest call whole.
    summarized = [
        r
        for r in model.requests
        if len(r.messages) > 2 and (r.messages[2].content or "").startswith("[Summary of")
    ]
    assert len(summarized) >= 5
    for request in summarized:
        newest = request.messages[-2]
        assert isinstance(newest, AssistantMessage)
        assert newest.tool_calls[0].arguments.endswith('k"}')


def _turn(n: int, result: str) -> tuple[Message, ...]:
    call = ToolCall(id=f"c{n}", name="read_page", arguments=f'{{"page": {n}}}')
    return (
        AssistantMessage(content=f"[turn {n}]", tool_calls=(call,)),
        ToolMessage(tool_call_id=f"c{n}", name="read_page", content=result),
    )


def test_a_window_measures_turns_as_they_are_sent() -> None:
    # A tool protocol writes calls and results as text, which takes more than they
    # do: the window keeps what fits as the model is sent it, not as it is kept.
    turns = (*_turn(1, "a" * 200), *_turn(2, "b" * 200))
    as_kept = estimate_tokens(turns[2:])
    written = ContextWindow(max_tokens=as_kept + 5, measure=lambda m: 2 * estimate_tokens(m))
    shown, omitted = written.fit(turns)
    assert omitted == 2
    assert 2 * estimate_tokens(shown) <= as_kept + 5  # the newest turn, cut to fit
    assert shown[0].content == "[turn 2]"


def test_a_window_charges_its_note_only_when_it_leaves_turns_out() -> None:
    turns = (*_turn(1, "a" * 200), *_turn(2, "b" * 200))
    whole = estimate_tokens(turns)
    # Everything fits: no note is sent, so none is charged.
    shown, omitted = ContextWindow(max_tokens=whole, note_tokens=40).fit(turns)
    assert (shown, omitted) == (turns, 0)
    # The older turn is left out: the note that stands for it takes its share, and
    # the newest turn is cut to leave it room.
    newest = estimate_tokens(turns[2:])
    shown, omitted = ContextWindow(max_tokens=newest, note_tokens=20).fit(turns)
    assert omitted == 2
    assert estimate_tokens(shown) <= newest - 20


class LogReport(BaseModel):
    """What the log says."""

    summary: str
    facts: list[str]
    ships: list[str]
    harbour_master_name: str
    weather_notes: str
    total_pages_read: int


async def test_a_tool_protocols_output_schema_counts_in_the_budget() -> None:
    # A tool protocol writes the output schema into the prompt, beside the tools; the
    # budget was kept without it, and 7 of 9 requests went over a 1,200-token budget
    # (by up to 281 tokens). It counts now, as the turn's tool choice does.
    answer = json.dumps(
        {"summary": "s", "facts": [], "ships": [], "harbour_master_name": "h",
         "weather_notes": "w", "total_pages_read": 8}
    )  # fmt: skip

    inner, loop = text_reader(8, answer, Compaction(budget_tokens=1200), LogReport)
    result = await loop.run("read the log")
    assert isinstance(result, Final)
    assert result.state.compactions
    assert over(inner.requests, 1200, by_estimate) == []
