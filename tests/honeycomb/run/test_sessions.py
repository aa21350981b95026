"""Sessions: each message a run that sees the conversation before it, kept in the run
store turn by turn, one message of a session at a time, and history to edit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from honeycomb import (
    Compaction,
    ConfigError,
    ConfigErrors,
    Executor,
    Guards,
    OfflineModel,
    Policy,
    Role,
)
from honeycomb.cli.main import main as cli
from honeycomb.events import CompactionFinished, RunFinished, RunStarted
from honeycomb.run.conversation import CONVERSATION_HEADER, SessionPolicy
from honeycomb.testing import FunctionModel
from honeycomb.web.app import create_app
from runtime import (
    AssistantMessage,
    Event,
    ModelRequest,
    ModelResponse,
    PlanError,
    SessionBusy,
    SessionError,
    StoreError,
    ToolMessage,
)
from runtime.testing import call
from tests.support.model_requests import role_of
from workers.compaction import is_summary_request

ROLES = [
    Role(name="planner"),
    Role(name="researcher", description="Finds facts about cities and weather."),
    Role(name="aggregator"),
]


def offline() -> FunctionModel:
    """The offline model, its requests recorded."""
    return FunctionModel(OfflineModel(latency=0).complete, name="offline")


def asked(model: FunctionModel, role: str) -> list[str]:
    """The user messages of the requests ``role``'s workers sent, in order."""
    return [
        str(r.messages[1].content)
        for r in model.requests
        if role_of(r) == role and len(r.messages) > 1
    ]


def stalling(started: asyncio.Event, hold: asyncio.Event) -> FunctionModel:
    """The offline model, whose researchers say they started, then wait for ``hold``."""
    model = OfflineModel(latency=0)

    async def stalls(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "researcher":
            started.set()
            await hold.wait()
        return await model.complete(request)

    return FunctionModel(stalls)


def executor(model: object, store: Path | None = None, **options: object) -> Executor:
    return Executor(ROLES, model, store=store, **options)  # type: ignore[arg-type]


async def test_the_third_message_is_planned_with_the_first_two_answers(
    fast_demo: Path, db: Path
) -> None:
    from examples.service import HIVE

    model = offline()
    session = Executor.from_yaml(HIVE, model=model, store=db).session("user-42")
    first = await session.run("Compare the weather in Lisbon and Porto.")
    second = await session.run("And Madrid?")
    third = await session.run("Book the cheaper one.")
    planned = asked(model, "planner")
    assert len(planned) == 3
    assert CONVERSATION_HEADER not in planned[0]
    for answer in (first.answer_text, second.answer_text):
        assert answer.strip()
        assert answer.strip() in planned[2]
    # The offline planner says a follow-up again in the words of the message before it
    # that has a topic.
    assert second.plan.subtasks[0].instruction.startswith("Compare the weather in Madrid")
    assert "Lisbon and Porto" in third.plan.subtasks[0].instruction
    assert [t.answer for t in await session.turns()] == [
        first.answer_text,
        second.answer_text,
        third.answer_text,
    ]


async def test_a_service_started_again_continues_the_conversation(db: Path) -> None:
    before = executor(offline(), db)
    first = await before.session("chat").run("Find the weather in Rome.")
    assert before.store is not None
    before.store.close()

    model = offline()
    after = executor(model, db)
    again = after.session("chat")
    await again.run("And in Oslo?")
    assert first.answer_text.strip() in asked(model, "planner")[0]
    turns = await again.turns()
    assert [t.turn for t in turns] == [1, 2]
    assert [t.status for t in turns] == ["ok", "ok"]
    assert turns[0].run_id == first.run_id


async def test_a_turn_cut_off_is_resumed_and_the_conversation_goes_on(db: Path) -> None:
    started, hold = asyncio.Event(), asyncio.Event()
    first = executor(stalling(started, hold), db).session("s")
    turn = asyncio.create_task(first.run("Find the weather in Rome."))
    await started.wait()
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn

    later = executor(offline(), db).session("s")
    with pytest.raises(SessionError) as refused:
        await later.run("And in Oslo?")
    assert refused.value.turn == 1
    assert "resume()" in str(refused.value)
    resumed = await later.resume()
    assert resumed is not None
    assert resumed.status == "ok"
    await later.run("And in Oslo?")
    assert [t.status for t in await later.turns()] == ["ok", "ok"]


async def test_messages_to_one_session_run_one_at_a_time_in_the_order_they_came() -> None:
    model = FunctionModel(OfflineModel(latency=0.02).complete)
    seen: list[tuple[str, str]] = []

    def note(event: Event) -> None:
        if isinstance(event, RunStarted | RunFinished):
            seen.append((event.kind, event.task if isinstance(event, RunStarted) else ""))

    ex = executor(model, on_event=[note])
    session = ex.session("one")
    messages = [f"Find the weather in {city}." for city in ("Rome", "Oslo", "Lima", "Kyiv")]
    async with asyncio.TaskGroup() as group:
        for message in messages:
            group.create_task(session.run(message))
            await asyncio.sleep(0)  # they arrive in this order
    kinds = [kind for kind, _ in seen]
    assert kinds == ["run.started", "run.finished"] * 4  # never two under way at once
    assert [task for kind, task in seen if kind == "run.started"] == messages
    turns = await session.turns()
    assert [t.message for t in turns] == messages
    # Each turn saw the ones before it.
    planned = asked(model, "planner")
    assert turns[0].answer
    assert turns[0].answer.strip() in planned[3]


async def test_a_message_that_may_not_wait_is_refused_while_another_is_answered() -> None:
    started, hold = asyncio.Event(), asyncio.Event()
    session = executor(stalling(started, hold)).session("busy", busy="refuse")
    first = asyncio.create_task(session.run("Find the weather in Rome."))
    await started.wait()
    with pytest.raises(SessionBusy):
        await session.run("And in Oslo?")
    hold.set()
    assert (await first).status == "ok"
    assert len(await session.turns()) == 1


async def test_messages_to_different_sessions_run_at_the_same_time() -> None:
    """Each session's researcher waits until the other's is under way too: run one
    after the other, neither would ever finish."""
    arrived: set[str] = set()
    both = asyncio.Event()
    model = OfflineModel(latency=0)

    async def meets(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "researcher":
            arrived.add(str(request.conversation))
            if len(arrived) == 2:
                both.set()
            await both.wait()
        return await model.complete(request)

    ex = executor(FunctionModel(meets))
    async with asyncio.timeout(10):
        a, b = await asyncio.gather(
            ex.session("a").run("Find the weather in Rome."),
            ex.session("b").run("Find the weather in Oslo."),
        )
    assert a.status == b.status == "ok"


async def test_undo_start_over_and_fork(db: Path) -> None:
    ex = executor(offline(), db)
    session = ex.session("edit")
    for city in ("Rome", "Oslo", "Lima"):
        await session.run(f"Find the weather in {city}.")
    popped = await session.pop()
    assert popped is not None
    assert popped.turn == 3
    assert [t.turn for t in await session.turns()] == [1, 2]

    branch = await session.fork(1, "edit-b")
    await branch.run("And in Kyiv?")
    assert [t.message for t in await branch.turns()] == [
        "Find the weather in Rome.",
        "And in Kyiv?",
    ]
    assert len(await session.turns()) == 2  # the original goes on as it was

    await session.clear()
    assert await session.turns() == []
    await session.run("Find the weather in Rome.")
    assert [t.turn for t in await session.turns()] == [1]


async def test_the_conversation_stays_within_its_budget_by_a_rolling_summary() -> None:
    budget = 300
    folded: list[CompactionFinished] = []
    model = offline()
    policy = Policy(sessions=SessionPolicy(context=Compaction(budget_tokens=budget, keep_turns=2)))
    ex = executor(model, policy=policy, on_event=[lambda e: _fold(e, folded)])
    session = ex.session("long")
    for n in range(8):
        await session.run(f"Find the weather in city number {n}.")
    assert folded, "the oldest turns were folded into the summary"
    last = asked(model, "planner")[-1]
    shown = last.partition(CONVERSATION_HEADER)[2].partition("\n\nAvailable roles:")[0]
    assert "[Summary of the first" in shown
    assert len(shown) / 4 <= budget  # about four characters a token
    turns = await session.turns()
    assert turns[-1].summarized >= 1  # kept with the turn: the next one starts there


async def test_a_conversation_the_window_cut_says_how_many_messages_it_left_out() -> None:
    model = OfflineModel(latency=0)

    async def summaries_fail(request: ModelRequest) -> ModelResponse:
        if is_summary_request(request):
            raise ValueError("the summary endpoint is down")
        return await model.complete(request)

    recorded = FunctionModel(summaries_fail)
    policy = Policy(sessions=SessionPolicy(context=Compaction(budget_tokens=256, keep_turns=1)))
    session = executor(recorded, policy=policy).session("cut")
    for n in range(4):
        assert (await session.run(f"Find the weather in city number {n}.")).status == "ok"
    shown = asked(recorded, "planner")[-1].partition(CONVERSATION_HEADER)[2]
    # Not folded (no summary), the oldest are left out: the planner is told so, not
    # handed the newest as if they were the whole conversation.
    note, _, rest = shown.strip().partition("\n\n")
    assert note == (
        "[2 earlier messages of this conversation were left out to fit the context "
        "window; the most recent ones follow.]"
    )
    assert rest.startswith("## Message 3")


def _fold(event: Event, folded: list[CompactionFinished]) -> None:
    if isinstance(event, CompactionFinished):
        folded.append(event)


async def test_a_role_says_what_its_workers_see_of_the_conversation() -> None:
    model = offline()
    roles = [
        *ROLES[:1],
        Role(name="researcher", description="Finds facts about cities.", session="summary"),
        Role(name="writer", description="Writes replies."),
        ROLES[2],
    ]
    ex = Executor(
        roles,
        model,
        planner=lambda task: [("researcher", task), ("writer", task)],
    )
    session = ex.session("modes")
    await session.run("Find the weather in Rome.")
    await session.run("And in Oslo?")
    researcher, writer = asked(model, "researcher"), asked(model, "writer")
    assert CONVERSATION_HEADER in researcher[-1]
    assert "## Message 1" in researcher[-1]
    assert "Found by its subtasks" not in researcher[-1]  # a summary: no subtask results
    assert CONVERSATION_HEADER not in writer[-1]  # the default for a worker: none


async def test_a_nested_agents_role_says_what_it_sees_of_the_conversation_too() -> None:
    # A role's session: reached the workers the plan gave it, not those a worker called
    # as a tool: a researcher asked by the lead never saw the conversation.
    told: list[str] = []

    def model(request: ModelRequest) -> AssistantMessage | str:
        if role_of(request) == "researcher":
            told.append(str(request.messages[1].content))
            return "found"
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "the lead's answer"
        return AssistantMessage(tool_calls=(call("researcher", {"instruction": "Look."}),))

    roles = [
        Role(name="lead", description="Leads.", tools=("agent:researcher",)),
        Role(name="researcher", description="Finds facts.", session="full"),
    ]
    plan = [("lead", "Answer the user.")]
    ex = Executor(roles, FunctionModel(model), planner=lambda task: plan, aggregator="concat")
    session = ex.session("nested")
    await session.run("Find the weather in Rome.")
    await session.run("And in Oslo?")
    assert CONVERSATION_HEADER not in told[0]  # the first message: nothing before it
    assert CONVERSATION_HEADER in told[1]
    assert "Find the weather in Rome." in told[1].partition(CONVERSATION_HEADER)[2]


async def test_a_roles_input_guards_check_the_conversation_its_workers_are_told() -> None:
    # The conversation is new to a role that sees it: the run's guards checked each
    # message on its own turn, not against this role's rules.
    no_secrets = Guards(input=("tests.support.guards:no_secrets",))
    roles = [
        *ROLES[:1],
        Role(name="researcher", description="Finds facts.", session="full", guards=no_secrets),
        Role(name="writer", description="Writes replies.", guards=no_secrets),
        ROLES[2],
    ]
    plan = [("researcher", "Find the weather."), ("writer", "Write the reply.")]
    ex = Executor(roles, offline(), planner=lambda task: plan)
    session = ex.session("guarded")
    first = await session.run("My password is hunter2. Weather in Rome?")
    assert first.subtasks["s1"].status == first.subtasks["s2"].status == "ok"
    second = await session.run("And in Oslo?")
    researcher, writer = second.subtasks["s1"], second.subtasks["s2"]
    assert researcher.status == "failed"  # told the first message, which it refuses
    assert researcher.error is not None
    assert researcher.error.type == "GuardrailTripped"
    assert "input guard 'tests.support.guards:no_secrets'" in researcher.error.message
    assert writer.status == "ok"  # told its instruction alone


async def test_a_message_the_hive_cannot_run_leaves_no_turn() -> None:
    session = Executor([Role(name="researcher")], OfflineModel(latency=0)).session("none")
    with pytest.raises(ConfigError, match="no planner"):
        await session.run("Find the weather in Rome.")
    assert await session.turns() == []


async def test_a_turn_resumed_as_any_run_sees_the_conversation_and_answers_it(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``Executor.resume`` (and ``honeycomb resume``) of a turn's run: its planner and
    aggregator are told the conversation, and the session reads the answer, as do
    ``honeycomb sessions show`` and the session's page of ``honeycomb serve``."""
    first = executor(offline(), db).session("r")
    await first.run("Find the weather in Rome.")
    started, hold = asyncio.Event(), asyncio.Event()
    cut = asyncio.create_task(executor(stalling(started, hold), db).session("r").run("And Oslo?"))
    await started.wait()
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut

    model = offline()
    later = executor(model, db)
    turns = await later.session("r").turns()
    result = await later.resume(turns[-1].run_id)
    assert result.status == "ok"
    assert later.store is not None
    later.store.close()
    capsys.readouterr()
    assert await asyncio.to_thread(cli, ["sessions", "show", "r", "--store", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "(no answer)" not in shown
    assert shown.count("answer: [offline simulation]") == 2
    with TestClient(create_app(db, token="t")) as client:
        page = client.get("/sessions/r", headers={"Authorization": "Bearer t"}).text
    assert "(no answer" not in page
    assert turns[0].answer
    assert turns[0].answer.strip() in asked(model, "aggregator")[-1]
    again = await later.session("r").turns()
    assert again[-1].status == "ok"
    assert again[-1].answer == result.answer_text


@settings(max_examples=12, deadline=None)
@given(
    gaps=st.lists(st.integers(0, 3), min_size=2, max_size=4),
    slow=st.lists(st.integers(0, 2), min_size=4, max_size=4),
)
def test_any_arrivals_are_answered_in_the_order_they_came_never_two_at_once(
    gaps: list[int], slow: list[int]
) -> None:
    """Messages arrive a few turns of the event loop apart; their runs take different
    times (each researcher waits ``slow[i]`` turns): each turn is the message that came
    next, and a turn's run starts only once the one before it has finished."""
    asyncio.run(_arrivals(gaps, slow))


async def _arrivals(gaps: list[int], slow: list[int]) -> None:
    model = OfflineModel(latency=0)
    under_way: list[str] = []
    overlaps: list[tuple[str, str]] = []

    def note(event: Event) -> None:
        if isinstance(event, RunStarted):
            if under_way:
                overlaps.append((under_way[-1], event.task))
            under_way.append(event.task)
        elif isinstance(event, RunFinished):
            under_way.clear()

    async def answer(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "researcher":
            for _ in range(slow[int(str(request.messages[1].content).split("#")[1][0])]):
                await asyncio.sleep(0)
        return await model.complete(request)

    session = executor(FunctionModel(answer), on_event=[note]).session("order")
    sent = [f"Find the weather in Rome #{i}." for i in range(len(gaps))]
    async with asyncio.TaskGroup() as group:
        for message, gap in zip(sent, gaps, strict=True):
            group.create_task(session.run(message))
            for _ in range(gap):
                await asyncio.sleep(0)
    assert overlaps == []
    assert [t.message for t in await session.turns()] == sent


async def test_a_turn_whose_planner_fails_ends_failed_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    """A planner's own bug (a PlanError, the bug chained) ends the turn ``failed``,
    with a store or without: the next message is answered, not refused as if one were."""
    calls = [0]

    def planner(task: str) -> list[tuple[str, str]]:
        calls[0] += 1
        if calls[0] == 1:
            raise ValueError("a planner's bug")
        return [("researcher", task)]

    for store in (None, tmp_path / "runs.db"):
        calls[0] = 0
        session = executor(offline(), store, planner=planner).session("p")
        with pytest.raises(PlanError, match="ValueError: a planner's bug"):
            await session.run("Find the weather in Rome.")
        assert [t.status for t in await session.turns()] == ["failed"]
        assert (await session.run("And Oslo?")).status == "ok"


async def test_without_a_store_a_turn_cut_off_is_not_run_again_from_the_start() -> None:
    """Its finished workers (and their side effects) are not kept: going on from where
    it stopped cannot be done, and is refused; dropped, the conversation goes on."""
    started, hold = asyncio.Event(), asyncio.Event()
    model = stalling(started, hold)
    session = executor(model).session("m")
    cut = asyncio.create_task(session.run("Find the weather in Rome."))
    await started.wait()
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    hold.set()
    asked_before = len(model.requests)
    with pytest.raises(StoreError, match="without a run store it cannot go on from where"):
        await session.resume()
    with pytest.raises(StoreError, match="without a run store"):
        await session.run("And Oslo?", unfinished="resume")
    assert len(model.requests) == asked_before  # nothing was run again
    assert (await session.run("And Oslo?", unfinished="drop")).status == "ok"
    assert [t.message for t in await session.turns()] == ["And Oslo?"]


async def test_a_session_another_service_answers_is_not_undone_cleared_nor_forgotten(
    db: Path,
) -> None:
    """Another Executor on the store (as another process would) holds none of this
    one's locks: the store says the turn is being answered."""
    started, hold = asyncio.Event(), asyncio.Event()
    answering = asyncio.create_task(
        executor(stalling(started, hold), db).session("x").run("Find the weather in Rome.")
    )
    await started.wait()
    other = executor(offline(), db).session("x")
    for undo in (other.pop, other.clear, other.forget):
        with pytest.raises(SessionBusy, match="is answering message 1"):
            await undo()
    with pytest.raises(SessionBusy, match="another: try again once it has ended"):
        await other.run("And Oslo?")  # what to do, said to a message as to an edit
    forget = ["sessions", "forget", "x", "--store", str(db)]
    assert await asyncio.to_thread(cli, forget) == 2  # honeycomb sessions forget: neither
    hold.set()
    assert (await answering).status == "ok"
    assert [t.status for t in await other.turns()] == ["ok"]


def test_a_session_summarizer_the_executor_does_not_have_is_named() -> None:
    context = Compaction(budget_tokens=1000, model="small")
    policy = Policy(sessions=SessionPolicy(context=context))
    with pytest.raises(ConfigErrors, match=r"sessions\.context\.model 'small'"):
        Executor(ROLES, {"big": OfflineModel(latency=0)}, policy=policy)


@pytest.mark.parametrize("unfinished", ["resume", "drop"])
async def test_a_message_after_a_turn_cut_off_resumes_or_drops_it_as_told(
    db: Path, unfinished: str
) -> None:
    started, hold = asyncio.Event(), asyncio.Event()
    cut = asyncio.create_task(
        executor(stalling(started, hold), db).session("u").run("Find the weather in Rome.")
    )
    await started.wait()
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut

    session = executor(offline(), db).session("u", unfinished=unfinished)  # type: ignore[arg-type]
    await session.run("And in Oslo?")
    turns = await session.turns()
    if unfinished == "resume":
        assert [(t.message, t.status) for t in turns] == [
            ("Find the weather in Rome.", "ok"),
            ("And in Oslo?", "ok"),
        ]
    else:
        assert [(t.turn, t.message, t.status) for t in turns] == [(1, "And in Oslo?", "ok")]


@pytest.mark.parametrize("message", ["", "   \n"])
async def test_an_empty_message_is_refused_as_an_empty_task_is(message: str) -> None:
    session = executor(offline()).session("empty")
    with pytest.raises(ConfigError, match="task is empty"):
        await session.run(message)
    with pytest.raises(ConfigError, match="task is empty"):
        session.stream(message)  # at once, as Executor.stream
    assert await session.turns() == []


def stalls_on(city: str, started: asyncio.Event, hold: asyncio.Event) -> FunctionModel:
    """The offline model, whose researchers told of ``city`` say they started, then
    wait for ``hold``."""
    model = OfflineModel(latency=0)

    async def stalls(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "researcher" and city in str(request.messages[-1].content):
            started.set()
            await hold.wait()
        return await model.complete(request)

    return FunctionModel(stalls)


async def test_without_a_store_retention_never_forgets_a_session_that_is_answering() -> None:
    # Its turns were deleted under it: its answer was kept nowhere.
    started, hold = asyncio.Event(), asyncio.Event()
    policy = Policy(sessions=SessionPolicy(max_sessions=1))
    ex = executor(stalls_on("Rome", started, hold), policy=policy)
    answering = asyncio.create_task(ex.session("a").run("Find the weather in Rome."))
    await started.wait()
    await ex.session("b").run("Find the weather in Oslo.")  # "a" is older, but answers
    hold.set()
    assert (await answering).status == "ok"
    assert [t.status for t in await ex.session("a").turns()] == ["ok"]
    await ex.session("c").run("Find the weather in Oslo.")  # neither answers now
    assert await ex.session("a").turns() == await ex.session("b").turns() == []


@pytest.mark.parametrize("kept", [False, True], ids=["memory", "store"])
async def test_a_fork_onto_its_own_session_cuts_it_back_to_that_turn(db: Path, kept: bool) -> None:
    # With a store, it deleted the target's turns, then copied the source's: none.
    session = executor(offline(), db if kept else None).session("self")
    for city in ("Rome", "Oslo", "Lima"):
        await session.run(f"Find the weather in {city}.")
    same = await session.fork(1, "self")
    assert same.id == "self"
    assert [t.message for t in await session.turns()] == ["Find the weather in Rome."]
    await session.run("And in Kyiv?")
    assert [(t.turn, t.status) for t in await session.turns()] == [(1, "ok"), (2, "ok")]


@pytest.mark.parametrize("kept", [False, True], ids=["memory", "store"])
async def test_a_fork_never_replaces_a_session_that_is_answering(db: Path, kept: bool) -> None:
    # It replaced the target's turns under the turn being answered, whose answer was lost.
    started, hold = asyncio.Event(), asyncio.Event()
    ex = executor(stalls_on("Rome", started, hold), db if kept else None)
    source = ex.session("source")
    await source.run("Find the weather in Oslo.")
    answering = asyncio.create_task(ex.session("target").run("Find the weather in Rome."))
    await started.wait()
    with pytest.raises(SessionBusy):
        await source.fork(1, "target")
    if kept:  # another Executor on the store, as another process: the store refuses
        other = executor(offline(), db).session("source")
        with pytest.raises(SessionBusy, match="is answering message 1"):
            await other.fork(1, "target")
    hold.set()
    assert (await answering).status == "ok"
    target = ex.session("target")
    assert [(t.message, t.status) for t in await target.turns()] == [
        ("Find the weather in Rome.", "ok")
    ]
    await source.fork(1, "target")  # once it has ended
    assert [t.message for t in await target.turns()] == ["Find the weather in Oslo."]


@pytest.mark.parametrize("kept", [False, True], ids=["memory", "store"])
async def test_a_fork_holds_only_turns_that_have_ended(db: Path, kept: bool) -> None:
    # Without a store, the turn under way was copied as "running" for ever: every
    # message, pop, clear and forget of the fork was refused.
    started, hold = asyncio.Event(), asyncio.Event()
    ex = executor(stalls_on("Rome", started, hold), db if kept else None)
    session = ex.session("s")
    await session.run("Find the weather in Oslo.")
    answering = asyncio.create_task(session.run("And in Rome?"))
    await started.wait()
    with pytest.raises(SessionBusy, match="is answering message 2"):
        await session.fork(2, "s-b")
    assert await ex.session("s-b").turns() == []
    branch = await session.fork(1, "s-c")  # an earlier turn may be forked meanwhile
    hold.set()
    assert (await answering).status == "ok"
    assert [t.status for t in await branch.turns()] == ["ok"]
    await branch.run("And in Lima?")
    assert [t.status for t in await branch.turns()] == ["ok", "ok"]


async def test_an_edit_while_a_message_is_answered_here_is_refused_in_its_own_words() -> None:
    # It was told "send this one once it has ended (or wait for it: busy='wait')", which
    # an edit neither sends nor takes.
    started, hold = asyncio.Event(), asyncio.Event()
    ex = executor(stalling(started, hold))
    session = ex.session("s")
    answering = asyncio.create_task(session.run("Find the weather in Rome."))
    await started.wait()
    for edit, name in ((session.pop, "pop"), (session.clear, "clear"), (session.forget, "forget")):
        with pytest.raises(SessionBusy) as refused:
            await edit()
        said = f"session 's' is answering a message: {name} refused; try again once it has ended"
        assert str(refused.value) == said
    with pytest.raises(SessionBusy, match="answering a message: a fork over it refused"):
        await ex.session("other").fork(0, "s")
    hold.set()
    assert (await answering).status == "ok"
    await session.forget()
    assert await session.turns() == []
